// What the conv templates' defaults share (schedules/conv_<name>_defaults.cpp, each template's
// parameters chosen from a conv group's shape and the target, and conv_choice.cpp, which template a
// group takes: conv_default_params in conv_template.h). Each is described, with the measurements
// behind it, where it is defined. Internal to schedules/.
#pragma once

#include "schedules/conv_template.h"
#include "schedules/schedule_params.h"

#include <nlohmann/json.hpp>

#include <utility>

namespace hfuse::schedules {

// Register tiles' size in units of AVX2's 16 vector registers: 1 there, 2 with 32 (conv_choice.cpp).
int register_budget(const TargetTraits &tt);
// Whether every output channel goes in one block: the weights smaller than the output's positions
// (conv_cv_defaults.cpp; conv_flat's blocks too).
bool weights_smaller_than_positions(const ConvGroupShape &s);

// conv_cv's parameters for the direct conv or its Winograd form: register tile, tasks, input copy,
// reduction passes (conv_cv_defaults.cpp).
nlohmann::json conv_cv_defaults(const ConvGroupShape &shape, const TargetTraits &tt);
// conv_cv's parameters for a depthwise conv, each lane its own channel (conv_cv_defaults.cpp).
nlohmann::json conv_cv_depthwise_defaults(const ConvGroupShape &s, const TargetTraits &tt);
// conv_flat's parameters (register tile, blocks of rows and channels) and the share of the lanes they
// compute that are used, which decides conv_flat against conv_xv (conv_flat_defaults.cpp).
std::pair<nlohmann::json, double> conv_flat_defaults(const ConvGroupShape &s, int vw, int budget);
// conv_dw's parameters: vectors, rows a tile, channel blocks, its pointwise producer's tiles and bands
// (conv_dw_defaults.cpp).
nlohmann::json conv_dw_defaults(const ConvGroupShape &s, const TargetTraits &tt, int vw);
// conv_xv's parameters: register tile, channel loop, a pool's strips, one row's tasks, the input copy
// (conv_xv_defaults.cpp).
nlohmann::json conv_xv_defaults(const ConvGroupShape &s, const TargetTraits &tt, int vw);

}  // namespace hfuse::schedules
