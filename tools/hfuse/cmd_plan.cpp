// hfuse plan MODEL: plan fusion, print the groups, write the plan and a drawing.
#include "cli_common.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/plan_report.h"
#include "hfuse/target.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace hfuse::cli {
namespace {

struct PlanOptions {
    ModelArg model;
    std::string out, dot;
    PlanChoice choice;
};

int plan(const PlanOptions &o) {
    Graph g = o.model.load();
    FusedGraph plan = o.choice.make(g);
    // Schedules from outside (a plan file's, tuning records') are checked as run, bench, explain and
    // compile use them, before the plan is shown or written; the planner's own are the defaults.
    if (!o.choice.plan_file.empty() || !o.choice.tuned.empty()) check_schedules(plan, host_target());
    // -o - (or /dev/stdout, which a file opened anew would truncate under the table): the JSON alone
    // on stdout, what is said about it on stderr.
    const bool to_stdout = o.out == "-" || o.out == "/dev/stdout";
    std::FILE *said = to_stdout ? stderr : stdout;
    std::fprintf(said, "%s", plan_table(plan).c_str());
    if (to_stdout) {
        std::printf("%s\n", plan_to_json(plan).dump(2).c_str());
    } else if (!o.out.empty()) {
        write_plan(o.out, plan);
        std::printf("plan written to %s\n", o.out.c_str());
    }
    if (!o.dot.empty()) {
        std::ofstream f(o.dot);
        if (!(f << plan_dot(plan))) throw Error("cannot write '" + o.dot + "'");
        const std::string svg = std::filesystem::path(o.dot).replace_extension(".svg").string();
        std::fprintf(said, "graph written to %s (render: dot -Tsvg %s -o %s)\n", o.dot.c_str(), o.dot.c_str(),
                     svg.c_str());
    }
    return 0;
}

}  // namespace

Command add_plan(CLI::App &app) {
    auto *cmd = app.add_subcommand("plan", "plan fusion: print the groups, write the plan and a drawing");
    auto o = std::make_shared<PlanOptions>();
    o->model.add(cmd);
    o->choice.add_flags(cmd);
    cmd->add_option("-o,--output", o->out,
                    "write the plan as JSON (feed it back with run --plan); - (or /dev/stdout) prints it alone on "
                    "stdout, the table going to stderr");
    cmd->add_option("--dot", o->dot, "write a Graphviz drawing: groups as clusters, masters marked");
    return {cmd, [o] { return plan(*o); }};
}

}  // namespace hfuse::cli
