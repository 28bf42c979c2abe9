// hfuse side by side with its peers, in one process, with one thread count: each bundled workload
// (models/*.json) run by
//
//   WORKLOAD/hfuse_fused           the default plan (x86 rules), hfuse's schedule templates
//   WORKLOAD/hfuse_fused_halide_pool  the same, every group's parallel loops on Halide's thread pool
//                                  (by default: OpenMP from 1 MFLOP a group, ExecutorOptions::parallel_runtime)
//   WORKLOAD/hfuse_unfused         one group per op, the graph as written (`hfuse run --unfused`)
//   WORKLOAD/hfuse_AS_groups       the default plan, each group scheduled by Halide's autoscheduler AS
//   WORKLOAD/hfuse_AS_whole        the whole model one pipeline, every choice AS's (`--whole`)
//   WORKLOAD/onednn                convolution workloads: oneDNN as an expert would use it (onednn_net.h)
//   WORKLOAD/onednn_winograd       those with a 3x3 stride-1 conv: the same, those convs by oneDNN's
//                                  Winograd (hfuse's default for them too, conv_cv "algorithm")
//   WORKLOAD/eigen                 RNN/LSTM/MLP cells: Eigen, weights concatenated into one GEMV
//   peak/fma/threads:N             the measured FMA peak (peak_flops.h)
//   machine/core_round_trip        a cache line's round trip between the first two CPUs
//                                  (core_round_trip.h): how far apart the cores are, which moves on a VM
//
// Every implementation is checked once, before it is timed, against hfuse's independent reference
// evaluator on the same inputs; a mismatch fails the benchmark (SkipWithError) instead of timing it.
// Counters: GFLOP/s (the model's FLOPs as written, the same count for every implementation),
// peak_share (of the FMA peak measured at start-up with the same thread count), groups (hfuse).
//
//   hfuse_bench [--threads=N] [--autoschedule=mullapudi2016|adams2019|li2018] [Google Benchmark flags]
#include "core_round_trip.h"
#include "onednn_net.h"
#include "peak_flops.h"

