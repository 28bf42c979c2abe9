// ModelArg: the MODEL argument and --shape, shared by the commands that load a model.
#include "cli_common.h"

#include <algorithm>
#include <cctype>

namespace hfuse::cli {

void ModelArg::add(CLI::App *cmd) {
    cmd->add_option("MODEL", path, "model file (.json, or .onnx)")->required();
    cmd->add_option("--shape", shapes,
                    "NAME=DIMS, e.g. input=1x3x224x224: the shape of a model input with dynamic dims (ONNX)")
        ->allow_extra_args(false);
}

LoadOptions ModelArg::options() const {
    LoadOptions o;
    for (const std::string &s : shapes) {
        const auto eq = s.rfind('=');
        const std::string bad = "--shape " + s + ": expected NAME=DIMS with positive dims, e.g. input=1x3x224x224";
        if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) throw UsageError(bad);
        Shape shape;
        size_t pos = eq + 1;
        while (pos <= s.size()) {
            const size_t x = std::min(s.find('x', pos), s.size());
            const std::string dim = s.substr(pos, x - pos);
            if (dim.empty() || dim.size() > 12 || !std::all_of(dim.begin(), dim.end(), ::isdigit))
                throw UsageError(bad);
            shape.push_back(std::stoll(dim));
            if (shape.back() < 1) throw UsageError(bad);
            pos = x + 1;
        }
        if (!o.input_shapes.emplace(s.substr(0, eq), shape).second) {
            throw UsageError("--shape: '" + s.substr(0, eq) + "' is given twice");
        }
    }
    return o;
}

}  // namespace hfuse::cli
