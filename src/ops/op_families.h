// Each family of ops registers its schemas here; called once by the registry (explicit calls rather
// than static initialisers, so nothing is dropped when linking the static library).
#pragma once

#include "hfuse/op_registry.h"

#include <vector>

namespace hfuse::ops {

void register_conv_ops(std::vector<OpSchema> &ops);           // Conv
void register_pool_ops(std::vector<OpSchema> &ops);           // MaxPool, AveragePool, Global*Pool
void register_elementwise_ops(std::vector<OpSchema> &ops);    // activations, Add/Sub/Mul/Div
void register_normalization_ops(std::vector<OpSchema> &ops);  // BatchNormalization, Softmax, ReduceMean
void register_linalg_ops(std::vector<OpSchema> &ops);         // Gemm, MatMul
void register_shape_ops(std::vector<OpSchema> &ops);          // Reshape, Transpose, Concat, Resize, ...

}  // namespace hfuse::ops
