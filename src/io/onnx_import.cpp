#include "io/onnx_import.h"

#include "hfuse/error.h"
#include "hfuse/op_registry.h"
#include "io/onnx_constants.h"
#include "io/onnx_tensors.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace hfuse {
namespace {

using namespace onnx_io;
using nlohmann::json;

// The default-domain opsets whose semantics the translation below knows. Of the ops imported, 18 to 21
// change Split (num_outputs), Pad (an axes input; mode wrap), ReduceMean (axes as an input,
// noop_with_empty_axes), Resize (antialias, axes, keep_aspect_ratio_policy; half_pixel_symmetric) and
// AveragePool (dilations); the rest only gain element types (float8, int4, ...), which read_tensor refuses.
constexpr int64_t kMinOpset = 9, kMaxOpset = 21;

std::string quote(const std::string &s) {
    return "'" + s + "'";
}

std::string join(const std::vector<std::string> &items, const std::string &sep) {
    std::string s;
    for (const auto &i : items) s += (s.empty() ? "" : sep) + i;
    return s;
}

std::string dir_of(const std::string &path) {
    return path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
}

// ---- The ONNX nodes, as the translation sees them -------------------------------------------------

struct OnnxNode {
    const onnx::NodeProto *proto = nullptr;
    std::string name;                  // unique among the nodes
    std::string op;                    // op_type ("domain.op" outside the default domain)
    std::vector<std::string> inputs;   // "" where an optional input is left out; trailing ones removed
    std::vector<std::string> outputs;  // "" where an optional output is not produced
    json attrs = json::object();       // int, float, string, ints and floats attributes
    std::map<std::string, const onnx::TensorProto *> tensors;  // tensor attributes (Constant's value)

    bool has(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
};

json attribute_value(const onnx::AttributeProto &a) {
    switch (a.type()) {
    case onnx::AttributeProto::INT: return a.i();
    case onnx::AttributeProto::FLOAT: return static_cast<double>(a.f());
    case onnx::AttributeProto::STRING: return a.s();
    case onnx::AttributeProto::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::FLOATS: {
        json v = json::array();
        for (float f : a.floats()) v.push_back(static_cast<double>(f));
        return v;
    }
    case onnx::AttributeProto::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    default: fail_field(a.name(), "attributes of this type (graphs, sparse tensors, types) are not supported");
    }
}

// ---- The translation --------------------------------------------------------------------------------

class Importer;
// How one ONNX op is imported: `fold` evaluates it when all its inputs are constants (returns its
// outputs), `emit` adds hfuse nodes for it otherwise. Either may be empty.
struct OpImport {
    std::function<std::vector<Constant>(Importer &, const OnnxNode &)> fold;
    std::function<void(Importer &, const OnnxNode &)> emit;
    bool fold_without_constant_inputs = false;  // Shape, Size: only the input's type is needed
};
const std::map<std::string, OpImport> &op_imports();

class Importer {
public:
    Importer(const std::string &path, const LoadOptions &options)
        : path_(path), dir_(dir_of(path)), options_(options) {}

    Graph run();

    int64_t opset() const { return opset_; }
    const std::string &dir() const { return dir_; }

    // --- values
    bool is_constant(const std::string &v) const { return !v.empty() && (consts_.count(v) || g_.weights.count(v)); }
    const Constant &constant(const std::string &v) const {
        auto it = consts_.find(v);
        return it != consts_.end() ? it->second : g_.weights.at(v);
    }
    const TensorType &type_of(const std::string &v) const {
        if (auto it = consts_.find(v); it != consts_.end()) return it->second.type;
        return g_.type_of(v);
    }
    // Input i of n, which must be a constant (a shape-like operand).
    const Constant &constant_input(const OnnxNode &n, size_t i, const std::string &what) const {
        if (!n.has(i)) fail_field(input_field(i, what), "is required");
        if (!is_constant(n.inputs[i])) {
            fail_field(input_field(i, what),
                       quote(n.inputs[i]) + " must be a constant, but it is computed from the model inputs");
        }
        return constant(n.inputs[i]);
    }
    static std::string input_field(size_t i, const std::string &what) {
        return "input " + std::to_string(i) + " (" + what + ")";
    }
    // A new constant value, named after `base`.
    std::string add_constant(const std::string &base, Constant c) {
        std::string name = fresh_value(base);
        consts_[name] = std::move(c);
        return name;
    }
    std::string fresh_value(const std::string &base) {
        std::string name = base;
        for (int i = 2; names_.count(name); i++) name = base + "_" + std::to_string(i);
        names_.insert(name);
        return name;
    }
    std::string fresh_node_name(const std::string &base) {
        std::string name = base;
        for (int i = 2; node_names_.count(name); i++) name = base + "_" + std::to_string(i);
        node_names_.insert(name);
        return name;
    }

    // Adds an hfuse node (inputs and outputs as given) and infers its output types. Constants it reads
    // become weights of the graph.
    void emit(Node n);
    // The node as it is: same op, inputs, attributes; only the outputs that are used (an unused
    // optional output such as MaxPool's Indices is dropped; a used one is an error).
    void emit_same(const OnnxNode &n, const std::string &op = "");
    // The first `k` outputs of n that are used elsewhere must be the only ones used.
    std::vector<std::string> used_outputs(const OnnxNode &n, size_t supported) const;

private:
    void read_opset();
    void check_ops(const std::vector<OnnxNode> &nodes) const;
    void read_attributes(OnnxNode &n) const;
    void read_initializers();
    void read_inputs();
    std::vector<OnnxNode> sorted_nodes();
    void translate(const OnnxNode &n);
    void check_schema(const Node &n, const OpSchema &op) const;

