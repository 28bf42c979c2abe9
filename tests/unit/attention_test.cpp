// Attention as one group: the planner's `attention` rule joins MatMul(Q, K^T), the score ops, Softmax
// and MatMul(P, V) into one group, the composer computes it with an online softmax over blocks of
// keys (schedules/attention_template.h), and every variant computes what the unfused graph and the
// reference evaluator compute: odd sizes, fewer keys or channels than a vector, keys in several
// blocks, masks of -inf (blocks wholly masked, rows whose first blocks are) or given as an input,
// batch dims V broadcasts over, each way of splitting the work.
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/passes.h"
#include "hfuse/plan_report.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>

namespace hfuse {
namespace {

using nlohmann::json;

// AVX2 whatever the host (16 registers, 8 lanes): the plans' defaults are pinned, and run on the host.
const Halide::Target kTarget("x86-64-linux-avx-avx2-f16c-fma-sse41");

enum class Mask { None, Bias, Random, LateKeys, Input };

struct AttentionShape {
    Shape batch;  // the scores' batch dims, e.g. {B, H}
    int64_t sq, sk, d, dv;
    Shape v_batch;  // V's batch dims (broadcast to `batch`)
    Mask mask = Mask::None;
};

// `values` in a raw float32 file in the test directory, named `stem`: -inf has no JSON form. Returns
// the file's name, as a model's weight refers to it.
std::string write_floats(const std::string &stem, const std::vector<float> &values) {
    const std::string file = stem + "_" + std::to_string(getpid()) + ".f32";
    std::ofstream(testing::TempDir() + "/" + file, std::ios::binary)
        .write(reinterpret_cast<const char *>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(float)));
    return file;
}

// A model `name` from its JSON parts, written to the test directory and loaded as a model file is.
Graph json_model(const std::string &name, const json &inputs, const json &weights, const json &nodes) {
    const json m = {{"format", "hfuse-model"}, {"version", 1},   {"name", name},      {"inputs", inputs},
                    {"weights", weights},      {"nodes", nodes}, {"outputs", {"act"}}};
    const std::string path = testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << m.dump();
    return load_model(path);
}

// A mask [Sq, Sk] (broadcast over the batch dims): Random drops 30% of the keys of each query (none
// drops every key of a row), LateKeys lets query i see the keys from i * Sk / Sq / 2 on (the first
// blocks of the later rows wholly masked), Bias adds finite values.
json mask_weight(const AttentionShape &s) {
    std::vector<float> m(static_cast<size_t>(s.sq * s.sk), 0.0f);
    const float neg_inf = -std::numeric_limits<float>::infinity();
    uint32_t state = 12345;
    for (int64_t i = 0; i < s.sq; i++) {
        for (int64_t j = 0; j < s.sk; j++) {
            float &v = m[static_cast<size_t>(i * s.sk + j)];
            state = state * 1664525u + 1013904223u;
            const float u = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
            if (s.mask == Mask::Bias) v = 2.0f * u - 1.0f;
            if (s.mask == Mask::Random && u < 0.3f && j != i % s.sk) v = neg_inf;
            if (s.mask == Mask::LateKeys && j < i * s.sk / s.sq / 2) v = neg_inf;
        }
    }
    return {{"shape", Shape{s.sq, s.sk}}, {"file", write_floats("attention_mask", m)}};
}

Shape with(Shape batch, std::initializer_list<int64_t> tail) {
    batch.insert(batch.end(), tail);
    return batch;
}

// Q [batch, Sq, D], K [batch, Sk, D] (transposed in the graph), V [v_batch, Sk, Dv]: MatMul, a scale,
// the mask, Softmax, MatMul, then a Relu reading the attention (another op of the group's kind).
Graph attention_model(const AttentionShape &s) {
    const int rank = static_cast<int>(s.batch.size()) + 2;
    json perm = json::array();
    for (int i = 0; i < rank - 2; i++) perm.push_back(i);
    perm.push_back(rank - 1);
    perm.push_back(rank - 2);
    json nodes = {{{"name", "kt"}, {"op", "Transpose"}, {"inputs", {"k"}}, {"attrs", {{"perm", perm}}}},
                  {{"name", "scores"}, {"op", "MatMul"}, {"inputs", {"q", "kt"}}},
                  {{"name", "scaled"}, {"op", "Mul"}, {"inputs", {"scores", "scale"}}}};
    json weights = {{"scale", {{"shape", Shape{}}, {"values", {1.0 / std::sqrt(static_cast<double>(s.d))}}}}};
    std::string last = "scaled";
    if (s.mask != Mask::None) {
        nodes.push_back({{"name", "masked"}, {"op", "Add"}, {"inputs", {"scaled", "mask"}}});
        if (s.mask != Mask::Input) weights["mask"] = mask_weight(s);
        last = "masked";
    }
    nodes.push_back({{"name", "probs"}, {"op", "Softmax"}, {"inputs", {last}}, {"attrs", {{"axis", -1}}}});
    nodes.push_back({{"name", "attn"}, {"op", "MatMul"}, {"inputs", {"probs", "v"}}});
    nodes.push_back({{"name", "act"}, {"op", "Relu"}, {"inputs", {"attn"}}});
    json inputs = {{{"name", "q"}, {"shape", with(s.batch, {s.sq, s.d})}},
                   {{"name", "k"}, {"shape", with(s.batch, {s.sk, s.d})}},
                   {{"name", "v"}, {"shape", with(s.v_batch, {s.sk, s.dv})}}};
    if (s.mask == Mask::Input) {
        // A padding mask as a model input, per sequence and key ([B, 1, ..., 1, Sk]), as BERT takes one.
        Shape shape(s.batch.size(), 1);
        if (!shape.empty()) shape[0] = s.batch[0];
        inputs.push_back({{"name", "mask"}, {"shape", with(shape, {1, s.sk})}});
    }
    return json_model("attention", inputs, weights, nodes);
}

FusedGraph default_plan(const Graph &g, const RuleSet &rules = load_rules("x86")) {
    return with_default_schedules(plan_fusion(g, {rules}), kTarget);
}

FusedGroup &group_with(FusedGraph &plan, const std::string &node) {
    for (FusedGroup &grp : plan.groups) {
        if (std::count(grp.nodes.begin(), grp.nodes.end(), node)) return grp;
    }
    throw std::runtime_error("no group holds " + node);
}

// Runs `plan` and expects the model's output within 1e-4 (of its scale) of the reference and of
// the unfused run.
void expect_matches(const FusedGraph &plan, const Graph &model) {
    std::string schedules;
    for (const FusedGroup &grp : plan.groups) schedules += grp.name + " " + grp.schedule.dump() + "; ";
    SCOPED_TRACE(schedules);
    const test::ModelInputs in = test::make_inputs(model);
    const std::map<std::string, TensorBuffer> unfused = Executor(singleton_groups(model)).run(in.buffers);
    const std::map<std::string, reference::RefTensor> ref = reference::run(model, in.reference);
    const std::map<std::string, TensorBuffer> actual = Executor(plan).run(in.buffers);
    const TensorBuffer &a = actual.at("act");
    ASSERT_EQ(shape_of(a), ref.at("act").shape);
    const size_t n = ref.at("act").data.size();
    EXPECT_LE(reference::compare(a.data(), ref.at("act").data.data(), n).relative(), 1e-4) << "vs the reference";
    EXPECT_LE(reference::compare(a.data(), unfused.at("act").data(), n).relative(), 1e-4) << "vs unfused";
}

TEST(Attention, PlannedAsOneGroupUnderItsRule) {
    const Graph g = attention_model({{2, 3}, 37, 45, 24, 20, {2, 3}, Mask::Random});
    FusedGraph plan = default_plan(g);
    FusedGroup &grp = group_with(plan, "attn");
    for (const char *n : {"kt", "scores", "scaled", "masked", "probs", "attn", "act"}) {
        EXPECT_TRUE(std::count(grp.nodes.begin(), grp.nodes.end(), n)) << n;
    }
    EXPECT_EQ(grp.master, "attn");
    EXPECT_EQ(grp.schedule.value("template", ""), "attention") << grp.schedule.dump();
    EXPECT_NE(grp.why.find("online softmax"), std::string::npos) << grp.why;
    EXPECT_EQ(grp.placement.at("probs"), Placement::ComputeAt);
    // The drawing names the group's template.
    EXPECT_NE(plan_dot(plan).find("label=\"" + grp.name + " (attention)\""), std::string::npos) << plan_dot(plan);
    expect_matches(plan, g);

    // Without the rule, the Softmax's value goes through memory to the second product's group.
    RuleSet apart = load_rules("x86");
    apart.attention = false;
    FusedGraph plan2 = default_plan(g, apart);
    EXPECT_NE(&group_with(plan2, "probs"), &group_with(plan2, "attn"));
    expect_matches(plan2, g);

    // The rule round-trips through a rule-set file.
    EXPECT_FALSE(parse_rules(to_json(apart), "test").attention);
    EXPECT_TRUE(parse_rules(to_json(load_rules("x86")), "test").attention);
}

TEST(Attention, NotJoinedWhereItsProbabilitiesAreReadElsewhere) {
    // The probabilities also a model output: no attention group (they must be stored).
    Graph g = attention_model({{2}, 9, 11, 8, 8, {2}, Mask::None});
    g.outputs.push_back("probs");
    g = prepare(g);
    FusedGraph plan = default_plan(g);
    for (const FusedGroup &grp : plan.groups) EXPECT_NE(grp.schedule.value("template", ""), "attention");
}

TEST(Attention, EveryVariantMatchesTheReference) {
    const std::vector<AttentionShape> shapes = {
        {{2, 3}, 37, 45, 24, 20, {2, 3}, Mask::Random},  // odd sizes, -inf masks
        {{2, 3}, 29, 43, 16, 16, {3}, Mask::LateKeys},   // V broadcast over the batch; masked first blocks
        {{4}, 17, 5, 8, 6, {4}, Mask::Bias},             // fewer keys and channels than a vector
        {{}, 21, 33, 12, 24, {}, Mask::None},            // no batch dims at all
        {{3, 2}, 19, 23, 16, 8, {3, 2}, Mask::Input},    // a mask computed outside (a model input)
    };
    // Parameters over the defaults: keys in blocks of one or two vectors (the online softmax's
    // rescaling), queries split unevenly, one vector a register tile, each way of parallelising.
    const std::vector<json> variants = {
        json::object(),
        {{"key_block", 8}},
        {{"key_block", 16}, {"query_tile", 5}, {"tile_vectors", 1}},
        {{"parallel", "query_tiles"}, {"key_block", 8}, {"query_tile", 3}},
    };
    for (const AttentionShape &s : shapes) {
        const Graph g = attention_model(s);
        for (const json &v : variants) {
            FusedGraph plan = default_plan(g);
            FusedGroup &grp = group_with(plan, "attn");
            ASSERT_EQ(grp.schedule.value("template", ""), "attention") << grp.schedule.dump();
            for (const auto &[key, value] : v.items()) grp.schedule[key] = value;
            const int64_t whole_keys = (s.sk + 7) / 8 * 8;  // AVX2's vectors of keys
            if (grp.schedule["key_block"].get<int64_t>() > whole_keys) grp.schedule["key_block"] = whole_keys;
            if (s.batch.empty() && grp.schedule.value("parallel", "") == "heads") continue;
            expect_matches(plan, g);
        }
    }
}

// Swin's shifted windows: the scores of B * W windows and H heads plus a bias [H, N, N], regrouped
// [B, W, H, N, N] to add a mask per window [W, 1, N, N] (-inf where tokens of different regions
// meet), and back: the Reshapes join the attention.
TEST(Attention, WindowMaskBetweenReshapes) {
    const int64_t B = 2, W = 4, H = 3, N = 13, D = 8;
    std::vector<float> mask(static_cast<size_t>(W * N * N), 0.0f);
    for (int64_t w = 0; w < W; w++) {
        for (int64_t i = 0; i < N; i++) {
            for (int64_t j = 0; j < N; j++) {
                if (w % 2 == 1 && (i < N / 2) != (j < N / 2))
                    mask[static_cast<size_t>((w * N + i) * N + j)] = -std::numeric_limits<float>::infinity();
            }
        }
    }
    const std::string file = write_floats("window_mask", mask);
    const json nodes = {{{"name", "kt"}, {"op", "Transpose"}, {"inputs", {"k"}}, {"attrs", {{"perm", {0, 1, 3, 2}}}}},
                        {{"name", "scores"}, {"op", "MatMul"}, {"inputs", {"q", "kt"}}},
                        {{"name", "biased"}, {"op", "Add"}, {"inputs", {"scores", "bias"}}},
                        {{"name", "per_window"}, {"op", "Reshape"}, {"inputs", {"biased", "shape5"}}},
                        {{"name", "masked"}, {"op", "Add"}, {"inputs", {"per_window", "mask"}}},
                        {{"name", "back"}, {"op", "Reshape"}, {"inputs", {"masked", "shape4"}}},
                        {{"name", "probs"}, {"op", "Softmax"}, {"inputs", {"back"}}, {"attrs", {{"axis", -1}}}},
                        {{"name", "attn"}, {"op", "MatMul"}, {"inputs", {"probs", "v"}}},
                        {{"name", "act"}, {"op", "Relu"}, {"inputs", {"attn"}}}};
    const json weights = {{"bias", {{"shape", Shape{H, N, N}}, {"uniform", {-1, 1}}, {"seed", 7}}},
                          {"mask", {{"shape", Shape{W, 1, N, N}}, {"file", file}}},
                          {"shape5", {{"shape", Shape{5}}, {"dtype", "int64"}, {"values", {B, W, H, N, N}}}},
                          {"shape4", {{"shape", Shape{4}}, {"dtype", "int64"}, {"values", {B * W, H, N, N}}}}};
    const json inputs = {{{"name", "q"}, {"shape", Shape{B * W, H, N, D}}},
                         {{"name", "k"}, {"shape", Shape{B * W, H, N, D}}},
                         {{"name", "v"}, {"shape", Shape{B * W, H, N, D}}}};
    const Graph g = json_model("windows", inputs, weights, nodes);
    FusedGraph plan = default_plan(g);
    FusedGroup &grp = group_with(plan, "attn");
    EXPECT_EQ(grp.schedule.value("template", ""), "attention") << grp.schedule.dump();
    for (const char *n : {"scores", "biased", "per_window", "masked", "back", "probs"}) {
        EXPECT_TRUE(std::count(grp.nodes.begin(), grp.nodes.end(), n)) << n;
    }
    expect_matches(plan, g);
    grp.schedule["key_block"] = 8;
    expect_matches(plan, g);
}

// A causal mask as GPT-2 exports it: Where(the lower triangle, scores, -inf) between the scale and
// the Softmax. Keys in blocks of 8: the first queries' later blocks are wholly masked.
TEST(Attention, CausalWhereMask) {
    const int64_t H = 3, S = 29, D = 8;
    const std::string file = write_floats("causal_ninf", {-std::numeric_limits<float>::infinity()});
    json causal = json::array();
    for (int64_t i = 0; i < S; i++) {
        for (int64_t j = 0; j < S; j++) causal.push_back(j <= i ? 1 : 0);
    }
    const json nodes = {{{"name", "kt"}, {"op", "Transpose"}, {"inputs", {"k"}}, {"attrs", {{"perm", {0, 2, 1}}}}},
                        {{"name", "scores"}, {"op", "MatMul"}, {"inputs", {"q", "kt"}}},
                        {{"name", "scaled"}, {"op", "Div"}, {"inputs", {"scores", "scale"}}},
                        {{"name", "masked"}, {"op", "Where"}, {"inputs", {"causal", "scaled", "ninf"}}},
                        {{"name", "probs"}, {"op", "Softmax"}, {"inputs", {"masked"}}, {"attrs", {{"axis", -1}}}},
                        {{"name", "attn"}, {"op", "MatMul"}, {"inputs", {"probs", "v"}}},
                        {{"name", "act"}, {"op", "Relu"}, {"inputs", {"attn"}}}};
    const json weights = {{"scale", {{"shape", Shape{}}, {"values", {std::sqrt(static_cast<double>(D))}}}},
                          {"causal", {{"shape", Shape{S, S}}, {"values", causal}}},
                          {"ninf", {{"shape", Shape{}}, {"file", file}}}};
    const json inputs = {{{"name", "q"}, {"shape", Shape{H, S, D}}},
                         {{"name", "k"}, {"shape", Shape{H, S, D}}},
                         {{"name", "v"}, {"shape", Shape{H, S, D}}}};
    const Graph g = json_model("causal", inputs, weights, nodes);
    FusedGraph plan = default_plan(g);
    FusedGroup &grp = group_with(plan, "attn");
    EXPECT_EQ(grp.schedule.value("template", ""), "attention") << grp.schedule.dump();
    EXPECT_TRUE(std::count(grp.nodes.begin(), grp.nodes.end(), "masked"));
    expect_matches(plan, g);
    grp.schedule["key_block"] = 8;
    expect_matches(plan, g);
}

TEST(Attention, InOneWholeModelPipeline) {
    const Graph g = attention_model({{2, 3}, 37, 45, 24, 20, {2, 3}, Mask::Random});
    FusedGraph plan = default_plan(g);
    group_with(plan, "attn").schedule["key_block"] = 16;
    test::expect_pipeline_matches_reference(plan, 1e-4, &g);
}

TEST(Attention, BadParametersNameTheField) {
    const Graph g = attention_model({{2}, 9, 11, 8, 8, {2}, Mask::None});
    auto error_of = [&](const json &params) {
        FusedGraph plan = default_plan(g);
        FusedGroup &grp = group_with(plan, "attn");
        for (const auto &[key, value] : params.items()) grp.schedule[key] = value;
        try {
            Executor ex(plan);
            (void)ex;
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_TRUE(test::contains(error_of({{"key_block", 12}}), "schedule.key_block")) << error_of({{"key_block", 12}});
    EXPECT_TRUE(test::contains(error_of({{"query_tile", 10}}), "schedule.query_tile"));
    EXPECT_TRUE(test::contains(error_of({{"parallel", "rows"}}), "schedule.parallel"));
    EXPECT_TRUE(test::contains(error_of({{"tile_vectors", 0}}), "schedule.tile_vectors"));
    EXPECT_TRUE(test::contains(error_of({{"key_blok", 8}}), "schedule.key_blok"));
}

}  // namespace
}  // namespace hfuse
