// How to plug a backend into hfuse — a worked example, and the tests of the backend plumbing.
//
// A backend that has its own kernel for a fused pattern (the way cuBLASLt or oneDNN "tensorize"
// Gemm + bias + activation into one call with an epilogue) takes part in three steps:
//
//   1. It registers the pattern once, at start-up (here: register_eigen_backend()):
//
//        register_backend_pattern({"eigen", "gemm_bias_relu", {"Gemm", "Add", "Relu"}, accepts, lower});
//
//      `ops` is a chain, each op the only consumer of the one before; `accepts` may refuse a match
//      the kernel does not implement (attributes, shapes).
//   2. The planner claims every accepted match when the backend is enabled:
//
//        FusedGraph plan = plan_fusion(graph, {load_rules("x86")}, {"eigen"});
//
//      Each match becomes one group with group.backend == "eigen:gemm_bias_relu", made before the
//      rule-based rounds, which leave it alone (it is opaque to them). The plan file records the
//      pattern as the group's "backend", so a saved plan replays it.
//   3. The Executor lowers a claimed group by calling the pattern's `lower` with the group's
//      EpilogueDescriptor (master, its attrs, input, weight, bias, activation) and a Halide Func for
//      every value the group reads. `lower` returns the group's output Func and the extern symbols it
//      calls. Here the output is a Func::define_extern stage that calls an extern "C" function running
//      the whole epilogue with Eigen, and the symbol goes to the JIT through BackendLowering::jit_externs.
//
// The kernel (eigen_gemm_bias_relu below) follows Halide's extern-stage protocol: it is first called
// in "bounds query" mode (input hosts null) to say which input regions it needs, then for real.
#include "hfuse/attributes.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <Halide.h>
#include "test_util.h"

#include <gtest/gtest.h>
#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

// --- The kernel: what the backend library provides ------------------------------------------------

namespace {

// Calls that computed a result (bounds queries not counted), so tests can tell the kernel ran.
std::atomic<int> g_kernel_runs{0};

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;

// The address of element 0 along every dim, or nullptr if the buffer does not cover [0, extent) of
// each dim. The host pointer points at the buffer's min corner, which need not be the origin.
template <typename T>
T *origin(const halide_buffer_t *buf, const std::vector<int32_t> &extents) {
    if (buf->dimensions != static_cast<int32_t>(extents.size())) return nullptr;
    int64_t offset = 0;
    for (int d = 0; d < buf->dimensions; d++) {
        const halide_dimension_t &dim = buf->dim[d];
        if (dim.min > 0 || dim.min + dim.extent < extents[d]) return nullptr;
        offset -= static_cast<int64_t>(dim.min) * dim.stride;
    }
    return reinterpret_cast<T *>(buf->host) + offset;
}

// Asks for the region [0, extents) of an input in a bounds query.
void request(halide_buffer_t *buf, const std::vector<int32_t> &extents) {
    for (int d = 0; d < buf->dimensions && d < static_cast<int>(extents.size()); d++) {
        buf->dim[d].min = 0;
        buf->dim[d].extent = extents[d];
    }
}

// Halide extents of an ONNX [rows, cols] tensor: dims reversed, dim 0 (cols) innermost — row-major.
std::vector<int32_t> extents_of(int32_t rows, int32_t cols) {
    return {cols, rows};
}

// Extents of the bias, whose ONNX shape is [], [cols] or [rows, cols] (each 1 where it broadcasts).
std::vector<int32_t> bias_extents(const halide_buffer_t *bias, int32_t rows, int32_t cols) {
    if (bias->dimensions == 0) return {};
    if (bias->dimensions == 1) return {cols};
    return {cols, rows};
}

}  // namespace

