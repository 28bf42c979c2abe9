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
    const TargetTraits tt = target_traits(target);
    int vw = tt.vector_width;
    while (vw > 1 && vw > width) vw /= 2;
    // With AVX-512, a stride-1 pool's vectors halved (not below 8) while they do not divide the row, as
    // conv_dw's: a row's last vector shifts inwards and computes again what the one before it did, up to
    // 15 of 16 lanes. Zen 5, 2 threads, in the networks (compare_builds, 4 rounds), 16 lanes against 8:
    // Inception-V3's seven Pad + 3x3 AveragePool at 35x35 and 17x17, summed, 0.904 -> 0.661 ms;
    // GoogLeNet's two 3x3 stride-1 MaxPool at 28x28 0.150 -> 0.128. Strided pools gained nothing
    // (SqueezeNet's 3x3 stride-2 MaxPool to 27 wide 0.088 -> 0.087 and 0.043 -> 0.051 ms,
    // Inception-V3's to 17 wide 0.056 -> 0.059): their vectors read every other input column anyway.
    while (tt.avx512 && s.stride_product == 1 && vw > 8 && width % vw != 0) vw /= 2;
    // Tasks of about kTaskElements outputs that do not cross a plane where that is near: whole planes
    // where they are small, else bands of rows dividing the plane. A task's windows then read its own
    // channels' rows only (a task's window input, computed per task, covers the planes it touches).
    const int64_t plane_rows = num_elements(s.output) / (s.output[0] * s.output[1] * width);
    const int64_t target_rows = std::max<int64_t>(1, kTaskElements / width);
    int64_t per_task = rows;
    if (num_elements(s.output) >= kParallelElements) {
        if (plane_rows <= target_rows) {
            // Blocks of channels dividing them where one is near: a last block of fewer channels is a
            // second copy of the loops (768 channels at 17x17, 2 threads: 28 a task 0.129 ms, 24 0.070).
            const int64_t channels = target_rows / plane_rows, whole = largest_divisor_at_most(s.output[1], channels);
            per_task = plane_rows * (2 * whole >= channels ? whole : channels);
        } else {
            const int64_t band = largest_divisor_at_most(plane_rows, target_rows);
            per_task = 2 * band >= target_rows ? band : target_rows;
        }
        per_task = std::clamp<int64_t>(per_task, 1, rows);
    }
    nlohmann::json p = {{"template", "pool"},
                        {"vector_width", vw},
                        {"rows_per_task", per_task},
                        {"unroll_window", s.window_taps <= 16 ? 1 : 0}};
    // A padded or computed window input, made once per task where the windows test bounds or read a
    // value more than once (Pad + 3x3 AveragePool over 768 channels at 17x17, AVX-512, 2 threads:
    // 1.07 ms inlined, ONNX Runtime 0.08 ms).
    if (s.window_input && (s.padded || s.window_taps > s.stride_product)) p["window_input"] = "task";
    return p;
}

void schedule_pool(Func tile, Func pool, Func window_input, const PoolGroupShape &s, const nlohmann::json &p,
                   const Halide::Target &target) {
    check_param_keys(p, {"vector_width", "rows_per_task", "unroll_window", "window_input"});
    const int64_t width = s.output.back(), rows = num_elements(s.output) / width;
    const int vw = param_int(p, "vector_width", 1, std::min<int64_t>(64, width));
    require_power_of_two("vector_width", vw);  // tests/data/property_failures/pool_vector_width_17
    const int per_task = param_int(p, "rows_per_task", 1, rows);
    const bool unroll = param_int(p, "unroll_window", 0, 1) == 1;
    const bool input_per_task =
        p.contains("window_input") && param_choice(p, "window_input", {"inline", "task"}) == "task";
    if (input_per_task && !window_input.defined()) {
        fail_field("schedule.window_input",
                   "the pool's windows read the group's input as it is: nothing to compute per task");
    }

    // T's args: x, the other spatial dims (fused into rows of a plane), channels, batch.
    std::vector<Var> a = tile.args();
    const size_t rank = a.size();
    const int64_t plane_rows = rows / (s.output[0] * s.output[1]);
    Var xo("xo"), xi("xi"), task("task"), band("band"), row("row"), cto("cto"), cti("cti");
    Var loop = a[0];
    if (vw > 1) {
        tile.split(a[0], xo, xi, vw).vectorize(xi);  // edge vectors shift inwards
        loop = xo;
    }
    Var y = a[1];
    for (size_t i = 2; i + 2 < rank; i++) {
        Var fused(y.name() + "_" + a[i].name());
        tile.fuse(y, a[i], fused);
        y = fused;
    }
    const Var c = a[rank - 2], n = a[rank - 1];
    // Tasks: bands of a plane's rows, or whole planes of a block of channels; the batch fused outside
    // them. (Never a fused loop of channels x rows cut into tasks: the bounds Halide infers from such a
    // task's range cover every channel, and a window input computed per task would be all of them.)
    const bool parallel = per_task < rows;
    if (parallel && per_task < plane_rows) {
        tile.split(y, band, row, per_task, TailStrategy::GuardWithIf).fuse(band, c, task).fuse(task, n, task);
    } else if (parallel) {
        const int channels = static_cast<int>(per_task / plane_rows);
        tile.split(c, cto, cti, channels, TailStrategy::GuardWithIf).fuse(cto, n, task);
    }
    if (parallel) tile.parallel(task);
    if (input_per_task) {
        // The values the task's windows read, dense, x in vector lanes (its tails guarded: the buffer
        // is as wide as the windows reach, not a whole number of vectors).
        Func in = window_input.in(pool);
        if (parallel) {
            in.compute_at(tile, task);
        } else {
            in.compute_root();
        }
        if (vw > 1) in.vectorize(in.args()[0], vw, TailStrategy::GuardWithIf);
    }

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
