#include "exec/parallel_runtime.h"

#include "hfuse/error.h"
#include "hfuse/executor.h"

#include "hfuse/hfuse_runtime.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>

namespace hfuse {

const char *to_string(ParallelRuntime r) {
    switch (r) {
    case ParallelRuntime::Auto: return "auto";
    case ParallelRuntime::OpenMP: return "openmp";
    case ParallelRuntime::Halide: return "halide";
    }
    return "?";
}

ParallelRuntime parse_parallel_runtime(const std::string &name) {
    for (ParallelRuntime r : {ParallelRuntime::Auto, ParallelRuntime::OpenMP, ParallelRuntime::Halide}) {
        if (name == to_string(r)) return r;
    }
    throw Error("unknown parallel runtime '" + name + "': expected auto, openmp or halide");
}

}  // namespace hfuse

namespace hfuse::exec {
namespace {

int threads_from_environment() {
    const char *env = std::getenv("HL_NUM_THREADS");
    const int n = env ? std::atoi(env) : 0;
    return n > 0 ? n : omp_get_num_procs();
}

std::atomic<uint64_t> loops_run{0};

std::atomic<int> &thread_count() {
    static std::atomic<int> n{threads_from_environment()};
    return n;
}

}  // namespace

ParallelRuntime resolve_parallel_runtime(ParallelRuntime requested, double flops) {
    if (requested != ParallelRuntime::Auto) return requested;
    return flops >= kOpenMPMinFlops ? ParallelRuntime::OpenMP : ParallelRuntime::Halide;
}

void use_parallel_runtime(Halide::Pipeline &pipeline, ParallelRuntime runtime) {
    if (runtime == ParallelRuntime::Auto) throw Error("internal: use_parallel_runtime needs Auto resolved");
    pipeline.jit_handlers().custom_do_par_for = runtime == ParallelRuntime::OpenMP ? openmp_do_par_for : nullptr;
}

void set_openmp_threads(int n) {
    thread_count().store(n > 0 ? n : omp_get_num_procs());
}

int openmp_threads() {
    return thread_count().load();
}

uint64_t openmp_loops_run() {
    return loops_run.load();
}

int openmp_do_par_for(Halide::JITUserContext *context, int (*task)(Halide::JITUserContext *, int, uint8_t *), int min,
                      int extent, uint8_t *closure) {
    loops_run.fetch_add(1, std::memory_order_relaxed);
    // The loop the compiled models run on too (hfuse_runtime.h), its tasks called with the JIT's context.
    struct JitLoop {
        int (*task)(Halide::JITUserContext *, int, uint8_t *);
        Halide::JITUserContext *context;
    } loop{task, context};
    auto run_task = [](void *loop, int i, uint8_t *closure) {
        const JitLoop *l = static_cast<const JitLoop *>(loop);
        return l->task(l->context, i, closure);
    };
    return hfuse_openmp_par_for(&loop, run_task, min, extent, closure, openmp_threads());
}

int openmp_do_par_for_aot(void *user_context, int (*task)(void *, int, uint8_t *), int min, int extent,
                          uint8_t *closure) {
    loops_run.fetch_add(1, std::memory_order_relaxed);
    return hfuse_openmp_par_for(user_context, task, min, extent, closure, openmp_threads());
}

}  // namespace hfuse::exec
