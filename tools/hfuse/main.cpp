// The hfuse command-line tool. Exit codes: 0 success, 1 bad model/plan/data or failed check, 2 bad usage.
#include "cli_common.h"
#include "hfuse/error.h"
#include "hfuse/version.h"

#include <cstdio>

int main(int argc, char **argv) {
    using namespace hfuse::cli;
    CLI::App app{"hfuse: operator fusion and schedule composition on Halide"};
    app.require_subcommand(1);
    app.set_version_flag(
        "--version", [] { return hfuse::version_report(); },
        "print hfuse's version, Halide's, the default target and the CPU, and exit");
    int threads = 0;
    auto *threads_opt = app.add_option("--threads", threads, "Halide worker threads (default: one per core)")
                            ->check(CLI::NonNegativeNumber);
    std::vector<Command> commands = {add_info(app),  add_plan(app), add_explain(app), add_run(app),
                                     add_bench(app), add_demo(app), add_compile(app)};
    commands.push_back(add_explore(app));
    commands.push_back(add_import(app));
    commands.push_back(add_cache(app));
    // --threads is accepted after the command too: `hfuse run m.json --threads 2`.
    for (Command &c : commands) {
        c.app->add_option("--threads", threads, threads_opt->get_description())->check(CLI::NonNegativeNumber);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    try {
        hfuse::set_num_threads(threads);
        for (Command &c : commands) {
            if (c.app->parsed()) return c.run();
        }
    } catch (const UsageError &e) {
        std::fprintf(stderr, "hfuse: %s\n", e.what());
        return 2;
    } catch (const hfuse::Error &e) {
        std::fprintf(stderr, "hfuse: error: %s\n", e.what());
        return 1;
    } catch (const Halide::Error &e) {
        std::fprintf(stderr, "hfuse: Halide error: %s\n", e.what());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "hfuse: internal error: %s\n", e.what());
        return 1;
    }
    return 0;
}
