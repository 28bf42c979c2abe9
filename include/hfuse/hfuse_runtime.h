/* hfuse_runtime.h: what hfuse runs Halide pipelines on besides Halide's own runtime, for the JIT
 * executor and for the models `hfuse compile` writes (copied beside NAME.h, which includes it).
 * C or C++, header-only, every function `static`; POSIX threads.
 *
 * - A block cache behind halide_malloc / halide_free. A freed block of at least 64 KiB goes to a
 *   cache by size and serves the next request of that size, the block the asking thread freed last
 *   first (it is still in that core's caches). glibc otherwise hands such blocks back to the system
 *   (the heap's top trimmed, or mmap'ed and unmapped), and every run faults its buffers in again: a
 *   compiled conv + bias + relu + 2x2 max-pool at 56x56 (14 tasks, two buffers each) took 2.1-2.8 ms
 *   a run on Halide's default allocator, 0.72 on this one (Zen 5, 2 threads).
 * - With OpenMP (compiled with -fopenmp), a halide_do_par_for split as OpenMP's static schedule
 *   splits a loop: each thread the same contiguous share of a loop's tasks in every loop, so a core
 *   reads back from its own caches what it wrote in the previous loop or run
 *   (src/exec/parallel_runtime.h for figures), run on worker threads of its own that start a loop
 *   faster than an OpenMP parallel region does (OpenMP's threads when another thread's loop holds
 *   them).
 * - hfuse_runtime_install(): makes them Halide's, where the program has not installed its own.
 *
 *   halide_set_custom_malloc(hfuse_cached_malloc);  // what hfuse_runtime_install() does
 *   halide_set_custom_free(hfuse_cached_free);
 *   halide_set_custom_do_par_for(hfuse_openmp_do_par_for);
 */
#ifndef HFUSE_RUNTIME_H
#define HFUSE_RUNTIME_H

#ifndef HALIDE_HALIDERUNTIME_H /* a compiled model's header holds a copy */
#include "HalideRuntime.h"
#endif

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#include <sched.h>
#include <unistd.h>
#endif

/* ---- the block cache ------------------------------------------------------------------------- */

enum {
    /* Before each buffer, keeping it 64-byte aligned; holds (from its end) the block's size, its
     * cookie and the pointer malloc returned. */
    HFUSE_BLOCK_HEADER = 64,
    HFUSE_CACHE_SLOTS = 256 /* blocks the cache holds at most */
};
#define HFUSE_SMALL_BLOCK ((size_t)64 << 10) /* below this, malloc's bins reuse blocks well enough */
#define HFUSE_MAX_CACHED ((size_t)256 << 20) /* beyond this many cached bytes, blocks go back */
/* Beside each block's size, its address xor this: how hfuse_cached_free tells its own blocks from
 * those another allocator made (it is cleared before a block goes back to free()). */
#define HFUSE_BLOCK_COOKIE ((uintptr_t)0x6866757365626c6bULL)

struct hfuse_cached_block {
    char *block;
    size_t bytes;
    pthread_t freed_by;
};

struct hfuse_block_cache {
    pthread_mutex_t mutex;
    size_t count, cached_bytes;
    struct hfuse_cached_block blocks[HFUSE_CACHE_SLOTS]; /* the most recently freed last */
    /* Where a block hfuse_cached_malloc did not make goes (set by hfuse_runtime_install). */
    void (*foreign_free)(void *user_context, void *ptr);
};

/* One cache per translation unit that includes this header: the one whose functions are installed. */
static inline struct hfuse_block_cache *hfuse_block_cache(void) {
    static struct hfuse_block_cache cache = {PTHREAD_MUTEX_INITIALIZER, 0, 0, {{NULL, 0, 0}}, NULL};
    return &cache;
}

/* A block's size: whole pages (few sizes, each reused run after run) with the header before the
 * buffer and at least 64 bytes after it (Halide may read 8 bytes past either end of a buffer). */
static inline size_t hfuse_block_bytes(size_t size) {
    const size_t page = 4096;
    return (size + 2 * HFUSE_BLOCK_HEADER + page - 1) / page * page;
}

