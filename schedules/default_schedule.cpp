#include "schedules/default_schedule.h"

#include <algorithm>

namespace hfuse::schedules {
namespace {

using Halide::RVar;
using Halide::Stage;
using Halide::TailStrategy;
using Halide::Var;
using Halide::VarOrRVar;

// Below this many output elements a parallel loop costs more than it saves.
constexpr int64_t kMinParallelElements = 4096;
// Elements each parallel task should at least compute.
constexpr int64_t kMinTaskElements = 8192;

void schedule_definition(Stage s, const std::vector<Var> &pure, const std::vector<RVar> &rvars, const Shape &shape,
                         int vector_width) {
    const int rank = static_cast<int>(pure.size());
    if (rank == 0) return;
    std::vector<VarOrRVar> order;  // innermost first
    Var inner = pure[0];
    bool vectorize = shape[rank - 1] >= vector_width;
    Var xo(inner.name() + "_o"), xi(inner.name() + "_i");
    if (vectorize) {
        s.split(inner, xo, xi, vector_width, TailStrategy::GuardWithIf).vectorize(xi);
        order.push_back(xi);
    } else {
        order.push_back(inner);
    }
    for (const RVar &r : rvars) order.push_back(r);
    if (vectorize) order.push_back(xo);
    for (int k = 1; k < rank; k++) order.push_back(pure[k]);
    if (order.size() > 1) s.reorder(order);

    if (num_elements(shape) < kMinParallelElements) return;
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
        std::min<int64_t>(outer_extent, std::max<int64_t>(1, kMinTaskElements / shape[rank - 1]));
    if (rows_per_task > 1) {
        Var task(outer.name() + "_task"), row(outer.name() + "_row");
        s.split(outer, task, row, static_cast<int>(rows_per_task), TailStrategy::GuardWithIf);
        outer = task;
    }
    s.parallel(outer);
}

}  // namespace

void schedule_root_stage(Halide::Func f, const Shape &shape, const Halide::Target &target) {
    f.compute_root();
    const int vw = target.natural_vector_size<float>();
    std::vector<Var> pure = f.args();
    schedule_definition(f, pure, {}, shape, vw);
    for (int i = 0; i < f.num_update_definitions(); i++) schedule_definition(f.update(i), pure, f.rvars(i), shape, vw);
}

void schedule_root_intermediate(Halide::Func f, const Halide::Target &target) {
    f.compute_root();
    if (f.dimensions() > 0 && f.num_update_definitions() == 0) {
        f.vectorize(f.args()[0], target.natural_vector_size<float>(), TailStrategy::GuardWithIf);
    }
}

}  // namespace hfuse::schedules
