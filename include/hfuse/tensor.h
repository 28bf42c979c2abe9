// Tensor types and constant data. Shapes follow ONNX: outermost dimension first (NCHW, OIHW).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hfuse {

using Shape = std::vector<int64_t>;

// float32 is the only type activations have; int64 exists for shape-like constants
// (Reshape's shape, Slice's starts, Pad's pads, ...).
enum class DType { Float32, Int64 };

const char *to_string(DType t);

struct TensorType {
    DType dtype = DType::Float32;
    Shape shape;

    int rank() const { return static_cast<int>(shape.size()); }
    bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
    bool operator!=(const TensorType &o) const { return !(*this == o); }
};

// A weight: its type and its values, row-major (the last ONNX dimension is contiguous).
// Exactly one of f32 / i64 is filled, matching type.dtype.
struct Constant {
    TensorType type;
    std::vector<float> f32;
    std::vector<int64_t> i64;
};

// Largest tensor hfuse accepts: Halide indexes buffers with 32-bit offsets.
constexpr int64_t kMaxTensorElements = (int64_t(1) << 31) / 4 - 1;

// Product of the dims; 1 for a scalar (rank 0).
int64_t num_elements(const Shape &shape);

// "1x64x56x56"; "scalar" for rank 0.
std::string to_string(const Shape &shape);

// Throws an Error naming the field if a dim is not positive or the tensor is too large.
void check_shape(const Shape &shape, const std::string &field);

// Resolves a possibly negative ONNX axis against a rank; throws an Error naming the field.
int normalize_axis(int64_t axis, int rank, const std::string &field);

}  // namespace hfuse