/* halide_malloc: 64-byte aligned, at least `size` bytes; NULL if the system has none. */
static inline void *hfuse_cached_malloc(void *user_context, size_t size) {
    const size_t bytes = hfuse_block_bytes(size);
    char *block = NULL, *ptr;
    (void)user_context;
    if (bytes >= HFUSE_SMALL_BLOCK) {
        struct hfuse_block_cache *c = hfuse_block_cache();
        const pthread_t self = pthread_self();
        size_t i, found;
        pthread_mutex_lock(&c->mutex);
        found = c->count;
        for (i = c->count; i-- > 0;) {
            if (c->blocks[i].bytes != bytes) continue;
            if (found == c->count) found = i; /* another thread's, if this one freed none */
            if (pthread_equal(c->blocks[i].freed_by, self)) {
                found = i;
                break;
            }
        }
        if (found < c->count) {
            block = c->blocks[found].block;
            memmove(&c->blocks[found], &c->blocks[found + 1], (c->count - found - 1) * sizeof(c->blocks[0]));
            c->count--;
            c->cached_bytes -= bytes;
        }
        pthread_mutex_unlock(&c->mutex);
    }
    if (!block) {
        /* malloc aligned by hand (aligned_alloc is C11); the header keeps what malloc returned */
        char *raw = (char *)malloc(bytes + HFUSE_BLOCK_HEADER);
        if (!raw) return NULL; /* Halide reports the failed allocation */
        block = raw + (HFUSE_BLOCK_HEADER - (uintptr_t)raw % HFUSE_BLOCK_HEADER) % HFUSE_BLOCK_HEADER;
        ((char **)(block + HFUSE_BLOCK_HEADER))[-3] = raw;
    }
    ptr = block + HFUSE_BLOCK_HEADER;
    ((size_t *)ptr)[-1] = bytes;
    ((uintptr_t *)ptr)[-2] = (uintptr_t)ptr ^ HFUSE_BLOCK_COOKIE;
    return ptr;
}

/* halide_free. A block another allocator made (Halide's default one, before hfuse_runtime_install
 * ran) goes to the cache's foreign_free: Halide's default malloc keeps at least 16 bytes of its
 * block before the pointer it returns, so reading the cookie there stays inside that block. */
static inline void hfuse_cached_free(void *user_context, void *ptr) {
    struct hfuse_block_cache *c = hfuse_block_cache();
    if (!ptr) return;
    if (((uintptr_t *)ptr)[-2] != ((uintptr_t)ptr ^ HFUSE_BLOCK_COOKIE)) {
        if (!c->foreign_free) abort(); /* not ours and nowhere to send it: a bug */
        c->foreign_free(user_context, ptr);
        return;
    }
    char *block = (char *)ptr - HFUSE_BLOCK_HEADER;
    size_t bytes = ((size_t *)ptr)[-1];
    if (bytes >= HFUSE_SMALL_BLOCK) {
        int cached = 0;
        pthread_mutex_lock(&c->mutex);
        if (c->count < HFUSE_CACHE_SLOTS && c->cached_bytes + bytes <= HFUSE_MAX_CACHED) {
            struct hfuse_cached_block *b = &c->blocks[c->count++];
            b->block = block;
            b->bytes = bytes;
            b->freed_by = pthread_self();
            c->cached_bytes += bytes;
            cached = 1;
        }
        pthread_mutex_unlock(&c->mutex);
        if (cached) return;
    }
    ((uintptr_t *)ptr)[-2] = 0;
    free(((char **)ptr)[-3]);
}

/* Bytes the cache holds for reuse. */
static inline size_t hfuse_cached_bytes(void) {
    struct hfuse_block_cache *c = hfuse_block_cache();
    size_t bytes;
    pthread_mutex_lock(&c->mutex);
    bytes = c->cached_bytes;
    pthread_mutex_unlock(&c->mutex);
    return bytes;
}

/* ---- parallel loops ------------------------------------------------------------------------- */

#ifdef _OPENMP
/* A loop's tasks split as OpenMP's static schedule splits them, share `t` of `threads`: [*front,
 * *back), the first extent % threads shares one task longer. */
static inline void hfuse_static_share(int extent, int threads, int t, int *front, int *back) {
    const int q = extent / threads, r = extent % threads;
    *front = q * t + (t < r ? t : r);
    *back = *front + q + (t < r ? 1 : 0);
}

/* A worker spins this many pauses for the next loop before it sleeps, about a millisecond on x86
 * (the loops of one run of a model come microseconds apart; between runs, a spinning core costs the
 * machine this much at most; counted rather than timed: C callers need no POSIX clock). None when
 * the loops ask for more threads than the machine has cores: a spinning worker would hold a core
 * another thread of the loop needs. */
#define HFUSE_POOL_SPINS 20000

/* Worker threads of hfuse's parallel loops, one loop at a time (`busy`). A loop is published by
 * bumping `generation` (the job's fields written before); each worker runs its share and counts
 * itself in `done`, which the caller waits for. The fields the two sides write are on lines of
 * their own. */
