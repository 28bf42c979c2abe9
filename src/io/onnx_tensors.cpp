// Reading ONNX tensors and model files for the importer; see onnx_tensors.h.
#include "io/onnx_tensors.h"

#include "hfuse/error.h"
#include "io/onnx_constants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

namespace hfuse::onnx_io {

float half_to_float(uint16_t h) {
    const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0) {
        v = std::ldexp(static_cast<float>(mant), -24);
    } else if (exp == 31) {
        v = mant ? NAN : INFINITY;
    } else {
        v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
    }
    return sign ? -v : v;
}

const char *type_name(int t) {
    switch (t) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::UINT8: return "uint8";
    case onnx::TensorProto::INT8: return "int8";
    case onnx::TensorProto::UINT16: return "uint16";
    case onnx::TensorProto::INT16: return "int16";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::STRING: return "string";
    case onnx::TensorProto::BOOL: return "bool";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::DOUBLE: return "float64";
    case onnx::TensorProto::UINT32: return "uint32";
    case onnx::TensorProto::UINT64: return "uint64";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    case onnx::TensorProto::COMPLEX64: return "complex64";
    case onnx::TensorProto::COMPLEX128: return "complex128";
    // Types newer than the ONNX headers hfuse builds with (IR 9 and 10, opsets 19 and 21); none is read.
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    default: return "an unknown type";
    }
}

// Bytes per element in raw_data, 0 for types hfuse does not read.
int element_bytes(int t) {
    switch (t) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::DOUBLE: return 8;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: return 2;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: return 1;
    default: return 0;
    }
}

bool is_float_type(int t) {
    return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE || t == onnx::TensorProto::FLOAT16 ||
           t == onnx::TensorProto::BFLOAT16;
}

