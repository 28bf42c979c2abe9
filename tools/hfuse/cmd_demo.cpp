// hfuse demo [MODEL]: plan the bundled conv+bias+relu+maxpool model, check fused and unfused against
// the reference, and time both.
#include "cli_common.h"
#include "hfuse/model_io.h"
#include "hfuse/plan_report.h"
#include "hfuse/planner.h"

#include <algorithm>
#include <cstdio>

#ifndef HFUSE_MODELS_DIR
#define HFUSE_MODELS_DIR "models"
#endif

namespace hfuse::cli {

int print_info(const std::string &path);  // cmd_info.cpp

namespace {

int demo(const std::string &path) {
    std::printf("hfuse demo: %s\n\n", path.c_str());
    print_info(path);
    Graph g = load_model(path);
    FusedGraph plan = plan_fusion(g, {load_rules("x86")});
    std::printf("\n%s\n", plan_table(plan).c_str());
    auto inputs = load_inputs(g, {}, false);

    Executor fused(plan), unfused(singleton_groups(g));
    bool ok = true;
    for (auto *ex : {&fused, &unfused}) {
        std::printf("%s:\n", ex == &fused ? "fused (x86 plan)" : "unfused");
        ok = check_against_reference(g, inputs, ex->run(inputs)) && ok;
    }
    // Interleaved, so both see the same machine conditions.
    double fused_ms = 1e30, unfused_ms = 1e30;
    for (int round = 0; round < 3; round++) {
        for (double ms : time_runs(fused, inputs, 5)) fused_ms = std::min(fused_ms, ms);
        for (double ms : time_runs(unfused, inputs, 5)) unfused_ms = std::min(unfused_ms, ms);
    }
    std::printf("\nfused %.3f ms (%d group%s), unfused %.3f ms (%d groups): %.2fx\n", fused_ms, fused.num_groups(),
                fused.num_groups() == 1 ? "" : "s", unfused_ms, unfused.num_groups(), unfused_ms / fused_ms);
    std::printf("%s\n", ok ? "demo: OK" : "demo: FAILED");
    return ok ? 0 : 1;
}

}  // namespace

Command add_demo(CLI::App &app) {
    auto *cmd =
        app.add_subcommand("demo", "run the bundled conv+bias+relu+maxpool model fused and unfused, and check it");
    auto model = std::make_shared<std::string>(std::string(HFUSE_MODELS_DIR) + "/conv_bias_relu_maxpool.json");
    cmd->add_option("MODEL", *model, "model file (default: the bundled one)");
    return {cmd, [model] { return demo(*model); }};
}

}  // namespace hfuse::cli
