// schedule_conv: checks a conv group's parameters and hands it to its template
// (schedules/conv_*_template.cpp); the parameters' readers and their values when left out.
#include "schedules/conv_template.h"

#include "hfuse/error.h"
#include "schedules/conv_schedule_util.h"
#include "schedules/schedule_params.h"

#include <string>

namespace hfuse::schedules {

using conv_util::choice_or_absent;
using conv_util::get_int;
using conv_util::int_or_absent;
using conv_util::schedule_cv;
using conv_util::schedule_dw;
using conv_util::schedule_flat;
using conv_util::schedule_xv;
using conv_util::WinogradFuncs;
using Halide::Func;

const std::map<std::string, nlohmann::json> &conv_absent_params(const std::string &template_name) {
    static const std::map<std::string, std::map<std::string, nlohmann::json>> kAbsent = {
        {"conv_xv",
         {{"reduction_unroll", 1},
          {"row_tasks", 1},
          {"channel_loop", "outer"},
          {"reduction_order", "kx,ci,ky"},
          {"input_at", "root"}}},
        {"conv_flat", {{"reduction_unroll", 1}}},
        {"conv_dw", {{"row_bands", 1}, {"tile_x_vectors", 1}, {"deinterleave_x", false}}},
        {"conv_cv", {{"algorithm", "direct"}, {"input_block", 0}, {"input_at", "root"}, {"position_tiles", "flat"}}},
    };
    static const std::map<std::string, nlohmann::json> kNone;
    const auto it = kAbsent.find(template_name);
    return it == kAbsent.end() ? kNone : it->second;
}

int conv_cv_input_block(const nlohmann::json &params) {
    return int_or_absent(params, "input_block", 0, 64);  // absent in plans written before it: planar
}

int conv_cv_read_block(int input_block, const ConvGroupShape &shape) {
    return input_block > 0 ? input_block : shape.input_stored_block;
}

bool conv_cv_copy_subsamples(int input_block, const ConvGroupShape &s) {
    return input_block > 0 && s.input_stored_block == 0 && s.subsampling_pointwise;
}

ConvGroupShape conv_at_root(ConvGroupShape s) {
    s.tile_output = s.output;
    s.tile_stride_x = s.tile_stride_y = 1;
    s.pooled = false;
    return s;
}

bool conv_cv_tile_from_lanes(const ConvGroupShape &s, int64_t channel_block, int vw) {
    return s.output_block > 0 || (channel_block % vw == 0 && s.tile_output[3] >= vw);
}

bool conv_cv_winograd(const nlohmann::json &params) {
    return choice_or_absent(params, "algorithm", {"direct", "winograd"}) == "winograd";
}

int64_t conv_dw_band_row(const ConvGroupShape &s, const nlohmann::json &p) {
    if (p.value("template", "") != "conv_dw" || s.tile_output.size() != 4) return 0;
    const int64_t rows = s.tile_output[2];
    const int ny = get_int(p, "tile_y", 1, 64);
    const int64_t row_tiles = (rows + ny - 1) / ny;
    if (int_or_absent(p, "row_bands", 1, row_tiles) != 2) return 0;
    const int64_t row = (row_tiles + 1) / 2 * ny;  // schedule_dw's split of the row tiles
    return 2 * row == rows ? row : 0;
}

bool conv_input_per_task(const nlohmann::json &params) {
    return choice_or_absent(params, "input_at", {"root", "task"}) == "task";
}

bool conv_cv_rows_padded(const nlohmann::json &params) {
    return choice_or_absent(params, "position_tiles", {"flat", "in_rows"}) == "in_rows";
}

int conv_cv_winograd_tile(const nlohmann::json &params) {
    if (!conv_cv_winograd(params)) {
        if (params.contains("winograd_tile")) fail_field("schedule.winograd_tile", "needs \"algorithm\": \"winograd\"");
        return 0;
    }
    if (!params.contains("winograd_tile")) return 2;
    const int m = param_int(params, "winograd_tile", 2, 4);
    if (m != 2 && m != 4) fail_field("schedule.winograd_tile", "expected 2 or 4, got " + std::to_string(m));
    return m;
}

void schedule_conv(Func tile, Func conv, Func padded, const std::vector<Func> &per_tile, const ConvGroupShape &s,
                   const nlohmann::json &p, const Halide::Target &target, Func producer,
                   const std::map<std::string, Func> &parts) {
    if (producer.defined() && p.value("template", "") != "conv_dw")
        throw Error("internal: only conv_dw computes a producer conv per task");
    const std::string tmpl = p.value("template", "");
    if (tmpl == "conv_xv") {
        // "compute" ("root" or absent) is the composer's (compose_conv).
        check_param_keys(
            p, {"vector_width", "tile_x_vectors", "tile_y", "tile_c", "reduction_order", "reduction_unroll", "strip_y",
                "strip_c", "channel_loop", "row_tasks", "input_at", "compute"});
    } else if (tmpl == "conv_dw") {
        check_param_keys(p, {"vector_width", "tile_x_vectors", "tile_y", "channel_block", "row_bands", "deinterleave_x",
                             "producer_vector_width", "producer_tile_x_vectors", "producer_tile_c", "compute"});
    } else if (tmpl == "conv_flat") {
        check_param_keys(p, {"vector_width", "tile_x_vectors", "tile_c", "block_rows", "channel_block",
                             "reduction_unroll", "compute"});
    } else if (tmpl == "conv_cv") {
        check_param_keys(
            p, {"algorithm", "winograd_tile", "vector_width", "tile_positions", "tile_c_vectors", "block_rows",
                "channel_block", "ci_block", "input_block", "input_at", "position_tiles", "compute"});
    }
    const int vw = vector_width_param(p, target, true);
    auto part = [&](const char *name) {
        auto it = parts.find(name);
        return it == parts.end() ? Func() : it->second;
    };
    if (tmpl == "conv_xv") {
        schedule_xv(tile, conv, padded, part("conv_input"), per_tile, s, p, vw);
    } else if (tmpl == "conv_dw") {
        if (!per_tile.empty()) fail_field("schedule.template", "conv_dw takes no window consumer");
        schedule_dw(tile, conv, padded, part("phases"), s, p, vw, producer, target_traits(target).vector_width);
    } else if (tmpl == "conv_flat") {
        if (!per_tile.empty()) fail_field("schedule.template", "conv_flat takes no window consumer");
        schedule_flat(tile, conv, padded, s, p, vw);
    } else if (tmpl == "conv_cv") {
        WinogradFuncs wino;
        if (conv_cv_winograd(p)) {
            wino = {part("wino_input_rows"), part("wino_input"), part("wino_product"), part("wino_output_columns"),
                    conv};
        }
        schedule_cv(tile, conv, padded, per_tile, s, p, vw, target_traits(target), wino);
    } else {
        fail_field("schedule.template",
                   "unknown conv template '" + tmpl + "' (expected conv_xv, conv_dw, conv_flat or conv_cv)");
    }
}

}  // namespace hfuse::schedules
