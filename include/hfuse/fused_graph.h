// A fused graph: a graph partitioned into groups, each with a master op and a placement for every
// member. It is the planner's input and output (so planning can run in rounds) and, written as JSON,
// the plan file users read, edit and feed back:
//
//   {"format": "hfuse-plan", "version": 1, "model": "cbrm", "rules": ["x86"],
//    "groups": [{"name": "g0", "master": "conv", "nodes": ["conv", "relu", "pool"],
//                "placement": {"conv": "compute_at", "relu": "inline", "pool": "output"},
//                "why": "keeps 3.1 MiB out of memory (~196 us); recomputes 14.5 MFLOP (~19 us)"}]}
//
// Node names are those of the source model; a node a rewrite folded away (a BatchNormalization in
// its Conv) is listed in the group of the node that absorbed it, with placement "folded".
//
// A cheap node (elementwise, broadcast, injective) may be listed in several groups with placement
// "recompute" in all but at most one: each of those groups computes its own copy inline instead of
// reading the value from memory. With no owner, every group that reads the node must recompute it.
#pragma once

#include "hfuse/error.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/graph.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace hfuse {

struct FusedGroup {
    std::string name;
    std::string master;                                  // node that leads the group (its schedule template)
    std::vector<std::string> nodes;                      // graph nodes, in topological order
    std::map<std::string, Placement> placement;          // every node, plus folded source nodes
    std::string backend;                                 // set when a backend pattern claimed the group
    nlohmann::json schedule = nlohmann::json::object();  // composer parameters, kept verbatim
    // Why the planner made the group so (its cost model's price, the merges it declined); kept
    // verbatim, never read back as a decision.
    std::string why;
    // Merges the cost model could not price (MergePrice::close()) and the rules made: per merge, the
    // nodes it joined to the rest (the side that reached out). measure_undecided_merges() times the
    // group against each part apart and keeps the faster. Not written to plan files: a plan file's
    // groups are decisions.
    std::vector<std::vector<std::string>> undecided;
};

struct FusedGraph {
    Graph graph;                     // the (rewritten) graph the groups partition
    std::vector<FusedGroup> groups;  // in an order that respects data dependences
    std::vector<std::string> rules;  // the rule sets applied, in order
    bool rewritten = false;          // `graph` went through simplify() (planner plans do; --unfused not)
    std::string source;              // the plan file it was read from (read_plan), "" if made in memory
};

// Every node its own group.
FusedGraph singleton_groups(const Graph &graph);

// Whether `group` holds `node` as a "recompute" copy (not as its own).
bool is_recompute_copy(const FusedGroup &group, const std::string &node);

// Pattern kind of a node as fusion sees it: a broadcasting op whose computed (non-weight) inputs all
// have the output's shape is elementwise along the data flow (as in TVM).
PatternKind effective_kind(const Graph &graph, const Node &node);

// Fills in what a plan may leave out (master, placement), orders the groups, and checks the plan:
// every node in exactly one group (or recomputed, see above), groups convex (no path leaves a group
// and comes back), every master able to lead its group. Throws an Error naming the offending nodes.
FusedGraph check_plan(FusedGraph fused);

// Plan files. read_plan maps source-model names onto `graph` (the rewritten graph) and runs check_plan.
nlohmann::json plan_to_json(const FusedGraph &fused);
FusedGraph plan_from_json(const nlohmann::json &plan, const Graph &graph, const std::string &source);
FusedGraph read_plan(const std::string &path, const Graph &graph);
// Reads a plan for a model as loaded: maps it onto simplify(model) unless the plan says it is over
// the graph as written ("rewritten": false, as `--unfused` plans are).
FusedGraph read_plan_for_model(const std::string &path, const Graph &model);
void write_plan(const std::string &path, const FusedGraph &fused);

// Locates `e`, met lowering, scheduling or compiling `group` of `plan`: names the group, its master
// (unless a node is named already) and the file holding what it is about: the plan file
// (plan.source) for the group's schedule (field "schedule..."), else the model (plan.graph.source).
//   "p.json: group 'g0': node 'conv' (Conv): field 'schedule.tile_positions': 99 is outside [1, 16] ..."
Error &in_group(Error &e, const FusedGraph &plan, const FusedGroup &group);

// The values a group hands out: those of the nodes it owns (not its "recompute" copies) that the
// model returns or that a group without its own copy reads.
std::set<std::string> handed_out_values(const FusedGraph &fused, const FusedGroup &group);

// The Transpose in `group` whose output a MatMul `product` of the group reads as B [..., K, N] lying as
// its input does, contiguous along K (attention's K^T: keys [S, heads, d] transposed to [heads, d, S]),
// or nullptr. Inlined (or recomputed) into the product, it makes B's columns strided; materialised
// (root), B is contiguous along N.
const Node *k_contiguous_transpose(const Graph &graph, const FusedGroup &group, const Node &product);

// Bytes of intermediates a group keeps out of memory: values produced and consumed inside it that
// are neither handed out nor placed at root.
int64_t intermediate_bytes_saved(const FusedGraph &fused, const FusedGroup &group);

}  // namespace hfuse
