#include "exec/jit_runtime.h"

#include <chrono>
#include <mutex>

namespace hfuse::exec {

double compile_jit_runtime(const Halide::Target &target) {
    static std::mutex mutex;
    static bool compiled = false;
    std::lock_guard<std::mutex> lock(mutex);
    if (compiled) return 0;
    const auto start = std::chrono::steady_clock::now();
    // JIT-compiling any pipeline builds the runtime if the process has none yet (Halide keeps the
    // first one for every later pipeline); this one's own code is a few instructions.
    Halide::Func f("hfuse_jit_runtime");
    Halide::Var x;
    f(x) = x;
    f.compile_jit(target);
    compiled = true;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace hfuse::exec