// Element i of little-endian raw bytes of ONNX type t, as double (float types) or int64.
double raw_value(const char *p, int t) {
    auto load = [p](auto v) {
        std::memcpy(&v, p, sizeof(v));
        return v;
    };
    switch (t) {
    case onnx::TensorProto::FLOAT: return load(float());
    case onnx::TensorProto::DOUBLE: return load(double());
    case onnx::TensorProto::FLOAT16: return half_to_float(load(uint16_t()));
    case onnx::TensorProto::BFLOAT16: {
        uint32_t bits = uint32_t(load(uint16_t())) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
    default: return 0;
    }
}

int64_t raw_int(const char *p, int t) {
    auto load = [p](auto v) {
        std::memcpy(&v, p, sizeof(v));
        return v;
    };
    switch (t) {
    case onnx::TensorProto::INT64: return load(int64_t());
    case onnx::TensorProto::UINT64: return static_cast<int64_t>(load(uint64_t()));
    case onnx::TensorProto::INT32: return load(int32_t());
    case onnx::TensorProto::UINT32: return load(uint32_t());
    case onnx::TensorProto::INT16: return load(int16_t());
    case onnx::TensorProto::UINT16: return load(uint16_t());
    case onnx::TensorProto::INT8: return load(int8_t());
    case onnx::TensorProto::UINT8: return load(uint8_t());
    case onnx::TensorProto::BOOL: return load(uint8_t()) != 0;
    default: return 0;
    }
}

ExternalData external_data(const onnx::TensorProto &t, const std::string &dir, const std::string &field) {
    ExternalData e;
    for (const auto &kv : t.external_data()) {
        try {
            if (kv.key() == "location") {
                e.location = kv.value();
            } else if (kv.key() == "offset") {
                e.offset = std::stoll(kv.value());
            } else if (kv.key() == "length") {
                e.length = std::stoll(kv.value());
            }
        } catch (const std::exception &) {
            fail_field(field, "external data " + kv.key() + " '" + kv.value() + "' is not a number");
        }
    }
    if (e.location.empty()) fail_field(field, "external data without a 'location'");
    // As ONNX's checker: the file is inside the model's directory.
    if (e.location[0] == '/' || e.location.find("..") != std::string::npos) {
        fail_field(field,
                   "external data location '" + e.location + "' must be a path relative to the model's directory");
    }
    if (e.offset < 0) fail_field(field, "negative external data offset " + std::to_string(e.offset));
    e.path = dir + "/" + e.location;
    return e;
}

std::string read_external(const ExternalData &e, int64_t bytes, const std::string &field) {
    std::ifstream in(e.path, std::ios::binary | std::ios::ate);
    if (!in) fail_field(field, "cannot open the external data file '" + e.path + "'");
    const int64_t size = in.tellg();
    if (e.length >= 0 && e.length != bytes) {
        fail_field(field, "external data length " + std::to_string(e.length) + " does not match the tensor's " +
                              std::to_string(bytes) + " bytes");
    }
    if (e.offset + bytes > size) {
        fail_field(field, "the external data file '" + e.path + "' has " + std::to_string(size) + " bytes; " +
                              std::to_string(bytes) + " are needed at offset " + std::to_string(e.offset));
    }
    std::string data(bytes, '\0');
    in.seekg(e.offset);
    in.read(data.data(), bytes);
    if (!in) fail_field(field, "failed reading the external data file '" + e.path + "'");
    return data;
}

// A TensorProto (initializer, Constant's value) as a Constant; `field` names it in errors.
Constant read_tensor(const onnx::TensorProto &t, const std::string &dir, const std::string &field) {
    Shape shape;
    for (int64_t d : t.dims()) {
        if (d < 0) fail_field(field, "negative dimension " + std::to_string(d));
        shape.push_back(d);
    }
    const int type = t.data_type();
    const int esize = element_bytes(type);
    if (esize == 0) {
        fail_field(field,
                   std::string("element type ") + type_name(type) +
                       " is not supported (hfuse reads float32/64, float16, bfloat16, 8- to 64-bit integers, bool)");
    }
    if (t.has_segment()) fail_field(field, "segmented tensors are not supported");
    const int64_t n = count(shape);
    if (n > kMaxTensorElements) fail_field(field, "too large: " + std::to_string(n) + " elements");
    Constant c;
    c.type = {is_float_type(type) ? DType::Float32 : DType::Int64, shape};
    if (is_float_type(type)) {
        c.f32.resize(n);
    } else {
        c.i64.resize(n);
    }
    auto set = [&](int64_t i, double f, int64_t k) {
        if (is_float_type(type)) {
            c.f32[i] = static_cast<float>(f);
        } else {
            c.i64[i] = k;
        }
    };

    std::string external;
    const std::string *raw = nullptr;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
        external = read_external(external_data(t, dir, field), n * esize, field);
        raw = &external;
    } else if (t.has_raw_data()) {
        raw = &t.raw_data();
    }
    if (raw) {
        if (static_cast<int64_t>(raw->size()) != n * esize) {
            fail_field(field, "has " + std::to_string(raw->size()) + " bytes of data, shape " + list_ints(shape) +
                                  " of " + type_name(type) + " needs " + std::to_string(n * esize));
        }
        const char *p = raw->data();
        for (int64_t i = 0; i < n; i++, p += esize) set(i, raw_value(p, type), raw_int(p, type));
        return c;
    }
    // Typed fields: float_data, double_data, int64_data, uint64_data, or int32_data for the small types.
    auto check_size = [&](int64_t got) {
        if (got != n) {
            fail_field(field, "has " + std::to_string(got) + " values, shape " + list_ints(shape) + " needs " +
                                  std::to_string(n));
        }
    };
    switch (type) {
    case onnx::TensorProto::FLOAT:
        check_size(t.float_data_size());
        for (int64_t i = 0; i < n; i++) set(i, t.float_data(i), 0);
        break;
    case onnx::TensorProto::DOUBLE:
        check_size(t.double_data_size());
        for (int64_t i = 0; i < n; i++) set(i, t.double_data(i), 0);
        break;
    case onnx::TensorProto::INT64:
        check_size(t.int64_data_size());
        for (int64_t i = 0; i < n; i++) set(i, 0, t.int64_data(i));
        break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
        check_size(t.uint64_data_size());
        for (int64_t i = 0; i < n; i++) set(i, 0, static_cast<int64_t>(t.uint64_data(i)));
        break;
    case onnx::TensorProto::FLOAT16:
        check_size(t.int32_data_size());
        for (int64_t i = 0; i < n; i++) set(i, half_to_float(static_cast<uint16_t>(t.int32_data(i))), 0);
        break;
    case onnx::TensorProto::BFLOAT16:
        check_size(t.int32_data_size());
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = uint32_t(static_cast<uint16_t>(t.int32_data(i))) << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            set(i, f, 0);
        }
        break;
    default:  // int32, int16, int8, uint16, uint8, bool
        check_size(t.int32_data_size());
        for (int64_t i = 0; i < n; i++)
            set(i, 0, type == onnx::TensorProto::BOOL ? t.int32_data(i) != 0 : t.int32_data(i));
        break;
    }
    return c;
}

onnx::ModelProto read_model_proto(const std::string &path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error("cannot open the ONNX model file").in_file(path);
    const std::streamoff size = in.tellg();
    std::string bytes(static_cast<size_t>(std::max<std::streamoff>(size, 0)), '\0');
    in.seekg(0);
    in.read(bytes.data(), size);
    if (!in) throw Error("failed reading the ONNX model file").in_file(path);
    onnx::ModelProto model;
    if (bytes.empty() || !model.ParseFromString(bytes)) {
        throw Error("not a valid ONNX model: the protobuf data cannot be parsed (truncated or corrupt file, " +
                    std::to_string(size) + " bytes)")
            .in_file(path);
    }
    // Arbitrary bytes can parse as an (almost) empty message: a model has a graph and an opset.
    if (model.ir_version() <= 0 || !model.has_graph() || model.opset_import_size() == 0) {
        throw Error("not a valid ONNX model: no ir_version, graph or opset_import (truncated or corrupt file)")
            .in_file(path);
    }
    return model;
}

}  // namespace hfuse::onnx_io
