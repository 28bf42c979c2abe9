#include "schedules/gemm_template.h"

#include "hfuse/error.h"
#include "schedules/schedule_params.h"

#include <algorithm>

namespace hfuse::schedules {
namespace {

using Halide::Func;
using Halide::RVar;
using Halide::Stage;
using Halide::TailStrategy;
using Halide::Var;
using Halide::VarOrRVar;

// Below this many FLOPs a group runs serially: waking the thread pool costs about a microsecond on
// an idle 2-core Zen 3, as much as the RNN cell's 128x128 product computes (33 KFLOP, 0.8 us). There,
// the LSTM cell's two 512x128 products (262 KFLOP) took 3.0 us serial, 2.4 us in 2 tasks; fc 784->256
// (401 KFLOP) 10.8 us serial, 6.1-6.9 us in 2 tasks, 5.9-6.3 us in 4. On 2 Zen 5 cores in a VM, where
// a fork and join costs 3.5 us, the LSTM cell took 6.1 us serial against 10.0 in 2 tasks (medians),
// fc 784->256 8.5 serial against 7.4 in 3.
constexpr double kParallelFlops = 3e5;
// FLOPs per parallel task (at least two tasks once parallel).
constexpr double kTaskFlops = 1.28e5;
// gemm_nv's reduction blocking: a block of B this large stays in a first-level cache (32 KB on Zen
// 3 and 4); panels of A and B of 7/8 of a second-level cache (Zen 4's and 5's 1 MB) or more are
// blocked. The bound lies between the two panels measured (below): 768 KB gained nothing, 1 MB did.
constexpr int64_t kL1BlockBytes = 32 << 10;
constexpr int64_t kL2PanelBytes = (1 << 20) / 8 * 7;
// Register tiles above this many accumulators spill and take long to compile.
constexpr int kMaxAccumulators = 64;

// The product's rows: its M dim (Halide arg 1), or where M is 1 the innermost batch dim (arg 2), as
// a seq-first transformer's [S, 1, D] x [D, N] is S rows of one batch each: tiles of ty rows then
// share each vector of B (one row a tile streamed all of B once per row).
struct Extents {
    int rank;
    int row_arg;          // the Halide arg tiled by tile_y (rank >= 2)
    int64_t n, m, batch;  // m: the rows' extent; batch: every other dim's but n's
};

Extents extents_of(const Shape &s) {
    const int rank = static_cast<int>(s.size());
    Extents e{rank, 1, s.back(), rank >= 2 ? s[rank - 2] : 1, 1};
    if (rank >= 3 && s[rank - 2] == 1) {
        e.row_arg = 2;
        e.m = s[rank - 3];
    }
    for (int arg = 1; arg < rank; arg++) {
        if (arg != e.row_arg) e.batch *= s[rank - 1 - arg];
    }
    return e;
}

struct Params {
    bool dot;
    int vw, tx, ty, unroll_k, tasks;
    int k_block = 0;  // gemm_nv: the product per panel of columns, its reduction in blocks of k_block
    bool rows_inner;  // the tiles of one panel of columns, every row, before the next panel
};

Params read_params(const GemmGroupShape &s, const nlohmann::json &p, const Halide::Target &target) {
    const Extents e = extents_of(s.output);
    const std::string tmpl = p.value("template", "");
    Params r;
    r.dot = tmpl == "gemm_dot";
    if (!r.dot && tmpl != "gemm_nv") {
        fail_field("schedule.template", "unknown gemm template '" + tmpl + "' (expected gemm_nv or gemm_dot)");
    }
    check_param_keys(p, {"vector_width", r.dot ? "tile_x" : "tile_x_vectors", "tile_y", "unroll_k", "parallel_tasks",
                         "compute", "tile_order", "k_block"});
    r.rows_inner =
        p.contains("tile_order") && param_choice(p, "tile_order", {"rows_inner", "columns_inner"}) == "rows_inner";
    r.vw = vector_width_param(p, target, true);
    if (r.dot) {
        r.tx = param_int(p, "tile_x", 1, e.n);
    } else {
        if (r.vw > e.n) fail_field("schedule.vector_width", "exceeds the output width " + std::to_string(e.n));
        r.tx = r.vw * param_int(p, "tile_x_vectors", 1, e.n / r.vw);
    }
    r.ty = param_int(p, "tile_y", 1, e.m);
    const int accumulators = (r.dot ? r.tx : r.tx / r.vw) * r.ty;
    if (accumulators > kMaxAccumulators) {
        fail_field("schedule.tile_y", "a register tile of " + std::to_string(accumulators) + " accumulators exceeds " +
                                          std::to_string(kMaxAccumulators));
    }
    r.unroll_k = param_int(p, "unroll_k", 1, std::max<int64_t>(1, r.dot ? ceil_div(s.k, r.vw) : s.k));
    r.tasks = param_int(p, "parallel_tasks", 1, 1 << 16);
    if (p.contains("k_block")) {
        if (r.dot) fail_field("schedule.k_block", "only gemm_nv blocks its reduction");
        if (extents_of(s.output).rank < 2) fail_field("schedule.k_block", "needs a product with rows");
        r.k_block = param_int(p, "k_block", 1, std::max<int64_t>(1, s.k));
    }
    return r;
}

// The tile's columns `xi`: whole vectors unrolled, or one vector narrower than the target's.
void vectorize_columns(Func t, Var xi, const Params &p) {
    if (p.vw > 1 && p.tx >= p.vw) {
        t.vectorize(xi, p.vw).unroll(xi);
    } else if (p.tx > 1) {
        t.vectorize(xi);
    }
}

// With tasks > 1, `loop` (over `units` tiles or panels) cut into that many parallel tasks; returns
// the loop inside a task (named `unit`), or `loop`.
Var split_into_tasks(Func t, Var loop, int64_t units, int tasks, const char *unit) {
    if (tasks <= 1 || units <= 1) return loop;
    Var task("task"), in(unit);
    t.split(loop, task, in, static_cast<int>(ceil_div(units, tasks)), TailStrategy::GuardWithIf).parallel(task);
    return in;
}

// Splits `t` into tiles of tx x ty outputs (edge tiles shift inwards), vectorizes and unrolls the
// tile, fuses the tile loops into one and, with tasks > 1, cuts it into parallel tasks. Returns the
// loop the products are computed at.
Var tile_loops(Func t, const Extents &e, const Params &p) {
    std::vector<Var> a = t.args();
    Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
    t.split(a[0], xo, xi, p.tx);
    std::vector<VarOrRVar> order = {xi};
    std::vector<Var> outer = {xo};
    if (e.rank >= 2) {
        t.split(a[e.row_arg], yo, yi, p.ty);
        order.push_back(yi);
        outer.push_back(yo);
    }
    for (size_t i = 1; i < a.size(); i++) {
        if (e.rank < 2 || static_cast<int>(i) != e.row_arg) outer.push_back(a[i]);
    }
    if (p.rows_inner && e.rank >= 2) std::swap(outer[0], outer[1]);  // yo inside xo
    order.insert(order.end(), outer.begin(), outer.end());
    t.reorder(order);
    vectorize_columns(t, xi, p);
    if (e.rank >= 2) t.unroll(yi);
    Var loop = outer[0];
    for (size_t i = 1; i < outer.size(); i++) {
        Var fused(loop.name() + "_" + outer[i].name());
        t.fuse(loop, outer[i], fused);
        loop = fused;
    }
    return split_into_tasks(t, loop, ceil_div(e.n, p.tx) * ceil_div(e.m, p.ty) * e.batch, p.tasks, "tile");
}

// x vectorized: vectors of B times broadcasts of A, the tile's accumulators in registers.
// Appends to `order` the reduction loop `k` (split into outer, inner by unroll_k when unrolled, the
// inner loop first) and then the output's outer dimensions (a[2..]).
void push_reduction_loops(Stage s, RVar k, RVar outer, RVar inner, int unroll_k, const std::vector<Var> &a,
                          const Extents &e, std::vector<VarOrRVar> &order) {
    if (unroll_k > 1) {
        s.split(k, outer, inner, unroll_k, TailStrategy::GuardWithIf);
        order.push_back(inner);
        order.push_back(outer);
    } else {
        order.push_back(k);
    }
    for (size_t i = 1; i < a.size(); i++) {
        if (static_cast<int>(i) != e.row_arg) order.push_back(a[i]);
    }
}

void schedule_nv(Func t, Var loop, Func g, const Extents &e, const Params &p) {
    std::vector<Var> a = g.args();
    g.compute_at(t, loop).vectorize(a[0], p.vw).unroll(a[0]);
    if (e.rank >= 2) g.unroll(a[e.row_arg]);
    Stage u = g.update();
    RVar k = g.rvars(0)[0], ko("ko"), ki("ki");
    std::vector<VarOrRVar> order = {a[0]};
    if (e.rank >= 2) order.push_back(a[e.row_arg]);
    push_reduction_loops(u, k, ko, ki, p.unroll_k, a, e, order);
    u.reorder(order).vectorize(a[0], p.vw).unroll(a[0]);
    if (e.rank >= 2) u.unroll(a[e.row_arg]);
    if (p.unroll_k > 1) u.unroll(ki);
}

// gemm_nv with a blocked reduction: the output in panels of tx columns (every row, one batch), each a
// task's unit; the product computed per panel, its reduction in blocks of k_block outermost, so a
// block of B (k_block x tx, packed contiguous) stays in the core's first cache while every row tile
// of the panel takes it, and a block of A (rows x k_block) in the second. The accumulators go to
// memory once a block. Returns the panel loop.
Var panel_loops(Func t, const Extents &e, const Params &p) {
    std::vector<Var> a = t.args();
    Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
    t.split(a[0], xo, xi, p.tx).split(a[e.row_arg], yo, yi, p.ty);
    std::vector<VarOrRVar> order = {xi, yi, yo};
    Var panel = xo;
    for (size_t i = 1; i < a.size(); i++) {
        if (static_cast<int>(i) != e.row_arg) order.push_back(a[i]);
    }
    order.push_back(xo);
    t.reorder(order);
    vectorize_columns(t, xi, p);
    t.unroll(yi);
    for (size_t i = 1; i < a.size(); i++) {
        if (static_cast<int>(i) == e.row_arg) continue;
        Var fused(panel.name() + "_" + a[i].name());
        t.fuse(a[i], panel, fused);  // the batch dims inside the column panels, fused into one loop
        panel = fused;
    }
    return split_into_tasks(t, panel, ceil_div(e.n, p.tx) * e.batch, p.tasks, "panel");
}

void schedule_nv_blocked(Func t, Var panel, Func g, const Extents &e, const Params &p) {
    std::vector<Var> a = g.args();
    g.compute_at(t, panel).vectorize(a[0], p.vw).unroll(a[0]);
    Stage u = g.update();
    RVar k = g.rvars(0)[0], ko("ko"), ki("ki");
    Var yo("gyo"), yi("gyi");
    // Guarded: a shifted tile would accumulate its overlap twice.
    u.split(a[e.row_arg], yo, yi, p.ty, TailStrategy::GuardWithIf);
    u.split(k, ko, ki, p.k_block, TailStrategy::GuardWithIf);
    std::vector<VarOrRVar> order = {a[0], yi, ki, yo, ko};
    for (size_t i = 1; i < a.size(); i++) {
        if (static_cast<int>(i) != e.row_arg) order.push_back(a[i]);
    }
    u.reorder(order).vectorize(a[0], p.vw).unroll(a[0]).unroll(yi);
}

// k vectorized: vw partial sums per output (rfactor), added across lanes once per tile.
void schedule_dot(Func t, Var loop, Func g, const Extents &e, const Params &p) {
    std::vector<Var> a = g.args();
    RVar k = g.rvars(0)[0], ko("ko"), ki("ki"), kou("kou"), koi("koi");
    Var u("u");
    g.update().split(k, ko, ki, p.vw, TailStrategy::GuardWithIf);
    Func lanes = g.update().rfactor(ki, u);  // lanes(x, y, ..., u): partial sums over k = u mod vw
    std::vector<Var> storage = {u};
    storage.insert(storage.end(), a.begin(), a.end());
    lanes.compute_at(t, loop).reorder_storage(storage).vectorize(u).unroll(a[0]);
    if (e.rank >= 2) lanes.unroll(a[1]);
    Stage lu = lanes.update();
    std::vector<VarOrRVar> order = {u, a[0]};
    if (e.rank >= 2) order.push_back(a[e.row_arg]);
    push_reduction_loops(lu, ko, kou, koi, p.unroll_k, a, e, order);
    lu.reorder(order).vectorize(u).unroll(a[0]);
    if (e.rank >= 2) lu.unroll(a[e.row_arg]);
    if (p.unroll_k > 1) lu.unroll(koi);

    g.compute_at(t, loop);
    if (p.tx % p.vw == 0) {
        g.vectorize(a[0], p.vw).unroll(a[0]);
    } else if (p.tx < p.vw) {
        g.vectorize(a[0]);
    } else {
        g.unroll(a[0]);
    }
    if (e.rank >= 2) g.unroll(a[e.row_arg]);
    std::vector<VarOrRVar> sum_order = {ki, a[0]};
    if (e.rank >= 2) sum_order.push_back(a[e.row_arg]);
    for (size_t i = 1; i < a.size(); i++) {
        if (static_cast<int>(i) != e.row_arg) sum_order.push_back(a[i]);
    }
    Stage su = g.update();
    su.reorder(sum_order).atomic().vectorize(ki).unroll(a[0]);
    if (e.rank >= 2) su.unroll(a[e.row_arg]);
}

}  // namespace

nlohmann::json gemm_default_params(const GemmGroupShape &s, const Halide::Target &target) {
    const TargetTraits tt = target_traits(target);
    const Extents e = extents_of(s.output);
    const int vw = tt.vector_width, regs = tt.vector_registers;
    const double flops = 2.0 * static_cast<double>(num_elements(s.output)) * s.k * s.products;
    nlohmann::json p;
    int64_t tx, ty;
    // B contiguous along x but narrower than a vector: dot products (B gathered, but there is little of it).
    const bool dot = s.k_contiguous || e.n < vw;
    if (dot) {
        // Accumulators tx * ty, ty vectors of A and one of B in the registers: batch 1 takes one
        // vector's worth of columns (8 AVX2, 16 AVX-512), or all of them if they fit.
        ty = std::min<int64_t>(e.m, 3);
        if (ty == 1) {
            tx = e.n <= regs - 4 ? e.n : std::min<int64_t>(e.n, vw);
        } else {
            int64_t fit = 1;  // the largest power of two of columns that fits, at most a vector's worth
            while (fit * 2 <= std::min<int64_t>(vw, (regs - ty - 1) / ty)) fit *= 2;
            tx = std::min<int64_t>(e.n, fit);
        }
        p = {{"template", "gemm_dot"}, {"vector_width", vw}, {"tile_x", tx}, {"tile_y", ty}, {"unroll_k", 1}};
    } else {
        // The classic 6x16 AVX2 micro-kernel (12 accumulators, 2 vectors of B, 1 broadcast of A), 14x32
        // with AVX-512's 32 registers; batch 1 takes up to 8 vectors of one row.
        int64_t nx;
        if (e.m == 1) {
            nx = std::min<int64_t>({8, e.n / vw, regs - 4});
            ty = 1;
        } else {
            nx = std::min<int64_t>(2, e.n / vw);
            // As many rows as the registers hold, then balanced over the row tiles that takes, so the
            // last tile is not mostly empty: 64 rows in 5 tiles of 13, not 4 of 14 and one of 8. A
            // transformer encoder's products (64 tokens, AVX-512, 2 threads): 1.08-1.10x the encoder.
            const int64_t most = std::min<int64_t>(e.m, (regs - 4) / nx);
            ty = ceil_div(e.m, ceil_div(e.m, most));
        }
        tx = nx * vw;
        p = {{"template", "gemm_nv"}, {"vector_width", vw}, {"tile_x_vectors", nx}, {"tile_y", ty}, {"unroll_k", 1}};
        // Where B (k x n) is the larger operand, each panel of its columns goes through every row tile
        // before the next: B streams in once and A's rows (the smaller) come again from the caches;
        // columns inner streamed all of B once per row tile. A transformer's feed-forward 2048 -> 512
        // on 64 rows, AVX-512, 2 threads: B 4 MB, A 512 KB.
        if (ceil_div(e.m, ty) > 1 && e.n > e.m * e.batch) p["tile_order"] = "rows_inner";
        // Where a panel's rows of A and its columns of B (M x K and K x tx) outgrow the core's
        // second-level cache, the reduction is blocked: blocks of B of kL1BlockBytes (a first-level
        // cache's worth) through every row tile. AVX-512, 2 threads, interleaved: ViT-B/32's 3072 -> 768
        // feed-forward product (50 rows, a 1 MB panel) 1.03-1.33x (median 1.17x) in blocks of 256, 0.93x
        // of that in blocks of 128; the encoder's 2048 -> 512 (64 rows, 768 KB) 0.90-1.01x, its 512-deep
        // and ViT's 768-deep products unchanged.
        const int64_t k_block = std::max<int64_t>(vw, kL1BlockBytes / (4 * tx));
        if (e.m > 1 && (e.m + tx) * s.k * 4 >= kL2PanelBytes && s.k >= 2 * k_block) p["k_block"] = k_block;
    }
    const int64_t tiles = ceil_div(e.n, tx) * ceil_div(e.m, ty) * e.batch;
    int64_t tasks = 1;
    if (flops >= kParallelFlops) {
        tasks = std::min<int64_t>(tiles, std::max<int64_t>(2, static_cast<int64_t>(flops / kTaskFlops)));
    }
    p["parallel_tasks"] = std::max<int64_t>(1, std::min<int64_t>(tasks, 1 << 16));
    p["compute"] = s.chain ? "tile" : "root";
    return p;
}

bool gemm_computed_per_tile(const GemmGroupShape &s, const nlohmann::json &p) {
    const std::string c = param_choice(p, "compute", {"tile", "root"});
    if (c == "tile" && !s.chain) {
        fail_field("schedule.compute",
                   "\"tile\" needs the product's consumers to be one elementwise chain to the group's only output; "
                   "use \"root\"");
    }
    return c == "tile";
}

void schedule_gemm(Func tile, const std::vector<Func> &products, const GemmGroupShape &s, const nlohmann::json &params,
                   const Halide::Target &target) {
    const Params p = read_params(s, params, target);
    const Extents e = extents_of(s.output);
    if (p.k_block > 0) {
        Var panel = panel_loops(tile, e, p);
        for (const Func &g : products) schedule_nv_blocked(tile, panel, g, e, p);
        return;
    }
    Var loop = tile_loops(tile, e, p);
    for (const Func &g : products) {
        if (p.dot) {
            schedule_dot(tile, loop, g, e, p);
        } else {
            schedule_nv(tile, loop, g, e, p);
        }
    }
}

}  // namespace hfuse::schedules
