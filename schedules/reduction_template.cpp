#include "schedules/reduction_template.h"

#include "hfuse/error.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <optional>

namespace hfuse::schedules {
namespace {

using Halide::Func;
using Halide::RVar;
using Halide::Stage;
using Halide::TailStrategy;
using Halide::Var;
using Halide::VarOrRVar;

// Reduced elements below which a group runs serially, and at least per parallel task.
constexpr int64_t kParallelWork = 16384;
constexpr int64_t kTaskWork = 8192;

// Rows of T (the iterations of its row loop) and the elements each row reduces.
struct Rows {
    int64_t rows, work_per_row;
};

Rows rows_of(const ReductionGroupShape &s) {
    const int64_t total = num_elements(s.output);
    if (s.global_pool) return {total, s.reduced};
    const int rank = static_cast<int>(s.output.size());
    const int64_t x = s.output[rank - 1];
    if (s.axis_arg == 0) return {total / x, x};
    const int64_t axis = s.output[rank - 1 - s.axis_arg];
    return {total / (x * axis), x * axis};
}

struct ReductionParams {
    int vw, per_task;
};

ReductionParams read_params(const ReductionGroupShape &s, const nlohmann::json &p, const Halide::Target &target) {
    if (p.value("template", "") != "reduction") {
        fail_field("schedule.template", "expected \"reduction\" for a reduction-led group");
    }
    check_param_keys(p, {"vector_width", "rows_per_task"});
    ReductionParams r;
    r.vw = vector_width_param(p, target, true);
    if (!p.contains("vector_width")) fail_field("schedule.vector_width", "missing (expected an integer)");
    r.per_task = param_int(p, "rows_per_task", 1, std::max<int64_t>(1, rows_of(s).rows));
    return r;
}

// Fuses `row_args` of `t` into one loop, cut into parallel tasks of `per_task` rows when that leaves
// more than one; returns the loop a row's reductions are computed at (none: there is one row).
std::optional<Var> row_loop(Func t, const std::vector<Var> &row_args, int64_t rows, int per_task) {
    if (row_args.empty()) return std::nullopt;
    Var loop = row_args[0];
    for (size_t i = 1; i < row_args.size(); i++) {
        Var fused(loop.name() + "_" + row_args[i].name());
        t.fuse(loop, row_args[i], fused);
        loop = fused;
    }
    if (per_task < rows) {
        Var task("task"), row("row");
        t.split(loop, task, row, per_task, TailStrategy::GuardWithIf).parallel(task);
        loop = row;
    }
    return loop;
}

void compute_at_row(Func f, Func t, const std::optional<Var> &loop) {
    if (loop) {
        f.compute_at(t, *loop);
    } else {
        f.compute_root();
    }
}

// A reduction over a contiguous RVar `r` of stage 0 of `f`: vw partial results (rfactor), each
// accumulating every vw-th element, then combined across lanes.
void reduce_in_lanes(Func f, RVar r, Func t, const std::optional<Var> &loop, int vw) {
    RVar ro("ro"), ri("ri");
    Var u("u");
    f.update().split(r, ro, ri, vw, TailStrategy::GuardWithIf);
    Func lanes = f.update().rfactor(ri, u);
    std::vector<Var> storage = {u};
    std::vector<Var> fa = f.args();
    storage.insert(storage.end(), fa.begin(), fa.end());
    compute_at_row(lanes, t, loop);
    if (storage.size() > 1) lanes.reorder_storage(storage);  // u innermost: one vector per row
    lanes.vectorize(u);
    std::vector<VarOrRVar> order = {u, ro};
    order.insert(order.end(), fa.begin(), fa.end());
    lanes.update().reorder(order).vectorize(u);
    std::vector<VarOrRVar> sum_order = {ri};
    sum_order.insert(sum_order.end(), fa.begin(), fa.end());
    f.update().reorder(sum_order).atomic().vectorize(ri);
}

void vectorize_x(Func t, Var x, int64_t extent, int vw) {
    if (vw <= 1 || extent <= 1) return;
    if (extent >= vw) {
        t.vectorize(x, vw);  // the last vector of a row shifts inwards
    } else {
        t.vectorize(x);
    }
}

}  // namespace

nlohmann::json reduction_default_params(const ReductionGroupShape &s, const Halide::Target &target) {
    int vw = target_traits(target).vector_width;
    // Lanes along the reduced axis (contiguous case) or across the row: no wider than needed.
    const int64_t lanes_over = s.global_pool || s.axis_arg == 0 ? s.reduced : s.output.back();
    while (vw > 1 && vw / 2 >= lanes_over) vw /= 2;
    const Rows r = rows_of(s);
    const int64_t per_task = r.rows * r.work_per_row < kParallelWork
                                 ? r.rows
                                 : std::clamp<int64_t>(kTaskWork / std::max<int64_t>(1, r.work_per_row), 1, r.rows);
    return {{"template", "reduction"}, {"vector_width", vw}, {"rows_per_task", std::max<int64_t>(1, per_task)}};
}

void schedule_softmax(Func t, const std::vector<Func> &stages, const ReductionGroupShape &s,
                      const nlohmann::json &params, const Halide::Target &target) {
    const ReductionParams p = read_params(s, params, target);
    const std::vector<Var> a = t.args();
    const int rank = static_cast<int>(a.size()), pos = s.axis_arg;
    auto extent = [&](int arg) { return s.output[rank - 1 - arg]; };
    std::vector<Var> row_args;
    if (pos == 0) {
        row_args.assign(a.begin() + 1, a.end());
    } else {
        // x innermost, then the axis: a row of T is a plane (x, axis), its reductions vectors along x.
        std::vector<VarOrRVar> order = {a[0], a[pos]};
        for (int i = 1; i < rank; i++) {
            if (i != pos) {
                order.push_back(a[i]);
                row_args.push_back(a[i]);
            }
        }
        t.reorder(order);
    }
    vectorize_x(t, a[0], extent(0), p.vw);
    const std::optional<Var> loop = row_loop(t, row_args, rows_of(s).rows, p.per_task);
    for (Func st : stages) {
        compute_at_row(st, t, loop);
        if (p.vw <= 1) continue;
        RVar r = st.rvars(0)[0];
        if (pos == 0) {
            reduce_in_lanes(st, r, t, loop, p.vw);
        } else {
            std::vector<Var> sa = st.args();  // (x, the row args)
            std::vector<VarOrRVar> order = {sa[0], r};
            order.insert(order.end(), sa.begin() + 1, sa.end());
            st.update().reorder(order);
            // Only whole vectors: Halide 14 miscompiles a guarded tail of these updates when the
            // vector loop stays a loop (every iteration wrote the first vector; found by the
            // property test, tests/data/property_failures/softmax_tail).
            int vw = p.vw;
            while (vw > 1 && extent(0) % vw != 0) vw /= 2;
            if (vw > 1) {
                st.vectorize(sa[0], vw);
                st.update().vectorize(sa[0], vw);
            }
        }
    }
}

void schedule_global_pool(Func t, Func pool, const ReductionGroupShape &s, const nlohmann::json &params,
                          const Halide::Target &target) {
    const ReductionParams p = read_params(s, params, target);
    // T is 1 x 1 per channel: every dim fused into one loop over channels (and batch).
    const std::optional<Var> loop = row_loop(t, t.args(), rows_of(s).rows, p.per_task);
    compute_at_row(pool, t, loop);
    if (p.vw <= 1) return;
    // The plane is contiguous: its dims fused into one reduction loop of H*W elements.
    std::vector<RVar> rv = pool.rvars(0);
    RVar plane = rv[0];
    for (size_t i = 1; i < rv.size(); i++) {
        RVar fused("plane" + std::to_string(i));
        pool.update(0).fuse(plane, rv[i], fused);
        plane = fused;
    }
    reduce_in_lanes(pool, plane, t, loop, p.vw);
    // An average's division: one scalar per channel.
    for (int i = 1; i < pool.num_update_definitions(); i++) pool.update(i).unscheduled();
}

}  // namespace hfuse::schedules
