#include "exec/jit_allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace hfuse::exec {
namespace {

constexpr size_t kHeader = 64;                    // keeps the block 64-byte aligned; holds its size
constexpr size_t kSmall = 64 * 1024;              // below this malloc's bins reuse blocks well enough
constexpr size_t kMaxCached = size_t{256} << 20;  // beyond this many cached bytes, blocks go back

struct Cache {
    std::mutex mutex;
    // By rounded size and the thread that freed them, the most recent last: a thread gets back the block
    // it freed last (still in its core's caches), another's only when it has none of that size.
    std::map<size_t, std::map<std::thread::id, std::vector<void *>>> free_blocks;
    size_t cached_bytes = 0;
};

Cache &cache() {
    static Cache *c = new Cache;  // never destroyed: pipelines may free after static destructors ran
    return *c;
}

// Whole pages, with the header before the block and at least 64 bytes after it (Halide may read 8
// past the end; a block ending on a page boundary could end the mapping).
size_t rounded(size_t size) {
    const size_t page = 4096;
    return (size + 2 * kHeader + page - 1) / page * page;
}

}  // namespace

void *jit_malloc(Halide::JITUserContext *, size_t size) {
    const size_t bytes = rounded(size);
    if (bytes >= kSmall) {
        Cache &c = cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        auto sized = c.free_blocks.find(bytes);
        if (sized != c.free_blocks.end()) {
            auto by_thread = sized->second.find(std::this_thread::get_id());
            if (by_thread == sized->second.end()) by_thread = sized->second.begin();
            void *block = by_thread->second.back();
            by_thread->second.pop_back();
            if (by_thread->second.empty()) sized->second.erase(by_thread);
            if (sized->second.empty()) c.free_blocks.erase(sized);
            c.cached_bytes -= bytes;
            return static_cast<char *>(block) + kHeader;
        }
    }
    void *block = std::aligned_alloc(kHeader, bytes);
    if (!block) return nullptr;  // Halide reports the failed allocation
    *static_cast<size_t *>(block) = bytes;
    return static_cast<char *>(block) + kHeader;
}

void jit_free(Halide::JITUserContext *, void *ptr) {
    if (!ptr) return;
    void *block = static_cast<char *>(ptr) - kHeader;
    const size_t bytes = *static_cast<size_t *>(block);
    if (bytes >= kSmall) {
        Cache &c = cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        if (c.cached_bytes + bytes <= kMaxCached) {
            c.free_blocks[bytes][std::this_thread::get_id()].push_back(block);
            c.cached_bytes += bytes;
            return;
        }
    }
    std::free(block);
}

size_t jit_allocator_cached_bytes() {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    return c.cached_bytes;
}

void *cached_malloc(size_t size) {
    // Halide::Buffer::allocate() writes its header into the block unchecked: fail here instead.
    void *p = jit_malloc(nullptr, size);
    if (!p) throw std::bad_alloc();
    return p;
}

void cached_free(void *ptr) {
    jit_free(nullptr, ptr);
}

}  // namespace hfuse::exec
