#include "planner/post_dominators.h"

#include <stdexcept>

namespace hfuse::planner {

std::vector<int> immediate_post_dominators(const std::vector<std::vector<int>> &succ) {
    const int n = static_cast<int>(succ.size());
    const int sink = n;
    std::vector<int> ipdom(n + 1, sink), depth(n + 1, 0);
    // The meet of two vertices in the post-dominator tree: walk the deeper one up until they meet.
    auto lca = [&](int a, int b) {
        while (a != b) {
            if (depth[a] < depth[b]) {
                b = ipdom[b];
            } else {
                a = ipdom[a];
            }
        }
        return a;
    };
    // Reverse topological order: every successor's tree position is known before its producers'.
    for (int v = n - 1; v >= 0; v--) {
        int dom = -1;
        for (int s : succ[v]) {
            // The walk above relies on it: a successor's tree position must already be known.
            if (s <= v) throw std::logic_error("immediate_post_dominators: vertices are not in topological order");
            dom = dom < 0 ? s : lca(dom, s);
        }
        ipdom[v] = dom < 0 ? sink : dom;
        depth[v] = depth[ipdom[v]] + 1;
    }
    ipdom.pop_back();
    return ipdom;
}

}  // namespace hfuse::planner
