// The kernels built with add_halide_library in generators/CMakeLists.txt (hfuse_generated_kernels.h
// lists them with their GeneratorParams), called through their C functions: each against the
// reference evaluator and the JIT executor on the graph its generator compiles (asked from the
// generator itself, through Halide's registry, with the same GeneratorParams), and each refusing
// buffers of the wrong shape.
#include "hfuse_generated_kernels.h"
#include "hfuse_generator.h"

#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace hfuse {
namespace {

// What halide_error reports in the generated kernels' runtime (not the JIT's: libHalide keeps its own).
std::string g_errors;
void capture_error(void *, const char *msg) {
    g_errors += msg;
}

// A kernel of the table with the graph and plan its generator compiles.
struct Kernel {
    const HfuseGeneratedKernel *entry = nullptr;
    Graph graph;
    FusedGraph plan;
    std::vector<std::string> names;  // C names of the arguments: inputs, then outputs
};

std::unique_ptr<Halide::Internal::GeneratorBase> make_generator(const std::string &name,
                                                                const std::vector<std::string> &params) {
    auto gen = Halide::Internal::GeneratorRegistry::create(name, Halide::GeneratorContext(Halide::get_host_target()));
    Halide::Internal::GeneratorParamsMap values;
    for (const std::string &p : params) {
        size_t eq = p.find('=');
        if (eq != std::string::npos) values[p.substr(0, eq)] = p.substr(eq + 1);
    }
    gen->set_generator_param_values(values);
    return gen;
}

Kernel load_kernel(const HfuseGeneratedKernel &entry) {
    Kernel k;
    k.entry = &entry;
    auto gen = make_generator(entry.generator, entry.params);
    auto *source = dynamic_cast<gen::GraphSource *>(gen.get());
    if (!source) throw Error(std::string(entry.generator) + " is not one of hfuse's generators");
    k.graph = source->graph();
    k.plan = source->fused_plan(Halide::get_host_target());
    k.names = gen::argument_names(k.graph);
    return k;
}

bool autoscheduled(const Kernel &k) {
    return k.entry->autoscheduler[0] != '\0';
}

// Seeded data for input `i`: uniform [-1, 1], or [0.5, 1.5] for a batch-norm variance.
std::vector<float> input_data(const std::string &name, const Shape &shape, int i) {
    const bool positive = name == "var";
    return uniform_values(num_elements(shape), positive ? 0.5 : -1.0, positive ? 1.5 : 1.0, 1000 + i);
}

struct KernelRun {
    int code = 0;
    std::vector<TensorBuffer> outputs;
};

// Calls the kernel through its _argv entry point with `inputs` (graph input order) and fresh outputs
// of `output_shapes`.
KernelRun call(const HfuseGeneratedKernel &entry, std::vector<TensorBuffer> inputs,
               const std::vector<Shape> &output_shapes) {
    KernelRun r;
    std::vector<void *> args;
    for (TensorBuffer &b : inputs) args.push_back(b.raw_buffer());
    for (const Shape &s : output_shapes) r.outputs.push_back(make_tensor_buffer(s));
    for (TensorBuffer &b : r.outputs) args.push_back(b.raw_buffer());
    g_errors.clear();
    halide_set_error_handler(capture_error);
    r.code = entry.argv(args.data());
    return r;
}

std::vector<Shape> output_shapes(const Graph &g) {
    std::vector<Shape> shapes;
    for (const std::string &v : g.outputs) shapes.push_back(g.type_of(v).shape);
    return shapes;
}

double max_abs(const TensorBuffer &b) {
    double m = 0;
    for (size_t i = 0; i < b.number_of_elements(); i++) m = std::max(m, (double)std::fabs(b.data()[i]));
    return m;
}

class GeneratedKernel : public testing::TestWithParam<int> {
protected:
    const HfuseGeneratedKernel &entry() const { return kHfuseGeneratedKernels[GetParam()]; }
};

// The C function's arguments are the graph's inputs then outputs, as Halide's metadata says.
TEST_P(GeneratedKernel, SignatureIsTheGraphs) {
    Kernel k = load_kernel(entry());
    const halide_filter_metadata_t *md = entry().metadata();
    const size_t n_in = k.graph.inputs.size(), n_out = k.graph.outputs.size();
    ASSERT_EQ(md->num_arguments, static_cast<int>(n_in + n_out));
    for (size_t i = 0; i < n_in + n_out; i++) {
        const halide_filter_argument_t &a = md->arguments[i];
        const bool is_output = i >= n_in;
        const Shape &shape = is_output ? k.graph.type_of(k.graph.outputs[i - n_in]).shape : k.graph.inputs[i].shape;
        EXPECT_EQ(a.name, k.names[i]) << "argument " << i;
        EXPECT_EQ(a.kind, is_output ? halide_argument_kind_output_buffer : halide_argument_kind_input_buffer) << a.name;
        EXPECT_EQ(a.dimensions, static_cast<int>(shape.size())) << a.name;
        EXPECT_TRUE(a.type.code == halide_type_float && a.type.bits == 32) << a.name;
    }
}

// Same results as the reference evaluator and as the JIT executor running the same plan.
TEST_P(GeneratedKernel, MatchesReferenceAndJit) {
    Kernel k = load_kernel(entry());
    const Graph &g = k.graph;
    if (std::string(entry().generator) != "hfuse_model") {
        EXPECT_EQ(k.plan.groups.size(), 1u) << "a named kernel must be one fused group";
    }
    std::vector<TensorBuffer> inputs;
    std::map<std::string, TensorBuffer> jit_inputs;
    std::map<std::string, reference::RefTensor> ref_inputs;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const GraphInput &in = g.inputs[i];
        std::vector<float> data = input_data(in.name, in.shape, static_cast<int>(i));
        inputs.push_back(tensor_from_data(in.shape, data.data()));
        jit_inputs[in.name] = tensor_from_data(in.shape, data.data());
        ref_inputs[in.name] = {in.shape, data};
    }
    KernelRun r = call(entry(), inputs, output_shapes(g));
    ASSERT_EQ(r.code, 0) << g_errors;