#include "hfuse/composer.h"
#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/model_io.h"
#include "hfuse/op_registry.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <benchmark/benchmark.h>
#include <omp.h>
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace hfuse::bench {
namespace {

int g_threads = 2;
std::string g_autoschedule = "mullapudi2016";
double g_peak_gflops = 0;                 // all g_threads threads, measured at start-up
const FmaKernel *g_fma_kernel = nullptr;  // the peak's loop, on the vectors of Halide's target
std::optional<CpuPair> g_core_pair;       // the CPUs machine/core_round_trip measures (2+ threads)
bool g_failed = false;                    // some benchmark could not be set up or computed a wrong result: exit 1

using Outputs = std::map<std::string, std::vector<float>>;

// The ISA oneDNN's kernels use (its effective one, after set_max_cpu_isa), for the run's context.
std::string onednn_isa_name(dnnl::cpu_isa isa) {
    using I = dnnl::cpu_isa;
    const std::pair<I, const char *> names[] = {{I::sse41, "sse41"},
                                                {I::avx, "avx"},
                                                {I::avx2, "avx2"},
                                                {I::avx2_vnni, "avx2_vnni"},
                                                {I::avx512_core, "avx512_core"},
                                                {I::avx512_core_vnni, "avx512_core_vnni"},
                                                {I::avx512_core_bf16, "avx512_core_bf16"},
                                                {I::avx512_core_amx, "avx512_core_amx"}};
    for (const auto &[value, name] : names)
        if (value == isa) return name;
    return std::to_string(static_cast<int>(isa));
}

// A bundled model, its inputs (as `hfuse run` generates them) and the reference evaluator's outputs.
struct Workload {
    Graph graph;
    std::map<std::string, TensorBuffer> inputs;
    std::map<std::string, std::vector<float>> input_data;
    Outputs expected;
    double flops = 0;
};

const Workload &workload(const std::string &name) {
    static std::map<std::string, std::unique_ptr<Workload>> cache;
    auto &slot = cache[name];
    if (slot) return *slot;
    auto w = std::make_unique<Workload>();
    // The bundled models, else the benchmark-only ones (bench/models/).
    const std::string bundled = std::string(HFUSE_SOURCE_DIR) + "/models/" + name + ".json";
    w->graph = load_model(
        std::ifstream(bundled).good() ? bundled : std::string(HFUSE_SOURCE_DIR) + "/bench/models/" + name + ".json");
    std::map<std::string, reference::RefTensor> ref_inputs;
    for (size_t i = 0; i < w->graph.inputs.size(); i++) {
        const GraphInput &in = w->graph.inputs[i];
        // Seed 1000 + i: the inputs `hfuse run` and `hfuse bench` generate.
        std::vector<float> data = uniform_values(num_elements(in.shape), -1.0, 1.0, 1000 + i);
        w->inputs[in.name] = tensor_from_data(in.shape, data.data());
        ref_inputs[in.name] = {in.shape, data};
        w->input_data[in.name] = std::move(data);
    }
    for (auto &[out, t] : reference::run(w->graph, ref_inputs)) w->expected[out] = std::move(t.data);
    w->flops = graph_flops(w->graph);
    slot = std::move(w);
    return *slot;
}

// "" when every output is within 1e-3 of the reference's scale: reordered float sums stay far below, a
// wrong computation (a missed bias, a wrong layout) lands far above.
std::string check(const Workload &w, const Outputs &actual) {
    for (const auto &[name, expected] : w.expected) {
        auto it = actual.find(name);
        if (it == actual.end() || it->second.size() != expected.size()) return "output '" + name + "' missing";
        reference::Comparison c = reference::compare(it->second.data(), expected.data(), expected.size());
        if (c.relative() > 1e-3) {
            char msg[160];
            std::snprintf(msg, sizeof msg, "output '%s' differs from the reference: max abs error %.3g at scale %.3g",
                          name.c_str(), c.max_abs_error, c.scale);
            return msg;
        }
    }
    return "";
}

// An implementation set up and verified once (Google Benchmark calls a benchmark several times while
// it sizes the iteration count), kept for the whole run.
struct Impl {
    std::function<void()> run;
    std::string error;  // set-up failure or mismatch: the benchmark reports it instead of a time
    std::string label;
    int groups = 0;
    // hfuse: building the executor (JIT), its slowest group, and Halide's shared JIT runtime, which the
    // process's first executor compiles (compile_ms is without it: whichever benchmark sets up first).
    double compile_ms = 0, compile_max_ms = 0, runtime_compile_ms = 0;
};

Impl &cached(const std::string &key, const std::function<Impl()> &make) {
    static std::map<std::string, std::unique_ptr<Impl>> cache;
    auto &slot = cache[key];
    if (!slot) {
        try {
            slot = std::make_unique<Impl>(make());
        } catch (const std::exception &e) {
            slot = std::make_unique<Impl>();
            slot->error = e.what();
        }
    }
    return *slot;
}

void timed(benchmark::State &state, const Workload &w, Impl &impl) {
    if (!impl.error.empty()) {
        g_failed = true;
        state.SkipWithError(impl.error.c_str());
        return;
    }
    for (auto _ : state) impl.run();
    using benchmark::Counter;
    state.counters["GFLOP/s"] = Counter(w.flops * 1e-9, Counter::kIsIterationInvariantRate);
    // flops / peak, as a rate over the measured time: the achieved share of the peak.
    if (g_peak_gflops > 0) {
        state.counters["peak_share"] = Counter(w.flops * 1e-9 / g_peak_gflops, Counter::kIsIterationInvariantRate);
    }
    if (impl.groups > 0) {
        state.counters["groups"] = impl.groups;
        state.counters["compile_ms"] = impl.compile_ms;
        state.counters["group_compile_max_ms"] = impl.compile_max_ms;
        if (impl.runtime_compile_ms > 0) state.counters["runtime_compile_ms"] = impl.runtime_compile_ms;
    }
    if (!impl.label.empty()) state.SetLabel(impl.label);
}

// ---- hfuse ------------------------------------------------------------------------------------------

// FusedBlockedIo: the fused plan taking its input and returning its output channel-blocked where its
// conv_cv groups would convert them (ExecutorOptions::blocked_io), the conversions outside the timed
// runs, as the oneDNN peer's reorders are.
enum class Variant { Fused, FusedBlockedIo, FusedHalidePool, Unfused, AutoGroups, AutoWhole };

Impl make_hfuse(const Workload &w, Variant v) {
    ExecutorOptions opts;
    opts.parallelism = g_threads;
    FusedGraph plan;
    switch (v) {
    case Variant::Fused: plan = plan_fusion(w.graph, {load_rules("x86")}); break;
    case Variant::FusedBlockedIo:
        plan = plan_fusion(w.graph, {load_rules("x86")});
        opts.blocked_io = true;
        break;
    case Variant::FusedHalidePool:
        plan = plan_fusion(w.graph, {load_rules("x86")});
        opts.parallel_runtime = ParallelRuntime::Halide;
        break;
    case Variant::Unfused:
        plan = singleton_groups(w.graph);
        plan.rules = {"unfused"};
        break;
    case Variant::AutoGroups:
        plan = plan_fusion(w.graph, {load_rules("x86")});
        opts.schedule = parse_schedule_source(g_autoschedule);
        break;
    case Variant::AutoWhole:
        plan = whole_model_plan(w.graph);
        opts.schedule = parse_schedule_source(g_autoschedule);
        break;
    }
    const auto start = std::chrono::steady_clock::now();
    auto ex = std::make_shared<Executor>(with_default_schedules(std::move(plan), opts.target), opts);
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Impl impl;
    std::map<std::string, TensorBuffer> inputs;
    for (const auto &[name, buf] : w.inputs) inputs[name] = ex->pack_input(name, buf);
    Outputs actual;
    for (auto &[name, stored] : ex->run(inputs)) {
        TensorBuffer buf = ex->unpack_output(name, stored);
        actual[name].assign(buf.data(), buf.data() + buf.number_of_elements());
    }
    impl.error = check(w, actual);
    impl.groups = ex->num_groups();
    for (const GroupInfo &g : ex->groups()) {
        if (!g.note.empty()) impl.label += (impl.label.empty() ? "fallback to templates: " : ", ") + g.name;
        impl.compile_max_ms = std::max(impl.compile_max_ms, g.compile_ms);
    }
    impl.runtime_compile_ms = ex->runtime_compile_ms();
    impl.compile_ms = compile_ms - impl.runtime_compile_ms;
    if (v == Variant::FusedBlockedIo) {
        std::string stored;
        for (const auto &[value, layout] : ex->stored_io()) stored += (stored.empty() ? "" : ", ") + value;
        impl.label +=
            (impl.label.empty() ? "" : "; ") + (stored.empty() ? "no input or output stored" : "stored: " + stored);
    }
    impl.run = [ex, inputs] { benchmark::DoNotOptimize(ex->run(inputs)); };
    return impl;
}

// ---- oneDNN -------------------------------------------------------------------------------------------

dnnl::memory::dims dims_of(const Shape &s) {
    return dnnl::memory::dims(s.begin(), s.end());
}

// The Conv node `conv` of the model as written, with the BatchNormalization `bn` (if any) folded into
// its weights and bias, as an inference framework does at load time.
ConvLayer conv_layer(const Graph &g, const std::string &conv, const std::string &bn = "") {
    const Node &n = *g.find_node(conv);
    for (const char *unsupported : {"dilations", "auto_pad"}) {
        if (n.attrs.contains(unsupported)) throw std::runtime_error(conv + ": " + unsupported + " not handled here");
    }
    ConvLayer c;
    c.src = dims_of(g.type_of(n.inputs[0]).shape);
    c.dst = dims_of(g.type_of(n.outputs[0]).shape);
    c.weights = dims_of(g.type_of(n.inputs[1]).shape);
    c.groups = n.attrs.value("group", 1);
    auto strides = n.attrs.value("strides", std::vector<int64_t>{1, 1});
    auto pads = n.attrs.value("pads", std::vector<int64_t>{0, 0, 0, 0});  // ONNX: top, left, bottom, right
    c.strides = {strides[0], strides[1]};
    c.pad_l = {pads[0], pads[1]};
    c.pad_r = {pads[2], pads[3]};
    const int64_t oc = c.weights[0];
    c.w = g.weights.at(n.inputs[1]).f32;
    c.b = n.inputs.size() > 2 && !n.inputs[2].empty() ? g.weights.at(n.inputs[2]).f32 : std::vector<float>(oc, 0.0f);
    if (!bn.empty()) {
        const Node &b = *g.find_node(bn);
        auto param = [&](int i) -> const std::vector<float> & { return g.weights.at(b.inputs[i]).f32; };
        const double eps = b.attrs.value("epsilon", 1e-5);
        const int64_t per_oc = static_cast<int64_t>(c.w.size()) / oc;
        for (int64_t o = 0; o < oc; o++) {
            const double s = param(1)[o] / std::sqrt(double(param(4)[o]) + eps);
            for (int64_t k = 0; k < per_oc; k++) c.w[o * per_oc + k] = float(c.w[o * per_oc + k] * s);
            c.b[o] = float((c.b[o] - double(param(3)[o])) * s + param(2)[o]);
        }
    }
    return c;
}

// Builds the network from the workload's graph and returns its output memory (named by the model's
// single output).
using NetBuilder = std::function<dnnl::memory(DnnlNet &, const Graph &, const dnnl::memory &input)>;

Impl make_onednn(const Workload &w, const NetBuilder &build, bool winograd = false) {
    auto net = std::make_shared<DnnlNet>(winograd);
    const GraphInput &in = w.graph.inputs.at(0);
    dnnl::memory out = build(*net, w.graph, net->input(dims_of(in.shape), w.input_data.at(in.name).data()));
    net->run();
    Impl impl;
    impl.error = check(w, {{w.graph.outputs.at(0), net->to_plain(out)}});
    impl.label = net->implementations();
    impl.run = [net] { net->run(); };
    return impl;
}

dnnl::memory conv_bn_relu(DnnlNet &net, const Graph &g, const dnnl::memory &x) {
    return net.conv(x, conv_layer(g, "conv", "bn"), Activation::Relu);
}

dnnl::memory dwconv_bn_relu(DnnlNet &net, const Graph &g, const dnnl::memory &x) {
    return net.conv(x, conv_layer(g, "dwconv", "bn"), Activation::Relu);
}

dnnl::memory conv_bias_relu_maxpool(DnnlNet &net, const Graph &g, const dnnl::memory &x) {
    dnnl::memory y = net.conv(x, conv_layer(g, "conv"), Activation::Relu);
    return net.max_pool(y, {2, 2}, {2, 2}, {0, 0}, {0, 0});
}

dnnl::memory resnet_block(DnnlNet &net, const Graph &g, const dnnl::memory &x) {
    dnnl::memory t = net.conv(x, conv_layer(g, "conv1", "bn1"), Activation::Relu);
    return net.conv(t, conv_layer(g, "conv2", "bn2"), Activation::Relu, &x);
}

// bench/models/mobilenet_v2_block.json: ReLU6 (Clip 0..6) as a clip post-op, the identity as a sum.
dnnl::memory mobilenet_v2_block(DnnlNet &net, const Graph &g, const dnnl::memory &x) {
    dnnl::memory e = net.conv(x, conv_layer(g, "expand", "expand_bn"), Activation::Relu6);
    dnnl::memory d = net.conv(e, conv_layer(g, "dw", "dw_bn"), Activation::Relu6);
    return net.conv(d, conv_layer(g, "project", "project_bn"), Activation::None, &x);
}

// ---- Eigen (the cells: batch-1 matrix-vector products) ----------------------------------------------

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

// A Gemm node's weight (transB = 1: [N, K], row-major) as a matrix.
RowMatrix gemm_weight(const Graph &g, const std::string &gemm) {
    const Node &n = *g.find_node(gemm);
    if (n.attrs.value("transB", 0) != 1) throw std::runtime_error(gemm + ": expected transB = 1");
    const Shape &s = g.type_of(n.inputs[1]).shape;
    return Eigen::Map<const RowMatrix>(g.weights.at(n.inputs[1]).f32.data(), s[0], s[1]);
}

Vector gemm_bias(const Graph &g, const std::string &gemm) {
    const std::vector<float> &b = g.weights.at(g.find_node(gemm)->inputs.at(2)).f32;
    return Eigen::Map<const Vector>(b.data(), b.size());
}

// y = w x. Eigen does not thread matrix-vector products; an expert with several threads splits the
// rows across them once the weights outgrow a core's share of L2 (2x faster on lstm_cell's 512 KB and
// mlp_softmax's 800 KB here); below that the fork costs what it saves (rnn_cell's 128 KB: even).
void gemv(Vector &y, const RowMatrix &w, const Eigen::Ref<const Vector> &x) {
    if (g_threads == 1 || w.size() * sizeof(float) <= 256 * 1024) {
        y.noalias() = w * x;
        return;
    }
    const int64_t rows = w.rows();
#pragma omp parallel num_threads(g_threads)
    {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
        y.segment(r0, r1 - r0).noalias() = w.middleRows(r0, r1 - r0) * x;
    }
}

// The cells' two products x W^T + h U^T as one product [W U] [x; h]: weights concatenated at set-up.
struct Cell {
    RowMatrix w;
    Vector b, xh, z;
    int64_t nx = 0;
    Cell(const Graph &g, const std::string &xw, const std::string &hw) {
        RowMatrix a = gemm_weight(g, xw), c = gemm_weight(g, hw);
        w.resize(a.rows(), a.cols() + c.cols());
        w << a, c;
        b = gemm_bias(g, xw);
        nx = a.cols();
        xh.resize(w.cols());
        z.resize(w.rows());
    }
    // z = [W U] [x; h] + b
    void gates(const float *x, const float *h) {
        xh.head(nx) = Eigen::Map<const Vector>(x, nx);
        xh.tail(xh.size() - nx) = Eigen::Map<const Vector>(h, xh.size() - nx);
        gemv(z, w, xh);
        z += b;
    }
};

Impl make_eigen_rnn(const Workload &w) {
    auto cell = std::make_shared<Cell>(w.graph, "xw", "hu");
    auto h_next = std::make_shared<Vector>(cell->z.size());
    const float *x = w.input_data.at("x").data(), *h = w.input_data.at("h").data();
    auto run = [=] {
        cell->gates(x, h);
        *h_next = cell->z.array().tanh();
    };
    run();
    Impl impl;
    impl.error = check(w, {{"h_next", std::vector<float>(h_next->data(), h_next->data() + h_next->size())}});
    impl.run = run;
    return impl;
}

Impl make_eigen_lstm(const Workload &w) {
    auto cell = std::make_shared<Cell>(w.graph, "xw", "hr");
    const int64_t n = cell->z.size() / 4;
    auto h_next = std::make_shared<Vector>(n), c_next = std::make_shared<Vector>(n);
    const float *x = w.input_data.at("x").data(), *h = w.input_data.at("h").data();
    Eigen::Map<const Vector> c(w.input_data.at("c").data(), n);
    auto run = [=] {
        cell->gates(x, h);
        // ONNX gate order i, o, f, c.
        auto z = cell->z.array();
        c_next->array() =
            z.segment(2 * n, n).logistic() * c.array() + z.segment(0, n).logistic() * z.segment(3 * n, n).tanh();
        h_next->array() = z.segment(n, n).logistic() * c_next->array().tanh();
    };
    run();
    Impl impl;
    impl.error = check(w, {{"h_next", std::vector<float>(h_next->data(), h_next->data() + n)},
                           {"c_next", std::vector<float>(c_next->data(), c_next->data() + n)}});
    impl.run = run;
    return impl;
}

Impl make_eigen_mlp(const Workload &w) {
    struct Mlp {
        RowMatrix w1, w2;
        Vector b1, b2, y1, y2;
    };
    auto m = std::make_shared<Mlp>();
    m->w1 = gemm_weight(w.graph, "fc1");
    m->w2 = gemm_weight(w.graph, "fc2");
    m->b1 = gemm_bias(w.graph, "fc1");
    m->b2 = gemm_bias(w.graph, "fc2");
    m->y1.resize(m->w1.rows());
    m->y2.resize(m->w2.rows());
    Eigen::Map<const Vector> x(w.input_data.at("input").data(), m->w1.cols());
    auto run = [=] {
        gemv(m->y1, m->w1, x);
        m->y1 = (m->y1 + m->b1).cwiseMax(0.0f);
        gemv(m->y2, m->w2, m->y1);
        m->y2 += m->b2;
        m->y2 = (m->y2.array() - m->y2.maxCoeff()).exp();
        m->y2 /= m->y2.sum();
    };
    run();
    Impl impl;
    impl.error = check(w, {{"softmax", std::vector<float>(m->y2.data(), m->y2.data() + m->y2.size())}});
    impl.run = run;
    return impl;
}

// ---- registration -------------------------------------------------------------------------------------

struct Spec {
    const char *model;
    benchmark::TimeUnit unit;
    const char *peer;  // "onednn" or "eigen"
    std::function<Impl(const Workload &)> make_peer;
    std::function<Impl(const Workload &)> make_winograd_peer = nullptr;  // "onednn_winograd"
};

const std::vector<Spec> &specs() {
    auto onednn = [](NetBuilder b) { return [b](const Workload &w) { return make_onednn(w, b); }; };
    auto wino = [](NetBuilder b) { return [b](const Workload &w) { return make_onednn(w, b, true); }; };
    static const std::vector<Spec> s = {
        {"conv_bn_relu", benchmark::kMillisecond, "onednn", onednn(conv_bn_relu)},
        {"conv3x3_bn_relu", benchmark::kMillisecond, "onednn", onednn(conv_bn_relu), wino(conv_bn_relu)},
        {"conv_bias_relu_maxpool", benchmark::kMillisecond, "onednn", onednn(conv_bias_relu_maxpool),
         wino(conv_bias_relu_maxpool)},
        {"resnet_block", benchmark::kMillisecond, "onednn", onednn(resnet_block), wino(resnet_block)},
        {"dwconv_bn_relu", benchmark::kMicrosecond, "onednn", onednn(dwconv_bn_relu)},
        {"rnn_cell", benchmark::kMicrosecond, "eigen", make_eigen_rnn},
        {"lstm_cell", benchmark::kMicrosecond, "eigen", make_eigen_lstm},
        {"mlp_softmax", benchmark::kMicrosecond, "eigen", make_eigen_mlp},
        // bench/models/ (make_bench_models.py): the inverted residual block, and batch 8.
        {"mobilenet_v2_block", benchmark::kMillisecond, "onednn", onednn(mobilenet_v2_block)},
        {"conv_bn_relu_b8", benchmark::kMillisecond, "onednn", onednn(conv_bn_relu)},
        {"conv3x3_bn_relu_b8", benchmark::kMillisecond, "onednn", onednn(conv_bn_relu), wino(conv_bn_relu)},
        {"conv_bias_relu_maxpool_b8", benchmark::kMillisecond, "onednn", onednn(conv_bias_relu_maxpool),
         wino(conv_bias_relu_maxpool)},
        {"resnet_block_b8", benchmark::kMillisecond, "onednn", onednn(resnet_block), wino(resnet_block)},
        {"dwconv_bn_relu_b8", benchmark::kMillisecond, "onednn", onednn(dwconv_bn_relu)},
        {"mobilenet_v2_block_b8", benchmark::kMillisecond, "onednn", onednn(mobilenet_v2_block)},
    };
    return s;
}

using Maker = std::function<Impl(const Workload &)>;

// The body of benchmark `name` (MODEL/IMPL): sets the implementation up on its first call, then times it.
void run_case(benchmark::State &state, const std::string &name, const std::string &model, const Maker &make) {
    const Workload *w = nullptr;
    try {
        w = &workload(model);
    } catch (const std::exception &e) {
        g_failed = true;
        state.SkipWithError(e.what());
        return;
    }
    timed(state, *w, cached(name, [&] { return make(*w); }));
}

void register_benchmarks() {
    register_peak_benchmarks(g_fma_kernel, g_threads);
    if (g_core_pair) register_core_round_trip_benchmark(*g_core_pair);
    const std::vector<std::pair<std::string, Variant>> variants = {
        {"hfuse_fused", Variant::Fused},
        {"hfuse_fused_blocked_io", Variant::FusedBlockedIo},
        {"hfuse_fused_halide_pool", Variant::FusedHalidePool},
        {"hfuse_unfused", Variant::Unfused},
        {"hfuse_" + g_autoschedule + "_groups", Variant::AutoGroups},
        {"hfuse_" + g_autoschedule + "_whole", Variant::AutoWhole},
    };
    for (const Spec &spec : specs()) {
        std::vector<std::pair<std::string, Maker>> impls;
        for (const auto &[suffix, v] : variants) {
            if (v == Variant::FusedBlockedIo && std::string(spec.peer) != "onednn") continue;  // no 4-D values
            impls.emplace_back(suffix, [v = v](const Workload &w) { return make_hfuse(w, v); });
        }
        impls.emplace_back(spec.peer, spec.make_peer);
        if (spec.make_winograd_peer) impls.emplace_back("onednn_winograd", spec.make_winograd_peer);
        for (const auto &[suffix, make] : impls) {
            const std::string name = std::string(spec.model) + "/" + suffix, model = spec.model;
            auto body = [name, model, make = make](benchmark::State &state) { run_case(state, name, model, make); };
            // The minimum beside the median: on a shared machine a neighbour's load only ever adds
            // time, so the minimum over repetitions is the steadier comparison in a noisy spell.
            benchmark::RegisterBenchmark(name.c_str(), body)
                ->UseRealTime()
                ->Unit(spec.unit)
                ->ComputeStatistics("min",
                                    [](const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); });
        }
    }
}

// Takes our own flags out of argv before Google Benchmark sees it.
bool parse_own_flags(int *argc, char **argv) {
    int kept = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (std::strncmp(a, "--threads=", 10) == 0) {
            g_threads = std::atoi(a + 10);
            if (g_threads < 1) return false;
        } else if (std::strncmp(a, "--autoschedule=", 15) == 0) {
            g_autoschedule = a + 15;
        } else {
            argv[kept++] = argv[i];
        }
    }
    *argc = kept;
    return true;
}

