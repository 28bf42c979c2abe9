// Timing candidates in child processes: each candidate is `hfuse bench ... --json` (the same harness
// as the command), run with its stdout and stderr in files, killed (its whole process group) when it
// outlives its timeout, and several at once with jobs > 1. A crash, an error or a timeout is a
// result like any other. The children die with the explorer (PR_SET_PDEATHSIG), and an interrupt
// (SIGINT, SIGTERM) kills the running ones and stops the batch, so what finished can be resumed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hfuse::explore {

struct ChildJob {
    std::vector<std::string> argv;  // argv[0] is the program's path
    std::string out_path, err_path;
    int64_t max_memory_bytes = 0;  // its address space (RLIMIT_AS); 0: no bound
    double timeout_s = 0;          // 0: run_children's
};

struct ChildResult {
    bool ran = false;        // false: interrupted before it started
    bool timed_out = false;  // killed after the timeout
    int exit_code = -1;      // when it exited
    int signal = 0;          // when a signal ended it
    double wall_s = 0;
    double peak_rss_mb = 0;  // its peak resident memory (wait4's rusage)
    std::string out, err;    // what it wrote (read back from the files)
};

// Whether a child that failed ran out of the `max_memory_bytes` its job allowed (its error output
// says so); false when there was no bound.
bool out_of_memory(const ChildResult &result, int64_t max_memory_bytes);

// Runs `jobs` (at most `parallel` at once, each under `timeout_s`), calling `on_done` as each ends
// and `on_tick` every ~0.2 s while any runs. Returns false if an interrupt stopped it.
// `stop_starting`, when given and true, starts no more jobs (those running finish).
bool run_children(const std::vector<ChildJob> &jobs, int parallel, double timeout_s,
                  const std::function<void(size_t, const ChildResult &)> &on_done, const std::function<void()> &on_tick,
                  const std::function<bool()> &stop_starting = nullptr);

// Whether SIGINT or SIGTERM arrived since install_interrupt_handlers().
bool interrupted();
void install_interrupt_handlers();

}  // namespace hfuse::explore
