// report.md: what the exploration found — the best candidate against the baselines, why it won
// (which nodes it fuses where, the bytes its groups pass through memory and its schedule parameters,
// against the default plan's), every candidate in a table, the failures, and the plot.
#pragma once

#include "explore/candidate.h"
#include "explore/cost_model.h"
#include "explore/segment_findings.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace hfuse::explore {

struct ReportInput {
    nlohmann::json header;  // results.json's header: model, machine, options, plan space
    std::vector<Evaluation> rows;
    std::string best_key;                   // fastest candidate overall ("" if none ran)
    std::string best_plan_key;              // the one written to best_plan.json
    std::map<std::string, PlanCost> costs;  // by key: the best, best_plan and the default baseline
    std::vector<SegmentFindings> segments;  // per distinct segment (none when the model is one)
    std::vector<std::string> notes;         // said at the end
};

std::string markdown_report(const ReportInput &in);

}  // namespace hfuse::explore