struct hfuse_pool {
    pthread_mutex_t busy;
    pthread_mutex_t sleep_lock;
    pthread_cond_t wake;
    int workers;               /* started, numbered 1..workers (the caller is share 0) */
    int fork_handled;          /* hfuse_pool_after_fork registered */
    int spin;                  /* whether the workers spin between loops */
    uint64_t start_generation; /* the generation a worker starting now has seen */
    int (*task)(void *, int, uint8_t *);
    void *user_context;
    uint8_t *closure;
    int min, extent, threads;
    uint64_t generation __attribute__((aligned(64)));
    int sleepers __attribute__((aligned(64)));
    int done __attribute__((aligned(64)));
    int failure __attribute__((aligned(64)));
};

/* One pool per translation unit that includes this header, as the block cache. */
static inline struct hfuse_pool *hfuse_pool(void) {
    /* clang-format off */
    static struct hfuse_pool pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                                     0, 0, 0, 0, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0};
    /* clang-format on */
    return &pool;
}

/* Whether this thread is running a task of a pool loop (a loop it starts runs on it, in order). */
static inline int *hfuse_pool_in_task(void) {
    static __thread int in_task;
    return &in_task;
}

static inline void hfuse_pool_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline void hfuse_pool_run_share(struct hfuse_pool *p, int t) {
    int i, front, back;
    hfuse_static_share(p->extent, p->threads, t, &front, &back);
    for (i = front; i < back; i++) {
        int status;
        if (__atomic_load_n(&p->failure, __ATOMIC_RELAXED) != 0) break;
        status = p->task(p->user_context, p->min + i, p->closure);
        if (status != 0) __atomic_store_n(&p->failure, status, __ATOMIC_RELAXED);
    }
}

