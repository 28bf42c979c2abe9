#include "hfuse/model_io.h"

#include "hfuse/error.h"
#include "hfuse/passes.h"
#include "hfuse/random.h"
#include "io/onnx_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace hfuse {
namespace {

using nlohmann::json;

// Rejects keys we do not know: a typo ("attr" for "attrs") must not be silently ignored.
void check_keys(const json &obj, const std::set<std::string> &allowed, const std::string &where) {
    for (const auto &kv : obj.items()) {
        if (!allowed.count(kv.key())) {
            std::string list;
            for (const auto &a : allowed) list += (list.empty() ? "" : ", ") + a;
            fail_field(where + kv.key(), "unknown key (expected one of: " + list + ")");
        }
    }
}

const json &require(const json &obj, const std::string &key, const std::string &field) {
    if (!obj.contains(key)) fail_field(field, "missing");
    return obj.at(key);
}

std::string get_string(const json &obj, const std::string &key, const std::string &field) {
    const json &v = require(obj, key, field);
    if (!v.is_string()) fail_field(field, "expected a string, got " + v.dump());
    return v.get<std::string>();
}

Shape get_shape(const json &v, const std::string &field) {
    if (!v.is_array()) fail_field(field, "expected a list of dimensions, got " + v.dump());
    Shape shape;
    for (const json &d : v) {
        if (!d.is_number_integer()) fail_field(field, "expected integer dimensions, got " + v.dump());
        shape.push_back(d.get<int64_t>());
    }
    check_shape(shape, field);
    return shape;
}

std::vector<std::string> get_names(const json &v, const std::string &field) {
    if (!v.is_array()) fail_field(field, "expected a list of names, got " + v.dump());
    std::vector<std::string> names;
    for (const json &n : v) {
        if (!n.is_string()) fail_field(field, "expected names (strings), got " + n.dump());
        names.push_back(n.get<std::string>());
    }
    return names;
}

std::string join_path(const std::string &dir, const std::string &file) {
    if (file.empty() || file[0] == '/' || dir.empty()) return file;
    return dir + "/" + file;
}

Constant parse_weight(const std::string &name, const json &w, const std::string &base_dir) {
    const std::string f = "weights." + name;
    if (!w.is_object()) fail_field(f, "expected an object with 'shape' and one of 'file', 'values', 'uniform'");
    check_keys(w, {"shape", "dtype", "file", "values", "uniform", "seed"}, f + ".");
    Constant c;
    // Rank 0 (a scalar) is allowed for weights: Clip bounds, Pad's constant_value.
    c.type.shape = get_shape(require(w, "shape", f + ".shape"), f + ".shape");
    std::string dtype = w.contains("dtype") ? get_string(w, "dtype", f + ".dtype") : "float32";
    if (dtype == "int64") {
        c.type.dtype = DType::Int64;
    } else if (dtype != "float32") {
        fail_field(f + ".dtype", "unsupported dtype '" + dtype + "' (expected float32 or int64)");
    }
    const int64_t count = num_elements(c.type.shape);
    const bool is_int = c.type.dtype == DType::Int64;

    int sources = int(w.contains("file")) + int(w.contains("values")) + int(w.contains("uniform"));
    if (sources != 1)
        fail_field(f, "needs exactly one of 'file', 'values', 'uniform' (has " + std::to_string(sources) + ")");

    if (w.contains("file")) {
        std::string path = join_path(base_dir, get_string(w, "file", f + ".file"));
        if (is_int) {
            std::ifstream in(path, std::ios::binary | std::ios::ate);
            if (!in) fail_field(f + ".file", "cannot open '" + path + "'");
            int64_t bytes = in.tellg();
            if (bytes != count * 8) {
                fail_field(f + ".file", "'" + path + "' has " + std::to_string(bytes) + " bytes, expected " +
                                            std::to_string(count * 8) + " (" + std::to_string(count) + " int64)");
            }
            c.i64.resize(count);
            in.seekg(0);
            in.read(reinterpret_cast<char *>(c.i64.data()), bytes);
        } else {
            try {
                c.f32 = read_f32_file(path, count, "weight '" + name + "'");
            } catch (Error &e) {
                throw e.at_field(f + ".file");
            }
        }
    } else if (w.contains("values")) {
        const json &v = w.at("values");
        if (!v.is_array()) fail_field(f + ".values", "expected a list of numbers");
        if ((int64_t)v.size() != count) {
            fail_field(f + ".values", "has " + std::to_string(v.size()) + " values, shape [" + to_string(c.type.shape) +
                                          "] needs " + std::to_string(count));
        }
        for (const json &e : v) {
            if (is_int ? !e.is_number_integer() : !e.is_number()) {
                fail_field(f + ".values",
                           std::string("expected ") + (is_int ? "integers" : "numbers") + ", got " + e.dump());
            }
            if (is_int) {
                c.i64.push_back(e.get<int64_t>());
            } else {
                c.f32.push_back(e.get<float>());
            }
        }
    } else {
        if (is_int) fail_field(f + ".uniform", "only float32 weights can be generated");
        const json &u = w.at("uniform");
        if (!u.is_array() || u.size() != 2 || !u[0].is_number() || !u[1].is_number()) {
            fail_field(f + ".uniform", "expected [low, high], got " + u.dump());
        }
        double lo = u[0].get<double>(), hi = u[1].get<double>();
        if (!(lo <= hi)) fail_field(f + ".uniform", "low must not exceed high, got " + u.dump());
        const json &seed = require(w, "seed", f + ".seed");
        // JSON built in code holds 1 as a signed integer, parsed text as an unsigned one: accept both.
        if (!seed.is_number_integer() || (!seed.is_number_unsigned() && seed.get<int64_t>() < 0)) {
            fail_field(f + ".seed", "expected a non-negative integer, got " + seed.dump());
        }
        c.f32 = uniform_values(count, lo, hi, seed.get<uint64_t>());
    }
    return c;
}

Node parse_node(const json &n, size_t index) {
    const std::string f = "nodes[" + std::to_string(index) + "]";
    if (!n.is_object()) fail_field(f, "expected an object");
    Node node;
    node.name = get_string(n, "name", f + ".name");
    try {
        check_keys(n, {"name", "op", "inputs", "outputs", "attrs", "doc"}, "");
        node.op = get_string(n, "op", "op");
        node.inputs = get_names(require(n, "inputs", "inputs"), "inputs");
        if (n.contains("outputs")) {
            node.outputs = get_names(n.at("outputs"), "outputs");
            if (node.outputs.empty()) fail_field("outputs", "must name at least one output");
        } else {
            node.outputs = {node.name};
        }
        if (n.contains("attrs")) {
            node.attrs = n.at("attrs");
            if (!node.attrs.is_object()) fail_field("attrs", "expected an object, got " + node.attrs.dump());
        }
    } catch (Error &e) {
        throw e.at_node(node.name, n.contains("op") && n["op"].is_string() ? n["op"].get<std::string>() : "");
    }
    return node;
}

}  // namespace