// out[m, n] = relu(alpha * op(A) op(B) + bias), op transposing when trans_a / trans_b is set.
// Buffers are ONNX tensors as Halide holds them (dims reversed): A is [M, K] ([K, M] if trans_a),
// B is [K, N] ([N, K] if trans_b), bias broadcasts to [M, N] (bias_rows is 1 or M, bias_cols 1 or N),
// out is [M, N]. Returns 0, or -1 if the buffers are not what the pipeline promised.
extern "C" int hfuse_test_eigen_gemm_bias_relu(halide_buffer_t *a, halide_buffer_t *b, halide_buffer_t *bias, int32_t m,
                                               int32_t n, int32_t k, int32_t trans_a, int32_t trans_b, float alpha,
                                               int32_t bias_rows, int32_t bias_cols, halide_buffer_t *out) {
    const std::vector<int32_t> a_ext = trans_a ? extents_of(k, m) : extents_of(m, k);
    const std::vector<int32_t> b_ext = trans_b ? extents_of(n, k) : extents_of(k, n);
    const std::vector<int32_t> bias_ext = bias_extents(bias, bias_rows, bias_cols);
    const std::vector<int32_t> out_ext = extents_of(m, n);
    // We compute the whole output in one call; the pipeline (output pinned to [M, N], no tiling) asks
    // for exactly that.
    if (out->dimensions != 2 || out->dim[0].min != 0 || out->dim[0].extent != n || out->dim[1].min != 0 ||
        out->dim[1].extent != m) {
        return -1;
    }
    if (a->is_bounds_query() || b->is_bounds_query() || bias->is_bounds_query()) {
        // Bounds query: say which region of each input we read — all of it — and compute nothing.
        if (a->is_bounds_query()) request(a, a_ext);
        if (b->is_bounds_query()) request(b, b_ext);
        if (bias->is_bounds_query()) request(bias, bias_ext);
        return 0;
    }
    const float *pa = origin<const float>(a, a_ext), *pb = origin<const float>(b, b_ext);
    const float *pbias = origin<const float>(bias, bias_ext);
    float *pout = origin<float>(out, out_ext);
    if (!pa || !pb || !pbias || !pout) return -1;

    // Row-major views honouring Halide's strides: ONNX dim 0 (rows) is Halide dim 1.
    auto view = [](const float *p, const halide_buffer_t *buf, int32_t rows, int32_t cols) {
        return Eigen::Map<const RowMajor, 0, Strided>(p, rows, cols, Strided(buf->dim[1].stride, buf->dim[0].stride));
    };
    auto A = trans_a ? view(pa, a, k, m) : view(pa, a, m, k);
    auto B = trans_b ? view(pb, b, n, k) : view(pb, b, k, n);
    Eigen::Map<RowMajor, 0, Strided> Y(pout, m, n, Strided(out->dim[1].stride, out->dim[0].stride));
    if (trans_a && trans_b) {
        Y.noalias() = alpha * (A.transpose() * B.transpose());
    } else if (trans_a) {
        Y.noalias() = alpha * (A.transpose() * B);
    } else if (trans_b) {
        Y.noalias() = alpha * (A * B.transpose());
    } else {
        Y.noalias() = alpha * (A * B);
    }
    // The epilogue: a broadcast bias is a view with stride 0 along the dims it repeats.
    const int64_t col_stride = bias->dimensions >= 1 && bias_cols > 1 ? bias->dim[0].stride : 0;
    const int64_t row_stride = bias->dimensions == 2 && bias_rows > 1 ? bias->dim[1].stride : 0;
    Eigen::Map<const RowMajor, 0, Strided> Bias(pbias, m, n, Strided(row_stride, col_stride));
    Y = (Y + Bias).cwiseMax(0.0f);
    g_kernel_runs++;
    return 0;
}

// --- The backend: pattern, condition and lowering -------------------------------------------------