    std::string path_, dir_;
    const LoadOptions &options_;
    onnx::ModelProto model_;
    int64_t opset_ = 0;
    Graph g_;
    std::map<std::string, Constant> consts_;  // constants that are not (yet) weights of g_
    std::set<std::string> names_;             // every value name in use
    std::set<std::string> node_names_;
    std::set<std::string> used_;      // values read by some node or returned by the graph
    std::set<std::string> computed_;  // outputs of emitted nodes
};

void Importer::read_opset() {
    opset_ = -1;
    for (const auto &o : model_.opset_import()) {
        if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    }
    if (opset_ < 0) fail_field("opset_import", "the model imports no version of the default ONNX domain");
    if (opset_ < kMinOpset || opset_ > kMaxOpset) {
        fail_field("opset_import", "opset " + std::to_string(opset_) + " is not supported (hfuse reads opsets " +
                                       std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
    }
}

// Every unsupported op type in one error, each with (some of) its node names.
void Importer::check_ops(const std::vector<OnnxNode> &nodes) const {
    std::map<std::string, std::vector<std::string>> unsupported;
    for (const OnnxNode &n : nodes) {
        if (!op_imports().count(n.op)) unsupported[n.op].push_back(n.name);
    }
    if (unsupported.empty()) return;
    std::vector<std::string> items;
    size_t total = 0;
    for (const auto &kv : unsupported) {
        total += kv.second.size();
        std::vector<std::string> shown;
        for (size_t i = 0; i < kv.second.size() && i < 3; i++) shown.push_back(quote(kv.second[i]));
        std::string more = kv.second.size() > 3 ? " and " + std::to_string(kv.second.size() - 3) + " more" : "";
        items.push_back(kv.first + " (node" + (kv.second.size() > 1 ? "s " : " ") + join(shown, ", ") + more + ")");
    }
    fail(std::to_string(unsupported.size()) + " unsupported op type" + (unsupported.size() > 1 ? "s" : "") + " in " +
         std::to_string(total) + " node" + (total > 1 ? "s" : "") + ": " + join(items, ", "));
}

void Importer::read_initializers() {
    const onnx::GraphProto &graph = model_.graph();
    if (graph.sparse_initializer_size() > 0) {
        fail_field("graph.sparse_initializer", "sparse initializers are not supported");
    }
    for (const onnx::TensorProto &t : graph.initializer()) {
        const std::string field = "initializer " + quote(t.name());
        if (t.name().empty()) fail_field("graph.initializer", "an initializer without a name");
        if (consts_.count(t.name())) fail_field(field, "defined twice");
        consts_[t.name()] = read_tensor(t, dir_, field);
        names_.insert(t.name());
    }
}

// Graph inputs that are not initializers (an input with an initializer of the same name is that
// constant: hfuse compiles weights in), with their shapes from the model or --shape.
void Importer::read_inputs() {
    std::set<std::string> known;
    std::vector<std::string> names;  // the inputs that are not initializers
    for (const onnx::ValueInfoProto &vi : model_.graph().input()) {
        known.insert(vi.name());
        if (!consts_.count(vi.name())) names.push_back(vi.name());
    }
    for (const auto &kv : options_.input_shapes) {
        if (!known.count(kv.first)) {
            fail_field("--shape " + kv.first,
                       "the model has no input named " + quote(kv.first) + " (inputs: " + join(names, ", ") + ")");
        }
        if (consts_.count(kv.first)) {
            fail_field("--shape " + kv.first, quote(kv.first) + " is an initializer (a weight), not a model input");
        }
    }
    std::vector<std::string> dynamic;
    for (const onnx::ValueInfoProto &vi : model_.graph().input()) {
        if (consts_.count(vi.name())) continue;
        const std::string field = "inputs." + vi.name();  // as JSON models name them
        if (vi.name().empty()) fail_field("graph.input", "an input without a name");
        if (!vi.type().has_tensor_type()) fail_field(field, "is not a tensor");
        const auto &tt = vi.type().tensor_type();
        if (tt.elem_type() != onnx::TensorProto::FLOAT) {
            fail_field(field, std::string("has element type ") + type_name(tt.elem_type()) +
                                  "; hfuse model inputs are float32");
        }
        // Dims as written: a value, or a name (dim_param) / nothing for a dynamic dim.
        const bool has_shape = tt.has_shape();
        std::vector<std::string> dims;
        Shape fixed;
        for (const auto &d : tt.shape().dim()) {
            dims.push_back(d.has_dim_value() ? std::to_string(d.dim_value())
                                             : (d.dim_param().empty() ? "?" : d.dim_param()));
            fixed.push_back(d.has_dim_value() ? d.dim_value() : -1);
        }
        GraphInput in;
        in.name = vi.name();
        auto given = options_.input_shapes.find(vi.name());
        if (given != options_.input_shapes.end()) {
            const Shape &s = given->second;
            if (has_shape && s.size() != fixed.size()) {
                fail_field(field, "--shape gives " + std::to_string(s.size()) + " dims, the model says " +
                                      std::to_string(fixed.size()) + " [" + join(dims, ", ") + "]");
            }
            for (size_t i = 0; has_shape && i < s.size(); i++) {
                if (fixed[i] >= 0 && fixed[i] != s[i]) {
                    fail_field(field, "--shape gives " + to_string(s) + ", but the model fixes dim " +
                                          std::to_string(i) + " at " + std::to_string(fixed[i]) + " [" +
                                          join(dims, ", ") + "]");
                }
            }
            in.shape = s;
        } else {
            bool is_dynamic = !has_shape;
            for (int64_t d : fixed) is_dynamic = is_dynamic || d < 0;
            if (is_dynamic) {
                std::string example;
                for (size_t i = 0; i < fixed.size(); i++) {
                    example += (i ? "x" : "") + (fixed[i] >= 0 ? std::to_string(fixed[i]) : std::string("N"));
                }
                dynamic.push_back(quote(vi.name()) + " [" + (has_shape ? join(dims, ", ") : "unknown rank") +
                                  "] (--shape " + vi.name() + "=" + (has_shape ? example : "1x3x224x224") + ")");
                continue;
            }
            in.shape = fixed;
        }
        check_shape(in.shape, field + ".shape");
        g_.inputs.push_back(in);
        g_.types[in.name] = {DType::Float32, in.shape};
        names_.insert(in.name);
    }
    if (!dynamic.empty()) {
        fail("model input" + std::string(dynamic.size() > 1 ? "s have" : " has") +
             " dynamic dims: give the shape with --shape NAME=DIMS: " + join(dynamic, ", "));
    }
    if (g_.inputs.empty()) fail_field("graph.input", "the model has no inputs (every graph input is an initializer)");
}

void Importer::read_attributes(OnnxNode &n) const {
    try {
        for (const onnx::AttributeProto &a : n.proto->attribute()) {
            if (!a.ref_attr_name().empty()) fail_field(a.name(), "attribute references (functions) are not supported");
            if (a.type() == onnx::AttributeProto::TENSOR) {
                n.tensors[a.name()] = &a.t();
            } else {
                n.attrs[a.name()] = attribute_value(a);
            }
        }
    } catch (Error &e) {
        throw e.at_node(n.name, n.op);
    }
}

std::vector<OnnxNode> Importer::sorted_nodes() {
    const onnx::GraphProto &graph = model_.graph();
    std::vector<OnnxNode> nodes;
    for (int i = 0; i < graph.node_size(); i++) {
        const onnx::NodeProto &p = graph.node(i);
        OnnxNode n;
        n.proto = &p;
        n.op = p.domain().empty() || p.domain() == "ai.onnx" ? p.op_type() : p.domain() + "." + p.op_type();
        n.name = fresh_node_name(p.name().empty() ? p.op_type() + "_" + std::to_string(i) : p.name());
        n.inputs.assign(p.input().begin(), p.input().end());
        while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
        n.outputs.assign(p.output().begin(), p.output().end());
        for (const std::string &v : n.inputs) used_.insert(v);
        nodes.push_back(std::move(n));
    }
    for (const auto &o : graph.output()) used_.insert(o.name());
    return nodes;
}

// Kahn's algorithm over the ONNX nodes (which ONNX requires sorted already), earliest first.
std::vector<OnnxNode> topological(std::vector<OnnxNode> nodes, const std::set<std::string> &defined) {
    std::map<std::string, size_t> producer;
    for (size_t i = 0; i < nodes.size(); i++) {
        for (const std::string &v : nodes[i].outputs) {
            if (v.empty()) continue;
            if (defined.count(v) || producer.count(v)) {
                throw Error(quote(v) + " is defined twice").at_node(nodes[i].name, nodes[i].op);
            }
            producer[v] = i;
        }
    }
    std::vector<int> pending(nodes.size(), 0);
    std::vector<std::vector<size_t>> consumers(nodes.size());
    for (size_t i = 0; i < nodes.size(); i++) {
        std::set<size_t> deps;
        for (size_t k = 0; k < nodes[i].inputs.size(); k++) {
            const std::string &v = nodes[i].inputs[k];
            if (v.empty() || defined.count(v)) continue;
            auto it = producer.find(v);
            if (it == producer.end()) {
                throw Error(quote(v) + " is not a graph input, an initializer or a node output")
                    .at_node(nodes[i].name, nodes[i].op)
                    .at_field("input " + std::to_string(k));
            }
            deps.insert(it->second);
        }
        pending[i] = static_cast<int>(deps.size());
        for (size_t d : deps) consumers[d].push_back(i);
    }
    std::set<size_t> ready;
    for (size_t i = 0; i < nodes.size(); i++) {
        if (pending[i] == 0) ready.insert(i);
    }
    std::vector<OnnxNode> order;
    while (!ready.empty()) {
        size_t i = *ready.begin();
        ready.erase(ready.begin());
        order.push_back(nodes[i]);
        for (size_t c : consumers[i]) {
            if (--pending[c] == 0) ready.insert(c);
        }
    }
    if (order.size() != nodes.size()) {
        for (size_t i = 0; i < nodes.size(); i++) {
            if (pending[i] > 0)
                throw Error("the graph has a cycle through this node").at_node(nodes[i].name, nodes[i].op);
        }
    }
    return order;
}

void Importer::check_schema(const Node &n, const OpSchema &op) const {
    const int k = static_cast<int>(n.inputs.size());
    auto range = [](int lo, int hi) {
        return hi < 0     ? "at least " + std::to_string(lo)
               : lo == hi ? std::to_string(lo)
                          : std::to_string(lo) + " to " + std::to_string(hi);
    };
    if (k < op.min_inputs || (op.max_inputs >= 0 && k > op.max_inputs)) {
        fail_field("inputs", "hfuse's " + n.op + " takes " + range(op.min_inputs, op.max_inputs) +
                                 " inputs, the node has " + std::to_string(k));
    }
    const int m = static_cast<int>(n.outputs.size());
    if (m < op.min_outputs || (op.max_outputs >= 0 && m > op.max_outputs)) {
        fail_field("outputs", "hfuse's " + n.op + " produces " + range(op.min_outputs, op.max_outputs) +
                                  " outputs, the node has " + std::to_string(m));
    }
    for (const auto &kv : n.attrs.items()) {
        if (std::find(op.attributes.begin(), op.attributes.end(), kv.key()) == op.attributes.end()) {
            fail_field(kv.key(), "attribute not supported for " + n.op + " (supported: " +
                                     (op.attributes.empty() ? "none" : join(op.attributes, ", ")) + ")");
        }
    }
    for (int i : op.constant_inputs) {
        if (i < k && !n.inputs[i].empty() && !g_.is_weight(n.inputs[i])) {
            fail_field(input_field(i, n.inputs[i]), "must be a constant, but it is computed from the model inputs");
        }
    }
    for (int i = 0; i < k; i++) {
        const std::string &v = n.inputs[i];
        bool constant_slot =
            std::find(op.constant_inputs.begin(), op.constant_inputs.end(), i) != op.constant_inputs.end();
        if (!v.empty() && !constant_slot && g_.type_of(v).dtype != DType::Float32) {
            fail_field(input_field(i, v), "is int64; hfuse computes on float32 data only");
        }
    }
}

void Importer::emit(Node n) {
    for (const std::string &v : n.inputs) {
        auto it = consts_.find(v);
        if (it == consts_.end()) continue;
        check_shape(it->second.type.shape, "weight " + quote(v));
        g_.types[v] = it->second.type;
        g_.weights[v] = std::move(it->second);
        consts_.erase(it);
    }
    const OpSchema *op = find_op(n.op);
    if (!op) fail("internal: the importer emitted an unknown op " + n.op);
    check_schema(n, *op);
    std::vector<TensorType> outs = op->infer(make_infer_context(g_, n));
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); i++) {
        check_shape(outs[i].shape, "output " + quote(n.outputs[i]));
        g_.types[n.outputs[i]] = outs[i];
        computed_.insert(n.outputs[i]);
    }
    g_.nodes.push_back(std::move(n));
}

std::vector<std::string> Importer::used_outputs(const OnnxNode &n, size_t supported) const {
    std::vector<std::string> outs(n.outputs.begin(), n.outputs.begin() + std::min(supported, n.outputs.size()));
    for (size_t i = supported; i < n.outputs.size(); i++) {
        if (!n.outputs[i].empty() && used_.count(n.outputs[i])) {
            fail_field("output " + std::to_string(i), quote(n.outputs[i]) + ": this output of " + n.op +
                                                          " is not supported (only the first " +
                                                          std::to_string(supported) + ")");
        }
    }
    return outs;
}

void Importer::emit_same(const OnnxNode &n, const std::string &op) {
    Node node;
    node.name = n.name;
    node.op = op.empty() ? n.op : op;
    node.inputs = n.inputs;
    node.attrs = n.attrs;
    const OpSchema *schema = find_op(node.op);
    node.outputs = used_outputs(n, schema->max_outputs < 0 ? n.outputs.size() : schema->max_outputs);
    emit(std::move(node));
}

void Importer::translate(const OnnxNode &n) {
    const OpImport &imp = op_imports().at(n.op);
    // Every op imported has a first output, and all but Constant a first input.
    if (n.outputs.empty() || n.outputs[0].empty()) fail_field("outputs", "the node has no (first) output");
    if (n.op != "Constant" && !n.has(0)) fail_field("input 0", "is required");
    bool all_constant = true;
    for (const std::string &v : n.inputs) all_constant = all_constant && (v.empty() || is_constant(v));
    if (imp.fold && (imp.fold_without_constant_inputs || all_constant)) {
        std::vector<Constant> outs = imp.fold(*this, n);
        for (size_t i = 0; i < outs.size() && i < n.outputs.size(); i++) {
            if (!n.outputs[i].empty()) consts_[n.outputs[i]] = std::move(outs[i]);
        }
        return;
    }
    if (!imp.emit) {
        for (size_t i = 0; i < n.inputs.size(); i++) {
            if (n.has(i) && !is_constant(n.inputs[i])) {
                fail_field("input " + std::to_string(i), quote(n.inputs[i]) +
                                                             " is computed from the model inputs; hfuse runs " + n.op +
                                                             " only on constants (folded at import)");
            }
        }
    }
    imp.emit(*this, n);
}

Graph Importer::run() {
    model_ = read_model_proto(path_);
    try {
        const onnx::GraphProto &graph = model_.graph();
        read_opset();
        g_.source = path_;
        // Exporters name every graph alike ("torch_jit", "main_graph"): the file says more.
        std::string stem = path_.substr(path_.find('/') == std::string::npos ? 0 : path_.rfind('/') + 1);
        g_.name = stem.substr(0, stem.size() - 5);
        std::vector<OnnxNode> nodes = sorted_nodes();
        if (nodes.empty()) fail_field("graph.node", "the graph has no nodes");
        check_ops(nodes);  // before reading any weight
        for (OnnxNode &n : nodes) read_attributes(n);
        read_initializers();
        read_inputs();
        std::set<std::string> defined;
        for (const GraphInput &in : g_.inputs) defined.insert(in.name);
        for (const auto &kv : consts_) defined.insert(kv.first);
        for (const OnnxNode &n : nodes) {
            for (const std::string &v : n.outputs) names_.insert(v);
        }
        for (const OnnxNode &n : topological(std::move(nodes), defined)) {
            try {
                translate(n);
            } catch (Error &e) {
                throw e.at_node(n.name, n.op);
            }
        }
        for (const auto &o : graph.output()) {
            const std::string field = "output " + quote(o.name());
            if (!computed_.count(o.name())) {
                if (is_constant(o.name())) {
                    fail_field(field,
                               "is a constant (it does not depend on the model inputs); hfuse models "
                               "compute their outputs");
                }
                if (g_.is_input(o.name())) fail_field(field, "is a model input; hfuse models compute their outputs");
                fail_field(field, "is not produced by any node");
            }
            if (g_.types.at(o.name()).dtype != DType::Float32) fail_field(field, "is int64; outputs are float32");
            g_.outputs.push_back(o.name());
        }
        if (g_.outputs.empty()) fail_field("graph.output", "the model has no outputs");
        if (g_.nodes.empty()) fail_field("graph.node", "nothing is left to compute once constants are folded");
        g_.types.clear();  // prepare() infers them again, as for JSON models
        return std::move(g_);
    } catch (Error &e) {
        throw e.in_file(path_);
    }
}

// ---- Per-op import -------------------------------------------------------------------------------

int64_t int_attr(const OnnxNode &n, const std::string &name, int64_t fallback) {
    return Attributes(n.attrs).get_int(name, fallback);
}

// Axes of Squeeze/Unsqueeze and the reductions: an attribute before opset 13 (18 for ReduceMean, ReduceMax
// and ReduceMin), an input after.
std::optional<std::vector<int64_t>> axes_operand(Importer &im, const OnnxNode &n, int64_t input_from_opset) {
    if (im.opset() >= input_from_opset) {
        if (!n.has(1)) return std::nullopt;
        return ints_of(im.constant_input(n, 1, "axes"));
    }
    if (!n.attrs.contains("axes")) return std::nullopt;
    return Attributes(n.attrs).get_ints("axes");
}

// An activation reshaped: an hfuse Reshape node with a constant shape.
void emit_reshape(Importer &im, const std::string &name, const std::string &input, const std::string &output,
                  const Shape &shape) {
    Node r;
    r.name = name;
    r.op = "Reshape";
    r.inputs = {input, im.add_constant(name + "/shape", make_ints({static_cast<int64_t>(shape.size())}, shape))};
    r.outputs = {output};
    im.emit(std::move(r));
}

SliceArgs slice_args(Importer &im, const OnnxNode &n, const Shape &in) {
    SliceArgs s;
    if (im.opset() >= 10) {
        s.starts = ints_of(im.constant_input(n, 1, "starts"));
        s.ends = ints_of(im.constant_input(n, 2, "ends"));
        if (n.has(3)) s.axes = ints_of(im.constant_input(n, 3, "axes"));
        if (n.has(4)) s.steps = ints_of(im.constant_input(n, 4, "steps"));
    } else {
        Attributes a(n.attrs);
        s.starts = a.get_ints("starts");
        s.ends = a.get_ints("ends");
        s.axes = a.get_ints("axes", {});
    }
    if (s.axes.empty()) {
        for (size_t i = 0; i < s.starts.size(); i++) s.axes.push_back(static_cast<int64_t>(i));
    }
    if (s.steps.empty()) s.steps.assign(s.starts.size(), 1);
    if (s.ends.size() != s.starts.size() || s.axes.size() != s.starts.size() || s.steps.size() != s.starts.size()) {
        fail_field("starts", "starts, ends, axes and steps must have the same length");
    }
    for (int64_t &a : s.axes) a = axis_in(a, static_cast<int64_t>(in.size()), "axes");
    return s;
}

std::vector<const Constant *> constant_inputs(Importer &im, const OnnxNode &n) {
    std::vector<const Constant *> out;
    for (const std::string &v : n.inputs) out.push_back(v.empty() ? nullptr : &im.constant(v));
    return out;
}

// Add, Sub, Mul, Div: folded on constants (integer results truncated, as ONNX's integer Div), hfuse's
// own op otherwise.
OpImport binary(double (*f)(double, double), bool is_div = false) {
    OpImport imp;
    imp.fold = [f, is_div](Importer &im, const OnnxNode &n) {
        auto in = constant_inputs(im, n);
        bool ints = is_int(*in[0]) && is_int(*in[1]);
        auto g = [f, ints, is_div](const std::vector<double> &a) {
            if (ints && is_div && a[1] == 0) fail("integer division by zero");
            double v = f(a[0], a[1]);
            return ints ? std::trunc(v) : v;
        };
        return std::vector<Constant>{elementwise({in[0], in[1]}, ints, g, "inputs")};
    };
    imp.emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };
    return imp;
}