    auto expected = reference::run(g, ref_inputs);
    Executor jit(k.plan);
    auto jit_out = jit.run(jit_inputs);
    // Same plan, same templates, same target: the same code up to the JIT/AOT difference. An
    // autoscheduler's schedule against the templates: another order of the same sums.
    const double jit_tolerance = autoscheduled(k) ? 1e-4 : 1e-6;
    for (size_t i = 0; i < g.outputs.size(); i++) {
        const std::string &v = g.outputs[i];
        const TensorBuffer &out = r.outputs[i];
        const auto &e = expected.at(v);
        ASSERT_EQ(out.number_of_elements(), e.data.size());
        EXPECT_GT(max_abs(out), 0.0) << v << " is all zeros";
        auto ref = reference::compare(out.data(), e.data.data(), e.data.size());
        EXPECT_LE(ref.relative(), 1e-4) << v << " vs reference: max abs error " << ref.max_abs_error;
        auto cmp = reference::compare(out.data(), jit_out.at(v).data(), e.data.size());
        EXPECT_LE(cmp.relative(), jit_tolerance) << v << " vs JIT: max abs error " << cmp.max_abs_error;
    }
}

// A buffer of another shape, input or output, is refused with an error code before anything is
// computed, and the error names the buffer: an input by its argument name, an output by its Func's
// (Halide names output buffers after the Func assigned to the Output, e.g. "output$1_tile" for the
// value "output"), which starts with the value's name.
TEST_P(GeneratedKernel, RefusesWrongShapes) {
    Kernel k = load_kernel(entry());
    const Graph &g = k.graph;
    const std::vector<Shape> outs = output_shapes(g);
    auto good_inputs = [&] {
        std::vector<TensorBuffer> in;
        for (size_t i = 0; i < g.inputs.size(); i++) {
            std::vector<float> data = input_data(g.inputs[i].name, g.inputs[i].shape, static_cast<int>(i));
            in.push_back(tensor_from_data(g.inputs[i].shape, data.data()));
        }
        return in;
    };
    ASSERT_EQ(call(entry(), good_inputs(), outs).code, 0) << g_errors;

    // Each argument in turn with its innermost extent one too large, then with one more dim.
    for (size_t i = 0; i < g.inputs.size() + outs.size(); i++) {
        const bool is_output = i >= g.inputs.size();
        for (int variant = 0; variant < 2; variant++) {
            std::vector<TensorBuffer> in = good_inputs();
            std::vector<Shape> out_shapes = outs;
            Shape shape = is_output ? outs[i - g.inputs.size()] : g.inputs[i].shape;
            if (variant == 0) {
                shape.back() += 1;
            } else {
                shape.insert(shape.begin(), 1);
            }
            if (is_output) {
                out_shapes[i - g.inputs.size()] = shape;
            } else {
                in[i] = make_tensor_buffer(shape);
            }
            KernelRun r = call(entry(), in, out_shapes);
            const std::string what = k.names[i] + " of shape [" + to_string(shape) + "]";
            EXPECT_NE(r.code, 0) << what << " was accepted";
            EXPECT_FALSE(g_errors.empty()) << what;
            const std::string name = is_output ? g.outputs[i - g.inputs.size()] : k.names[i];
            EXPECT_NE(g_errors.find(name), std::string::npos) << what << ": " << g_errors;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Generators, GeneratedKernel,
                         testing::Range(0, static_cast<int>(std::size(kHfuseGeneratedKernels))),
                         [](const testing::TestParamInfo<int> &info) {
                             return std::string(kHfuseGeneratedKernels[info.param].name);
                         });

const HfuseGeneratedKernel &find_kernel(const std::string &name) {
    for (const HfuseGeneratedKernel &k : kHfuseGeneratedKernels) {
        if (name == k.name) return k;
    }
    throw Error("no generated kernel " + name);
}

// The named kernels at the bundled models' shapes take those models' weights as they are (ONNX
// layouts) and compute what the model computes.
TEST(GeneratedKernels, RunBundledModelsWithTheirWeights) {
    struct Case {
        const char *kernel, *model;
        std::map<std::string, std::string> weights;  // kernel input -> model weight
    };
    const std::map<std::string, std::string> bn = {
        {"scale", "bn.scale"}, {"bias", "bn.bias"}, {"mean", "bn.mean"}, {"var", "bn.var"}};
    auto with_bn = [&](const std::string &w) {
        auto m = bn;
        m["weight"] = w;
        return m;
    };
    const Case cases[] = {
        {"gen_conv_bias_relu_maxpool", "conv_bias_relu_maxpool", {{"weight", "conv.w"}, {"bias", "conv.b"}}},
        {"gen_conv_bn_relu", "conv_bn_relu", with_bn("conv.w")},
        {"gen_dwconv_bn_relu", "dwconv_bn_relu", with_bn("dwconv.w")},
        {"gen_rnn_cell", "rnn_cell", {{"w_ih", "xw.w"}, {"b", "xw.b"}, {"w_hh", "hu.w"}}},
        {"gen_lstm_cell", "lstm_cell", {{"w_ih", "xw.w"}, {"b", "xw.b"}, {"w_hh", "hr.w"}}},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.kernel);
        Kernel k = load_kernel(find_kernel(c.kernel));
        Graph model = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/" + c.model + ".json");
        std::map<std::string, reference::RefTensor> ref_inputs;
        std::vector<TensorBuffer> inputs;
        for (size_t i = 0; i < k.graph.inputs.size(); i++) {
            const GraphInput &in = k.graph.inputs[i];
            std::vector<float> data;
            if (auto w = c.weights.find(in.name); w != c.weights.end()) {
                const Constant &constant = model.weights.at(w->second);
                ASSERT_EQ(constant.type.shape, in.shape) << in.name;
                data = constant.f32;
            } else {
                ASSERT_TRUE(model.is_input(in.name)) << in.name;
                data = input_data(in.name, in.shape, static_cast<int>(i));
                ref_inputs[in.name] = {in.shape, data};
            }
            inputs.push_back(tensor_from_data(in.shape, data.data()));
        }
        KernelRun r = call(*k.entry, inputs, output_shapes(k.graph));
        ASSERT_EQ(r.code, 0) << g_errors;
        auto expected = reference::run(model, ref_inputs);
        ASSERT_EQ(model.outputs.size(), r.outputs.size());
        for (size_t i = 0; i < model.outputs.size(); i++) {
            const auto &e = expected.at(model.outputs[i]);
            EXPECT_GT(max_abs(r.outputs[i]), 0.0);
            auto cmp = reference::compare(r.outputs[i].data(), e.data.data(), e.data.size());
            EXPECT_LE(cmp.relative(), 1e-4) << model.outputs[i] << ": max abs error " << cmp.max_abs_error;
        }
    }
}

// GeneratorParams outside what the op library accepts are errors naming the node and field.
TEST(Generators, BadParamsAreErrors) {
    auto graph_of = [](const std::string &generator, const std::vector<std::string> &params) {
        auto gen = make_generator(generator, params);
        return dynamic_cast<gen::GraphSource &>(*gen).graph();
    };
    try {
        graph_of("conv_bias_relu_maxpool", {"height=8", "width=8", "kernel=11", "pad=1"});
        FAIL() << "a kernel larger than the padded input was accepted";
    } catch (const Error &e) {
        EXPECT_EQ(e.node(), "conv");
        EXPECT_EQ(e.field(), "kernel_shape");
    }
    try {
        graph_of("conv_bias_relu_maxpool", {"height=4", "width=4", "kernel=3", "pad=1", "pool=5"});
        FAIL() << "a pool window larger than the conv output was accepted";
    } catch (const Error &e) {
        EXPECT_EQ(e.node(), "output");  // the last node is named after the kernel's output
        EXPECT_NE(std::string(e.what()).find("(MaxPool)"), std::string::npos) << e.what();
    }
    EXPECT_THROW(graph_of("hfuse_model", {}), Error);
    EXPECT_THROW(graph_of("hfuse_model", {"model=/nonexistent/model.json"}), Error);
    // Halide itself refuses an unknown activation or an out-of-range value.
    EXPECT_ANY_THROW(make_generator("dense_bias_relu", {"activation=gelu"}));
    EXPECT_ANY_THROW(graph_of("dense_bias_relu", {"in_features=0"}));
}

// The generator executable reports such errors in one line and exits with 1 (a failed build step).
TEST(Generators, ExecutableReportsErrors) {
    const std::string cmd = std::string(HFUSE_GENERATORS) + " -g conv_bias_relu_maxpool -f k -o " + testing::TempDir() +
                            " -e c_header target=host height=8 width=8 kernel=11 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    int status = pclose(p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << out;
    EXPECT_NE(out.find("hfuse generator: error: conv_bias_relu_maxpool: node 'conv' (Conv): field 'kernel_shape'"),
              std::string::npos)
        << out;
}

// Argument names are C identifiers Halide accepts (no "__"), distinct, in graph order.
TEST(Generators, ArgumentNames) {
    Graph g;
    for (const char *n : {"input", "conv.w", "1x", "a__b", "int", "a_b", "target", "_x"}) g.inputs.push_back({n, {1}});
    g.outputs = {"a.b", "out"};
    EXPECT_EQ(gen::argument_names(g), (std::vector<std::string>{"input", "conv_w", "v_1x", "a_b", "v_int", "a_b_2",
                                                                "target_2", "v_x", "a_b_3", "out"}));
}

}  // namespace
}  // namespace hfuse
