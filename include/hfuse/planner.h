// The fusion planner: a graph-to-graph pass that groups ops under a rule set, in the spirit of TVM's
// FuseOps (pattern kinds and a post-dominator tree) and extended with window consumers, injective
// neighbours, reductions after producers and multi-output groups.
//
//   Graph g = simplify(load_model("models/resnet_block.json"));
//   FusedGraph plan = plan_fusion(g, {load_rules("x86")});
//   FusedGraph again = plan_round(plan, load_rules("my_backend.json"));   // a further round
//
// Each round is a pure function of (fused graph, rules): groups only ever merge.
#pragma once

#include "hfuse/fused_graph.h"
#include "hfuse/fusion_rules.h"

#include <Halide.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hfuse {

FusedGraph plan_round(const FusedGraph &fused, const RuleSet &rules);

// --- Backends claiming patterns -------------------------------------------------------------------
// A backend that implements a fused pattern itself (how one "tensorizes" gemm+bias+activation)
// registers it; the planner makes each match one group before the rule-based rounds, and the
// executor lowers that group through the backend instead of the op library.

// The fused epilogue a backend is handed.
struct EpilogueDescriptor {
    std::string master;  // the Gemm/MatMul/Conv node
    std::string master_op;
    nlohmann::json master_attrs;
    std::string input;       // the activation the master reads (value name)
    std::string weight;      // the master's weight (value name)
    std::string bias;        // value added after the master ("" for none): Gemm's C or an Add operand
    std::string activation;  // op type of the activation ("" for none), e.g. "Relu"
    nlohmann::json activation_attrs;
    std::vector<std::string> nodes;  // the matched nodes, in order
};

// No Func of a lowering may be named like an extern function it calls (Halide names the group's
// pipeline after its output Func, and would call one for the other): the executor refuses it.
struct BackendLowering {
    Halide::Func output;                                   // the group's single output
    std::map<std::string, Halide::JITExtern> jit_externs;  // extern functions the Func calls
};

struct BackendPattern {
    std::string backend;           // e.g. "eigen"
    std::string name;              // e.g. "gemm_bias_relu"
    std::vector<std::string> ops;  // a chain of op types, each the only consumer of the one before
    // Optional extra condition on a match (attributes, shapes); nullptr accepts every match.
    std::function<bool(const Graph &, const EpilogueDescriptor &)> accepts;
    // `values` holds a Func for every value the group reads (activations and float weights).
    std::function<BackendLowering(const Graph &, const EpilogueDescriptor &,
                                  const std::map<std::string, Halide::Func> &values, const TensorType &output)>
        lower;

    std::string id() const { return backend + ":" + name; }
};

void register_backend_pattern(BackendPattern pattern);
// nullptr if no pattern has this id.
const BackendPattern *find_backend_pattern(const std::string &id);
std::vector<const BackendPattern *> backend_patterns();

// The descriptor of a chain of nodes matched against `ops` (throws an Error if they do not match).
EpilogueDescriptor describe_epilogue(const Graph &graph, const std::vector<std::string> &nodes);

// Makes every match of the enabled backends' patterns one group (before any rule-based round).
FusedGraph claim_backend_patterns(const FusedGraph &fused, const std::vector<std::string> &backends);

// --- Enumerating plans (for experiments over fusion choices) --------------------------------------

struct PlanEnumeration {
    size_t limit = 1000;     // stop after this many plans
    int max_group_ops = 64;  // no group larger than this
    // Stop after visiting this many partitions, legal or not (0: 64 x limit, or 4M / nodes if more:
    // 4M node labels, 16 MB and the set's overhead). Each is kept so that none is visited twice, and
    // a plan of n groups has n(n-1)/2 successors: MobileNet-V2's 150 nodes made millions of them, 8
    // GB, before the limit of plans was reached.
    size_t max_partitions = 0;
    // Set, where given, to whether every legal plan was found (neither limit stopped the search).
    bool *complete = nullptr;
};

// The legal plans of `graph` (already rewritten: simplify() it first): every partition of its nodes
// into groups that check_plan accepts (convex, executable in some order), each once, from the unfused
// plan (first) through merges of two groups at a time, breadth first, so smaller merges come first.
// No recompute copies. A plan here may still fail to compile or be slow: that is for the caller to
// measure.
//
//   for (const FusedGraph &p : enumerate_plans(simplify(g), {})) { ... time p ... }
std::vector<FusedGraph> enumerate_plans(const Graph &graph, const PlanEnumeration &options);

// The whole planner: simplify, claim backend patterns, then one round per rule set.
FusedGraph plan_fusion(const Graph &graph, const std::vector<RuleSet> &rounds,
                       const std::vector<std::string> &backends = {});

}  // namespace hfuse