// Erf, Sqrt, Reciprocal, Exp, Log, Neg, Abs: folded on a constant (Neg and Abs keep integers, as in
// shape computations), hfuse's own op otherwise.
OpImport unary_math(double (*f)(double), bool keeps_ints = false) {
    OpImport imp;
    imp.fold = [f, keeps_ints](Importer &im, const OnnxNode &n) {
        const Constant &x = im.constant(n.inputs[0]);
        const bool ints = keeps_ints && is_int(x);
        return std::vector<Constant>{elementwise(
            {&x}, ints, [f](const std::vector<double> &a) { return f(a[0]); }, "input 0")};
    };
    imp.emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };
    return imp;
}

// Max, Min, Sum, Mean: any number of inputs, folded on constants (integers stay integers but for
// Mean), hfuse's own op otherwise.
OpImport variadic(double (*f)(double, double), bool mean = false) {
    OpImport imp;
    imp.fold = [f, mean](Importer &im, const OnnxNode &n) {
        auto in = constant_inputs(im, n);
        bool ints = !mean;
        for (const Constant *c : in) ints = ints && c && is_int(*c);
        auto g = [f, mean](const std::vector<double> &a) {
            double v = a[0];
            for (size_t i = 1; i < a.size(); i++) v = f(v, a[i]);
            return mean ? v / static_cast<double>(a.size()) : v;
        };
        return std::vector<Constant>{elementwise(in, ints, g, "inputs")};
    };
    imp.emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };
    return imp;
}

