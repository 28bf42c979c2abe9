#include "hfuse/tensor.h"

#include "hfuse/error.h"

namespace hfuse {

const char *to_string(DType t) {
    return t == DType::Float32 ? "float32" : "int64";
}

int64_t num_elements(const Shape &shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string to_string(const Shape &shape) {
    if (shape.empty()) return "scalar";
    std::string s;
    for (size_t i = 0; i < shape.size(); i++) s += (i ? "x" : "") + std::to_string(shape[i]);
    return s;
}

void check_shape(const Shape &shape, const std::string &field) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d <= 0)
            fail_field(field,
                       "dimension " + std::to_string(d) + " in shape [" + to_string(shape) + "] is not positive");
        if (n > kMaxTensorElements / d)
            fail_field(field, "shape [" + to_string(shape) + "] has more than 2^29 elements");
        n *= d;
    }
}

int normalize_axis(int64_t axis, int rank, const std::string &field) {
    if (axis < -rank || axis >= rank) {
        fail_field(field, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    }
    return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace hfuse