std::vector<float> read_f32_file(const std::string &path, int64_t expected_count, const std::string &what) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error("cannot open '" + path + "' (" + what + ")");
    int64_t bytes = in.tellg();
    if (bytes != expected_count * 4) {
        throw Error("'" + path + "' (" + what + ") has " + std::to_string(bytes) + " bytes, expected " +
                    std::to_string(expected_count * 4) + " (" + std::to_string(expected_count) + " float32)");
    }
    std::vector<float> data(expected_count);
    in.seekg(0);
    in.read(reinterpret_cast<char *>(data.data()), bytes);
    if (!in) throw Error("failed reading '" + path + "' (" + what + ")");
    return data;  // hfuse only targets little-endian hosts, so the bytes are the floats
}

void write_f32_file(const std::string &path, const float *data, int64_t count) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + path + "'");
    out.write(reinterpret_cast<const char *>(data), count * 4);
    if (!out) throw Error("failed writing '" + path + "'");
}

Graph parse_model(const json &model, const std::string &base_dir, const std::string &source) {
    try {
        if (!model.is_object()) fail("expected a JSON object at the top level");
        check_keys(model, {"format", "version", "name", "doc", "inputs", "weights", "nodes", "outputs"}, "");
        if (get_string(model, "format", "format") != "hfuse-model") {
            fail_field("format", "expected \"hfuse-model\", got " + model.at("format").dump());
        }
        const json &version = require(model, "version", "version");
        if (version != 1)
            fail_field("version", "unsupported version " + version.dump() + " (this hfuse reads version 1)");

        Graph g;
        g.source = source;
        g.name = model.contains("name") ? get_string(model, "name", "name") : "model";

        const json &inputs = require(model, "inputs", "inputs");
        if (!inputs.is_array() || inputs.empty()) fail_field("inputs", "expected a non-empty list");
        for (size_t i = 0; i < inputs.size(); i++) {
            const std::string f = "inputs[" + std::to_string(i) + "]";
            if (!inputs[i].is_object()) fail_field(f, "expected an object with 'name' and 'shape'");
            check_keys(inputs[i], {"name", "shape"}, f + ".");
            GraphInput in;
            in.name = get_string(inputs[i], "name", f + ".name");
            in.shape = get_shape(require(inputs[i], "shape", f + ".shape"), f + ".shape");
            g.inputs.push_back(in);
        }

        if (model.contains("weights")) {
            const json &weights = model.at("weights");
            if (!weights.is_object()) fail_field("weights", "expected an object mapping names to weights");
            for (const auto &kv : weights.items()) g.weights[kv.key()] = parse_weight(kv.key(), kv.value(), base_dir);
        }

        const json &nodes = require(model, "nodes", "nodes");
        if (!nodes.is_array() || nodes.empty()) fail_field("nodes", "expected a non-empty list");
        for (size_t i = 0; i < nodes.size(); i++) g.nodes.push_back(parse_node(nodes[i], i));

        g.outputs = get_names(require(model, "outputs", "outputs"), "outputs");
        if (g.outputs.empty()) fail_field("outputs", "must name at least one output");
        return g;
    } catch (Error &e) {
        throw e.in_file(source);
    }
}

