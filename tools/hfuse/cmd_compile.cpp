// hfuse compile MODEL -o DIR --name NAME: the model under a plan as one Halide pipeline, compiled ahead
// of time into DIR/NAME.a (Halide runtime included), DIR/NAME.h and DIR/hfuse_runtime.h (what NAME.h
// installs at start-up: a block cache as Halide's allocator, OpenMP for the parallel loops of a model
// of at least 1 MFLOP), plus Halide's HalideBuffer.h and HalideRuntime.h so that DIR alone is enough to
// build a caller (--emit adds Halide's lowered statement, HTML, assembly or LLVM IR beside them):
//
//   g++ -fopenmp -I DIR caller.cpp DIR/NAME.a -ldl -lpthread
#include "cli_common.h"
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/target.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace hfuse::cli {
namespace {

struct CompileOptions {
    ModelArg model;
    std::string dir, name, target = "host", depfile;
    std::vector<std::string> emit;
    PlanChoice plan;
};

// Halide's runtime headers, for callers on machines without Halide (HFUSE_HALIDE_INCLUDE_DIR: where
// the build found Halide.h).
void copy_runtime_headers(const std::string &dir) {
    namespace fs = std::filesystem;
    for (const char *h : {"HalideBuffer.h", "HalideRuntime.h"}) {
        fs::path from = fs::path(HFUSE_HALIDE_INCLUDE_DIR) / h;
        std::error_code ec;
        fs::copy_file(from, fs::path(dir) / h, fs::copy_options::overwrite_existing, ec);
        if (ec) throw Error("cannot copy " + from.string() + " into " + dir + ": " + ec.message());
    }
}

// Makefile syntax, as CMake's DEPFILE and Ninja read it: the library depends on the model's files,
// the plan and rule files.
void write_depfile(const CompileOptions &o, const std::string &library) {
    std::vector<std::string> deps = model_files(o.model.path);
    if (!o.plan.plan_file.empty()) deps.push_back(o.plan.plan_file);
    for (const std::string &r : o.plan.rules) {
        if (std::filesystem::exists(r)) deps.push_back(r);  // a file, not a built-in name
    }
    auto escape = [](const std::string &p) {
        std::string s;
        for (char c : p) s += (c == ' ' ? "\\ " : std::string(1, c));
        return s;
    };
    std::ofstream out(o.depfile);
    if (!out) throw Error("cannot write the depfile").in_file(o.depfile);
    out << escape(library) << ":";
    for (const std::string &d : deps) out << " \\\n  " << escape(std::filesystem::absolute(d).string());
    out << "\n";
}

int compile(const CompileOptions &o) {
    const Halide::Target target = parse_target_flag(o.target);
    if (!is_c_identifier(o.name)) {
        throw UsageError("--name '" + o.name + "' must be a C identifier (letters, digits, '_'; not a keyword)");
    }
    Graph g = o.model.load();
    FusedGraph plan = o.plan.make(g, target);
    std::error_code ec;
    std::filesystem::create_directories(o.dir, ec);
    if (ec) throw Error("cannot create the output directory: " + ec.message()).in_file(o.dir);

    ModelPipelineOptions mo;
    mo.target = target;
    mo.schedule = o.plan.options().schedule;
    mo.parallel_runtime = o.plan.options().parallel_runtime;
    ModelPipeline mp(plan, mo);
    mp.compile_to_static_library(o.dir, o.name, o.emit);
    copy_runtime_headers(o.dir);
    const std::string library = o.dir + "/" + o.name + ".a";
    if (!o.depfile.empty()) write_depfile(o, library);

    int groups = 0;
    for (const FusedGroup &grp : plan.groups) groups += !handed_out_values(plan, grp).empty();
    std::printf("compiled '%s' (plan %s, %d group%s, schedule %s) for %s:\n  %s (%.0f KiB)\n  %s/%s.h\n",
                g.name.c_str(), o.plan.describe().c_str(), groups, groups == 1 ? "" : "s", o.plan.schedule().c_str(),
                target.to_string().c_str(), library.c_str(), std::filesystem::file_size(library) / 1024.0,
                o.dir.c_str(), o.name.c_str());
    for (const std::string &e : o.emit) {
        const char *ext = e == "stmt" ? ".stmt" : e == "html" ? ".stmt.html" : e == "assembly" ? ".s" : ".ll";
        std::printf("  %s/%s%s (%s)\n", o.dir.c_str(), o.name.c_str(), ext, e.c_str());
    }
    std::printf("  int %s(", o.name.c_str());
    const auto &args = mp.arguments();
    for (size_t i = 0; i < args.size(); i++) {
        std::printf("%shalide_buffer_t *%s", i ? ", " : "", args[i].c_name.c_str());
    }
    std::printf(");\n  parallel loops: %s\n",
                mp.resolved_parallel_runtime() == ParallelRuntime::OpenMP
                    ? "OpenMP (build the caller with -fopenmp; else Halide's thread pool, with a warning)"
                    : "Halide's thread pool");
    // What the groups hand each other channel-blocked (no halo: a padded reader copies the blocks).
    const std::map<std::string, std::string> blocked = mp.value_layouts();
    if (!blocked.empty()) {
        std::printf("  handed between groups channel-blocked: %zu value%s", blocked.size(),
                    blocked.size() == 1 ? "" : "s");
        size_t shown = 0;
        for (const auto &[value, layout] : blocked) {
            if (shown++ == 4) {
                std::printf(", ...");
                break;
            }
            std::printf("%s %s (%s)", shown == 1 ? ":" : ",", value.c_str(),
                        layout.substr(0, layout.find(',')).c_str());
        }
        std::printf("\n");
    }
    return 0;
}

}  // namespace

Command add_compile(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "compile", "compile the model under a plan ahead of time: DIR/NAME.a (self-contained) and DIR/NAME.h");
    auto o = std::make_shared<CompileOptions>();
    o->model.add(cmd);
    o->plan.add_flags(cmd);
    o->plan.add_schedule_flags(cmd, "the whole compiled pipeline");
    cmd->add_option("-o,--output-dir", o->dir, "directory for NAME.a and NAME.h (created if missing)")->required();
    cmd->add_option("--name", o->name, "name of the library and of its function (a C identifier)")->required();
    cmd->add_option("--target", o->target, "Halide target string, e.g. host (default), x86-64-linux-avx2");
    cmd->add_option("--parallel-runtime", o->plan.parallel_runtime,
                    "who runs the compiled model's parallel loops: openmp (installed by NAME.h at start-up in a "
                    "program compiled with -fopenmp: each thread a fixed share of a loop's tasks), halide "
                    "(Halide's thread pool) or auto (default: openmp for models of at least 1 MFLOP)")
        ->check(CLI::IsMember({"auto", "openmp", "halide"}));
    cmd->add_option("--depfile", o->depfile, "also write the files the library depends on (Makefile syntax)");
    cmd->add_option("--emit", o->emit,
                    "also write Halide's views of the compiled pipeline beside the library, comma-separated: "
                    "stmt (NAME.stmt, the lowered statement), html (NAME.stmt.html), assembly (NAME.s), llvm "
                    "(NAME.ll)")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(CLI::IsMember({"stmt", "html", "assembly", "llvm"}));
    return {cmd, [o] { return compile(*o); }};
}

}  // namespace hfuse::cli
