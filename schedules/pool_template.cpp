#include "schedules/pool_template.h"

#include "hfuse/error.h"
#include "schedules/schedule_params.h"

#include <algorithm>

namespace hfuse::schedules {
namespace {

using Halide::Func;
using Halide::RVar;
using Halide::TailStrategy;
using Halide::Var;

// As the simple schedule: below this many output elements run serially; otherwise tasks of at least
// this many elements.
constexpr int64_t kParallelElements = 4096;
constexpr int64_t kTaskElements = 8192;

}  // namespace

nlohmann::json pool_default_params(const PoolGroupShape &s, const Halide::Target &target) {
    const int64_t width = s.output.back(), rows = num_elements(s.output) / width;
    int vw = target_traits(target).vector_width;
    while (vw > 1 && vw > width) vw /= 2;
    const int64_t per_task =
        num_elements(s.output) < kParallelElements ? rows : std::clamp<int64_t>(kTaskElements / width, 1, rows);
    return {{"template", "pool"},
            {"vector_width", vw},
            {"rows_per_task", per_task},
            {"unroll_window", s.window_taps <= 16 ? 1 : 0}};
}

void schedule_pool(Func tile, Func pool, const PoolGroupShape &s, const nlohmann::json &p,
                   const Halide::Target &target) {
    check_param_keys(p, {"vector_width", "rows_per_task", "unroll_window"});
    const int64_t width = s.output.back(), rows = num_elements(s.output) / width;
    const int vw = param_int(p, "vector_width", 1, std::min<int64_t>(64, width));
    const int per_task = param_int(p, "rows_per_task", 1, rows);
    const bool unroll = param_int(p, "unroll_window", 0, 1) == 1;

    std::vector<Var> a = tile.args();
    Var xo("xo"), xi("xi"), task("task"), row("row");
    Var loop = a[0];
    if (vw > 1) {
        tile.split(a[0], xo, xi, vw).vectorize(xi);  // edge vectors shift inwards
        loop = xo;
    }
    // Channels x rows (x batch) as one loop, cut into tasks.
    Var rows_var = a[1];
    for (size_t i = 2; i < a.size(); i++) {
        Var fused(rows_var.name() + "_" + a[i].name());
        tile.fuse(rows_var, a[i], fused);
        rows_var = fused;
    }
    if (per_task < rows) tile.split(rows_var, task, row, per_task, TailStrategy::GuardWithIf).parallel(task);

    std::vector<Var> pa = pool.args();
    pool.compute_at(tile, loop);
    if (vw > 1) pool.vectorize(pa[0], vw);
    for (int i = 0; i < pool.num_update_definitions(); i++) {
        Halide::Stage u = pool.update(i);
        // x innermost (one vector), the window loops around it.
        std::vector<Halide::VarOrRVar> order = {pa[0]};
        for (const RVar &r : pool.rvars(i)) order.push_back(r);
        for (size_t k = 1; k < pa.size(); k++) order.push_back(pa[k]);
        u.reorder(order);
        if (vw > 1) u.vectorize(pa[0], vw);
        if (unroll) {
            for (const RVar &r : pool.rvars(i)) u.unroll(r);
        }
    }
}

}  // namespace hfuse::schedules
