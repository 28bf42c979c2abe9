// Fusion rule sets: which fusions the planner may make, as data. A rule set is a JSON file
// (schema in src/planner/rules/README.md); the built-in ones (tvm, x86, none) are those same files,
// compiled in.
//
//   RuleSet x86 = load_rules("x86");                 // a built-in name, or a path to a .json file
//   const FusionRule *r = x86.find(PatternKind::ComplexOutFusable, PatternKind::Window);
#pragma once

#include "hfuse/fusion_cost.h"
#include "hfuse/graph.h"
#include "hfuse/op_registry.h"

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace hfuse {

// Where a fused group places a member relative to the group's output (see fused_graph.h).
enum class Placement {
    Inline,     // recomputed inside its consumer (cheap elementwise/injective ops)
    ComputeAt,  // computed per tile of its consumer (a conv per pool tile)
    Root,       // materialised once inside the group's pipeline
    Output,     // a value the group hands out (consumed elsewhere or a model output)
    Folded,     // a source-model node a rewrite merged into another (a BatchNormalization in its Conv)
    Recompute,  // a copy of a cheap node another group owns (or every reader recomputes), inlined here
};

const char *to_string(Placement p);
// Throws an Error naming `field` for an unknown name.
Placement parse_placement(const std::string &name, const std::string &field);
PatternKind parse_pattern_kind(const std::string &name, const std::string &field);

// A group led by a master of kind `producer` may absorb an op (or group) of kind `consumer` that
// reads it; the producer side is then placed `placement` in the consumer.
struct FusionRule {
    PatternKind producer;
    PatternKind consumer;
    Placement placement;
};

struct RuleSet {
    std::string name;
    std::string source;  // file, or "built-in"
    std::vector<FusionRule> rules;
    int max_group_ops = 64;                 // ops per group
    int max_group_inputs = 16;              // distinct activations entering a group (weights not counted)
    bool window_fusion = true;              // window consumers (pools) may join a complex-out-fusable group
    bool multi_output = true;               // a group may hand out an intermediate (a model output also used inside)
    bool defer_injective = true;            // fuse injective-led groups only after the others (TVM's phases)
    bool recompute = false;                 // a cheap group read by several groups is recomputed in each of them
    bool sibling_products = false;          // Gemm/MatMul groups whose outputs meet in an elementwise op join
    bool pointwise_into_depthwise = false;  // a pointwise conv group joins the depthwise conv reading it
    bool attention = false;  // an attention's products, score ops and Softmax join one group (online softmax)
    // A merge or a recompute copy the rules allow is made only where it pays under `machine`
    // (hfuse/fusion_cost.h): what it keeps out of memory against what it recomputes.
    bool cost_model = false;
    MachineModel machine;
    std::set<std::string> opaque_ops;    // op types never fused
    std::set<std::string> opaque_nodes;  // node names never fused
    std::set<std::string> stop_after;    // node names no consumer may fuse with

    const FusionRule *find(PatternKind producer, PatternKind consumer) const;
};

// Sets the lanes of the target's float vectors (`natural_vector_lanes`: 16 with AVX-512, 8 with AVX2)
// in the machine model of every rule set in `rounds` that leaves them open (MachineModel::vector_lanes).
void set_target_lanes(std::vector<RuleSet> &rounds, int natural_vector_lanes);

// A built-in name ("tvm", "x86", "none") or the path of a rule-set file.
RuleSet load_rules(const std::string &name_or_path);
RuleSet parse_rules(const nlohmann::json &j, const std::string &source);
nlohmann::json to_json(const RuleSet &rules);
std::vector<std::string> builtin_rule_names();

// Notes for the node names `rules` lists (opaque_nodes, stop_after) that `model` (as loaded) has no
// node of, each naming the rule set's file, the field and the name: a typo there would otherwise
// fuse what it meant to keep apart, silently.
std::vector<std::string> unknown_rule_nodes(const RuleSet &rules, const Graph &model);

}  // namespace hfuse
