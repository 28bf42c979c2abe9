// Helpers the conv templates share (schedules/conv_*_template.cpp): reading their parameters, and
// placing the stages every template has (accumulators, the padded input, the epilogue tile).
#include "schedules/conv_schedule_util.h"

#include "hfuse/error.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <string>

namespace hfuse::schedules::conv_util {

using Halide::Func;
using Halide::RVar;
using Halide::Var;

int get_int(const nlohmann::json &p, const char *key, int lo, int hi) {
    return param_int(p, key, lo, hi);
}

// The value the template named in `p` runs `key` with when `p` leaves it out (conv_absent_params).
const nlohmann::json &absent_value(const nlohmann::json &p, const std::string &key) {
    const std::map<std::string, nlohmann::json> &absent = conv_absent_params(p.value("template", ""));
    const auto it = absent.find(key);
    if (it == absent.end()) throw Error("internal: no absent value for schedule." + key);
    return it->second;
}

// The integer parameter `key` in [lo, hi], its absent value when left out.
int int_or_absent(const nlohmann::json &p, const std::string &key, int64_t lo, int64_t hi) {
    return param_int_or(p, key, lo, hi, absent_value(p, key).get<int>());
}

// The string parameter `key`, one of `allowed`, its absent value when left out.
std::string choice_or_absent(const nlohmann::json &p, const std::string &key, const std::vector<std::string> &allowed) {
    return p.contains(key) ? param_choice(p, key, allowed) : absent_value(p, key).get<std::string>();
}

// "reduction_unroll": the update's loop over a group's `cin` input channels (`ci`) split by that many,
// the inner part unrolled (absent: 1, as plans written before the parameter ran); a count not
// dividing the channels guards its last step.
void unroll_reduction(Halide::Stage u, const RVar &ci, const nlohmann::json &p, int64_t cin) {
    const int n = int_or_absent(p, "reduction_unroll", 1, std::min<int64_t>(cin, 64));
    if (n == 1) return;
    RVar outer(ci.name() + "_o"), inner(ci.name() + "_u");
    u.split(ci, outer, inner, n, Halide::TailStrategy::GuardWithIf).unroll(inner);
}

// The conv's accumulators: its tile lives in registers when everything inside the loop it is computed
// at is unrolled. A pool's window widens the conv's region past whole vectors; rounded up, it would
// read past the input unless the input is padded (materialised with its boundary), so such tails are
// guarded.
void schedule_accumulators(Func conv, Func padded, bool pooled, const Dims &v, const nlohmann::json &p, int vw,
                           int64_t cin) {
    const Halide::TailStrategy tail =
        !pooled || padded.defined() ? Halide::TailStrategy::Auto : Halide::TailStrategy::GuardWithIf;
    conv.vectorize(v.x, vw, tail).unroll(v.x).unroll(v.y).unroll(v.c);
    std::vector<RVar> r = conv.rvars(0);  // (ci, kx, ky)
    Halide::Stage u = conv.update();
    const std::string order = choice_or_absent(p, "reduction_order", {"kx,ci,ky", "ci,kx,ky", "kx,ky,ci"});
    if (order == "kx,ci,ky") {
        u.reorder(v.x, v.y, v.c, r[1], r[0], r[2]).unroll(r[1]);
    } else if (order == "ci,kx,ky") {
        u.reorder(v.x, v.y, v.c, r[0], r[1], r[2]);
    } else {
        u.reorder(v.x, v.y, v.c, r[1], r[2], r[0]).unroll(r[1]);
    }
    unroll_reduction(u, r[0], p, cin);
    u.vectorize(v.x, vw, tail).unroll(v.x).unroll(v.y).unroll(v.c);
}

// The padded input materialised at root for `consumer`, in one parallel pass over its channels: a
// boundary condition inside the reduction costs ~4x. Returns the wrapper `consumer` reads.
Func padded_at_root(Func padded, Func consumer, int vw) {
    Func in = padded.in(consumer);
    Dims d(in);
    in.compute_root().vectorize(d.x, vw, Halide::TailStrategy::GuardWithIf).parallel(d.c);
    return in;
}

// The epilogue tile along x: whole vectors where a row holds one, narrowed down to 4 lanes; scalar
// below that (edge vectors shift inwards).
void vectorize_rows(Func tile, Var x, int64_t width, int vw) {
    int lanes = vw;
    while (lanes > 4 && lanes > width) lanes /= 2;
    if (lanes <= width) tile.vectorize(x, lanes, Halide::TailStrategy::ShiftInwards);
}

// Funcs between the conv and the tile that cannot be inlined (a pool): computed at `level`, along x
// in vectors of `lanes`, the last one rounded up or guarded as `tail` says.
void schedule_per_tile(const std::vector<Func> &per_tile, Func tile, Var level, int lanes, Halide::TailStrategy tail) {
    for (Func f : per_tile) {
        Dims d(f);
        f.compute_at(tile, level).vectorize(d.x, lanes, tail);
        for (int i = 0; i < f.num_update_definitions(); i++) f.update(i).vectorize(d.x, lanes, tail);
    }
}

// "channel_loop": where the loop over channel tiles sits, "inner" (inside the spatial tile loops) or
// "outer" (the default when absent, as plans written before the parameter existed ran).
bool channel_loop_inner(const nlohmann::json &p) {
    return choice_or_absent(p, "channel_loop", {"inner", "outer"}) == "inner";
}

RegisterTile register_tile(const nlohmann::json &p) {
    return {get_int(p, "tile_x_vectors", 1, 16), get_int(p, "tile_y", 1, 64), get_int(p, "tile_c", 1, 64)};
}

// A flat conv (`flat`, (q, c, n)) by register tiles inside `strip`, its wrapper, which the caller
// places: nx vectors of vw positions x nc channels, shifting inwards at the strip's ends, every loop
// inside unrolled, the taps along a row too (as conv_xv's "kx,ci,ky"). conv_flat's tiles, and those
// of conv_dw's pointwise producer.
void schedule_flat_register_tiles(Func strip, Func flat, int vw, int nx, int nc) {
    const Var fq = flat.args()[0], fc = flat.args()[1];
    Var qo("qo"), qi("qi"), fco("fco"), fci("fci");
    const auto inwards = Halide::TailStrategy::ShiftInwards;
    strip.split(fq, qo, qi, vw * nx, inwards)
        .split(fc, fco, fci, nc, inwards)
        .reorder(qi, fci, qo, fco)
        .vectorize(qi, vw)
        .unroll(qi)
        .unroll(fci);
    flat.compute_at(strip, qo).vectorize(fq, vw).unroll(fq).unroll(fc);
    std::vector<RVar> r = flat.rvars(0);  // (ci, kx, ky)
    flat.update().reorder(fq, fc, r[1], r[0], r[2]).vectorize(fq, vw).unroll(fq).unroll(fc).unroll(r[1]);
}

// Whether the Winograd form fits the conv: F(2x2, 3x3) computes 3x3 windows at stride 1.
bool winograd_fits(const ConvGroupShape &s) {
    return s.group == 1 && s.weight[2] == 3 && s.weight[3] == 3 && s.stride_x == 1 && s.stride_y == 1 &&
           s.dilation_x == 1 && s.dilation_y == 1;
}

}  // namespace hfuse::schedules::conv_util