// Pow: folded on constants; otherwise hfuse's Pow, an integer exponent given as a constant (opset 12
// lets it be int64) made a float one.
OpImport pow_import() {
    OpImport imp = binary([](double a, double b) { return std::pow(a, b); });
    imp.emit = [](Importer &im, const OnnxNode &n) {
        if (!n.has(1) || !im.is_constant(n.inputs[1]) || !is_int(im.constant(n.inputs[1]))) {
            im.emit_same(n);
            return;
        }
        const Constant &e = im.constant(n.inputs[1]);
        Node p;
        p.name = n.name;
        p.op = "Pow";
        p.inputs = {n.inputs[0],
                    im.add_constant(n.name + "/exponent",
                                    elementwise(
                                        {&e}, false, [](const std::vector<double> &a) { return a[0]; }, "input 1"))};
        p.outputs = {n.outputs[0]};
        im.emit(std::move(p));
    };
    return imp;
}

// `n`'s first output as a copy of its first input (removed before planning by remove_identities).
void emit_identity(Importer &im, const OnnxNode &n) {
    Node id;
    id.name = n.name;
    id.op = "Identity";
    id.inputs = {n.inputs[0]};
    id.outputs = {n.outputs[0]};
    im.emit(std::move(id));
}

// An op hfuse has under the same name and in its opset-13 form. With constant inputs it is emitted as
// well: hfuse's fold_constants rewrite evaluates it (with Halide) before planning.
// A comparison, logic op or Where over activations: hfuse's op of the same name on float32 (booleans
// as 0 and 1), its integer or boolean constant operands (a mask) converted to float32 weights.
void emit_on_floats(Importer &im, const OnnxNode &n) {
    Node node;
    node.name = n.name;
    node.op = n.op;
    node.attrs = n.attrs;
    node.outputs = {n.outputs[0]};
    for (const std::string &v : n.inputs) {
        if (im.is_constant(v) && is_int(im.constant(v))) {
            node.inputs.push_back(im.add_constant(v + "/float", fold_cast(im.constant(v), true, false)));
        } else {
            node.inputs.push_back(v);
        }
    }
    im.emit(std::move(node));
}

OpImport same() {
    OpImport imp;
    imp.emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };
    return imp;
}

void emit_clip(Importer &im, const OnnxNode &n) {
    if (im.opset() >= 11) {
        for (size_t i = 1; i < 3; i++) {
            if (n.has(i)) im.constant_input(n, i, i == 1 ? "min" : "max");
        }
        im.emit_same(n);
        return;
    }
    // Before opset 11, min and max are attributes.
    Node c;
    c.name = n.name;
    c.op = "Clip";
    c.inputs = {n.inputs[0], "", ""};
    Attributes a(n.attrs);
    if (a.has("min")) c.inputs[1] = im.add_constant(n.name + "/min", make_floats({}, {a.get_float("min")}));
    if (a.has("max")) c.inputs[2] = im.add_constant(n.name + "/max", make_floats({}, {a.get_float("max")}));
    while (!c.inputs.empty() && c.inputs.back().empty()) c.inputs.pop_back();
    c.outputs = {n.outputs[0]};
    im.emit(std::move(c));
}

// Softmax before opset 13 flattens the input to 2-D at `axis` (default 1) and normalises each row.
void emit_softmax(Importer &im, const OnnxNode &n) {
    if (im.opset() >= 13) {
        im.emit_same(n);
        return;
    }
    const Shape &in = im.type_of(n.inputs[0]).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    const int axis = rank == 0 ? 0 : axis_in(int_attr(n, "axis", 1), rank, "axis");
    if (axis == rank - 1) {
        Node s;
        s.name = n.name;
        s.op = "Softmax";
        s.inputs = {n.inputs[0]};
        s.outputs = {n.outputs[0]};
        s.attrs = {{"axis", -1}};
        im.emit(std::move(s));
        return;
    }
    const Shape rows = {count(Shape(in.begin(), in.begin() + axis)), count(Shape(in.begin() + axis, in.end()))};
    const std::string flat = im.fresh_value(n.outputs[0] + "/rows"), soft = im.fresh_value(n.outputs[0] + "/softmax");
    emit_reshape(im, im.fresh_node_name(n.name + "/rows"), n.inputs[0], flat, rows);
    Node s;
    s.name = n.name;
    s.op = "Softmax";
    s.inputs = {flat};
    s.outputs = {soft};
    s.attrs = {{"axis", 1}};
    im.emit(std::move(s));
    emit_reshape(im, im.fresh_node_name(n.name + "/unflatten"), soft, n.outputs[0], in);
}

void emit_split(Importer &im, const OnnxNode &n) {
    Node s;
    s.name = n.name;
    s.op = "Split";
    s.inputs = {n.inputs[0]};
    s.outputs = n.outputs;
    if (n.attrs.contains("axis")) s.attrs["axis"] = n.attrs["axis"];
    if (im.opset() >= 13) {
        if (n.has(1)) s.inputs.push_back(n.inputs[1]);
    } else if (n.attrs.contains("split")) {
        std::vector<int64_t> split = Attributes(n.attrs).get_ints("split");
        s.inputs.push_back(im.add_constant(n.name + "/split", make_ints({static_cast<int64_t>(split.size())}, split)));
    }
    // Split-18's num_outputs: parts of ceil(dim / num_outputs), the last one smaller when that does not
    // divide the dim. (Without it or a split input, the outputs share the dim equally, as before 18.)
    if (n.attrs.contains("num_outputs")) {
        const int64_t parts = int_attr(n, "num_outputs", 0);
        if (s.inputs.size() > 1) fail_field("num_outputs", "give either num_outputs or the split input, not both");
        if (parts != static_cast<int64_t>(n.outputs.size())) {
            fail_field("num_outputs", "is " + std::to_string(parts) + ", but the node has " +
                                          std::to_string(n.outputs.size()) + " outputs");
        }
        const Shape &in = im.type_of(n.inputs[0]).shape;
        const int axis = axis_in(int_attr(n, "axis", 0), static_cast<int64_t>(in.size()), "axis");
        const int64_t chunk = (in[axis] + parts - 1) / parts, last = in[axis] - chunk * (parts - 1);
        if (last <= 0) {
            fail_field("num_outputs", "splitting dim " + std::to_string(axis) + " (" + std::to_string(in[axis]) +
                                          ") into " + std::to_string(parts) + " parts of " + std::to_string(chunk) +
                                          " leaves the last part empty; hfuse requires positive dims");
        }
        std::vector<int64_t> sizes(parts, chunk);
        sizes.back() = last;
        s.inputs.push_back(im.add_constant(n.name + "/split", make_ints({parts}, sizes)));
    }
    im.emit(std::move(s));
}

void emit_pad(Importer &im, const OnnxNode &n) {
    if (im.opset() >= 11 && !n.has(3)) {
        im.emit_same(n);
        return;
    }
    if (im.opset() >= 11) {
        // Pad-18's axes input: pads for those axes only (begins, then ends), the other axes unpadded.
        const int64_t rank = static_cast<int64_t>(im.type_of(n.inputs[0]).shape.size());
        const std::string axes_field = Importer::input_field(3, "axes");
        const std::vector<int64_t> axes = ints_of(im.constant_input(n, 3, "axes"));
        const std::vector<int64_t> pads = ints_of(im.constant_input(n, 1, "pads"));
        const int64_t k = static_cast<int64_t>(axes.size());
        if (static_cast<int64_t>(pads.size()) != 2 * k) {
            fail_field(Importer::input_field(1, "pads"), "has " + std::to_string(pads.size()) + " values; the " +
                                                             std::to_string(k) + " axes " + list_ints(axes) + " need " +
                                                             std::to_string(2 * k));
        }
        std::vector<int64_t> full(2 * rank, 0);
        std::set<int> seen;
        for (int64_t i = 0; i < k; i++) {
            const int a = axis_in(axes[i], rank, axes_field);
            if (!seen.insert(a).second) fail_field(axes_field, "axis " + std::to_string(axes[i]) + " is given twice");
            full[a] = pads[i];
            full[a + rank] = pads[i + k];
        }
        Node p;
        p.name = n.name;
        p.op = "Pad";
        p.inputs = {n.inputs[0], im.add_constant(n.name + "/pads", make_ints({2 * rank}, full))};
        if (n.has(2)) p.inputs.push_back(n.inputs[2]);
        p.attrs = n.attrs;
        p.outputs = {n.outputs[0]};
        im.emit(std::move(p));
        return;
    }
    Attributes a(n.attrs);
    std::vector<int64_t> pads = a.get_ints("pads");
    Node p;
    p.name = n.name;
    p.op = "Pad";
    p.inputs = {n.inputs[0], im.add_constant(n.name + "/pads", make_ints({static_cast<int64_t>(pads.size())}, pads))};
    if (a.has("value")) p.inputs.push_back(im.add_constant(n.name + "/value", make_floats({}, {a.get_float("value")})));
    if (a.has("mode")) p.attrs["mode"] = a.get_string("mode");
    p.outputs = {n.outputs[0]};
    im.emit(std::move(p));
}

