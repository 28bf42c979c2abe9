// Rule sets: the built-in ones are exactly their shipped files, and every malformed rule set is an
// Error naming the field.
#include "hfuse/fusion_rules.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/model_io.h"
#include "hfuse/plan_report.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace hfuse {
namespace {

using nlohmann::json;
using test::kRulesDir;
using test::tmp_path;

json shipped(const std::string &name) {
    std::ifstream in(kRulesDir + name + ".json");
    return json::parse(in);
}

// A valid rule set the error tests break one field at a time.
json base_rules() {
    return json::parse(R"({"format": "hfuse-rules", "version": 1, "name": "test",
      "fuse": [{"producer": "complex-out-fusable", "consumers": ["elementwise", "broadcast"], "placement": "compute_at"},
               {"producer": "elementwise", "consumers": ["elementwise"], "placement": "inline"}],
      "max_group_ops": 8, "max_group_inputs": 4})");
}

// Writes `rules` to a file, loads it and expects an Error naming the file and containing each needle.
void expect_rules_error(const std::string &name, const json &rules, const std::vector<std::string> &needles) {
    SCOPED_TRACE(name);
    const std::string path = tmp_path(name + ".json");
    std::ofstream(path) << rules.dump(2);
    try {
        RuleSet r = load_rules(path);
        ADD_FAILURE() << "accepted: " << to_json(r).dump();
    } catch (const Error &e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << "does not name the file: " << msg;
        for (const auto &n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    }
}

TEST(FusionRules, BuiltInsAreTheirShippedFiles) {
    std::vector<std::string> names = builtin_rule_names();
    EXPECT_EQ(names, (std::vector<std::string>{"none", "tvm", "x86"}));
    for (const std::string &name : names) {
        SCOPED_TRACE(name);
        RuleSet builtin = load_rules(name);
        RuleSet parsed = parse_rules(shipped(name), kRulesDir + name + ".json");
        RuleSet from_file = load_rules(kRulesDir + name + ".json");
        EXPECT_EQ(to_json(builtin), to_json(parsed));
        EXPECT_EQ(to_json(builtin), to_json(from_file));
        EXPECT_EQ(builtin.name, name);
        EXPECT_EQ(builtin.source, "built-in rules '" + name + "'");
        EXPECT_EQ(from_file.source, kRulesDir + name + ".json");
        // Every (producer, consumer) of the file is a rule with the file's placement, and nothing else.
        size_t count = 0;
        const json file = shipped(name);
        for (const json &e : file["fuse"]) {
            for (const json &c : e["consumers"]) {
                count++;
                const FusionRule *r = builtin.find(parse_pattern_kind(e["producer"], "p"), parse_pattern_kind(c, "c"));
                ASSERT_NE(r, nullptr) << e.dump();
                EXPECT_EQ(to_string(r->placement), e["placement"].get<std::string>());
            }
        }
        EXPECT_EQ(builtin.rules.size(), count);
        // to_json is parseable and means the same rule set.
        EXPECT_EQ(to_json(parse_rules(to_json(builtin), "again")), to_json(builtin));
    }
}

TEST(FusionRules, BuiltInContents) {
    RuleSet x86 = load_rules("x86"), tvm = load_rules("tvm"), none = load_rules("none");
    ASSERT_NE(x86.find(PatternKind::ComplexOutFusable, PatternKind::Window), nullptr);
    EXPECT_EQ(x86.find(PatternKind::ComplexOutFusable, PatternKind::Window)->placement, Placement::ComputeAt);
    EXPECT_EQ(x86.find(PatternKind::ComplexOutFusable, PatternKind::Injective)->placement, Placement::Root);
    EXPECT_EQ(x86.find(PatternKind::ComplexOutFusable, PatternKind::ComplexOutFusable), nullptr);
    EXPECT_EQ(tvm.find(PatternKind::ComplexOutFusable, PatternKind::Window), nullptr);
    EXPECT_EQ(tvm.find(PatternKind::ComplexOutFusable, PatternKind::ComplexOutFusable), nullptr);
    EXPECT_TRUE(x86.window_fusion && x86.multi_output && x86.defer_injective);
    EXPECT_FALSE(tvm.window_fusion || tvm.multi_output);
    EXPECT_TRUE(x86.recompute);
    EXPECT_FALSE(tvm.recompute || none.recompute) << "Relay's FuseOps never recomputes";
    EXPECT_TRUE(x86.pointwise_into_depthwise);
    EXPECT_FALSE(tvm.pointwise_into_depthwise || none.pointwise_into_depthwise) << "Relay never fuses two convs";
    EXPECT_EQ(x86.max_group_ops, 64);
    EXPECT_EQ(x86.max_group_inputs, 16);
    EXPECT_TRUE(none.rules.empty());
    // Defaults of a file that leaves everything out.
    RuleSet minimal = parse_rules(json::parse(R"({"format": "hfuse-rules", "version": 1, "name": "m"})"), "m");
    EXPECT_TRUE(minimal.rules.empty());
    EXPECT_EQ(minimal.max_group_ops, 64);
    EXPECT_EQ(minimal.max_group_inputs, 16);
    EXPECT_TRUE(minimal.window_fusion && minimal.multi_output && minimal.defer_injective);
    EXPECT_FALSE(minimal.recompute);
    EXPECT_TRUE(minimal.opaque_ops.empty() && minimal.opaque_nodes.empty() && minimal.stop_after.empty());
}

TEST(FusionRules, AllFieldsAreRead) {
    json j = base_rules();
    j["window_fusion"] = false;
    j["multi_output"] = false;
    j["defer_injective"] = false;
    j["recompute"] = true;
    j["sibling_products"] = true;
    j["pointwise_into_depthwise"] = true;
    j["opaque_ops"] = {"Softmax", "MaxPool"};
    j["opaque_nodes"] = {"conv3"};
    j["stop_after"] = {"relu7"};
    j["doc"] = "a test";
    RuleSet r = parse_rules(j, "test");
    EXPECT_EQ(r.name, "test");
    EXPECT_EQ(r.rules.size(), 3u);
    EXPECT_EQ(r.max_group_ops, 8);
    EXPECT_EQ(r.max_group_inputs, 4);
    EXPECT_FALSE(r.window_fusion || r.multi_output || r.defer_injective);
    EXPECT_TRUE(r.recompute && r.sibling_products && r.pointwise_into_depthwise);
    EXPECT_EQ(r.opaque_ops, (std::set<std::string>{"MaxPool", "Softmax"}));
    EXPECT_EQ(r.opaque_nodes, (std::set<std::string>{"conv3"}));
    EXPECT_EQ(r.stop_after, (std::set<std::string>{"relu7"}));
    EXPECT_EQ(r.find(PatternKind::Elementwise, PatternKind::Elementwise)->placement, Placement::Inline);
}

TEST(FusionRules, UnknownKind) {
    json j = base_rules();
    j["fuse"][1]["producer"] = "elementwize";
    expect_rules_error("kind_producer", j, {"fuse[1].producer", "unknown pattern kind 'elementwize'", "elementwise"});
    j = base_rules();
    j["fuse"][0]["consumers"] = {"elementwise", "pointwise"};
    expect_rules_error("kind_consumer", j, {"fuse[0].consumers", "'pointwise'"});
    j = base_rules();
    j["fuse"][0]["consumers"] = {"opaque"};
    expect_rules_error("kind_opaque", j, {"fuse[0]", "opaque"});
}

TEST(FusionRules, UnknownPlacement) {
    json j = base_rules();
    j["fuse"][0]["placement"] = "compute-at";
    expect_rules_error("placement", j, {"fuse[0].placement", "unknown placement 'compute-at'", "compute_at"});
    for (const char *p : {"output", "folded", "recompute"}) {
        j["fuse"][0]["placement"] = p;
        expect_rules_error(std::string("placement_") + p, j, {"fuse[0].placement"});
    }
}

TEST(FusionRules, UnknownKey) {
    json j = base_rules();
    j["max_group_nodes"] = 3;
    expect_rules_error("key", j, {"max_group_nodes", "unknown key"});
}

TEST(FusionRules, UnknownKeyInARule) {
    // A misspelt key inside a rule ("consumer" for "consumers", a "doc" that is not allowed there,
    // "placment") must not be ignored silently either.
    json j = base_rules();
    j["fuse"][1]["placment"] = "root";
    expect_rules_error("rule_key", j, {"fuse[1]", "placment"});
}

TEST(FusionRules, DuplicateRule) {
    json j = base_rules();
    j["fuse"].push_back(
        {{"producer", "complex-out-fusable"}, {"consumers", {"window", "broadcast"}}, {"placement", "root"}});
    expect_rules_error("duplicate", j, {"fuse[2]", "second rule", "complex-out-fusable -> broadcast"});
    j = base_rules();
    j["fuse"][1]["consumers"] = {"elementwise", "elementwise"};
    expect_rules_error("duplicate_in_list", j, {"fuse[1]", "second rule"});
}

TEST(FusionRules, OtherErrors) {
    json j = base_rules();
    j["format"] = "hfuse-plan";
    expect_rules_error("format", j, {"format"});
    j = base_rules();
    j["version"] = 2;
    expect_rules_error("version", j, {"version"});
    j = base_rules();
    j.erase("name");
    expect_rules_error("name", j, {"name"});
    for (const json &bad : {json(0), json(-1), json(2.5), json("8")}) {
        j = base_rules();
        j["max_group_ops"] = bad;
        expect_rules_error("max_ops", j, {"max_group_ops", "positive integer"});
    }
    j = base_rules();
    j["max_group_inputs"] = 0;
    expect_rules_error("max_inputs", j, {"max_group_inputs"});
    j = base_rules();
    j["window_fusion"] = "yes";
    expect_rules_error("window", j, {"window_fusion", "true or false"});
    j = base_rules();
    j["opaque_ops"] = {"Frobnicate"};
    expect_rules_error("opaque_op", j, {"opaque_ops", "unknown op 'Frobnicate'"});
    j = base_rules();
    j["stop_after"] = "relu";
    expect_rules_error("stop_after", j, {"stop_after", "list"});
    j = base_rules();
    j["fuse"][0] = {{"producer", "complex-out-fusable"}, {"consumers", "elementwise"}, {"placement", "inline"}};
    expect_rules_error("consumers_not_list", j, {"fuse[0]"});
    j = base_rules();
    j["fuse"] = {{"producer", "elementwise"}};
    expect_rules_error("fuse_not_objects", j, {"fuse"});

    const std::string broken = tmp_path("broken.json");
    std::ofstream(broken) << "{\"format\": ";
    try {
        load_rules(broken);
        ADD_FAILURE() << "broken JSON accepted";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(broken), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("invalid JSON"), std::string::npos) << e.what();
    }
    try {
        load_rules("x87");
        ADD_FAILURE() << "unknown name accepted";
    } catch (const Error &e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("x87"), std::string::npos) << msg;
        EXPECT_NE(msg.find("tvm"), std::string::npos) << "should list the built-in sets: " << msg;
    }
}