namespace hfuse {
namespace {

constexpr const char *kKernelSymbol = "hfuse_test_eigen_gemm_bias_relu";

// A test sets it to call the kernel by the name Halide gave the group's output Func.
bool g_symbol_named_like_the_func = false;

// What the kernel implements: Gemm without its own C input (describe_epilogue already refuses a
// Gemm with C followed by a bias Add: two biases), a bias of rank <= 2 that broadcasts into the
// Gemm's [M, N] without enlarging it, and the Relu we apply. transA, transB and alpha are passed on.
bool accepts_gemm_bias_relu(const Graph &g, const EpilogueDescriptor &d) {
    if (d.nodes.size() != 3 || d.master_op != "Gemm" || d.bias.empty() || d.activation != "Relu") return false;
    const Node *gemm = g.find_node(d.master), *add = g.find_node(d.nodes[1]);
    if (add->op != "Add") return false;
    if (gemm->inputs.size() > 2 && !gemm->inputs[2].empty()) return false;
    const Shape &y = g.type_of(gemm->outputs[0]).shape;
    if (g.type_of(add->outputs[0]).shape != y) return false;  // the bias would enlarge the result
    const Shape &bias = g.type_of(d.bias).shape;
    if (bias.size() > 2) return false;
    for (size_t i = 0; i < bias.size(); i++) {
        if (bias[i] != 1 && bias[i] != y[y.size() - bias.size() + i]) return false;
    }
    return true;
}

// The group's output: one extern stage reading A, B and the bias, which Halide materializes for it.
BackendLowering lower_gemm_bias_relu(const Graph &g, const EpilogueDescriptor &d,
                                     const std::map<std::string, Halide::Func> &values, const TensorType &output) {
    // `lower` is also reached from plan files, which name a pattern without the planner having
    // matched it, so check again rather than compute something else.
    if (!accepts_gemm_bias_relu(g, d)) {
        throw Error("eigen:gemm_bias_relu cannot run this group (it needs Gemm -> bias Add -> Relu)")
            .at_node(d.master, d.master_op);
    }
    Attributes attrs(d.master_attrs);
    const int trans_a = attrs.get_int("transA", 0) != 0, trans_b = attrs.get_int("transB", 0) != 0;
    const float alpha = attrs.get_float("alpha", 1.0f);  // beta scales Gemm's C, which we refuse
    const Shape &a = g.type_of(d.input).shape, &bias = g.type_of(d.bias).shape;
    const int m = static_cast<int>(output.shape[0]), n = static_cast<int>(output.shape[1]);
    const int k = static_cast<int>(trans_a ? a[0] : a[1]);
    const int bias_rows = bias.size() == 2 ? static_cast<int>(bias[0]) : 1;
    const int bias_cols = bias.empty() ? 1 : static_cast<int>(bias.back());

    // Func arguments of an extern stage reach the kernel as buffers: Halide materializes each over
    // the region the kernel's bounds query asks for (the whole tensor here) before calling it. The
    // scalars describe the problem, so the kernel can answer the bounds query.
    Halide::Func out("eigen_gemm_bias_relu");
    // Halide makes a repeated Func name unique ("eigen_gemm_bias_relu$1"): the name it gave.
    const std::string symbol = g_symbol_named_like_the_func ? out.name() : kKernelSymbol;
    out.define_extern(symbol,
                      {values.at(d.input), values.at(d.weight), values.at(d.bias), Halide::Expr(m), Halide::Expr(n),
                       Halide::Expr(k), Halide::Expr(trans_a), Halide::Expr(trans_b), Halide::Expr(alpha),
                       Halide::Expr(bias_rows), Halide::Expr(bias_cols)},
                      Halide::Float(32), output.rank(), Halide::NameMangling::C);
    BackendLowering lowered;
    lowered.output = out;
    lowered.jit_externs.emplace(symbol, Halide::JITExtern(hfuse_test_eigen_gemm_bias_relu));
    return lowered;
}

// Step 1: registration. Idempotent (registering the same id again replaces it).
void register_eigen_backend() {
    BackendPattern p;
    p.backend = "eigen";
    p.name = "gemm_bias_relu";
    p.ops = {"Gemm", "Add", "Relu"};
    p.accepts = accepts_gemm_bias_relu;
    p.lower = lower_gemm_bias_relu;
    register_backend_pattern(std::move(p));
}

// --- Test models ----------------------------------------------------------------------------------

// A small in-code model builder; every value is named after the node (or input/weight) making it.
class ModelBuilder {
public:
    explicit ModelBuilder(const std::string &name) {
        g_.name = name;
        g_.source = "<test " + name + ">";
    }
    std::string input(const std::string &name, Shape shape) {
        g_.inputs.push_back({name, std::move(shape)});
        return name;
    }
    std::string weight(const std::string &name, Shape shape) {
        Constant c;
        c.type = {DType::Float32, shape};
        c.f32 = uniform_values(num_elements(shape), -1, 1, 17 + g_.weights.size());
        g_.weights[name] = std::move(c);
        return name;
    }
    std::string node(const std::string &name, const std::string &op, std::vector<std::string> inputs,
                     nlohmann::json attrs = nlohmann::json::object()) {
        Node n;
        n.name = name;
        n.op = op;
        n.inputs = std::move(inputs);
        n.outputs = {name};
        n.attrs = std::move(attrs);
        g_.nodes.push_back(std::move(n));
        return name;
    }
    Graph build(std::vector<std::string> outputs) {
        g_.outputs = std::move(outputs);
        return prepare(g_);
    }

private:
    Graph g_;
};

struct GemmCase {
    int m, n, k;
    bool trans_a = false, trans_b = true;
    float alpha = 1.0f;
    Shape bias;  // empty: [N]
};

// x[M, K] -> Gemm(x, W) -> Add(bias) -> Relu -> Sigmoid: the pattern, then an op it must not take.
Graph gemm_bias_relu_model(const GemmCase &c) {
    ModelBuilder b("gemm_bias_relu");
    std::string x = b.input("x", c.trans_a ? Shape{c.k, c.m} : Shape{c.m, c.k});
    std::string w = b.weight("W", c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n});
    std::string bias = b.weight("bias", c.bias.empty() ? Shape{c.n} : c.bias);
    nlohmann::json attrs = {{"transA", c.trans_a ? 1 : 0}, {"transB", c.trans_b ? 1 : 0}, {"alpha", c.alpha}};
    b.node("gemm", "Gemm", {x, w}, attrs);
    b.node("add", "Add", {"gemm", bias});
    b.node("relu", "Relu", {"add"});
    b.node("sigmoid", "Sigmoid", {"relu"});
    return b.build({"sigmoid"});
}

const FusedGroup *group_of(const FusedGraph &plan, const std::string &node) {
    for (const FusedGroup &grp : plan.groups) {
        if (std::find(grp.nodes.begin(), grp.nodes.end(), node) != grp.nodes.end()) return &grp;
    }
    return nullptr;
}

int claimed_groups(const FusedGraph &plan) {
    return static_cast<int>(
        std::count_if(plan.groups.begin(), plan.groups.end(), [](const FusedGroup &g) { return !g.backend.empty(); }));
}

// Runs `plan` with the Executor and `model` with the reference evaluator on seeded inputs in [-1, 1];
// expects every output within `tolerance` of the largest |reference| value.
//
// The kernel sums the K products in float32 (in Eigen's blocked order); the reference accumulates in
// double and rounds once. With operands in [-1, 1] the float32 rounding error of a K-term dot product
// grows like sqrt(K) * 2^-24 * |partial sums| — about 1e-6 of the output scale at K = 128 — so 1e-5
// leaves a wide margin, while a wrong layout, transposition, bias or activation errs by O(1).
void expect_matches_reference(const Graph &model, const FusedGraph &plan, double tolerance = 1e-5) {
    test::expect_plan_matches_reference(plan, tolerance, &model);
}

// Every test registers the backend first, as a program would at start-up.
class BackendPatternTest : public testing::Test {
protected:
    void SetUp() override { register_eigen_backend(); }
    RuleSet x86_ = load_rules("x86");
};

// --- Tests ----------------------------------------------------------------------------------------

TEST_F(BackendPatternTest, IsRegistered) {
    const hfuse::BackendPattern *p = find_backend_pattern("eigen:gemm_bias_relu");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->ops, (std::vector<std::string>{"Gemm", "Add", "Relu"}));
    EXPECT_EQ(find_backend_pattern("eigen:gemm_bias_gelu"), nullptr);
}