void emit_slice(Importer &im, const OnnxNode &n) {
    if (im.opset() >= 10) {
        im.emit_same(n);
        return;
    }
    SliceArgs s = slice_args(im, n, im.type_of(n.inputs[0]).shape);
    auto vec = [](const std::vector<int64_t> &v) { return make_ints({static_cast<int64_t>(v.size())}, v); };
    Node node;
    node.name = n.name;
    node.op = "Slice";
    node.inputs = {n.inputs[0], im.add_constant(n.name + "/starts", vec(s.starts)),
                   im.add_constant(n.name + "/ends", vec(s.ends)), im.add_constant(n.name + "/axes", vec(s.axes))};
    node.outputs = {n.outputs[0]};
    im.emit(std::move(node));
}

// Dropout is the identity in inference; a training_mode that is true is refused unless the ratio is 0.
void emit_dropout(Importer &im, const OnnxNode &n) {
    if (n.has(2)) {
        const Constant &t = im.constant_input(n, 2, "training_mode");
        const bool drops = !n.has(1) || as_double(im.constant_input(n, 1, "ratio"), 0) != 0;
        if (count(t) == 1 && as_double(t, 0) != 0 && drops) {
            fail_field("input 2 (training_mode)", "only inference (or a ratio of 0) is supported");
        }
    }
    Node d;
    d.name = n.name;
    d.op = "Identity";
    d.inputs = {n.inputs[0]};
    d.outputs = im.used_outputs(n, 1);
    im.emit(std::move(d));
}

void emit_batch_norm(Importer &im, const OnnxNode &n) {
    Node b;
    b.name = n.name;
    b.op = "BatchNormalization";
    b.inputs = n.inputs;
    for (const char *a : {"epsilon", "momentum", "training_mode"}) {
        if (n.attrs.contains(a)) b.attrs[a] = n.attrs[a];
    }
    if (n.attrs.contains("spatial") && int_attr(n, "spatial", 1) != 1)
        fail_field("spatial", "only spatial = 1 is supported");
    if (n.attrs.contains("is_test") && int_attr(n, "is_test", 1) != 1)
        fail_field("is_test", "only inference is supported");
    b.outputs = im.used_outputs(n, 1);
    im.emit(std::move(b));
}

// AveragePool-19's dilations: hfuse's AveragePool has none, so only dilations of 1 (the default) are
// taken.
void emit_average_pool(Importer &im, const OnnxNode &n) {
    if (!n.attrs.contains("dilations")) {
        im.emit_same(n);
        return;
    }
    const std::vector<int64_t> d = Attributes(n.attrs).get_ints("dilations");
    for (int64_t v : d) {
        if (v != 1)
            fail_field("dilations", "only 1s are supported (hfuse's AveragePool has none), got " + list_ints(d));
    }
    OnnxNode plain = n;
    plain.attrs.erase("dilations");
    im.emit_same(plain);
}

// ReduceMean, ReduceSum, ReduceMax, ReduceMin: axes an input from opset 18 (13 for ReduceSum). A
// ReduceMean (ReduceMax) over every spatial dim of an N x C x ... tensor is a GlobalAveragePool
// (GlobalMaxPool: hfuse's reduction template), followed by a Reshape when the dims are not kept.
void emit_reduce(Importer &im, const OnnxNode &n) {
    const Shape &in = im.type_of(n.inputs[0]).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    const int64_t axes_input_since = n.op == "ReduceSum" ? 13 : 18;
    std::optional<std::vector<int64_t>> axes = axes_operand(im, n, axes_input_since);
    // With axes as an input, none or an empty one reduces every dim, unless noop_with_empty_axes makes
    // the node an identity.
    if (im.opset() >= axes_input_since && (!axes || axes->empty())) {
        if (int_attr(n, "noop_with_empty_axes", 0) != 0) {
            emit_identity(im, n);
            return;
        }
        axes.reset();
    }
    const bool keep = int_attr(n, "keepdims", 1) != 0;
    std::set<int64_t> reduced;
    if (axes) {
        for (int64_t a : *axes) reduced.insert(axis_in(a, rank, "axes"));
    }
    std::set<int64_t> spatial;
    for (int64_t i = 2; i < rank; i++) spatial.insert(i);
    const char *global = n.op == "ReduceMean" ? "GlobalAveragePool" : n.op == "ReduceMax" ? "GlobalMaxPool" : nullptr;
    if (global && rank >= 3 && reduced == spatial) {
        Node gap;
        gap.name = n.name;
        gap.op = global;
        gap.inputs = {n.inputs[0]};
        gap.outputs = {keep ? n.outputs[0] : im.fresh_value(n.outputs[0] + "/pooled")};
        im.emit(gap);
        if (!keep)
            emit_reshape(im, im.fresh_node_name(n.name + "/squeeze"), gap.outputs[0], n.outputs[0], {in[0], in[1]});
        return;
    }
    Node r;
    r.name = n.name;
    r.op = n.op;
    r.inputs = {n.inputs[0]};
    r.outputs = {n.outputs[0]};
    if (axes) r.attrs["axes"] = *axes;
    r.attrs["keepdims"] = keep ? 1 : 0;
    im.emit(std::move(r));
}

// Resize-18's attributes, resolved into the opset-13 form hfuse's Resize takes (r: inputs as the node's,
// an empty roi or scales already left out): antialias is kept (hfuse's Resize takes it);
// keep_aspect_ratio_policy is taken where it is stretch (the default) or the sizes keep the input's
// aspect ratio (where every policy is stretch); `axes` (roi, scales and sizes given for those axes
// only) is expanded to every axis.
void resolve_resize_18(Importer &im, const OnnxNode &n, Node &r) {
    const Shape &in = im.type_of(n.inputs[0]).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    const int64_t antialias = int_attr(n, "antialias", 0);
    if (antialias != 0 && antialias != 1) fail_field("antialias", "must be 0 or 1, got " + std::to_string(antialias));

    const bool has_axes = n.attrs.contains("axes");
    std::vector<int64_t> axes;  // resolved
    if (has_axes) {
        std::set<int> seen;
        for (int64_t a : Attributes(n.attrs).get_ints("axes")) {
            const int k = axis_in(a, rank, "axes");
            if (!seen.insert(k).second) fail_field("axes", "axis " + std::to_string(a) + " is given twice");
            axes.push_back(k);
        }
        r.attrs.erase("axes");
    } else {
        for (int64_t i = 0; i < rank; i++) axes.push_back(i);
    }
    const int64_t k = static_cast<int64_t>(axes.size());
    const bool has_scales = r.inputs.size() > 2 && !r.inputs[2].empty();
    const bool has_sizes = r.inputs.size() > 3 && !r.inputs[3].empty();
    std::vector<int64_t> sizes, dims;  // sizes given, and the input dims they are for
    for (int64_t a : axes) dims.push_back(in[a]);

    const std::string policy = Attributes(n.attrs).get_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
        fail_field("keep_aspect_ratio_policy", "must be stretch, not_larger or not_smaller, got '" + policy + "'");
    }
    r.attrs.erase("keep_aspect_ratio_policy");
    if (has_sizes && (has_axes || policy != "stretch")) {
        sizes = ints_of(im.constant_input(n, 3, "sizes"));
        if (static_cast<int64_t>(sizes.size()) != k) {
            fail_field(Importer::input_field(3, "sizes"), "has " + std::to_string(sizes.size()) +
                                                              " values; one per resized axis (" + std::to_string(k) +
                                                              ") is needed");
        }
    }
    if (has_sizes && policy != "stretch") {
        // not_larger and not_smaller scale every axis by the smallest / largest sizes[i] / dims[i]: the
        // same as stretch only where those ratios are all equal.
        bool same_ratio = true;
        for (int64_t i = 0; i < k; i++) {
            same_ratio = same_ratio && sizes[i] >= 1 && sizes[i] <= kMaxTensorElements &&
                         sizes[i] * dims[0] == sizes[0] * dims[i];
        }
        if (!same_ratio) {
            fail_field("keep_aspect_ratio_policy",
                       "'" + policy + "' is supported only for sizes in the input's aspect ratio (as stretch), sizes " +
                           list_ints(sizes) + " for dims " + list_ints(dims) + " are not");
        }
    }
    if (!has_axes) return;
    // roi (read only by tf_crop_and_resize): starts then ends of the given axes; the others keep [0, 1].
    if (r.inputs.size() > 1 && !r.inputs[1].empty()) {
        const Constant &c = im.constant_input(n, 1, "roi");
        if (count(c) != 2 * k) {
            fail_field(Importer::input_field(1, "roi"), "has " + std::to_string(count(c)) +
                                                            " values; a start and an end per resized axis (" +
                                                            std::to_string(2 * k) + ") are needed");
        }
        std::vector<float> full(2 * rank, 0.0f);
        for (int64_t a = 0; a < rank; a++) full[rank + a] = 1.0f;
        for (int64_t i = 0; i < k; i++) {
            full[axes[i]] = static_cast<float>(as_double(c, i));
            full[rank + axes[i]] = static_cast<float>(as_double(c, k + i));
        }
        r.inputs[1] = im.add_constant(n.name + "/roi", make_floats({2 * rank}, full));
    }
    if (has_scales) {
        const Constant &c = im.constant_input(n, 2, "scales");
        if (count(c) != k) {
            fail_field(Importer::input_field(2, "scales"), "has " + std::to_string(count(c)) +
                                                               " values; one per resized axis (" + std::to_string(k) +
                                                               ") is needed");
        }
        std::vector<float> full(rank, 1.0f);
        for (int64_t i = 0; i < k; i++) full[axes[i]] = static_cast<float>(as_double(c, i));
        r.inputs[2] = im.add_constant(n.name + "/scales", make_floats({rank}, full));
    }
    if (has_sizes) {
        std::vector<int64_t> full(in.begin(), in.end());
        for (int64_t i = 0; i < k; i++) full[axes[i]] = sizes[i];
        r.inputs[3] = im.add_constant(n.name + "/sizes", make_ints({rank}, full));
    }
}

