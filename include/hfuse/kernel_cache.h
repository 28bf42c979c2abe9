// The persistent kernel cache, as its users manage it (`hfuse cache info|clear`). Executors use it
// with ExecutorOptions::kernel_cache; how it works: src/exec/kernel_cache.h.
#pragma once

#include <cstdint>
#include <string>

namespace hfuse {

// $HFUSE_CACHE_DIR, else $XDG_CACHE_HOME/hfuse, else $HOME/.cache/hfuse; throws an Error if none is set.
std::string default_kernel_cache_dir();

struct KernelCacheSummary {
    std::string dir;
    int entries = 0;    // compiled groups stored
    int64_t bytes = 0;  // on disk, the shared Halide runtime libraries included
};

KernelCacheSummary kernel_cache_summary(const std::string &dir);
// Removes every entry and runtime library in `dir`; returns how many entries there were.
int clear_kernel_cache(const std::string &dir);

}  // namespace hfuse
