#include "explore/evaluator.h"

#include "hfuse/error.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace hfuse::explore {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void on_signal(int) {
    g_interrupted = 1;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

using Clock = std::chrono::steady_clock;

struct Running {
    size_t index;
    pid_t pid;
    Clock::time_point start;
    bool killed = false;
};

// fork + exec, the child in its own process group (so a timeout kills all of it) and killed if we die.
pid_t spawn(const ChildJob &job) {
    std::vector<char *> argv;
    for (const std::string &a : job.argv) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) throw Error(std::string("cannot start a child process: ") + std::strerror(errno));
    if (pid == 0) {
        // Only async-signal-safe calls from here to exec.
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        if (job.max_memory_bytes > 0) {
            const rlimit limit{static_cast<rlim_t>(job.max_memory_bytes), static_cast<rlim_t>(job.max_memory_bytes)};
            if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(127);
        }
        int in = open("/dev/null", O_RDONLY);
        int out = open(job.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(job.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0) _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(argv[0], argv.data());
        _exit(127);
    }
    setpgid(pid, pid);  // also from here, so the group exists before any kill
    return pid;
}

}  // namespace

bool out_of_memory(const ChildResult &r, int64_t max_memory_bytes) {
    if (max_memory_bytes <= 0 || !r.ran || r.timed_out || r.exit_code == 0) return false;
    for (const char *sign :
         {"std::bad_alloc", "Out of memory", "out of memory", "Cannot allocate memory", "failed to map segment"}) {
        if (r.err.find(sign) != std::string::npos || r.out.find(sign) != std::string::npos) return true;
    }
    return false;
}

bool interrupted() {
    return g_interrupted != 0;
}

void install_interrupt_handlers() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

bool run_children(const std::vector<ChildJob> &jobs, int parallel, double timeout_s,
                  const std::function<void(size_t, const ChildResult &)> &on_done, const std::function<void()> &on_tick,
                  const std::function<bool()> &stop_starting) {
    std::vector<Running> running;
    size_t next = 0;
    auto last_tick = Clock::now();
    while (next < jobs.size() || !running.empty()) {
        if (interrupted()) {
            for (Running &r : running) {
                kill(-r.pid, SIGKILL);
                waitpid(r.pid, nullptr, 0);
            }
            return false;
        }
        if (stop_starting && running.empty() && stop_starting()) break;
        while (next < jobs.size() && static_cast<int>(running.size()) < std::max(1, parallel) &&
               !(stop_starting && stop_starting())) {
            running.push_back({next, spawn(jobs[next]), Clock::now()});
            next++;
        }
        bool any = false;
        for (size_t i = 0; i < running.size();) {
            Running &r = running[i];
            int status = 0;
            struct rusage usage {};
            pid_t w = wait4(r.pid, &status, WNOHANG, &usage);
            const double elapsed = std::chrono::duration<double>(Clock::now() - r.start).count();
            const double limit = jobs[r.index].timeout_s > 0 ? jobs[r.index].timeout_s : timeout_s;
            if (w == 0 && elapsed > limit && !r.killed) {
                kill(-r.pid, SIGKILL);
                r.killed = true;
            }
            if (w == 0 || (w < 0 && errno == EINTR)) {
                i++;
                continue;
            }
            ChildResult res;
            res.ran = true;
            res.timed_out = r.killed;
            res.wall_s = elapsed;
            if (w > 0) res.peak_rss_mb = usage.ru_maxrss / 1024.0;  // the child and what it waited for
            if (w > 0 && WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
            if (w > 0 && WIFSIGNALED(status)) res.signal = WTERMSIG(status);
            const ChildJob &job = jobs[r.index];
            res.out = read_file(job.out_path);
            res.err = read_file(job.err_path);
            size_t index = r.index;
            running.erase(running.begin() + i);
            on_done(index, res);
            any = true;
        }
        if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (on_tick && Clock::now() - last_tick > std::chrono::milliseconds(200)) {
            on_tick();
            last_tick = Clock::now();
        }
    }
    return true;
}

}  // namespace hfuse::explore
