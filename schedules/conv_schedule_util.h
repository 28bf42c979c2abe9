// What the conv templates (schedules/conv_*_template.cpp) share: their parameters as the plan gives
// them or as a template runs them when left out, the stages each template places (the
// accumulators, the padded input, the epilogue tile), and each template's entry point, which
// schedules::schedule_conv (conv_template.h) dispatches to. Internal to schedules/.
#pragma once

#include "schedules/conv_template.h"
#include "schedules/schedule_params.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hfuse::schedules::conv_util {

// The integer parameter `key` in [lo, hi] (schedule_params.h's param_int).
int get_int(const nlohmann::json &p, const char *key, int lo, int hi);
// The value the template named in `p` runs `key` with when `p` leaves it out (conv_absent_params).
const nlohmann::json &absent_value(const nlohmann::json &p, const std::string &key);
// The integer parameter `key` in [lo, hi], its absent value when left out.
int int_or_absent(const nlohmann::json &p, const std::string &key, int64_t lo, int64_t hi);
// The string parameter `key`, one of `allowed`, its absent value when left out.
std::string choice_or_absent(const nlohmann::json &p, const std::string &key, const std::vector<std::string> &allowed);

// "reduction_unroll": the update's loop over `cin` input channels (`ci`) split by that many, the
// inner part unrolled.
void unroll_reduction(Halide::Stage u, const Halide::RVar &ci, const nlohmann::json &p, int64_t cin);

// Halide Vars of a rank-4 Func in Halide order: x (W), y (H), c (C), n (N).
struct Dims {
    Halide::Var x, y, c, n;
    explicit Dims(const Halide::Func &f) : x(f.args()[0]), y(f.args()[1]), c(f.args()[2]), n(f.args()[3]) {}
};

// The conv's accumulators in registers, the reduction in the order "reduction_order" names.
void schedule_accumulators(Halide::Func conv, Halide::Func padded, bool pooled, const Dims &v, const nlohmann::json &p,
                           int vw, int64_t cin);
// The padded input materialised at root for `consumer`; returns the wrapper `consumer` reads.
Halide::Func padded_at_root(Halide::Func padded, Halide::Func consumer, int vw);
// The epilogue tile along x in vectors (narrower, or scalar, where rows are short).
void vectorize_rows(Halide::Func tile, Halide::Var x, int64_t width, int vw);
// Funcs between the conv and the tile that cannot be inlined (a pool), computed at `level`.
void schedule_per_tile(const std::vector<Halide::Func> &per_tile, Halide::Func tile, Halide::Var level, int lanes,
                       Halide::TailStrategy tail);
// "channel_loop": whether the loop over channel tiles sits inside the spatial tile loops.
bool channel_loop_inner(const nlohmann::json &p);

// conv_xv's register tile: nx x-vectors, ny conv rows, nc output channels.
struct RegisterTile {
    int nx, ny, nc;
};
RegisterTile register_tile(const nlohmann::json &p);

// A flat conv by register tiles inside `strip`: conv_flat's tiles, and those of conv_dw's pointwise
// producer.
void schedule_flat_register_tiles(Halide::Func strip, Halide::Func flat, int vw, int nx, int nc);

// conv_cv's Winograd form: the Funcs lower_winograd_conv makes (output the conv's output).
struct WinogradFuncs {
    Halide::Func input_rows, input, product, output_columns, output;
};
// Whether the Winograd form fits the conv: F(2x2, 3x3) computes 3x3 windows at stride 1.
bool winograd_fits(const ConvGroupShape &s);

// The templates (each described where it is defined). `tile` is the group output the conv is
// computed per tile of, `padded` the conv's padded input (undefined if none), `input` what the conv
// reads (the padded input or its own input), `vw` the lanes.
void schedule_xv(Halide::Func tile, Halide::Func conv, Halide::Func padded, Halide::Func input,
                 const std::vector<Halide::Func> &per_tile, const ConvGroupShape &s, const nlohmann::json &p, int vw);
// conv_dw's `phases`: the padded plane's columns by phase (ConvLowering::deinterleave_x), or undefined.
void schedule_dw(Halide::Func tile, Halide::Func conv, Halide::Func padded, Halide::Func phases,
                 const ConvGroupShape &s, const nlohmann::json &p, int vw, Halide::Func producer, int producer_vw);
void schedule_flat(Halide::Func tile, Halide::Func flat, Halide::Func padded, const ConvGroupShape &s,
                   const nlohmann::json &p, int vw);
void schedule_cv(Halide::Func tile, Halide::Func blocked, Halide::Func padded,
                 const std::vector<Halide::Func> &per_tile, const ConvGroupShape &s, const nlohmann::json &p, int vw,
                 const TargetTraits &tt, const WinogradFuncs &wino);

}  // namespace hfuse::schedules::conv_util
