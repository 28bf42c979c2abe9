// hfuse import MODEL.onnx -o MODEL.json: an ONNX model written in hfuse's JSON format, its weights as
// raw files beside it (the translation every command applies to an .onnx file, made visible and
// editable).
#include "cli_common.h"
#include "hfuse/error.h"

#include <cstdio>

namespace hfuse::cli {
namespace {

struct ImportOptions {
    ModelArg model;
    std::string out;
};

int import_model(const ImportOptions &o) {
    if (o.out.size() < 5 || o.out.substr(o.out.size() - 5) != ".json") {
        throw UsageError("-o " + o.out + ": the output must be a .json file (weights are written beside it)");
    }
    Graph g = o.model.load();
    std::vector<std::string> files = save_model(g, o.out);
    int64_t bytes = 0;
    for (const auto &kv : g.weights) {
        bytes += num_elements(kv.second.type.shape) * (kv.second.type.dtype == DType::Int64 ? 8 : 4);
    }
    std::printf("imported '%s' (%s): %zu nodes, %zu weights (%.1f MiB)\n  %s\n  %zu weight file%s beside it\n",
                g.name.c_str(), o.model.path.c_str(), g.nodes.size(), g.weights.size(), bytes / 1048576.0,
                o.out.c_str(), files.size(), files.size() == 1 ? "" : "s");
    return 0;
}

}  // namespace

Command add_import(CLI::App &app) {
    auto *cmd = app.add_subcommand("import", "write a model (ONNX) as hfuse JSON, its weights as .f32 files beside it");
    auto o = std::make_shared<ImportOptions>();
    o->model.add(cmd);
    cmd->add_option("-o,--output", o->out, "the JSON model to write (weights go beside it)")->required();
    return {cmd, [o] { return import_model(*o); }};
}

}  // namespace hfuse::cli
