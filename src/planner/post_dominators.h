// Immediate post-dominators of a DAG whose vertices 0..n-1 are in topological order; vertex n is the
// virtual sink every exit reaches. ipdom[v] == n means nothing but the sink post-dominates v.
//
//   succ = {{1, 2}, {3}, {3}, {4}}  (4 = sink)  ->  ipdom = {3, 3, 3, 4}
#pragma once

#include <vector>

namespace hfuse::planner {

std::vector<int> immediate_post_dominators(const std::vector<std::vector<int>> &successors);

}  // namespace hfuse::planner
