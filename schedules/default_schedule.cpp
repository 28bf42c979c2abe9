#include "schedules/default_schedule.h"

#include "schedules/schedule_params.h"

#include <algorithm>

namespace hfuse::schedules {
namespace {

using Halide::RVar;
using Halide::Stage;
using Halide::TailStrategy;
using Halide::Var;
using Halide::VarOrRVar;

void schedule_definition(Stage s, const std::vector<Var> &pure, const std::vector<RVar> &rvars, const Shape &shape,
                         const RootScheduleParams &p) {
    const int vector_width = p.vector_width;
    const int rank = static_cast<int>(pure.size());
    if (rank == 0) return;
    std::vector<VarOrRVar> order;  // innermost first
    Var inner = pure[0];
    bool vectorize = vector_width > 1 && shape[rank - 1] >= vector_width;
    Var xo(inner.name() + "_o"), xi(inner.name() + "_i");
    if (vectorize) {
        s.split(inner, xo, xi, vector_width, TailStrategy::GuardWithIf).vectorize(xi);
        order.push_back(xi);
    }
    // An unvectorized x goes outside the reduction's loops, as in Halide's default order: with x inside
    // them, Halide 14 miscompiled a depthwise 3x3 conv on a 2x2 input (tests/data/property_failures/
    // dwconv_2x2_scalar).
    for (const RVar &r : rvars) order.push_back(r);
    order.push_back(vectorize ? xo : inner);
    for (int k = 1; k < rank; k++) order.push_back(pure[k]);
    if (order.size() > 1) s.reorder(order);

    if (num_elements(shape) < p.parallel_threshold) return;
    if (rank == 1) {
        if (vectorize) s.parallel(xo);
        return;
    }
    // Fuse every outer pure dim into one parallel loop: batch-1 models have N = 1, so parallelism has
    // to come from channels and rows together. Each task then takes enough rows to amortise its
    // scheduling cost (a 14-wide row per task made a 512x14x14 Relu 3x slower).
    Var outer = pure[rank - 1];
    int64_t outer_extent = shape[0];
    for (int k = rank - 2; k >= 1; k--) {
        Var fused(outer.name() + "_" + pure[k].name());
        s.fuse(outer, pure[k], fused);
        outer = fused;
        outer_extent *= shape[rank - 1 - k];
    }
    const int64_t rows_per_task =
        std::min<int64_t>(outer_extent, std::max<int64_t>(1, p.task_elements / shape[rank - 1]));
    if (rows_per_task > 1) {
        Var task(outer.name() + "_task"), row(outer.name() + "_row");
        s.split(outer, task, row, static_cast<int>(rows_per_task), TailStrategy::GuardWithIf);
        outer = task;
    }
    s.parallel(outer);
}

}  // namespace

RootScheduleParams root_schedule_defaults(const Halide::Target &target) {
    RootScheduleParams p;
    p.vector_width = target_traits(target).vector_width;
    return p;
}

nlohmann::json simple_params(const RootScheduleParams &p) {
    return {{"template", "simple"},
            {"vector_width", p.vector_width},
            {"parallel_threshold", p.parallel_threshold},
            {"task_elements", p.task_elements}};
}

RootScheduleParams read_simple_params(const nlohmann::json &params, const Halide::Target &target) {
    check_param_keys(params, {"vector_width", "parallel_threshold", "task_elements"});
    RootScheduleParams p = root_schedule_defaults(target);
    p.vector_width = vector_width_param(params, target, true);
    p.parallel_threshold = param_int_or(params, "parallel_threshold", 0, INT32_MAX, p.parallel_threshold);
    p.task_elements = param_int_or(params, "task_elements", 1, INT32_MAX, p.task_elements);
    return p;
}

void schedule_root_stage(Halide::Func f, const Shape &shape, const RootScheduleParams &p) {
    f.compute_root();
    std::vector<Var> pure = f.args();
    schedule_definition(f, pure, {}, shape, p);
    for (int i = 0; i < f.num_update_definitions(); i++) schedule_definition(f.update(i), pure, f.rvars(i), shape, p);
}

void schedule_root_intermediate(Halide::Func f, const RootScheduleParams &p) {
    f.compute_root();
    if (f.dimensions() > 0 && f.num_update_definitions() == 0 && p.vector_width > 1) {
        f.vectorize(f.args()[0], p.vector_width, TailStrategy::GuardWithIf);
    }
}

}  // namespace hfuse::schedules
