// Reading models in hfuse's JSON format (version 1); see README.md "The model format".
#pragma once

#include "hfuse/graph.h"

#include <nlohmann/json.hpp>

#include <string>

namespace hfuse {

// Parses a model file and loads its weights (paths relative to the model file), then runs the
// front-end passes (validate, infer_shapes). Every problem throws an Error naming file, node, field.
Graph load_model(const std::string &path);

// The files a model is made of: the model file and the weight files it names (for build systems
// that rebuild when any of them changes).
std::vector<std::string> model_files(const std::string &path);

// Parses without running passes. `base_dir` resolves weight files; `source` names the model in errors.
Graph parse_model(const nlohmann::json &model, const std::string &base_dir, const std::string &source);

// Reads and parses a JSON file; a missing file or invalid JSON (with line and column) is an Error
// naming the file. `what` says what the file was meant to be ("model file", "plan file").
nlohmann::json read_json_file(const std::string &path, const std::string &what);

// Raw little-endian float32 files, as used for weights, inputs and outputs.
std::vector<float> read_f32_file(const std::string &path, int64_t expected_count, const std::string &what);
void write_f32_file(const std::string &path, const float *data, int64_t count);

}  // namespace hfuse