json read_json_file(const std::string &path, const std::string &what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open " + what).in_file(path);
    std::stringstream text;
    text << in.rdbuf();
    try {
        return json::parse(text.str());
    } catch (const json::parse_error &e) {
        // nlohmann's message carries the line and column; strip its "[json.exception...]" prefix.
        std::string msg = e.what();
        auto pos = msg.find("] ");
        throw Error("invalid JSON: " + (pos == std::string::npos ? msg : msg.substr(pos + 2))).in_file(path);
    }
}

bool is_onnx_path(const std::string &path) {
    std::string ext = path.size() >= 5 ? path.substr(path.size() - 5) : "";
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext == ".onnx";
}

Graph load_model(const std::string &path, const LoadOptions &options) {
    if (is_onnx_path(path)) {
        Graph g = import_onnx(path, options);
        try {
            return prepare(std::move(g));
        } catch (Error &e) {
            throw e.in_file(path);
        }
    }
    json model = read_json_file(path, "model file");
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    try {
        Graph g = parse_model(model, dir, path);
        // JSON inputs have fixed shapes: a --shape must name an input and agree with it.
        for (const auto &kv : options.input_shapes) {
            auto in =
                std::find_if(g.inputs.begin(), g.inputs.end(), [&](const GraphInput &i) { return i.name == kv.first; });
            if (in == g.inputs.end())
                fail_field("--shape " + kv.first, "the model has no input named '" + kv.first + "'");
            if (in->shape != kv.second) {
                fail_field("--shape " + kv.first,
                           "the model fixes the shape at " + to_string(in->shape) + ", got " + to_string(kv.second));
            }
        }
        return prepare(std::move(g));
    } catch (Error &e) {
        throw e.in_file(path);
    }
}

