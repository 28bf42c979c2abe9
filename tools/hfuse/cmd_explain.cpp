// hfuse explain MODEL: what fusion does to the loops. For each group of the plan, its members and their
// placement, its schedule and why, the loop nest Halide runs for it (the group compiled as one
// pipeline, as the executor compiles it), and beside it the loop nests of the same ops unfused (each
// its own pipeline, with its own default schedule), with the bytes of intermediates the fusion keeps
// out of memory.
#include "cli_common.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/fusion_cost.h"
#include "hfuse/loop_nest.h"
#include "hfuse/model_pipeline.h"

#include <cstdio>
#include <sstream>

namespace hfuse::cli {
namespace {

struct ExplainOptions {
    ModelArg model;
    PlanChoice choice;
    std::string group, target = "host";
};

std::string indented(const std::string &text, int spaces) {
    std::istringstream in(text);
    std::string out;
    for (std::string line; std::getline(in, line);) out += std::string(spaces, ' ') + line + "\n";
    return out;
}

// `groups` of `plan` on their nodes alone: a plan over the subgraph of their nodes (subgraph()).
FusedGraph plan_of(const FusedGraph &plan, std::vector<FusedGroup> groups) {
    std::set<std::string> nodes;
    for (const FusedGroup &grp : groups) nodes.insert(grp.nodes.begin(), grp.nodes.end());
    FusedGraph f;
    f.graph = subgraph(plan.graph, nodes);
    f.rewritten = plan.rewritten;
    f.rules = plan.rules;
    f.source = plan.source;
    f.groups = std::move(groups);
    return check_plan(std::move(f));
}

std::string nest(const FusedGraph &plan, const Halide::Target &target, ScheduleSource schedule) {
    ModelPipelineOptions mo;
    mo.target = target;
    mo.schedule = schedule;
    ModelPipeline mp(plan, mo);
    return loop_nest(mp.pipeline(), mp.halide_arguments(), target);
}

int explain(const ExplainOptions &o) {
    const Halide::Target target = parse_target_flag(o.target);
    const Graph g = o.model.load();
    const FusedGraph plan = o.choice.make(g, target);
    const ScheduleSource schedule = o.choice.options().schedule;
    bool found = o.group.empty();
    for (const FusedGroup &grp : plan.groups) found |= grp.name == o.group;
    if (!found) {
        std::string names;
        for (const FusedGroup &grp : plan.groups) names += (names.empty() ? "" : ", ") + grp.name;
        throw UsageError("--group '" + o.group + "': the plan has no such group (it has " + names + ")");
    }
    std::printf("explain '%s': plan %s, %s, schedule %s, loop nests for %s\n", g.name.c_str(),
                o.choice.describe().c_str(), counted(static_cast<long>(plan.groups.size()), "group").c_str(),
                o.choice.schedule().c_str(), target.to_string().c_str());
    for (const FusedGroup &grp : plan.groups) {
        if (!o.group.empty() && grp.name != o.group) continue;
        std::string members;
        for (const std::string &n : grp.nodes) {
            members += (members.empty() ? "" : ", ") + n + " " + to_string(grp.placement.at(n));
            for (const std::string &a : plan.graph.find_node(n)->absorbed) members += ", " + a + " folded";
        }
        std::printf("\ngroup %s (master %s): %s\n", grp.name.c_str(), grp.master.c_str(), members.c_str());
        if (!grp.why.empty()) std::printf("  why: %s\n", grp.why.c_str());
        if (!grp.backend.empty()) {
            std::printf("  claimed by backend pattern '%s': its kernel is the backend's own, no Halide loop nest\n",
                        grp.backend.c_str());
            continue;
        }
        if (schedule == ScheduleSource::Templates && grp.schedule.is_object()) {
            std::printf(
                "  schedule: %s%s\n", grp.schedule.value("template", std::string("?")).c_str(),
                grp.schedule.contains("why") ? (" (" + grp.schedule["why"].get<std::string>() + ")").c_str() : "");
        }
        // "fused" where there is something fused: not over a group of one op, nor an unfused plan's.
        const bool fused = grp.nodes.size() > 1 && !o.choice.unfused;
        std::printf("  %s:\n%s", fused ? "fused, one pipeline" : "one pipeline",
                    indented(nest(plan_of(plan, {grp}), target, schedule), 4).c_str());
        std::vector<std::string> own;  // the nodes it computes (not a copy another group owns)
        for (const std::string &n : grp.nodes) {
            if (!is_recompute_copy(grp, n)) own.push_back(n);
        }
        if (own.size() < 2) continue;
        std::printf("  unfused, each op its own pipeline (values between them in memory):\n");
        for (const std::string &n : own) {
            FusedGroup alone;
            alone.nodes = {n};
            FusedGraph single = with_default_schedules(plan_of(plan, {alone}), target);
            single.source.clear();  // its schedule is the defaults, not the plan file's
            std::printf("    %s (%s):\n%s", n.c_str(), plan.graph.find_node(n)->op.c_str(),
                        indented(nest(single, target, schedule), 6).c_str());
        }
        std::printf("  intermediates the fusion keeps out of memory: %s\n",
                    human_bytes(intermediate_bytes_saved(plan, grp)).c_str());
    }
    return 0;
}

}  // namespace

Command add_explain(CLI::App &app) {
    auto *cmd =
        app.add_subcommand("explain", "show each group's loop nest, fused, beside the same ops' loop nests unfused");
    auto o = std::make_shared<ExplainOptions>();
    o->model.add(cmd);
    o->choice.add_flags(cmd);
    o->choice.add_schedule_flags(cmd, "each group");
    cmd->add_option("--group", o->group, "only this group (a name `hfuse plan` prints: g0, g1, ...)");
    cmd->add_option("--target", o->target, "Halide target string the loop nests are for (default: host)");
    return {cmd, [o] { return explain(*o); }};
}

}  // namespace hfuse::cli
