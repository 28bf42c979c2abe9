// Reading models: hfuse's JSON format (version 1, see README.md "The model format") and ONNX files
// (`.onnx`, translated by src/io/onnx_import.cpp into the same Graph); writing the JSON format.
#pragma once

#include "hfuse/graph.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace hfuse {

struct LoadOptions {
    // Shapes of model inputs by name (`--shape NAME=1x3x224x224`). An ONNX input with dynamic dims
    // needs one; a dim the model fixes must be given as it is (any model format).
    std::map<std::string, Shape> input_shapes;
};

// True for paths ending in ".onnx" (any case): load_model and model_files read those as ONNX.
bool is_onnx_path(const std::string &path);

// Parses a model file (JSON or ONNX) and loads its weights (paths relative to the model file), then
// runs the front-end passes (validate, infer_shapes). Every problem throws an Error naming file,
// node, field.
Graph load_model(const std::string &path, const LoadOptions &options = {});

// The files a model is made of: the model file and the weight files it names (ONNX: the external
// data files), for build systems that rebuild when any of them changes.
std::vector<std::string> model_files(const std::string &path);

// Writes `graph` as an hfuse JSON model at `path`, its weights as raw files beside it named
// `<stem>.<weight>.f32` (`.i64` for int64); small weights (up to 16 values) are written inline.
// Returns the weight files written.
std::vector<std::string> save_model(const Graph &graph, const std::string &path);

// Parses without running passes. `base_dir` resolves weight files; `source` names the model in errors.
Graph parse_model(const nlohmann::json &model, const std::string &base_dir, const std::string &source);

// Reads and parses a JSON file; a missing file or invalid JSON (with line and column) is an Error
// naming the file. `what` says what the file was meant to be ("model file", "plan file").
nlohmann::json read_json_file(const std::string &path, const std::string &what);

// Raw little-endian float32 files, as used for weights, inputs and outputs.
std::vector<float> read_f32_file(const std::string &path, int64_t expected_count, const std::string &what);
void write_f32_file(const std::string &path, const float *data, int64_t count);

}  // namespace hfuse