TEST_F(BackendPatternTest, ClaimsGemmBiasReluAndDescribesIt) {
    Graph g = gemm_bias_relu_model({3, 37, 29});
    FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
    const FusedGroup *grp = group_of(plan, "gemm");
    ASSERT_NE(grp, nullptr);
    EXPECT_EQ(grp->backend, "eigen:gemm_bias_relu");
    EXPECT_EQ(grp->master, "gemm");
    EXPECT_EQ(grp->nodes, (std::vector<std::string>{"gemm", "add", "relu"}));
    EXPECT_NE(group_of(plan, "sigmoid"), grp) << "the rule rounds must not grow a claimed group";
    EXPECT_EQ(claimed_groups(plan), 1);

    EpilogueDescriptor d = describe_epilogue(plan.graph, grp->nodes);
    EXPECT_EQ(d.master, "gemm");
    EXPECT_EQ(d.master_op, "Gemm");
    EXPECT_EQ(d.input, "x");
    EXPECT_EQ(d.weight, "W");
    EXPECT_EQ(d.bias, "bias");
    EXPECT_EQ(d.activation, "Relu");
    EXPECT_EQ(d.master_attrs.at("transB"), 1);

    // The plan file says which backend runs the group.
    nlohmann::json j = plan_to_json(plan);
    bool found = false;
    for (const auto &jg : j["groups"]) found = found || jg.value("backend", "") == "eigen:gemm_bias_relu";
    EXPECT_TRUE(found) << j.dump();
}

