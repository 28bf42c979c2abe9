// enumerate_plans(): on small graphs, exactly the partitions a brute force over all set partitions
// finds legal (check_plan), each once, the unfused plan first; a chain's count by formula.
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>

namespace hfuse {
namespace {

using nlohmann::json;
using test::model_node;
using Key = std::set<std::set<std::string>>;

Key key_of(const FusedGraph &f) {
    Key k;
    for (const FusedGroup &g : f.groups) k.insert(std::set<std::string>(g.nodes.begin(), g.nodes.end()));
    return k;
}

// Every set partition of the nodes (restricted growth strings), kept where check_plan accepts it.
std::set<Key> brute_force(const Graph &g) {
    const int n = static_cast<int>(g.nodes.size());
    std::set<Key> legal;
    std::vector<int> label(n, 0);
    std::function<void(int, int)> rec = [&](int i, int groups) {
        if (i == n) {
            FusedGraph f;
            f.graph = g;
            f.rewritten = true;
            f.groups.resize(groups);
            for (int k = 0; k < n; k++) f.groups[label[k]].nodes.push_back(g.nodes[k].name);
            try {
                legal.insert(key_of(check_plan(f)));
            } catch (const Error &) {
            }
            return;
        }
        for (int l = 0; l <= groups; l++) {
            label[i] = l;
            rec(i + 1, std::max(groups, l + 1));
        }
    };
    rec(0, 0);
    return legal;
}

Graph model(const json &nodes, const json &outputs, const json &weights = json::object(),
            const Shape &shape = {1, 4, 6, 6}) {
    json j = {{"format", "hfuse-model"}, {"version", 1},
              {"name", "enum"},          {"inputs", {{{"name", "x"}, {"shape", shape}}}},
              {"weights", weights},      {"nodes", nodes},
              {"outputs", outputs}};
    return simplify(prepare(parse_model(j, ".", "enum.json")));
}

void expect_exact(const Graph &g, size_t expected_count) {
    std::vector<FusedGraph> plans = enumerate_plans(g, {});
    std::set<Key> found;
    for (const FusedGraph &p : plans) EXPECT_TRUE(found.insert(key_of(p)).second) << "a plan twice";
    std::set<Key> truth = brute_force(g);
    EXPECT_EQ(found, truth);
    EXPECT_EQ(plans.size(), expected_count);
    ASSERT_FALSE(plans.empty());
    EXPECT_EQ(plans[0].groups.size(), g.nodes.size()) << "the unfused plan comes first";
}

TEST(EnumeratePlans, ChainIsEveryCompositionOfItsLength) {
    // A chain of 5 ops: a legal group is a contiguous run, so 2^(5-1) plans.
    Graph g = model({model_node("a", "Relu", {"x"}), model_node("b", "Sigmoid", {"a"}), model_node("c", "Tanh", {"b"}),
                     model_node("d", "Relu", {"c"}), model_node("e", "Sigmoid", {"d"})},
                    {"e"});
    expect_exact(g, 16);
}

TEST(EnumeratePlans, DiamondAndResidualMatchBruteForce) {
    Graph diamond =
        model({model_node("a", "Relu", {"x"}), model_node("b", "Sigmoid", {"a"}), model_node("c", "Tanh", {"a"}),
               model_node("d", "Add", {"b", "c"}), model_node("e", "Relu", {"d"})},
              {"e"});
    expect_exact(diamond, brute_force(diamond).size());
    // Residual with two outputs and an independent branch: groups need not be connected.
    Graph residual =
        model({model_node("a", "Relu", {"x"}), model_node("b", "Sigmoid", {"a"}), model_node("c", "Add", {"a", "b"}),
               model_node("d", "Tanh", {"x"}), model_node("e", "Mul", {"c", "d"}), model_node("f", "Relu", {"b"})},
              {"e", "f"});
    expect_exact(residual, brute_force(residual).size());
    EXPECT_GT(brute_force(residual).size(), 20u) << "a test that enumerates nothing proves nothing";
}

TEST(EnumeratePlans, EveryPlanOfADiamondComputesTheReference) {
    Graph g = model({model_node("a", "Relu", {"x"}), model_node("b", "Sigmoid", {"a"}), model_node("c", "Tanh", {"a"}),
                     model_node("d", "Add", {"b", "c"}), model_node("e", "Relu", {"d"})},
                    {"e"});
    test::ModelInputs in = test::make_inputs(g);
    std::vector<FusedGraph> plans = enumerate_plans(g, {});
    ASSERT_GT(plans.size(), 10u);
    for (const FusedGraph &p : plans) test::expect_plan_matches_reference(p, 1e-5, &g);
}

TEST(EnumeratePlans, BundledResnetBlock) {
    Graph g = simplify(load_model(std::string(HFUSE_SOURCE_DIR) + "/models/resnet_block.json"));
    ASSERT_LE(g.nodes.size(), 7u);
    expect_exact(g, brute_force(g).size());
}

TEST(EnumeratePlans, LimitsAreKept) {
    Graph g = simplify(load_model(std::string(HFUSE_SOURCE_DIR) + "/models/lstm_cell.json"));
    std::vector<FusedGraph> plans = enumerate_plans(g, {50, 64});
    EXPECT_EQ(plans.size(), 50u);
    for (const FusedGraph &p : enumerate_plans(g, {200, 2})) {
        for (const FusedGroup &grp : p.groups) EXPECT_LE(grp.nodes.size(), 2u);
    }
}

// In a child process: enumerate_plans on `g` (up to 257 plans) with the address space bounded to
// `spare` bytes past what the process has; 0 where the search stopped short of completing with at
// least two plans found, 1 otherwise (an allocation past the bound aborts the child).
int enumerate_with_address_space_to_spare(const Graph &g, size_t spare) {
    size_t in_use = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmSize:", 0) == 0) in_use = std::stoull(line.substr(7)) * 1024;
    }
    rlimit limit;
    limit.rlim_cur = limit.rlim_max = in_use + spare;
    setrlimit(RLIMIT_AS, &limit);
    bool complete = true;
    PlanEnumeration options;
    options.limit = 257;
    options.complete = &complete;
    const std::vector<FusedGraph> plans = enumerate_plans(g, options);
    return !complete && plans.size() >= 2 ? 0 : 1;
}

TEST(EnumeratePlans, AWideSearchStopsWithinBoundedMemory) {
    // 200 nodes: every two of them merged is a partition to look at, 19,900 at the first step, held
    // until the search stops. Held as each node's group they take tens of MB; as vectors of groups
    // they took 735 MB for a 191-node network (explore's peak). The search runs in a child whose
    // address space may grow by 256 MB.
    json nodes = json::array();
    for (int i = 0; i < 200; i++) {
        nodes.push_back({{"name", "s" + std::to_string(i)},
                         {"op", "Sigmoid"},
                         {"inputs", {i == 0 ? std::string("x") : "s" + std::to_string(i - 1)}}});
    }
    const Graph g = model(nodes, {"s199"});
    ASSERT_EQ(g.nodes.size(), 200u);
    EXPECT_EXIT(std::exit(enumerate_with_address_space_to_spare(g, size_t{256} << 20)), ::testing::ExitedWithCode(0),
                "");
}

}  // namespace
}  // namespace hfuse
