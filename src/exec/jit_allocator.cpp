#include "exec/jit_allocator.h"

#include "hfuse/hfuse_runtime.h"

#include <new>

// One block cache for the JIT executor and the compiled models: include/hfuse/hfuse_runtime.h.
namespace hfuse::exec {

void *jit_malloc(Halide::JITUserContext *, size_t size) {
    return hfuse_cached_malloc(nullptr, size);
}

void jit_free(Halide::JITUserContext *, void *ptr) {
    hfuse_cached_free(nullptr, ptr);
}

size_t jit_allocator_cached_bytes() {
    return hfuse_cached_bytes();
}

void *aot_malloc(void *, size_t size) {
    return hfuse_cached_malloc(nullptr, size);
}

void aot_free(void *, void *ptr) {
    hfuse_cached_free(nullptr, ptr);
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
