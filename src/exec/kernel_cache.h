// The persistent kernel cache: compiled groups kept on disk, so that a later process (a second
// `hfuse run`, `bench`, or explore's next candidate) loads a group's code instead of compiling it.
//
// An entry is a directory named by the hash of its key, holding the group compiled ahead of time as a
// shared library (Halide's object output, linked by binutils' `ld -shared`, or `$CC -shared`) and meta.json: the full
// key, the library's size and content hash, its function's name, and what compiling it cost. The key
// is the executor's group key (ops, attributes, shapes, wiring, layouts, schedule, target: see
// executor.cpp) plus source_hash() (every source of hfuse and Halide's version), so any change to the
// code that builds kernels misses rather than loads stale code. Constants are the code's parameters
// (ops::ConstantParams): an entry serves every group of that structure, whatever its weights.
//
// Entries are written into a temporary directory and renamed into place (atomic: two processes
// filling one cache see either no entry or a whole one, and the second rename loses harmlessly).
// Before a library is loaded its meta.json is parsed and checked (format, key, size, hash): a corrupt,
// truncated or foreign entry is reported once as a note, removed and compiled again, never loaded.
// Entries are evicted least recently used (meta.json's mtime, touched by every load) beyond a size
// bound, measured after a process stored entries (only stores grow the cache: measuring walks every
// entry, 1.4 s for 14,000 of them, which a process that only loads does not pay). The kernels share
// one Halide runtime, compiled for the target once into the cache as a shared library of its own and
// loaded with its symbols global; hfuse installs its allocator, error handler and parallel loop there.
// Every kernel takes a user context naming the parallel runtime a call runs on (OpenMP or Halide's
// pool), so one entry serves either.
#pragma once

#include "hfuse/executor.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hfuse::exec {

// The identity of hfuse's kernel-building sources and Halide's version (generated at build time).
const char *source_hash();
const char *halide_version();

// $HFUSE_CACHE_DIR, else $XDG_CACHE_HOME/hfuse, else $HOME/.cache/hfuse.
std::string default_kernel_cache_dir();

constexpr int64_t kDefaultKernelCacheBytes = int64_t{2} << 30;

// A group's code loaded from the cache.
class CachedKernel {
public:
    ~CachedKernel();
    CachedKernel(const CachedKernel &) = delete;
    CachedKernel &operator=(const CachedKernel &) = delete;

    // Runs the kernel on `buffers` (its inputs, then its constants, then its outputs, in the order
    // it was stored with) with `runtime`'s parallel loops; throws an Error with Halide's message if
    // the kernel fails (a buffer of the wrong shape, say).
    void run(const std::vector<halide_buffer_t *> &buffers, ParallelRuntime runtime) const;

    const nlohmann::json &meta() const { return meta_; }
    int num_buffers() const { return num_buffers_; }

private:
    friend class KernelCache;
    CachedKernel() = default;
    void *library_ = nullptr;
    int (*argv_)(void **) = nullptr;
    int num_buffers_ = 0;
    nlohmann::json meta_;
};

// What KernelCache::evict() did.
struct Eviction {
    bool measured = false;  // the cache's size was measured against its bound (every entry read)
    int removed = 0;        // entries removed to keep it within the bound
};

struct KernelCacheInfo {
    std::string dir;
    int entries = 0;
    int64_t bytes = 0;
    int64_t max_bytes = 0;
};

class KernelCache {
public:
    // The cache in `dir` (created when first written) of kernels for `target`, holding at most about
    // `max_bytes`.
    KernelCache(std::string dir, const Halide::Target &target, int64_t max_bytes = kDefaultKernelCacheBytes);

    const std::string &dir() const { return dir_; }

    // The kernel stored under `key`, or null if there is none. An entry that fails its checks is
    // removed, and why is added to notes(). Adds to `runtime_ms` (if given) the milliseconds the call
    // spent on the shared runtime rather than the kernel: loading it, building it (runtime_compile_ms)
    // or waiting for another thread that does.
    std::shared_ptr<CachedKernel> load(const std::string &key, double *runtime_ms = nullptr);

    // Compiles `pipeline` (scheduled) ahead of time for the target into an entry under `key` and loads
    // it. The kernel's buffers: `args` (inputs and constants, in order), then the pipeline's outputs.
    // `meta` is stored beside it (compile_ms, schedule, ...) and returned by CachedKernel::meta().
    // Throws an Error if the system cannot link it (no `cc`); Halide::Error if Halide fails. Loading it
    // builds the shared runtime if the cache has none (the kernel's own compile needs none): the time
    // that takes is added to `runtime_ms`, as load() does, and is not in the entry's compile_ms.
    std::shared_ptr<CachedKernel> store(const std::string &key, Halide::Pipeline pipeline,
                                        const std::vector<Halide::Argument> &args, nlohmann::json meta,
                                        double *runtime_ms = nullptr);

    // Milliseconds this object spent building (compiling and linking) the shared Halide runtime into
    // the cache: once per process and target, by the first load or store in a cache without it; 0
    // when it was loaded from the cache, or this process had it already.
    double runtime_compile_ms() const;

    // Keeps the cache within its bound after this object stored entries: removes the least recently
    // used ones until it holds at most its bound (those this process loaded or stored stay), and
    // writers' temporary directories a day old. Reads no directory when nothing was stored.
    Eviction evict();

    KernelCacheInfo info() const;
    // Removes every entry (and the runtime library); returns how many entries there were.
    int clear();

    // Problems met, one line each, each said once (a corrupt entry, an eviction that failed).
    std::vector<std::string> notes() const;

private:
    void note(const std::string &text);
    static std::string full_key(const std::string &key);
    std::string entry_dir(const std::string &key) const;

    std::string dir_;
    Halide::Target target_;  // the runtime's (no JIT)
    int64_t max_bytes_;
    mutable std::mutex mutex_;
    std::vector<std::string> notes_;
    std::vector<std::string> used_;  // entry directories this process loaded or stored
    int stored_ = 0;                 // entries this object stored
    double runtime_compile_ms_ = 0;  // runtime_compile_ms()
};

}  // namespace hfuse::exec