static inline void *hfuse_pool_worker(void *arg) {
    struct hfuse_pool *p = hfuse_pool();
    const int index = (int)(intptr_t)arg;
    uint64_t seen = __atomic_load_n(&p->start_generation, __ATOMIC_ACQUIRE);
    *hfuse_pool_in_task() = 1;
    for (;;) {
        uint64_t generation = __atomic_load_n(&p->generation, __ATOMIC_SEQ_CST);
        if (generation == seen && __atomic_load_n(&p->spin, __ATOMIC_RELAXED)) {
            int spins = 0;
            while ((generation = __atomic_load_n(&p->generation, __ATOMIC_SEQ_CST)) == seen &&
                   spins++ < HFUSE_POOL_SPINS)
                hfuse_pool_pause();
        }
        if (generation == seen) {
            /* Asleep until the next loop: the caller wakes the sleepers it sees counted (both sides'
             * accesses sequentially consistent, one of them sees the other's). */
            pthread_mutex_lock(&p->sleep_lock);
            __atomic_fetch_add(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            while ((generation = __atomic_load_n(&p->generation, __ATOMIC_SEQ_CST)) == seen)
                pthread_cond_wait(&p->wake, &p->sleep_lock);
            __atomic_fetch_sub(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&p->sleep_lock);
        }
        seen = generation;
        if (index < p->threads) hfuse_pool_run_share(p, index);
        __atomic_fetch_add(&p->done, 1, __ATOMIC_ACQ_REL);
    }
    return NULL;
}

/* A forked child has none of the parent's workers: its pool starts anew. */
static inline void hfuse_pool_after_fork(void) {
    struct hfuse_pool *p = hfuse_pool();
    pthread_mutex_init(&p->busy, NULL);
    pthread_mutex_init(&p->sleep_lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->workers = 0;
    p->sleepers = 0;
}

/* Runs tasks [min, min + extent) of `task` on the pool, `threads` - 1 workers and the caller, and
 * returns 1 with the loop's status in *status; 0 if no worker could be started. Called with p->busy
 * held. */
static inline int hfuse_pool_par_for(struct hfuse_pool *p, void *user_context, int (*task)(void *, int, uint8_t *),
                                     int min, int extent, uint8_t *closure, int threads, int *status) {
    int spins = 0;
    if (!p->fork_handled) p->fork_handled = pthread_atfork(NULL, NULL, hfuse_pool_after_fork) == 0;
    if (p->workers < threads - 1) {
        /* The pool grows: the new workers start from the current generation. */
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        __atomic_store_n(&p->spin, cores <= 0 || threads <= cores, __ATOMIC_RELAXED);
        __atomic_store_n(&p->start_generation, p->generation, __ATOMIC_RELEASE);
        while (p->workers < threads - 1) {
            pthread_t thread;
            if (pthread_create(&thread, NULL, hfuse_pool_worker, (void *)(intptr_t)(p->workers + 1)) != 0) break;
            pthread_detach(thread);
            p->workers++;
        }
    }
    if (p->workers == 0) return 0;
    if (threads > p->workers + 1) threads = p->workers + 1;
    p->task = task;
    p->user_context = user_context;
    p->closure = closure;
    p->min = min;
    p->extent = extent;
    p->threads = threads;
    __atomic_store_n(&p->failure, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&p->generation, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&p->sleep_lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->sleep_lock);
    }
    *hfuse_pool_in_task() = 1;
    hfuse_pool_run_share(p, 0);
    *hfuse_pool_in_task() = 0;
    /* Every worker counts itself, those past `threads` too: none can miss a generation. */
    while (__atomic_load_n(&p->done, __ATOMIC_ACQUIRE) < p->workers) {
        hfuse_pool_pause();
        if (++spins % (p->spin ? 4096 : 16) == 0) sched_yield();
    }
    *status = __atomic_load_n(&p->failure, __ATOMIC_RELAXED);
    return 1;
}

/* Tasks [min, min + extent) of `task` over `threads` threads (<= 0: omp_get_max_threads()), split
 * as OpenMP's static schedule splits them: each thread the same contiguous share in every loop (the
 * caller the first), so that a core reads back from its own caches what it wrote in the loop
 * before. On hfuse's pool of worker threads, which spin a while between loops (HFUSE_POOL_SPINS)
 * and start a loop in a round trip between cores, where an OpenMP parallel region took ~3.5 us
 * (src/exec/parallel_runtime.h); on OpenMP's static schedule while another thread's loop holds
 * the pool. 0, or the status of a task that failed (once one has, the tasks not yet started are
 * skipped). On the calling thread, in order, with one task or one thread, and inside a task of a
 * loop or an OpenMP parallel region (a nested loop). */
static inline int hfuse_openmp_par_for(void *user_context, int (*task)(void *, int, uint8_t *), int min, int extent,
                                       uint8_t *closure, int threads) {
    struct hfuse_pool *p = hfuse_pool();
    int i, failure = 0;
    if (threads <= 0) threads = omp_get_max_threads();
    if (threads > extent) threads = extent;
    if (extent <= 1 || threads <= 1 || *hfuse_pool_in_task() || omp_in_parallel()) {
        for (i = min; i < min + extent; i++) {
            int status = task(user_context, i, closure);
            if (status != 0) return status;
        }
        return 0;
    }
    if (pthread_mutex_trylock(&p->busy) == 0) {
        int status = 0;
        const int ran = hfuse_pool_par_for(p, user_context, task, min, extent, closure, threads, &status);
        pthread_mutex_unlock(&p->busy);
        if (ran) return status;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (i = min; i < min + extent; i++) {
        int seen, status;
#pragma omp atomic read
        seen = failure;
        if (seen != 0) continue;
        status = task(user_context, i, closure);
        if (status != 0) {
#pragma omp atomic write
            failure = status;
        }
    }
    return failure;
}

/* halide_do_par_for on as many threads as OpenMP would use (OMP_NUM_THREADS, omp_set_num_threads). */
static inline int hfuse_openmp_do_par_for(void *user_context, halide_task_t task, int min, int extent,
                                          uint8_t *closure) {
    return hfuse_openmp_par_for(user_context, task, min, extent, closure, 0);
}
#endif

/* ---- installing them ------------------------------------------------------------------------- */

/* Makes the block cache Halide's allocator and, with `use_openmp` in a program compiled with
 * OpenMP, hfuse_openmp_do_par_for its parallel loop runtime. An allocator or loop runtime the
 * program installed before (or this header's copy in another translation unit) is kept. Process-
 * wide; not safe against Halide pipelines running on other threads meanwhile, so the models' headers
 * call it at start-up. */
static inline void hfuse_runtime_install(int use_openmp) {
    struct hfuse_block_cache *c = hfuse_block_cache();
    halide_free_t previous_free;
    halide_malloc_t previous_malloc;
    /* The free first: it takes the default allocator's blocks too, while malloc is still that one. */
    c->foreign_free = halide_default_free;
    previous_free = halide_set_custom_free(hfuse_cached_free);
    previous_malloc = halide_set_custom_malloc(hfuse_cached_malloc);
    if (previous_malloc != halide_default_malloc || previous_free != halide_default_free) {
        halide_set_custom_malloc(previous_malloc);
        halide_set_custom_free(previous_free);
        c->foreign_free = previous_free;
    }
#ifdef _OPENMP
    if (use_openmp) {
        halide_do_par_for_t previous = halide_set_custom_do_par_for(hfuse_openmp_do_par_for);
        if (previous != halide_default_do_par_for) halide_set_custom_do_par_for(previous);
    }
#else
    (void)use_openmp;
#endif
}

#endif /* HFUSE_RUNTIME_H */