// The claimed group runs through the kernel (the counter) and matches the reference.
TEST_F(BackendPatternTest, RunsThroughTheKernelAndMatchesReference) {
    const std::vector<GemmCase> cases = {
        {3, 37, 29},    // odd M, N, K; transB = 1 (a Linear layer)
        {1, 128, 128},  // a single row
        {5, 7, 11, /*trans_a=*/true, /*trans_b=*/false, /*alpha=*/0.5f},
        {4, 9, 6, false, false, 2.0f, /*bias=*/{4, 1}},  // per-row bias
        {4, 9, 6, true, true, 1.0f, /*bias=*/{4, 9}},    // full bias
        {2, 3, 5, false, true, 1.0f, /*bias=*/{1}},      // scalar-like bias
    };
    for (const GemmCase &c : cases) {
        SCOPED_TRACE(testing::Message() << "M=" << c.m << " N=" << c.n << " K=" << c.k << " transA=" << c.trans_a
                                        << " transB=" << c.trans_b << " alpha=" << c.alpha
                                        << " bias=" << (c.bias.empty() ? "[N]" : to_string(c.bias)));
        Graph g = gemm_bias_relu_model(c);
        FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
        ASSERT_EQ(claimed_groups(plan), 1);
        const int before = g_kernel_runs.load();
        expect_matches_reference(g, plan);
        EXPECT_EQ(g_kernel_runs.load() - before, 1) << "the claimed group did not run through the kernel";
    }
}

TEST_F(BackendPatternTest, WithoutTheBackendTheOpLibraryRunsIt) {
    Graph g = gemm_bias_relu_model({3, 37, 29});
    FusedGraph plan = plan_fusion(g, {x86_});
    EXPECT_EQ(claimed_groups(plan), 0);
    const int before = g_kernel_runs.load();
    expect_matches_reference(g, plan);
    EXPECT_EQ(g_kernel_runs.load(), before);
}

TEST_F(BackendPatternTest, UnknownBackendIsAnError) {
    Graph g = gemm_bias_relu_model({3, 5, 7});
    try {
        plan_fusion(g, {x86_}, {"cublas"});
        ADD_FAILURE() << "planned with a backend nobody registered";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("cublas"), std::string::npos) << e.what();
    }
}

// A bias computed at runtime is fine: the kernel gets it as a Func like any other input.
TEST_F(BackendPatternTest, RuntimeBiasIsClaimed) {
    ModelBuilder b("runtime_bias");
    b.input("x", {3, 29});
    b.input("y", {37});
    b.weight("W", {37, 29});
    b.node("gemm", "Gemm", {"x", "W"}, {{"transB", 1}});
    b.node("ybias", "Sigmoid", {"y"});
    b.node("add", "Add", {"ybias", "gemm"});  // the bias on the left
    b.node("relu", "Relu", {"add"});
    Graph g = b.build({"relu"});
    FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
    const FusedGroup *grp = group_of(plan, "gemm");
    ASSERT_NE(grp, nullptr);
    EXPECT_EQ(grp->backend, "eigen:gemm_bias_relu");
    EXPECT_EQ(grp->nodes, (std::vector<std::string>{"gemm", "add", "relu"}));
    EXPECT_EQ(describe_epilogue(plan.graph, grp->nodes).bias, "ybias");
    const int before = g_kernel_runs.load();
    expect_matches_reference(g, plan);
    EXPECT_EQ(g_kernel_runs.load() - before, 1);
}

