// The allocator of JIT-compiled group pipelines (Halide's root and per-tile buffers), the block cache
// of include/hfuse/hfuse_runtime.h that compiled models install too: a freed block large enough to
// come from the heap's top goes to the cache by size and serves the next request of that size,
// instead of returning to malloc. glibc trims the top of the heap when such a block is
// freed, so every run of a small model otherwise faulted its buffers in again: resnet_block (two 3x3
// 64->64 convs at 56x56) took 375 page faults per run, ~15% of its time (3.3 against 2.8 ms).
// A thread gets back the block it freed last before any other thread's: a per-task buffer then
// returns to the core whose caches hold it, where before the oldest block of the size, as often
// last written by the other core, came first. Zen 5, 2 threads, 4 alternations, medians:
// resnet_block 1.23-1.46 -> 1.22-1.42 ms, a 3x3 64->64 conv at 128x128 (0.5 and 0.6 MB buffers a
// task) 3.28-3.52 -> 3.28-3.32; in a quiet spell alike.
//
//   pipeline.jit_handlers().custom_malloc = exec::jit_malloc;
//   pipeline.jit_handlers().custom_free = exec::jit_free;
#pragma once

#include <Halide.h>

#include <cstddef>

namespace hfuse::exec {

// 64-byte aligned, at least `size` bytes (Halide needs 32 and may read 8 bytes past either end).
void *jit_malloc(Halide::JITUserContext *context, size_t size);
void jit_free(Halide::JITUserContext *context, void *ptr);

// The same free lists behind Halide::Buffer::allocate(cached_malloc, cached_free): the buffers the
// executor hands out each run (model outputs). glibc maps a block of 32 MB or more afresh for every
// malloc and unmaps it at free, so a run returning one faulted all of it in again: batch 8 of a 3x3
// 64->64 conv at 128x128 (a 32 MB output), 8,700 page faults a run, 81 against 23 ms.
void *cached_malloc(size_t size);
// The same block cache as halide_malloc / halide_free of the kernel cache's runtime.
void *aot_malloc(void *user_context, size_t size);
void aot_free(void *user_context, void *ptr);
void cached_free(void *ptr);

// Bytes held by free lists for reuse (for tests and diagnostics).
size_t jit_allocator_cached_bytes();

}  // namespace hfuse::exec
