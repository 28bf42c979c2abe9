// What the exploration found per segment (segments.h) of the model: for each distinct segment, the
// groupings of its nodes the timed candidates used and the fastest whole-network time with each,
// the default plan's grouping against best_plan.json's, and why they differ (groups, bytes the
// segment's groups pass through memory by the cost estimate, schedule parameters). report.md shows it
// as a table and results.json as "segments".
#pragma once

#include "explore/candidate.h"
#include "hfuse/tuning_record.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hfuse::explore {

struct SegmentChoice {
    std::string grouping;  // "Conv+Relu | Conv+Add+Relu" ("..." where a group reaches outside)
    int candidates = 0;    // timed candidates (templates, ok) that group the segment so
    double best_ms = 0;    // the fastest of them: a whole-network time, other segments as they had them
    // The segment's own time: the median, over those candidates and the segment's occurrences, of the
    // profiled times of the groups computing it (`bench --profile`); `measured` such sums (0: none).
    double segment_ms = 0;
    int measured = 0;
    bool is_default = false, is_best = false;
};

struct SegmentFindings {
    std::vector<std::string> nodes;      // its first occurrence's nodes (rewritten graph)
    int occurrences = 0;                 // segments with the same signature
    std::vector<SegmentChoice> choices;  // fastest first (by segment_ms where measured)
    std::string default_grouping, best_grouping;
    int default_groups = 0, best_groups = 0;
    int64_t default_bytes = 0, best_bytes = 0;  // handed out by the segment's groups (cost estimate)
    std::vector<std::string> schedule_changes;  // best_plan's parameters against the default's, in the segment
};

// `rewritten` is the graph the candidates' plans are over (those over the graph as written, "rewritten":
// false, are left out when `rewrites_matter`: explore.cpp), `default_key` and `best_plan_key` keys of
// `rows` ("" when there is none). Empty when the model is one segment.
std::vector<SegmentFindings> segment_findings(const Graph &rewritten, bool rewrites_matter,
                                              const std::vector<Evaluation> &rows, const std::string &default_key,
                                              const std::string &best_plan_key, const Halide::Target &target);

// Per distinct segment, the choice (grouping and group schedules) whose profiled groups took the least
// time, the median over the candidates and occurrences that had it: a tuning record to compose a plan
// from the fastest measured segments (apply_tuning), the fusions across segment edges left as they are.
TuningRecords fastest_segment_choices(const Graph &rewritten, bool rewrites_matter, const std::vector<Evaluation> &rows,
                                      const Halide::Target &target);

nlohmann::json to_json(const SegmentFindings &f);
// The "## Per segment" section of report.md ("" when `findings` is empty).
std::string segment_section(const std::vector<SegmentFindings> &findings);

}  // namespace hfuse::explore
