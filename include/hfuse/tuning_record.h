// Tuning records: what `hfuse explore` found for each segment of a network (its grouping and the
// groups' schedule parameters), keyed by the segment's signature and the target, so that any model
// containing the same segment can use it, as TVM's tuning logs do.
//
// A segment is a run of nodes between two cuts only one value crosses (explore/segments.h: the
// residual blocks of a stage, a stage's end); its signature names its ops, attributes, shapes and
// wiring, not its float weights. Explore writes DIR/tuning.json from its best plan:
//
//   {"format": "hfuse-tuning", "version": 1, "entries": [
//     {"signature": "Conv {...} (v0:[1,64,56,56] w[64,64,3,3] ) -> (v1:...)\n...",
//      "target": "x86-64, 16 float lanes, fma", "model": "resnet18",
//      "nodes": ["/layer1/layer1.0/conv1/Conv", ...],            // where it was tuned (for the reader)
//      "groups": [{"nodes": [0, 1], "master": 0,                 // indices into the segment's nodes
//                  "placement": {"1": "inline"}, "schedule": {...}}],
//      "tuned_ms": 9.1, "default_ms": 9.8}]}                     // the whole model, best against default
//
// `hfuse plan|run|bench|compile --tuned FILE` plans as usual, then regroups every segment of the model
// whose signature and target an entry has: the segment's nodes leave the groups they were in (a group
// that reached across the segment's edge keeps its other nodes) and the entry's groups take them.
#pragma once

#include "hfuse/fused_graph.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hfuse {

// The segments explore searches and records: at most this many nodes where the graph allows cuts.
constexpr int kTuningSegmentNodes = 24;

struct TunedGroup {
    std::vector<int> nodes;  // indices into the segment's nodes, the master among them
    int master = 0;
    std::map<int, Placement> placement;  // members given one (folded nodes are derived again)
    nlohmann::json schedule = nlohmann::json::object();
};

struct TuningEntry {
    std::string signature;           // the segment's (explore/segments.h)
    std::string target;              // tuning_target()
    std::string model;               // where it was tuned
    std::vector<std::string> nodes;  // the segment's nodes there
    std::vector<TunedGroup> groups;
    double tuned_ms = 0, default_ms = 0;  // that model's whole run: the tuned plan's and the default's
};

struct TuningRecords {
    std::vector<TuningEntry> entries;
};

// What of a target a tuning depends on: architecture, bits, float lanes and FMA.
std::string tuning_target(const Halide::Target &target);

// The groups of a plan file (`plan`, as JSON, over `g`) that compute a node of [begin, end) in g's
// order, as TunedGroups (node indices from begin), and their names in `names`; false when one of
// them also computes a node outside.
bool groups_within(const nlohmann::json &plan, const Graph &g, int begin, int end, std::vector<TunedGroup> &out,
                   std::vector<std::string> *names = nullptr);

// A segment's groups as one string, equal when they group and schedule it alike ("why" aside).
std::string tuned_groups_key(const std::vector<TunedGroup> &groups);

// One entry per distinct segment of `plan` (over the rewritten graph) whose groups stay inside the
// segment; `notes` gets a line for each segment left out and why.
TuningRecords tuning_records_from_plan(const FusedGraph &plan, const Halide::Target &target, double tuned_ms,
                                       double default_ms, std::vector<std::string> *notes);

nlohmann::json tuning_records_to_json(const TuningRecords &records);
// Checks every field; throws an Error naming `source` and the field.
TuningRecords tuning_records_from_json(const nlohmann::json &j, const std::string &source);
TuningRecords read_tuning_records(const std::string &path);
void write_tuning_records(const std::string &path, const TuningRecords &records);

// `plan` (over the rewritten graph, checked) with every segment an entry of `records` matches (same
// signature and target) regrouped as the entry says; a later entry for the same signature and target
// replaces an earlier one. Entries that make an illegal plan here are not applied.
struct TunedPlan {
    FusedGraph plan;
    int segments = 0;                // the model's segments
    int applied = 0;                 // of them regrouped by an entry
    std::vector<std::string> notes;  // entries not applied and why; targets that did not match
};
TunedPlan apply_tuning(FusedGraph plan, const TuningRecords &records, const Halide::Target &target);

}  // namespace hfuse
