// The fusion plans an exploration draws from: every legal plan (enumerate_plans: convex partitions
// from unfused to maximal, no duplicates) when there are at most `exhaustive_limit` of them;
// otherwise the graph is cut into segments (segments.h), each distinct segment's plans are found
// on its own (all of them, or those a seeded beam search visits, merging two groups joined by an edge
// at each step and keeping the best by the cost estimate and one random pick), and whole plans are
// composed from each segment's best few. Each plan gets the composer's default schedule parameters.
#pragma once

#include "explore/cost_model.h"
#include "hfuse/fused_graph.h"

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hfuse::explore {

struct RankedPlan {
    FusedGraph plan;
    PlanCost cost;
    // Composed from segments: which segment's choice this plan varies ("" for the plan of every
    // segment's best estimate, and outside segment search).
    std::string segment_choice;
};

struct PlanSpace {
    // Distinct plans, in the order the budget takes them: the best estimate of each group count first
    // (so the plot spans unfused to maximal), then the rest by estimate.
    std::vector<RankedPlan> plans;
    bool exhaustive = false;  // every legal plan is here
    // Otherwise: the segments the graph was cut into (segments.h) and how many of them differ.
    int segments = 0, distinct_segments = 0;
};

struct PlanSpaceOptions {
    size_t exhaustive_limit = 256;
    int beam_width = 4;
    size_t max_plans = 2000;  // the beam search stops after visiting this many legal plans
    // Beyond exhaustive_limit: the graph cut into segments of at most this many nodes where cuts allow,
    // each searched on its own (exhaustively, or by a beam of segment_max_plans plans), keeping its
    // segment_choices best.
    int max_segment_nodes = 24;
    size_t segment_max_plans = 400;
    int segment_choices = 4;
    int max_group_ops = 64;
    uint64_t seed = 1;
};

// `graph` is rewritten (simplify()).
PlanSpace plan_space(const Graph &graph, const Halide::Target &target, const PlanSpaceOptions &options);

// A deterministic generator (SplitMix64) for the seeded choices; the same on every platform.
struct SeededRandom {
    uint64_t state;
    explicit SeededRandom(uint64_t seed) : state(seed) {}
    uint64_t next();
    size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
};

}  // namespace hfuse::explore
