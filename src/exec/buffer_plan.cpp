#include "exec/buffer_plan.h"

#include "hfuse/error.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace hfuse::exec {

BufferPlan plan_buffers(const std::vector<BufferRequest> &requests, int64_t alignment) {
    auto aligned = [&](int64_t b) { return (b + alignment - 1) / alignment * alignment; };
    std::vector<size_t> order(requests.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
        return requests[a].first_use < requests[b].first_use;
    });
    BufferPlan plan;
    std::vector<size_t> placed;
    for (size_t i : order) {
        const BufferRequest &r = requests[i];
        if (r.last_use < r.first_use) fail("value '" + r.value + "' is read before it is written");
        const int64_t size = aligned(std::max<int64_t>(r.bytes, 1));
        // The live neighbours already placed, by offset; take the smallest gap between them that fits.
        std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) in bytes
        for (size_t j : placed) {
            const BufferRequest &o = requests[j];
            if (o.first_use <= r.last_use && r.first_use <= o.last_use) {
                int64_t begin = plan.offsets.at(o.value);
                busy.emplace_back(begin, begin + aligned(std::max<int64_t>(o.bytes, 1)));
            }
        }
        std::sort(busy.begin(), busy.end());
        int64_t best = -1, best_gap = std::numeric_limits<int64_t>::max(), cursor = 0;
        for (const auto &b : busy) {
            if (b.first - cursor >= size && b.first - cursor < best_gap) {
                best = cursor;
                best_gap = b.first - cursor;
            }
            cursor = std::max(cursor, b.second);
        }
        if (best < 0) best = cursor;  // past every live neighbour
        if (!plan.offsets.emplace(r.value, best).second) fail("value '" + r.value + "' is requested twice");
        plan.arena_bytes = std::max(plan.arena_bytes, best + size);
        placed.push_back(i);
    }
    return plan;
}

}  // namespace hfuse::exec