TEST(FusionRules, EveryAcceptedRuleSetCanPlan) {
    // parse_rules accepts "inline" for any producer, including a complex-out-fusable one (a Conv has a
    // reduction and can never be inlined). Such a rule set must either be rejected when it is read, or
    // plan (and run) without check_plan rejecting the planner's own output.
    json j = base_rules();
    j["fuse"][0]["placement"] = "inline";
    const std::string path = tmp_path("inline_conv.json");
    std::ofstream(path) << j.dump();
    RuleSet rules;
    try {
        rules = load_rules(path);
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("fuse[0].placement"), std::string::npos) << e.what();
        return;  // rejected up front: fine
    }
    const std::string model = tmp_path("inline_conv_model.json");
    std::ofstream(model) << R"({"format": "hfuse-model", "version": 1, "name": "ic",
      "inputs": [{"name": "x", "shape": [1, 2, 5, 5]}],
      "weights": {"w": {"shape": [2, 2, 3, 3], "uniform": [-0.5, 0.5], "seed": 1}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]}],
      "outputs": ["relu"]})";
    Graph g = load_model(model);
    FusedGraph f;
    try {
        f = plan_fusion(g, {rules});
    } catch (const Error &e) {
        FAIL() << "rule set accepted by load_rules, but planning with it fails: " << e.what();
    }
    EXPECT_EQ(f.groups.size(), 1u) << plan_table(f);
    std::vector<float> x = uniform_values(50, -1, 1, 3);
    auto inputs = std::map<std::string, TensorBuffer>{{"x", tensor_from_data({1, 2, 5, 5}, x.data())}};
    auto expected = Executor(singleton_groups(g)).run(inputs);
    auto actual = Executor(f).run(inputs);
    auto cmp = reference::compare(actual.at("relu").data(), expected.at("relu").data(), 50);
    EXPECT_LE(cmp.relative(), 1e-4);
}

}  // namespace
}  // namespace hfuse
