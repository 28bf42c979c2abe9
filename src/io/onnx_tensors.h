// Reading ONNX model files and tensors (initializers, Constant values) for the importer
// (onnx_import.cpp): raw or typed data, external data files; float types become float32, integer and
// bool types int64. Problems throw an Error naming the file or field.
#pragma once

#include "hfuse/tensor.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace hfuse::onnx_io {

// Parses an ONNX file; a truncated or corrupt file is an Error naming it.
onnx::ModelProto read_model_proto(const std::string &path);

// A TensorProto as a Constant; `dir` resolves external data, `field` names the tensor in errors.
Constant read_tensor(const onnx::TensorProto &t, const std::string &dir, const std::string &field);

// Where an external tensor's bytes are: the file (relative to the model's directory), offset, length.
struct ExternalData {
    std::string location, path;
    int64_t offset = 0, length = -1;
};
ExternalData external_data(const onnx::TensorProto &t, const std::string &dir, const std::string &field);

// ONNX element types (TensorProto::DataType): name, bytes per element (0 if hfuse cannot read it), and
// whether it becomes float32.
const char *type_name(int type);
int element_bytes(int type);
bool is_float_type(int type);

}  // namespace hfuse::onnx_io