void print_help() {
    std::printf(
        "hfuse_bench [--threads=N] [--autoschedule=mullapudi2016|adams2019|li2018] [benchmark flags]\n"
        "  --threads=N        threads for Halide, oneDNN (OpenMP) and Eigen alike (default 2)\n"
        "  --autoschedule=AS  the Halide autoscheduler of the hfuse_AS_* benchmarks (default mullapudi2016)\n\n");
    benchmark::PrintDefaultHelp();
}

}  // namespace
}  // namespace hfuse::bench

int main(int argc, char **argv) {
    using namespace hfuse::bench;
    if (!parse_own_flags(&argc, argv)) {
        std::fprintf(stderr, "hfuse_bench: --threads must be a positive integer\n");
        return 2;
    }
    try {
        hfuse::parse_schedule_source(g_autoschedule);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "hfuse_bench: --autoschedule: %s\n", e.what());
        return 2;
    }
    benchmark::Initialize(&argc, argv, print_help);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

    // Same thread count everywhere, set before anything runs: Halide's pool (HL_NUM_THREADS), oneDNN's
    // OpenMP runtime (Debian builds it with OpenMP), Eigen (OpenMP too; batch-1 products are serial).
    hfuse::set_num_threads(g_threads);
    omp_set_num_threads(g_threads);
    Eigen::setNbThreads(g_threads);

    // Every peer on the vectors of Halide's target (HL_JIT_TARGET, else the host's): on an AVX-512
    // machine, HL_JIT_TARGET=x86-64-linux-avx-avx2-f16c-fma-sse41 times hfuse's AVX2 code against
    // oneDNN's AVX2 kernels and shares of AVX2's FMA peak, as an AVX2 machine with these cores would.
    const Halide::Target target = Halide::get_jit_target_from_environment();
    const bool avx512 = target.has_feature(Halide::Target::AVX512);
    if (!avx512) {
        const dnnl::cpu_isa isa = target.has_feature(Halide::Target::AVX2)  ? dnnl::cpu_isa::avx2
                                  : target.has_feature(Halide::Target::AVX) ? dnnl::cpu_isa::avx
                                                                            : dnnl::cpu_isa::sse41;
        if (dnnl::set_max_cpu_isa(isa) != dnnl::status::success) {
            std::fprintf(stderr, "hfuse_bench: could not limit oneDNN to the Halide target's ISA (%s)\n",
                         target.to_string().c_str());
            return 2;
        }
    }
    // No FMA peak for a target without AVX2 + FMA: the loops measured would not be its code's.
    g_fma_kernel = fma_kernel_for_target(target);
    const double peak1 = g_fma_kernel ? measure_fma_peak_gflops(*g_fma_kernel, 1) : 0;
    g_peak_gflops = g_threads == 1 || !g_fma_kernel ? peak1 : measure_fma_peak_gflops(*g_fma_kernel, g_threads);
    // On a shared machine a neighbour can hold a core through a whole measurement (peak_share would
    // then pass 100%): measured again, a while apart, while N threads fall short of 3/4 of N x one.
    for (int retry = 0; g_fma_kernel && retry < 10 && g_peak_gflops < 0.75 * g_threads * peak1; retry++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        g_peak_gflops = std::max(g_peak_gflops, measure_fma_peak_gflops(*g_fma_kernel, g_threads));
    }
    if (g_peak_gflops < 0.75 * g_threads * peak1) {
        std::fprintf(stderr,
                     "hfuse_bench: %d threads reach only %.1f GFLOP/s against %.1f on one: the machine is busy\n",
                     g_threads, g_peak_gflops, peak1);
    }
    const dnnl_version_t *v = dnnl::version();
    benchmark::AddCustomContext("threads", std::to_string(g_threads));
    benchmark::AddCustomContext("fma_peak_gflops_1_thread", std::to_string(peak1));
    benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak_gflops));
    if (g_fma_kernel) benchmark::AddCustomContext("fma_peak_isa", g_fma_kernel->isa);
    if (g_threads > 1) g_core_pair = first_two_cpus();
    if (g_core_pair) {
        benchmark::AddCustomContext("core_round_trip_ns", std::to_string(measure_core_round_trip_ns(*g_core_pair)));
    }
    benchmark::AddCustomContext("halide_target", target.to_string());
    benchmark::AddCustomContext("onednn_isa", onednn_isa_name(dnnl::get_effective_cpu_isa()));
    benchmark::AddCustomContext("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                              std::to_string(v->patch) + " (" + v->hash + ")");
    benchmark::AddCustomContext("autoschedule", g_autoschedule);

    register_benchmarks();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return g_failed ? 1 : 0;
}