std::vector<std::string> model_files(const std::string &path) {
    if (is_onnx_path(path)) return onnx_model_files(path);
    json model = read_json_file(path, "model file");
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    std::vector<std::string> files = {path};
    if (model.contains("weights") && model["weights"].is_object()) {
        for (const auto &kv : model["weights"].items()) {
            if (kv.value().is_object() && kv.value().contains("file") && kv.value()["file"].is_string())
                files.push_back(join_path(dir, kv.value()["file"].get<std::string>()));
        }
    }
    return files;
}

namespace {

// A weight name as part of a file name: letters, digits, '.', '-' and '_' kept, the rest '_'.
std::string file_part(const std::string &name) {
    std::string s;
    for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
    return s.empty() ? "w" : s;
}

}  // namespace

std::vector<std::string> save_model(const Graph &g, const std::string &path) {
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    std::string stem = path.substr(path.find('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".json") stem.resize(stem.size() - 5);

    // One line per input, weight and node (in the README's key order), for reading and diffing.
    using ordered = nlohmann::ordered_json;
    std::vector<std::string> input_lines, weight_lines, node_lines;
    for (const GraphInput &in : g.inputs) input_lines.push_back(ordered{{"name", in.name}, {"shape", in.shape}}.dump());

    std::vector<std::string> written;
    std::set<std::string> files;
    for (const auto &kv : g.weights) {
        const Constant &c = kv.second;
        const bool ints = c.type.dtype == DType::Int64;
        ordered w = {{"shape", c.type.shape}};
        if (ints) w["dtype"] = "int64";
        const int64_t n = num_elements(c.type.shape);
        // JSON has no infinities or NaN (a mask's -inf): such values go to a file, whatever their count.
        const bool finite = ints || std::all_of(c.f32.begin(), c.f32.end(), [](float v) { return std::isfinite(v); });
        if (n <= 16 && finite) {
            w["values"] = ints ? ordered(c.i64) : ordered(c.f32);
        } else {
            std::string file = stem + "." + file_part(kv.first);
            for (int i = 2; files.count(file); i++) file = stem + "." + file_part(kv.first) + "_" + std::to_string(i);
            files.insert(file);
            file += ints ? ".i64" : ".f32";
            const std::string full = dir + "/" + file;
            std::ofstream out(full, std::ios::binary | std::ios::trunc);
            if (!out) throw Error("cannot write '" + full + "'");
            if (ints) {
                out.write(reinterpret_cast<const char *>(c.i64.data()), n * 8);
            } else {
                out.write(reinterpret_cast<const char *>(c.f32.data()), n * 4);
            }
            if (!out) throw Error("failed writing '" + full + "'");
            w["file"] = file;
            written.push_back(full);
        }
        weight_lines.push_back(json(kv.first).dump() + ": " + w.dump());
    }
    for (const Node &n : g.nodes) {
        ordered j = {{"name", n.name}, {"op", n.op}, {"inputs", n.inputs}};
        if (n.outputs != std::vector<std::string>{n.name}) j["outputs"] = n.outputs;
        if (!n.attrs.empty()) j["attrs"] = ordered::parse(n.attrs.dump());
        node_lines.push_back(j.dump());
    }
    auto block = [](const std::vector<std::string> &lines, const char *open, const char *close) {
        std::string s = open;
        for (size_t i = 0; i < lines.size(); i++) s += "\n    " + lines[i] + (i + 1 < lines.size() ? "," : "");
        return s + "\n  " + close;
    };
    std::ofstream out(path, std::ios::trunc);
    if (!out) throw Error("cannot write the model file").in_file(path);
    out << "{\n  \"format\": \"hfuse-model\", \"version\": 1, \"name\": " << json(g.name).dump() << ",\n"
        << "  \"inputs\": " << block(input_lines, "[", "]") << ",\n"
        << "  \"weights\": " << block(weight_lines, "{", "}") << ",\n"
        << "  \"nodes\": " << block(node_lines, "[", "]") << ",\n"
        << "  \"outputs\": " << json(g.outputs).dump() << "\n}\n";
    if (!out) throw Error("failed writing the model file").in_file(path);
    return written;
}

}  // namespace hfuse
