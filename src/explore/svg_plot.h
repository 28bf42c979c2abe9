// The exploration's plot, as a standalone SVG (no dependency): each candidate's median time against
// its number of groups, coloured by schedule source (circles: templates, squares: an autoscheduler
// per group, diamonds: the whole model as one pipeline), baselines ringed and labelled, the best as a
// red star, failed and timed-out candidates as crosses in a strip at the top. Hovering a point shows
// its plan and schedule (<title>).
#pragma once

#include "explore/candidate.h"

#include <string>
#include <vector>

namespace hfuse::explore {

std::string svg_plot(const std::vector<Evaluation> &rows, const std::string &best_key, const std::string &title);

}  // namespace hfuse::explore
