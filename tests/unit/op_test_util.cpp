#include "op_test_util.h"

#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/passes.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

namespace hfuse::test {

InputSpec activation(Shape shape) {
    InputSpec s;
    s.shape = std::move(shape);
    return s;
}

InputSpec weight(Shape shape, double lo, double hi) {
    InputSpec s;
    s.kind = InputSpec::Weight;
    s.f32 = uniform_values(num_elements(shape), lo, hi, 1000 + shape.size() * 7 + num_elements(shape));
    s.shape = std::move(shape);
    return s;
}

InputSpec weight_values(Shape shape, std::vector<float> values) {
    InputSpec s;
    s.kind = InputSpec::Weight;
    s.shape = std::move(shape);
    s.f32 = std::move(values);
    return s;
}

InputSpec ints(std::vector<int64_t> values) {
    InputSpec s;
    s.kind = InputSpec::Weight;
    s.dtype = DType::Int64;
    s.shape = {static_cast<int64_t>(values.size())};
    s.i64 = std::move(values);
    return s;
}

InputSpec missing() {
    InputSpec s;
    s.kind = InputSpec::Missing;
    return s;
}

std::string describe(const OpCase &c) {
    std::string s = c.op + " attrs=" + c.attrs.dump() + " inputs=";
    for (const auto &in : c.inputs) {
        if (in.kind == InputSpec::Missing) {
            s += "[missing] ";
            continue;
        }
        s += std::string(in.kind == InputSpec::Weight ? "w" : "x") + "[" + to_string(in.shape) + "]";
        if (in.dtype == DType::Int64) {
            s += "{";
            for (int64_t v : in.i64) s += std::to_string(v) + ",";
            s += "}";
        }
        s += " ";
    }
    return s;
}

Graph make_single_op_graph(const OpCase &c, uint64_t seed) {
    Graph g;
    g.name = "single_" + c.op;
    g.source = "<test " + c.op + ">";
    Node n;
    n.name = "op";
    n.op = c.op;
    n.attrs = c.attrs;
    for (size_t i = 0; i < c.inputs.size(); i++) {
        const InputSpec &in = c.inputs[i];
        std::string name = "in" + std::to_string(i);
        switch (in.kind) {
        case InputSpec::Missing: n.inputs.push_back(""); continue;
        case InputSpec::Activation: g.inputs.push_back({name, in.shape}); break;
        case InputSpec::Weight: {
            Constant k;
            k.type = {in.dtype, in.shape};
            k.f32 = in.f32;
            k.i64 = in.i64;
            if (in.dtype == DType::Float32 && k.f32.empty()) {
                k.f32 = uniform_values(num_elements(in.shape), -1, 1, seed * 31 + i);
            }
            g.weights[name] = std::move(k);
            break;
        }
        }
        n.inputs.push_back(name);
    }
    if (c.num_outputs == 1) {
        n.outputs = {"op"};
    } else {
        for (int i = 0; i < c.num_outputs; i++) n.outputs.push_back("out" + std::to_string(i));
    }
    g.outputs = n.outputs;
    g.nodes.push_back(std::move(n));
    return g;
}

void check_op(const OpCase &c, double tolerance, uint64_t seed) {
    SCOPED_TRACE(describe(c));
    Graph g;
    try {
        g = prepare(make_single_op_graph(c, seed));
    } catch (const Error &e) {
        ADD_FAILURE() << "preparing the graph failed: " << e.what();
        return;
    }
    std::map<std::string, TensorBuffer> inputs;
    std::map<std::string, reference::RefTensor> ref_inputs;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const GraphInput &in = g.inputs[i];
        std::vector<float> values = uniform_values(num_elements(in.shape), -1, 1, seed * 7919 + i);
        inputs[in.name] = tensor_from_data(in.shape, values.data());
        ref_inputs[in.name] = {in.shape, values};
    }
    std::map<std::string, TensorBuffer> actual;
    try {
        Executor ex(g, Executor::unfused_partition(g));
        actual = ex.run(inputs);
    } catch (const std::exception &e) {
        ADD_FAILURE() << "Halide execution failed: " << e.what();
        return;
    }
    std::map<std::string, reference::RefTensor> expected = reference::run(g, ref_inputs);
    for (const std::string &out : g.outputs) {
        const TensorBuffer &a = actual.at(out);
        const reference::RefTensor &e = expected.at(out);
        ASSERT_EQ(shape_of(a), e.shape) << "output " << out;
        reference::Comparison cmp = reference::compare(a.data(), e.data.data(), e.data.size());
        EXPECT_LE(cmp.relative(), tolerance)
            << "output " << out << ": max abs error " << cmp.max_abs_error << " at scale " << cmp.scale;
    }
}

void expect_op_error(const OpCase &c, const std::string &needle) {
    SCOPED_TRACE(describe(c));
    try {
        prepare(make_single_op_graph(c));
        ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
    }
}

}  // namespace hfuse::test
