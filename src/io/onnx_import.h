// ONNX models (opsets 9-21, default domain) read into hfuse's Graph: the ops hfuse has are mapped to
// its opset-13 forms, constant subgraphs (Constant, Shape -> Gather -> Unsqueeze -> Concat, Cast,
// ConstantOfShape, ...) are evaluated here so they never reach Halide, and a few ops are rewritten
// into hfuse's (Squeeze/Unsqueeze of activations -> Reshape, Upsample -> Resize, a ReduceMean over
// the spatial dims -> GlobalAveragePool). README.md "ONNX models" lists what is supported.
#pragma once

#include "hfuse/graph.h"
#include "hfuse/model_io.h"

#include <string>
#include <vector>

namespace hfuse {

// Reads and translates an ONNX file; the Graph is not yet validated (load_model runs prepare()).
// Before any translation work, every unsupported op type is reported in one Error (with a node name
// for each); a truncated or corrupt file, a missing external data file or a dynamic input dim without
// `options.input_shapes` is an Error naming the file and the node, initializer or input.
Graph import_onnx(const std::string &path, const LoadOptions &options);

// The ONNX file and the external data files its initializers name.
std::vector<std::string> onnx_model_files(const std::string &path);

}  // namespace hfuse