void emit_resize(Importer &im, const OnnxNode &n) {
    Node r;
    r.name = n.name;
    r.op = "Resize";
    r.outputs = {n.outputs[0]};
    r.attrs = n.attrs;
    if (im.opset() < 11) {
        // Resize-10: (X, scales), asymmetric coordinates, nearest rounds down when upsampling.
        r.inputs = {n.inputs[0], "", n.inputs[1]};
        r.attrs["coordinate_transformation_mode"] = "asymmetric";
        r.attrs["nearest_mode"] = "floor";
    } else {
        // An empty roi or scales (allowed as "not given") is left out.
        r.inputs = n.inputs;
        for (size_t i = 1; i < r.inputs.size(); i++) {
            if (!r.inputs[i].empty() && im.is_constant(r.inputs[i]) && count(im.constant(r.inputs[i])) == 0) {
                r.inputs[i] = "";
            }
        }
        resolve_resize_18(im, n, r);
    }
    while (!r.inputs.empty() && r.inputs.back().empty()) r.inputs.pop_back();
    im.emit(std::move(r));
}

// Upsample (deprecated since opset 10): nearest or linear; as Resize with asymmetric coordinates (nearest
// rounding down).
void emit_upsample(Importer &im, const OnnxNode &n) {
    Attributes a(n.attrs);
    const std::string mode = a.get_string("mode", "nearest");
    if (mode != "nearest" && mode != "linear") {
        fail_field("mode", "must be nearest or linear, got '" + mode + "'");
    }
    std::string scales;
    if (n.has(1)) {
        scales = n.inputs[1];
        im.constant_input(n, 1, "scales");
    } else {
        std::vector<float> s = a.get_floats("scales");
        scales = im.add_constant(n.name + "/scales", make_floats({static_cast<int64_t>(s.size())}, s));
    }
    Node r;
    r.name = n.name;
    r.op = "Resize";
    r.inputs = {n.inputs[0], "", scales};
    r.outputs = {n.outputs[0]};
    r.attrs = {{"mode", mode}, {"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}};
    im.emit(std::move(r));
}

// Gather of an activation with constant indices: a scalar index is a Slice then a Reshape dropping the
// axis; a run of consecutive indices is a Slice.
void emit_gather(Importer &im, const OnnxNode &n) {
    const Constant &idx = im.constant_input(n, 1, "indices");
    const Shape &in = im.type_of(n.inputs[0]).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    const int axis = axis_in(int_attr(n, "axis", 0), rank, "axis");
    std::vector<int64_t> k = ints_of(idx);
    for (int64_t &v : k) {
        if (v < -in[axis] || v >= in[axis]) {
            fail_field("input 1 (indices)",
                       "index " + std::to_string(v) + " is out of range for dim " + std::to_string(in[axis]));
        }
        if (v < 0) v += in[axis];
    }
    bool consecutive = idx.type.rank() <= 1 && !k.empty();
    for (size_t i = 1; i < k.size(); i++) consecutive = consecutive && k[i] == k[i - 1] + 1;
    if (!consecutive) {
        fail_field("input 1 (indices)",
                   "gathering an activation is supported for one index or consecutive "
                   "indices, got " +
                       list_ints(k));
    }
    auto one = [](int64_t v) { return make_ints({1}, {v}); };
    Node s;
    s.name = n.name;
    s.op = "Slice";
    s.inputs = {n.inputs[0], im.add_constant(n.name + "/starts", one(k.front())),
                im.add_constant(n.name + "/ends", one(k.back() + 1)), im.add_constant(n.name + "/axes", one(axis))};
    if (idx.type.rank() == 1) {
        s.outputs = {n.outputs[0]};
        im.emit(std::move(s));
        return;
    }
    s.outputs = {im.fresh_value(n.outputs[0] + "/slice")};
    im.emit(s);
    Shape out = in;
    out.erase(out.begin() + axis);
    emit_reshape(im, im.fresh_node_name(n.name + "/squeeze"), s.outputs[0], n.outputs[0], out);
}

// ---- Einsum as a (batched) matrix product

// An Einsum term with its ellipsis spelt out: one letter per dim, the ellipsis's dims given the
// characters '0', '1', ... from the right (so that they broadcast as numpy aligns them).
std::string einsum_term(std::string term, int64_t rank, int ellipsis_rank, const std::string &field) {
    const size_t dots = term.find("...");
    if (dots == std::string::npos) {
        if (static_cast<int64_t>(term.size()) != rank) {
            fail_field(field, "'" + term + "' names " + std::to_string(term.size()) + " dims of a rank-" +
                                  std::to_string(rank) + " operand");
        }
        return term;
    }
    const int64_t covered = rank - static_cast<int64_t>(term.size() - 3);
    if (covered < 0) fail_field(field, "'" + term + "' names more dims than its operand's " + std::to_string(rank));
    std::string spelt;
    for (int64_t k = 0; k < covered; k++) spelt += static_cast<char>('0' + (ellipsis_rank - covered + k));
    return term.substr(0, dots) + spelt + term.substr(dots + 3);
}

// Einsum of one operand that permutes it, or of two that is a batched matrix product: every index
// of both operands and the output a batch index (B); one index of both alone, contracted (K); at most
// one of the first operand and the output (M) and one of the second and the output (N), besides
// indices of one operand and the output (its extra batch dims, on one side only). Emitted as the
// Transposes to [extra..., B..., M, K] and [B..., K, N], a MatMul and a Transpose to the output's
// order: attention's "bhid,bhjd->bhij" and "bhij,bhjd->bhid", a linear layer's "bij,jk->bik".
void emit_einsum(Importer &im, const OnnxNode &n) {
    std::string eq = Attributes(n.attrs).get_string("equation");
    eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t start = 0;;) {
        const size_t comma = lhs.find(',', start);
        terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (terms.size() != n.inputs.size() || terms.size() > 2) {
        fail_field("equation", "'" + eq + "' has " + std::to_string(terms.size()) + " operands for " +
                                   std::to_string(n.inputs.size()) + " inputs (hfuse takes one or two)");
    }
    // The ellipsis's rank: the largest any operand's covers.
    int ellipsis = 0;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < terms.size(); i++) {
        shapes.push_back(im.type_of(n.inputs[i]).shape);
        if (terms[i].find("...") != std::string::npos) {
            ellipsis = std::max(ellipsis, static_cast<int>(shapes[i].size() - (terms[i].size() - 3)));
        }
    }
    for (size_t i = 0; i < terms.size(); i++) {
        terms[i] = einsum_term(terms[i], static_cast<int64_t>(shapes[i].size()), ellipsis, "equation");
        for (size_t a = 0; a < terms[i].size(); a++) {
            if (!std::isalnum(static_cast<unsigned char>(terms[i][a])) ||
                terms[i].find(terms[i][a], a + 1) != std::string::npos) {
                fail_field("equation", "'" + eq +
                                           "': an operand repeats an index or has a character other than a letter "
                                           "(diagonals are not supported)");
            }
        }
    }
    std::string out;
    if (arrow == std::string::npos) {
        // Implicit output: the ellipsis, then the letters that appear once, in alphabetical order.
        for (int k = 0; k < ellipsis; k++) out += static_cast<char>('0' + k);
        std::string letters = terms[0] + (terms.size() > 1 ? terms[1] : "");
        std::sort(letters.begin(), letters.end());
        for (char c : letters) {
            if (std::isalpha(static_cast<unsigned char>(c)) && std::count(letters.begin(), letters.end(), c) == 1)
                out += c;
        }
    } else {
        std::string o = eq.substr(arrow + 2);
        const int64_t o_rank = o.find("...") == std::string::npos ? static_cast<int64_t>(o.size())
                                                                  : ellipsis + static_cast<int64_t>(o.size() - 3);
        out = einsum_term(o, o_rank, ellipsis, "equation");
    }
    auto perm_to = [](const std::string &from, const std::string &to) {
        std::vector<int64_t> perm;
        for (char c : to) perm.push_back(static_cast<int64_t>(from.find(c)));
        return perm;
    };
    auto transpose = [&](const std::string &input, const std::string &from, const std::string &to,
                         const std::string &output) {
        if (from == to) return input;
        Node t;
        t.name = im.fresh_node_name(n.name + "/transpose");
        t.op = "Transpose";
        t.inputs = {input};
        t.outputs = {output.empty() ? im.fresh_value(n.outputs[0] + "/transposed") : output};
        t.attrs = {{"perm", perm_to(from, to)}};
        im.emit(t);
        return t.outputs[0];
    };
    auto unsupported = [&](const std::string &why) {
        fail_field("equation", "'" + eq + "' is not a batched matrix product: " + why);
    };
    for (char c : out) {
        if (std::count(out.begin(), out.end(), c) > 1) unsupported("the output repeats an index");
        bool found = false;
        for (const std::string &t : terms) found = found || t.find(c) != std::string::npos;
        if (!found) fail_field("equation", "'" + eq + "': output index '" + std::string(1, c) + "' is in no operand");
    }
    if (terms.size() == 1) {
        std::string sorted_in = terms[0], sorted_out = out;
        std::sort(sorted_in.begin(), sorted_in.end());
        std::sort(sorted_out.begin(), sorted_out.end());
        if (sorted_in != sorted_out) unsupported("one operand summed over some of its indices");
        if (transpose(n.inputs[0], terms[0], out, n.outputs[0]) == n.inputs[0]) emit_identity(im, n);
        return;
    }
    const std::string &a = terms[0], &b = terms[1];
    std::string batch, a_only, b_only, k;
    for (char c : out) {
        const bool in_a = a.find(c) != std::string::npos, in_b = b.find(c) != std::string::npos;
        if (in_a && in_b) {
            batch += c;
        } else if (in_a) {
            a_only += c;
        } else {
            b_only += c;
        }
    }
    for (char c : a) {
        if (out.find(c) == std::string::npos) {
            if (b.find(c) == std::string::npos)
                unsupported("index '" + std::string(1, c) + "' is summed within one operand");
            k += c;
        }
    }
    for (char c : b) {
        if (out.find(c) == std::string::npos && a.find(c) == std::string::npos)
            unsupported("index '" + std::string(1, c) + "' is summed within one operand");
    }
    if (k.size() != 1) unsupported(std::to_string(k.size()) + " contracted indices (one is)");
    // M and N: the last index of each side alone (its dims before that are extra batch dims).
    const std::string m = a_only.empty() ? "" : a_only.substr(a_only.size() - 1);
    const std::string nn = b_only.empty() ? "" : b_only.substr(b_only.size() - 1);
    const std::string a_extra = a_only.substr(0, a_only.size() - m.size());
    const std::string b_extra = b_only.substr(0, b_only.size() - nn.size());
    if (!a_extra.empty() && !b_extra.empty())
        unsupported("both operands have dims of their own beyond a row and a column");
    // A vector operand (no row, or no column) has no batch dims for MatMul to broadcast.
    if (m.empty() && !(batch.empty() && a_extra.empty())) unsupported("the first operand is a vector with batch dims");
    if (nn.empty() && !(batch.empty() && b_extra.empty()))
        unsupported("the second operand is a vector with batch dims");
    const std::string a_order = a_extra + batch + m + k, b_order = b_extra + batch + k + nn;
    const std::string product = a_extra + b_extra + batch + m + nn;
    const std::string ta = transpose(n.inputs[0], a, a_order, "");
    const std::string tb = transpose(n.inputs[1], b, b_order, "");
    Node mm;
    mm.name = n.name;
    mm.op = "MatMul";
    mm.inputs = {ta, tb};
    mm.outputs = {product == out ? n.outputs[0] : im.fresh_value(n.outputs[0] + "/product")};
    im.emit(mm);
    if (product != out) transpose(mm.outputs[0], product, out, n.outputs[0]);
}

const std::map<std::string, OpImport> &op_imports() {
    static const std::map<std::string, OpImport> table = [] {
        std::map<std::string, OpImport> t;
        for (const char *op : {"Conv", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "MaxPool",
                               "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul"}) {
            t[op] = same();
        }
        t["Clip"].emit = emit_clip;
        t["Softmax"].emit = emit_softmax;
        t["Einsum"].emit = emit_einsum;
        t["Split"].emit = emit_split;
        t["Pad"].emit = emit_pad;
        t["Dropout"].emit = emit_dropout;
        t["BatchNormalization"].emit = emit_batch_norm;
        for (const char *op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) t[op].emit = emit_reduce;
        t["Resize"].emit = emit_resize;
        t["Upsample"].emit = emit_upsample;
        t["AveragePool"].emit = emit_average_pool;

        t["Add"] = binary([](double a, double b) { return a + b; });
        t["Sub"] = binary([](double a, double b) { return a - b; });
        t["Mul"] = binary([](double a, double b) { return a * b; });
        t["Div"] = binary([](double a, double b) { return a / b; }, true);
        t["Pow"] = pow_import();
        t["Max"] = variadic([](double a, double b) { return std::isnan(a) || a > b ? a : b; });
        t["Min"] = variadic([](double a, double b) { return std::isnan(a) || a < b ? a : b; });
        t["Sum"] = variadic([](double a, double b) { return a + b; });
        t["Mean"] = variadic([](double a, double b) { return a + b; }, true);
        t["Erf"] = unary_math([](double x) { return std::erf(x); });
        t["Sqrt"] = unary_math([](double x) { return std::sqrt(x); });
        t["Reciprocal"] = unary_math([](double x) { return 1.0 / x; });
        t["Exp"] = unary_math([](double x) { return std::exp(x); });
        t["Log"] = unary_math([](double x) { return std::log(x); });
        t["Neg"] = unary_math([](double x) { return -x; }, true);
        t["Abs"] = unary_math([](double x) { return std::abs(x); }, true);
        // Expand: folded on a constant (a class token broadcast to the batch); hfuse's own op otherwise.
        t["Expand"].fold = [](Importer &im, const OnnxNode &n) {
            const Constant &x = im.constant(n.inputs[0]);
            const std::vector<int64_t> dims = ints_of(im.constant_input(n, 1, "shape"));
            const Shape target(dims.begin(), dims.end());
            for (int64_t d : dims) {
                if (d < 1) fail_field(Importer::input_field(1, "shape"), "has dim " + std::to_string(d));
            }
            if (count(target) > kMaxTensorElements) fail_field(Importer::input_field(1, "shape"), "is too large");
            const Constant like = make_ints(target, std::vector<int64_t>(count(target), 0));  // the shape alone
            return std::vector<Constant>{elementwise(
                {&x, &like}, is_int(x), [](const std::vector<double> &a) { return a[0]; }, "inputs")};
        };
        t["Expand"].emit = [](Importer &im, const OnnxNode &n) {
            im.constant_input(n, 1, "shape");
            im.emit_same(n);
        };
        t["Gelu"] = same();
        t["LayerNormalization"] = same();
        t["Equal"].fold = [](Importer &im, const OnnxNode &n) {
            auto in = constant_inputs(im, n);
            return std::vector<Constant>{elementwise(
                {in[0], in[1]}, true, [](const std::vector<double> &a) { return double(a[0] == a[1]); }, "inputs")};
        };
        t["Where"].fold = [](Importer &im, const OnnxNode &n) {
            auto in = constant_inputs(im, n);
            const bool ints = is_int(*in[1]) && is_int(*in[2]);
            return std::vector<Constant>{elementwise(
                {in[0], in[1], in[2]}, ints, [](const std::vector<double> &a) { return a[0] != 0 ? a[1] : a[2]; },
                "inputs")};
        };
        // Comparisons and logic folded on constants (the masks shape subgraphs build).
        auto compare = [](std::function<bool(double, double)> f) {
            OpImport op;
            op.fold = [f](Importer &im, const OnnxNode &n) {
                auto in = constant_inputs(im, n);
                return std::vector<Constant>{elementwise(
                    {in[0], in[1]}, true, [f](const std::vector<double> &a) { return double(f(a[0], a[1])); },
                    "inputs")};
            };
            return op;
        };
        t["Greater"] = compare([](double a, double b) { return a > b; });
        t["Less"] = compare([](double a, double b) { return a < b; });
        t["GreaterOrEqual"] = compare([](double a, double b) { return a >= b; });
        t["LessOrEqual"] = compare([](double a, double b) { return a <= b; });
        t["And"] = compare([](double a, double b) { return a != 0 && b != 0; });
        t["Or"] = compare([](double a, double b) { return a != 0 || b != 0; });
        t["Xor"] = compare([](double a, double b) { return (a != 0) != (b != 0); });
        t["Not"].fold = [](Importer &im, const OnnxNode &n) {
            return std::vector<Constant>{elementwise(
                {&im.constant(n.inputs[0])}, true, [](const std::vector<double> &a) { return double(a[0] == 0); },
                "input 0 (X)")};
        };
        // On activations: hfuse's ops, booleans as float32 0 and 1.
        for (const char *op :
             {"Equal", "Where", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor", "Not"}) {
            t[op].emit = emit_on_floats;
        }
        // Mod: integer (the sign of the divisor, as Python) unless fmod=1 (the sign of the dividend, as C).
        t["Mod"].fold = [](Importer &im, const OnnxNode &n) {
            auto in = constant_inputs(im, n);
            const int64_t fmod = int_attr(n, "fmod", 0);
            const bool ints = is_int(*in[0]) && is_int(*in[1]);
            if (!ints && fmod != 1) fail_field("fmod", "must be 1 for floating-point inputs");
            return std::vector<Constant>{elementwise(
                {in[0], in[1]}, ints,
                [fmod](const std::vector<double> &a) {
                    if (a[1] == 0) fail_field("input 1 (B)", "division by zero");
                    const double r = std::fmod(a[0], a[1]);
                    return fmod == 1 || r == 0 || (r < 0) == (a[1] < 0) ? r : r + a[1];
                },
                "inputs")};
        };
        t["ScatterND"].fold = [](Importer &im, const OnnxNode &n) {
            auto in = constant_inputs(im, n);
            return std::vector<Constant>{
                fold_scatter_nd(*in[0], *in[1], *in[2], Attributes(n.attrs).get_string("reduction", "none"))};
        };

        t["Identity"].fold = [](Importer &im, const OnnxNode &n) {
            return std::vector<Constant>{im.constant(n.inputs[0])};
        };
        t["Identity"].emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };

        t["Constant"].fold = [](Importer &im, const OnnxNode &n) {
            Attributes a(n.attrs);
            if (auto it = n.tensors.find("value"); it != n.tensors.end()) {
                return std::vector<Constant>{read_tensor(*it->second, im.dir(), "value")};
            }
            if (a.has("value_float")) return std::vector<Constant>{make_floats({}, {a.get_float("value_float")})};
            if (a.has("value_floats")) {
                std::vector<float> v = a.get_floats("value_floats");
                return std::vector<Constant>{make_floats({static_cast<int64_t>(v.size())}, v)};
            }
            if (a.has("value_int")) return std::vector<Constant>{make_ints({}, {a.get_int("value_int")})};
            if (a.has("value_ints")) {
                std::vector<int64_t> v = a.get_ints("value_ints");
                return std::vector<Constant>{make_ints({static_cast<int64_t>(v.size())}, v)};
            }
            fail_field("value",
                       "a Constant needs value, value_float(s) or value_int(s) (strings and sparse "
                       "tensors are not supported)");
        };

        // Shape and Size need only the input's type, so they fold on activations too.
        t["Shape"].fold_without_constant_inputs = true;
        t["Shape"].fold = [](Importer &im, const OnnxNode &n) {
            const Shape &s = im.type_of(n.inputs[0]).shape;
            const int64_t rank = static_cast<int64_t>(s.size());
            int64_t start = int_attr(n, "start", 0), end = int_attr(n, "end", rank);
            if (start < 0) start += rank;
            if (end < 0) end += rank;
            start = std::clamp<int64_t>(start, 0, rank);
            end = std::clamp<int64_t>(end, start, rank);
            std::vector<int64_t> dims(s.begin() + start, s.begin() + end);
            return std::vector<Constant>{make_ints({end - start}, dims)};
        };
        t["Size"].fold_without_constant_inputs = true;
        t["Size"].fold = [](Importer &im, const OnnxNode &n) {
            return std::vector<Constant>{make_ints({}, {count(im.type_of(n.inputs[0]).shape)})};
        };

        t["Gather"].fold = [](Importer &im, const OnnxNode &n) {
            return std::vector<Constant>{
                fold_gather(im.constant(n.inputs[0]), im.constant(n.inputs[1]), int_attr(n, "axis", 0))};
        };
        t["Gather"].emit = emit_gather;

        t["Unsqueeze"].fold = [](Importer &im, const OnnxNode &n) {
            auto axes = axes_operand(im, n, 13);
            if (!axes) fail_field("axes", "Unsqueeze needs axes");
            const Constant &x = im.constant(n.inputs[0]);
            return std::vector<Constant>{with_shape(x, unsqueezed(x.type.shape, *axes))};
        };
        t["Unsqueeze"].emit = [](Importer &im, const OnnxNode &n) {
            auto axes = axes_operand(im, n, 13);
            if (!axes) fail_field("axes", "Unsqueeze needs axes");
            emit_reshape(im, n.name, n.inputs[0], n.outputs[0], unsqueezed(im.type_of(n.inputs[0]).shape, *axes));
        };
        t["Squeeze"].fold = [](Importer &im, const OnnxNode &n) {
            const Constant &x = im.constant(n.inputs[0]);
            return std::vector<Constant>{with_shape(x, squeezed(x.type.shape, axes_operand(im, n, 13)))};
        };
        t["Squeeze"].emit = [](Importer &im, const OnnxNode &n) {
            emit_reshape(im, n.name, n.inputs[0], n.outputs[0],
                         squeezed(im.type_of(n.inputs[0]).shape, axes_operand(im, n, 13)));
        };

        t["Concat"].fold = [](Importer &im, const OnnxNode &n) {
            auto in = constant_inputs(im, n);
            in.erase(std::remove(in.begin(), in.end(), nullptr), in.end());
            return std::vector<Constant>{fold_concat(in, Attributes(n.attrs).get_int("axis"))};
        };
        t["Concat"].emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };

        t["Cast"].fold = [](Importer &im, const OnnxNode &n) {
            const int to = static_cast<int>(Attributes(n.attrs).get_int("to"));
            if (element_bytes(to) == 0)
                fail_field("to", std::string("casting to ") + type_name(to) + " is not supported");
            return std::vector<Constant>{
                fold_cast(im.constant(n.inputs[0]), is_float_type(to), to == onnx::TensorProto::BOOL)};
        };
        t["Cast"].emit = [](Importer &im, const OnnxNode &n) {
            int64_t to = Attributes(n.attrs).get_int("to");
            if (!is_float_type(static_cast<int>(to))) {
                fail_field("to", std::string("casting an activation to ") + type_name(static_cast<int>(to)) +
                                     " is not supported (hfuse computes in float32)");
            }
            emit_identity(im, n);
        };

        t["ConstantOfShape"].fold = [](Importer &im, const OnnxNode &n) {
            Shape shape = ints_of(im.constant(n.inputs[0]));
            for (int64_t d : shape) {
                if (d < 0) fail_field("input 0 (input)", "negative dim in " + list_ints(shape));
            }
            Constant value = make_floats({1}, {0.0f});
            if (auto it = n.tensors.find("value"); it != n.tensors.end())
                value = read_tensor(*it->second, im.dir(), "value");
            if (count(value) != 1) fail_field("value", "must hold one value");
            Constant c;
            c.type = {value.type.dtype, shape};
            if (is_int(value)) {
                c.i64.assign(count(shape), value.i64[0]);
            } else {
                c.f32.assign(count(shape), value.f32[0]);
            }
            return std::vector<Constant>{c};
        };

        t["Reshape"].fold = [](Importer &im, const OnnxNode &n) {
            const Constant &x = im.constant(n.inputs[0]);
            return std::vector<Constant>{with_shape(
                x, reshaped(x.type.shape, ints_of(im.constant(n.inputs[1])), int_attr(n, "allowzero", 0) != 0))};
        };
        t["Reshape"].emit = [](Importer &im, const OnnxNode &n) {
            im.constant_input(n, 1, "shape");
            im.emit_same(n);
        };
        t["Flatten"].fold = [](Importer &im, const OnnxNode &n) {
            const Constant &x = im.constant(n.inputs[0]);
            const Shape &s = x.type.shape;
            const int64_t rank = static_cast<int64_t>(s.size());
            int64_t axis = int_attr(n, "axis", 1);
            if (axis < 0) axis += rank;
            if (axis < 0 || axis > rank) fail_field("axis", "out of range for rank " + std::to_string(rank));
            return std::vector<Constant>{
                with_shape(x, {count(Shape(s.begin(), s.begin() + axis)), count(Shape(s.begin() + axis, s.end()))})};
        };
        t["Flatten"].emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };
        t["Transpose"].fold = [](Importer &im, const OnnxNode &n) {
            return std::vector<Constant>{
                fold_transpose(im.constant(n.inputs[0]), Attributes(n.attrs).get_ints("perm", {}))};
        };
        t["Transpose"].emit = [](Importer &im, const OnnxNode &n) { im.emit_same(n); };
        t["Slice"].fold = [](Importer &im, const OnnxNode &n) {
            const Constant &x = im.constant(n.inputs[0]);
            return std::vector<Constant>{fold_slice(x, slice_args(im, n, x.type.shape))};
        };
        t["Slice"].emit = emit_slice;
        t["Range"].fold = [](Importer &im, const OnnxNode &n) {
            auto in = constant_inputs(im, n);
            const double start = as_double(*in[0], 0), limit = as_double(*in[1], 0), delta = as_double(*in[2], 0);
            if (delta == 0) fail_field("input 2 (delta)", "must not be 0");
            const int64_t k = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
            Constant c;
            c.type = {in[0]->type.dtype, {k}};
            for (int64_t i = 0; i < k; i++) {
                if (is_int(*in[0])) {
                    c.i64.push_back(static_cast<int64_t>(start + i * delta));
                } else {
                    c.f32.push_back(static_cast<float>(start + i * delta));
                }
            }
            return std::vector<Constant>{c};
        };
        return t;
    }();
    return table;
}

}  // namespace

Graph import_onnx(const std::string &path, const LoadOptions &options) {
    Importer im(path, options);
    return im.run();
}

std::vector<std::string> onnx_model_files(const std::string &path) {
    onnx::ModelProto model = read_model_proto(path);
    std::vector<std::string> files = {path};
    const std::string dir = dir_of(path);
    try {
        for (const onnx::TensorProto &t : model.graph().initializer()) {
            if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
            std::string f = external_data(t, dir, "initializer " + quote(t.name())).path;
            if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
        }
    } catch (Error &e) {
        throw e.in_file(path);
    }
    return files;
}

}  // namespace hfuse
