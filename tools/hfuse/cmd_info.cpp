// hfuse info MODEL: the graph with inferred shapes, pattern kinds and FLOPs.
#include "cli_common.h"
#include "hfuse/model_io.h"
#include "hfuse/op_registry.h"

#include <cstdio>

namespace hfuse::cli {

int print_info(const ModelArg &model) {
    const std::string &path = model.path;
    Graph g = model.load();
    std::printf("model '%s' (%s): %zu nodes\n", g.name.c_str(), path.c_str(), g.nodes.size());
    for (const auto &in : g.inputs) std::printf("  input  %-20s [%s]\n", in.name.c_str(), to_string(in.shape).c_str());
    for (const auto &o : g.outputs)
        std::printf("  output %-20s [%s]\n", o.c_str(), to_string(g.type_of(o).shape).c_str());
    std::printf("\n%-22s %-20s %-20s %-22s %12s\n", "node", "op", "kind", "output", "MFLOP");
    double total = 0;
    for (const Node &n : g.nodes) {
        double flops = node_flops(g, n);
        total += flops;
        for (size_t i = 0; i < n.outputs.size(); i++) {
            std::printf("%-22s %-20s %-20s %-22s %12.3f\n", i ? "" : n.name.c_str(), i ? "" : n.op.c_str(),
                        i ? "" : to_string(find_op(n.op)->kind), to_string(g.type_of(n.outputs[i]).shape).c_str(),
                        i ? 0.0 : flops / 1e6);
        }
    }
    int64_t weight_bytes = 0;
    for (const auto &kv : g.weights)
        weight_bytes += num_elements(kv.second.type.shape) * (kv.second.type.dtype == DType::Int64 ? 8 : 4);
    std::printf("\ntotal: %.3f MFLOP, %zu weights (%.1f KiB)\n", total / 1e6, g.weights.size(), weight_bytes / 1024.0);
    return 0;
}

// For `hfuse demo` (cmd_demo.cpp).
int print_info(const std::string &path) {
    ModelArg model;
    model.path = path;
    return print_info(model);
}

Command add_info(CLI::App &app) {
    auto *cmd = app.add_subcommand("info", "print the graph with inferred shapes, pattern kinds and FLOPs");
    auto model = std::make_shared<ModelArg>();
    model->add(cmd);
    return {cmd, [model] { return print_info(*model); }};
}

}  // namespace hfuse::cli
