// A reference evaluator written independently of the Halide op definitions: plain loops, and Eigen
// for the matrix products (GEMM, im2col convolution). It is slow and obviously correct, and it is what
// tests and `hfuse run --check` compare every executor against.
#pragma once

#include "hfuse/graph.h"

#include <map>
#include <string>
#include <vector>

namespace hfuse::reference {

// A dense row-major tensor in ONNX dim order.
struct RefTensor {
    Shape shape;
    std::vector<float> data;
};

// Evaluates one node. `inputs[i]` is nullptr where an optional input is left out; `constants[i]` is
// non-null where input i is a weight (int64 shape-like inputs are only available there).
// `output_types` are the inferred output types.
std::vector<RefTensor> eval_node(const Node &node, const std::vector<const RefTensor *> &inputs,
                                 const std::vector<const Constant *> &constants,
                                 const std::vector<TensorType> &output_types);

// Runs a prepared graph; returns every model output by name.
std::map<std::string, RefTensor> run(const Graph &graph, const std::map<std::string, RefTensor> &inputs);

// How far `actual` is from `expected`: the largest absolute difference, and the scale it is judged
// against (the largest |expected|, at least 1e-6). Tolerances in hfuse are relative to that scale.
struct Comparison {
    double max_abs_error = 0;
    double scale = 0;
    double relative() const { return max_abs_error / scale; }
};
Comparison compare(const float *actual, const float *expected, size_t n);

}  // namespace hfuse::reference
