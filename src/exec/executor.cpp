#include "hfuse/executor.h"

#include "compose/composer.h"
#include "exec/group_lowering.h"
#include "hfuse/error.h"

#include <cstdlib>
#include <cstring>
#include <set>

namespace hfuse {

TensorBuffer make_tensor_buffer(const Shape &shape) {
    std::vector<int> extents(shape.rbegin(), shape.rend());
    return TensorBuffer(extents);
}

Shape shape_of(const TensorBuffer &buffer) {
    Shape s;
    for (int k = buffer.dimensions() - 1; k >= 0; k--) s.push_back(buffer.dim(k).extent());
    return s;
}

TensorBuffer tensor_from_data(const Shape &shape, const float *data) {
    TensorBuffer b = make_tensor_buffer(shape);
    std::memcpy(b.data(), data, sizeof(float) * num_elements(shape));
    return b;
}

void set_num_threads(int n) {
    // Halide's runtime reads HL_NUM_THREADS when its thread pool starts, i.e. at the first parallel loop.
    if (n > 0) {
        setenv("HL_NUM_THREADS", std::to_string(n).c_str(), 1);
    } else {
        unsetenv("HL_NUM_THREADS");
    }
}

namespace {

struct CompiledGroup {
    exec::LoweredGroup lowered;
    Halide::Pipeline pipeline;
};

bool is_dense(const TensorBuffer &b) {
    int64_t stride = 1;
    for (int k = 0; k < b.dimensions(); k++) {
        if (b.dim(k).min() != 0 || b.dim(k).stride() != stride) return false;
        stride *= b.dim(k).extent();
    }
    return true;
}

}  // namespace

struct Executor::Impl {
    Graph graph;
    ExecutorOptions options;
    exec::WeightBuffers weights;
    std::vector<CompiledGroup> groups;                  // in execution order
    std::map<std::string, TensorBuffer> intermediates;  // values passed between groups, reused across runs
};

Partition Executor::unfused_partition(const Graph &graph) {
    Partition p;
    for (const Node &n : graph.nodes) p.push_back({n.name});
    return p;
}

namespace {

FusedGraph plan_of_partition(const Graph &graph, const Partition &partition) {
    FusedGraph f;
    f.graph = graph;
    for (const std::vector<std::string> &nodes : partition) {
        FusedGroup grp;
        grp.nodes = nodes;
        f.groups.push_back(grp);
    }
    return check_plan(std::move(f));
}

}  // namespace

Executor::Executor(const Graph &graph, const Partition &partition, ExecutorOptions options)
    : Executor(plan_of_partition(graph, partition), options) {}

Executor::Executor(const FusedGraph &plan, ExecutorOptions options) : impl_(new Impl) {
    impl_->graph = plan.graph;
    impl_->options = options;
    const Graph &g = impl_->graph;
    impl_->weights = exec::make_weight_buffers(g);
    for (const FusedGroup &grp : plan.groups) {  // check_plan ordered them
        std::vector<const Node *> nodes;
        for (const std::string &name : grp.nodes) nodes.push_back(g.find_node(name));
        std::set<std::string> live_out = handed_out_values(plan, grp);
        // A group whose values nobody reads (dead nodes of a graph run as written, or an owner every
        // reader recomputes) has nothing to compute.
        if (live_out.empty()) continue;
        CompiledGroup cg;
        if (grp.backend.empty()) {
            cg.lowered = exec::lower_group(g, nodes, live_out, impl_->weights);
            compose::compose_group(g, grp, cg.lowered, options.target);
        } else {
            const BackendPattern *pattern = find_backend_pattern(grp.backend);
            if (!pattern) {
                throw Error("group " + grp.name + " names backend pattern '" + grp.backend +
                            "', which this program has not registered")
                    .in_file(g.source);
            }
            cg.lowered = exec::lower_backend_group(g, nodes, live_out, impl_->weights, *pattern);
        }
        cg.pipeline = Halide::Pipeline(cg.lowered.output_funcs);
        if (!cg.lowered.jit_externs.empty()) cg.pipeline.set_jit_externs(cg.lowered.jit_externs);
        try {
            cg.pipeline.compile_jit(options.target);
        } catch (const Halide::Error &e) {
            throw Error(std::string("Halide failed to compile group ") + grp.name + ": " + e.what())
                .at_node(nodes.front()->name, nodes.front()->op)
                .in_file(g.source);
        }
        for (const std::string &v : cg.lowered.output_values) {
            impl_->intermediates[v] = make_tensor_buffer(g.type_of(v).shape);
        }
        impl_->groups.push_back(std::move(cg));
    }
}

Executor::~Executor() = default;
Executor::Executor(Executor &&) noexcept = default;
Executor &Executor::operator=(Executor &&) noexcept = default;

const Graph &Executor::graph() const {
    return impl_->graph;
}
int Executor::num_groups() const {
    return static_cast<int>(impl_->groups.size());
}

std::map<std::string, TensorBuffer> Executor::run(const std::map<std::string, TensorBuffer> &inputs) {
    const Graph &g = impl_->graph;
    std::map<std::string, TensorBuffer> values;  // what this run reads: inputs, then group outputs
    for (const auto &kv : inputs) {
        if (!g.is_input(kv.first)) throw Error("'" + kv.first + "' is not an input of the model").in_file(g.source);
    }
    for (const GraphInput &in : g.inputs) {
        auto it = inputs.find(in.name);
        if (it == inputs.end()) throw Error("no data given for model input '" + in.name + "'").in_file(g.source);
        if (shape_of(it->second) != in.shape || !is_dense(it->second)) {
            throw Error("model input '" + in.name + "' must be a dense tensor of shape [" + to_string(in.shape) +
                        "], got [" + to_string(shape_of(it->second)) + "]" + (is_dense(it->second) ? "" : " (strided)"))
                .in_file(g.source);
        }
        values[in.name] = it->second;
    }
    // Model outputs get fresh buffers each run, so results stay valid after the next run.
    std::map<std::string, TensorBuffer> outputs;
    for (const std::string &v : g.outputs) {
        if (!outputs.count(v))
            outputs[v] = g.is_input(v) ? values.at(v).copy() : make_tensor_buffer(g.type_of(v).shape);
    }
    for (CompiledGroup &cg : impl_->groups) {
        for (size_t i = 0; i < cg.lowered.params.size(); i++)
            cg.lowered.params[i].set(values.at(cg.lowered.input_values[i]));
        std::vector<Halide::Buffer<void>> results;
        for (const std::string &v : cg.lowered.output_values) {
            TensorBuffer b = outputs.count(v) ? outputs.at(v) : impl_->intermediates.at(v);
            values[v] = b;
            results.push_back(b);
        }
        Halide::Realization realization(results);
        try {
            cg.pipeline.realize(realization, impl_->options.target);
        } catch (const Halide::Error &e) {
            throw Error(std::string("Halide runtime error: ") + e.what()).in_file(g.source);
        }
    }
    return outputs;
}

}  // namespace hfuse