// The Gemm's value is also read elsewhere: a backend group hands out only its last value.
TEST_F(BackendPatternTest, GemmWithSecondConsumerIsNotClaimed) {
    ModelBuilder b("second_consumer");
    b.input("x", {3, 29});
    b.weight("W", {37, 29});
    b.weight("bias", {37});
    b.node("gemm", "Gemm", {"x", "W"}, {{"transB", 1}});
    b.node("add", "Add", {"gemm", "bias"});
    b.node("relu", "Relu", {"add"});
    b.node("side", "Sigmoid", {"gemm"});
    b.node("sum", "Add", {"relu", "side"});
    Graph g = b.build({"sum"});
    FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
    EXPECT_EQ(claimed_groups(plan), 0);
    expect_matches_reference(g, plan);
}

TEST_F(BackendPatternTest, ModelOutputIntermediateIsNotClaimed) {
    for (const std::string &exposed : {"gemm", "add"}) {
        SCOPED_TRACE("model output: " + exposed);
        ModelBuilder b("exposed_" + exposed);
        b.input("x", {3, 29});
        b.weight("W", {37, 29});
        b.weight("bias", {37});
        b.node("gemm", "Gemm", {"x", "W"}, {{"transB", 1}});
        b.node("add", "Add", {"gemm", "bias"});
        b.node("relu", "Relu", {"add"});
        Graph g = b.build({"relu", exposed});
        FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
        EXPECT_EQ(claimed_groups(plan), 0);
        expect_matches_reference(g, plan);
    }
    // The last value of the chain may be a model output and have other consumers.
    ModelBuilder b("exposed_relu");
    b.input("x", {3, 29});
    b.weight("W", {37, 29});
    b.weight("bias", {37});
    b.node("gemm", "Gemm", {"x", "W"}, {{"transB", 1}});
    b.node("add", "Add", {"gemm", "bias"});
    b.node("relu", "Relu", {"add"});
    b.node("sigmoid", "Sigmoid", {"relu"});
    Graph g = b.build({"relu", "sigmoid"});
    FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
    EXPECT_EQ(claimed_groups(plan), 1);
    expect_matches_reference(g, plan);
}

// Matches of the op chain that `accepts` or describe_epilogue refuse stay with the op library.
TEST_F(BackendPatternTest, RefusedMatchesAreNotClaimed) {
    {
        SCOPED_TRACE("a bias that broadcasts the result up to [2, M, N]");
        ModelBuilder b("big_bias");
        b.input("x", {3, 29});
        b.weight("W", {37, 29});
        b.weight("bias", {2, 3, 37});
        b.node("gemm", "Gemm", {"x", "W"}, {{"transB", 1}});
        b.node("add", "Add", {"gemm", "bias"});
        b.node("relu", "Relu", {"add"});
        Graph g = b.build({"relu"});
        FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
        EXPECT_EQ(claimed_groups(plan), 0);
        expect_matches_reference(g, plan);
    }
    {
        SCOPED_TRACE("a Gemm with its own C, then a bias Add: two biases");
        ModelBuilder b("two_biases");
        b.input("x", {3, 29});
        b.weight("W", {37, 29});
        b.weight("C", {37});
        b.weight("bias", {37});
        b.node("gemm", "Gemm", {"x", "W", "C"}, {{"transB", 1}, {"beta", 0.5}});
        b.node("add", "Add", {"gemm", "bias"});
        b.node("relu", "Relu", {"add"});
        Graph g = b.build({"relu"});
        FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
        EXPECT_EQ(claimed_groups(plan), 0);
        expect_matches_reference(g, plan);
    }
}

// A saved plan replays the backend group: write it, read it back, run it.
TEST_F(BackendPatternTest, PlanFileKeepsTheBackend) {
    Graph g = gemm_bias_relu_model({3, 37, 29});
    FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
    std::string path = testing::TempDir() + "/backend_plan.json";
    write_plan(path, plan);
    FusedGraph again = read_plan(path, plan.graph);
    ASSERT_NE(group_of(again, "gemm"), nullptr);
    EXPECT_EQ(group_of(again, "gemm")->backend, "eigen:gemm_bias_relu");
    const int before = g_kernel_runs.load();
    expect_matches_reference(g, again);
    EXPECT_EQ(g_kernel_runs.load() - before, 1);
}

// Writes `plan` with the group of `node` relabelled `backend`, and reads it back.
FusedGraph relabelled_plan(const FusedGraph &plan, const std::string &node, const std::string &backend,
                           const std::string &file) {
    nlohmann::json j = plan_to_json(plan);
    for (auto &jg : j["groups"]) {
        for (const auto &n : jg["nodes"]) {
            if (n == node) jg["backend"] = backend;
        }
    }
    std::string path = testing::TempDir() + "/" + file;
    std::ofstream(path) << j.dump(2);
    return read_plan(path, plan.graph);
}

TEST_F(BackendPatternTest, PlanNamingAnUnregisteredPatternIsRejected) {
    Graph g = gemm_bias_relu_model({3, 37, 29});
    FusedGraph plan =
        relabelled_plan(plan_fusion(g, {x86_}, {"eigen"}), "gemm", "eigen:gemm_bias_gelu", "unregistered_plan.json");
    try {
        Executor ex(plan);
        ADD_FAILURE() << "ran a plan naming a backend pattern nobody registered";
    } catch (const Error &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("'eigen:gemm_bias_gelu'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("not registered"), std::string::npos) << msg;
        EXPECT_NE(msg.find(group_of(plan, "gemm")->name), std::string::npos) << "does not name the group: " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

TEST_F(BackendPatternTest, FuncNamedLikeItsExternFunctionIsRefused) {
    // Halide would name the pipeline after the Func and call it for the kernel: an internal LLVM
    // error ("Incorrect number of arguments passed to called function!"), not hfuse's.
    Graph g = gemm_bias_relu_model({3, 37, 29});
    FusedGraph plan = plan_fusion(g, {x86_}, {"eigen"});
    ASSERT_EQ(claimed_groups(plan), 1);
    g_symbol_named_like_the_func = true;
    const int before = g_kernel_runs.load();
    try {
        Executor ex(plan);
        ADD_FAILURE() << "compiled a backend Func named like its extern function";
    } catch (const Error &e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("<test gemm_bias_relu>: node 'gemm' (Gemm): backend 'eigen:gemm_bias_relu' names a "
                             "Halide Func 'eigen_gemm_bias_relu",
                             0),
                  0u)
            << what;
        EXPECT_TRUE(what.find("' like the extern function it calls; Halide cannot tell them apart: name the Func "
                              "otherwise") != std::string::npos)
            << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    } catch (const std::exception &e) {
        ADD_FAILURE() << "not an hfuse::Error: " << e.what();
    }
    g_symbol_named_like_the_func = false;
    EXPECT_EQ(g_kernel_runs.load(), before);
    expect_matches_reference(g, plan);
}

// A hand-edited plan may put the pattern on a group it does not fit (here Gemm -> Add without the
// Relu, a lone Gemm, a Sigmoid): running it must fail with an Error, not silently apply a Relu the
// model does not have. (The planner checks `accepts`; for plan files, `lower` checks again.)
TEST_F(BackendPatternTest, PlanPuttingAPatternOnAGroupItDoesNotFitIsRejected) {
    ModelBuilder b("no_relu");
    b.input("x", {3, 29});
    b.weight("W", {37, 29});
    b.weight("bias", {37});
    b.node("gemm", "Gemm", {"x", "W"}, {{"transB", 1}});
    b.node("add", "Add", {"gemm", "bias"});
    b.node("sigmoid", "Sigmoid", {"add"});
    Graph g = b.build({"sigmoid"});
    FusedGraph plan = plan_fusion(g, {});
    const std::vector<std::vector<std::vector<std::string>>> partitions = {
        {{"gemm", "add"}, {"sigmoid"}},  // the first group of each is labelled with the pattern
        {{"gemm"}, {"add", "sigmoid"}},
        {{"sigmoid"}, {"gemm", "add"}},
    };
    for (const auto &partition : partitions) {
        SCOPED_TRACE("labelled group: " + nlohmann::json(partition[0]).dump());
        nlohmann::json j = plan_to_json(plan);
        j["groups"] = {{{"name", "g_eigen"}, {"nodes", partition[0]}, {"backend", "eigen:gemm_bias_relu"}},
                       {{"name", "g_rest"}, {"nodes", partition[1]}}};
        FusedGraph edited = plan_from_json(j, plan.graph, "<edited plan>");
        const int before = g_kernel_runs.load();
        try {
            Executor ex(edited);
            ADD_FAILURE() << "lowered a group that does not fit gemm_bias_relu";
        } catch (const Error &e) {
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        }
        EXPECT_EQ(g_kernel_runs.load(), before);
    }
}

}  // namespace
}  // namespace hfuse
