#ifndef Py_INTERNAL_TRACEMALLOC_H
#define Py_INTERNAL_TRACEMALLOC_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* The tracing engine of the tracemalloc fork: cross-file internals.
 *
 *  file                              concern
 *  --------------------------------  -----------------------------------------
 *  Objects/obmalloc.c (patch)        calls to the hooks at the allocator API
 *                                    entry points
 *  Objects/obmalloc_tracemalloc.h    trace slots of pymalloc pools (included
 *                                    into obmalloc.c: it needs pool internals)
 *  Python/tracemalloc*.c             the engine, one translation unit: its
 *                                    files are listed in
 *                                    Python/tracemalloc_engine.h
 *  Modules/_tracemalloc.c            the _tracemalloc module: the only place
 *                                    that builds Python objects from traces
 *
 * Python/ exports C data (nodes read as filename/lineno pairs, trace
 * columns); it never calls into Modules/.  The engine's invariants are in
 * Doc/internals/tracemalloc-engine.rst, section "Invariants" (I1, I2...).
 */

#include <stdint.h>
#include "pycore_pymem.h"          // _Py_tracemalloc_config (3.11)

#if PY_VERSION_HEX >= 0x030D0000
/* 3.13 keeps tracemalloc's state in the runtime (pycore_runtime.h has a
   field `tracemalloc` of this type, initialised by pycore_runtime_init.h).
   The engine keeps its own state in Python/tracemalloc_engine.h; here is
   only the configuration that the allocator entry points test, under the
   name 3.11 gave it. */
struct _PyTraceMalloc_Config {
    enum {
        TRACEMALLOC_NOT_INITIALIZED,
        TRACEMALLOC_INITIALIZED,
        TRACEMALLOC_FINALIZED
    } initialized;
    int tracing;                /* allocations are traced */
    int max_nframe;             /* frames kept per traceback */
};
struct _tracemalloc_runtime_state {
    struct _PyTraceMalloc_Config config;
    /* Upstream keeps its whole engine state here (232 bytes on 64-bit
       builds).  The stdlib's extension modules are built with
       Py_BUILD_CORE_MODULE and read _PyRuntime's later fields (the static
       objects behind _Py_ID() and the small ints, the main interpreter)
       at offsets computed from upstream's headers: a module built for
       stock 3.13 must find them where it expects.  Not used. */
    void *upstream_layout[27];
};
#if SIZEOF_VOID_P == 8
_Static_assert(sizeof(struct _tracemalloc_runtime_state) == 232,
               "the runtime's tracemalloc field keeps upstream 3.13's size");
#endif
#define _tracemalloc_runtime_state_INIT \
    { \
        .config = { \
            .initialized = TRACEMALLOC_NOT_INITIALIZED, \
            .tracing = 0, \
            .max_nframe = 1, \
        }, \
    }
#define _Py_tracemalloc_config _PyRuntime.tracemalloc.config
/* Python/pylifecycle.c's calls (3.11 declares them in
   pycore_pylifecycle.h). */
extern PyStatus _PyTraceMalloc_Init(void);
/* The traceback of PTR's trace in DOMAIN, as a tuple of (filename,
   lineno) tuples, or None (Modules/_testinternalcapi.c uses it; 3.11
   declares it in Include/tracemalloc.h). */
PyAPI_FUNC(PyObject *) _PyTraceMalloc_GetTraceback(unsigned int domain,
                                                   uintptr_t ptr);
/* Objects/object.c: an object was made or taken from a free list. */
extern int _PyTraceMalloc_NewReference(PyObject *op);
/* _PyRuntime, for _Py_tracemalloc_config (pycore_runtime.h includes this
   header first: the struct above is defined by then). */
#include "pycore_runtime.h"
#endif

/* On-demand profiles (Python/tracemalloc_startup.c): the adapter's
   _PyTraceMalloc_Init() reads -X tracemalloc_signal /
   PYTHONTRACEMALLOCSIGNAL (0, or -1 with *ERROR set); init_interp_main()
   installs the handler, main interpreter only, before site. */
extern int _PyTraceMalloc_ReadSignalOption(const PyConfig *config,
                                           const char **error);
extern int _PyTraceMalloc_StartupSignal(void);
/* -X tracemalloc_dump_over and -X tracemalloc_dump_on_memory_error (and
   their variables), read with the configuration as the signal option; a
   dump option without a tracing option makes startup sample at the
   default interval (_PyTraceMalloc_StartupDefaultSample()) with 25
   frames. */
extern int _PyTraceMalloc_ReadDumpOverOption(const PyConfig *config,
                                             const char **error);
extern int _PyTraceMalloc_StartupDumpOver(void);
extern void _PyTraceMalloc_StartupDefaultSample(void);
#define _PyTraceMalloc_STARTUP_NFRAME 25
extern PyStatus _PyTraceMalloc_InstallStartupSignal(void);

/* Trace domain of the Python allocators (upstream's DEFAULT_DOMAIN). */
#define _PyTraceMalloc_DEFAULT_DOMAIN 0

/* A node of the call-context tree; 0 is the empty traceback (no Python
   frame), reported as ('<unknown>', 0) like upstream. */
typedef uint32_t _PyTraceMalloc_Node;

/* One trace of a pymalloc block, in the slot array of its pool: 6 bytes,
   aligned on 2, so the node is read and written with memcpy()
   (_PyTraceMalloc_SlotNode(), _PyTraceMalloc_SlotSetNode()).  A block of a
   pool is at most 512 bytes, so its size fits 16 bits. */
typedef struct {
    uint16_t node[2];           /* a _PyTraceMalloc_Node; 0: not traced */
    uint16_t size;              /* requested size (at most 512) */
} _PyTraceMalloc_Slot;
#define _PyTraceMalloc_SLOT_SIZE_MAX UINT16_MAX

static inline uint32_t
_PyTraceMalloc_SlotNode(const _PyTraceMalloc_Slot *slot)
{
    uint32_t node;
    memcpy(&node, slot->node, sizeof(node));
    return node;
}

static inline void
_PyTraceMalloc_SlotSetNode(_PyTraceMalloc_Slot *slot, uint32_t node)
{
    memcpy(slot->node, &node, sizeof(node));
}

/* ---- hooks: Objects/obmalloc.c ----------------------------------------- */
/* The traced variants of the allocator API entry points.  obmalloc.c calls
   them only while tracing (_Py_tracemalloc_config.tracing), and otherwise
   tail-calls the allocator exactly as pristine 3.11 does, so that tracing
   off costs one predictable branch.  Each calls ALLOC and records the
   caller's block.  When the bookkeeping cannot get memory, a new block is
   freed again and NULL returned, so the caller sees an allocation failure,
   as with upstream.  GIL_HELD is 0 for the raw domain, which may be called
   without the GIL: the traceback is then read from this thread's own
   frames, which no other thread can change. */
/* The mode word, _Py_tracemalloc_config.tracing: 0 when not tracing,
   _PyTraceMalloc_EXACT or _PyTraceMalloc_SAMPLED (negative, so that the
   test that sends a call to the traced path leaves the sign flag that
   tells the two modes apart).  Written under the engine lock
   (start/stop) and read here without it, by threads that may not hold the
   GIL.  The traced variants check it again under the lock.
   The entry points read it with a plain load, and the sampling filter
   below too: the compiler may then reuse the value an entry point has
   just tested and fold the filter's load into its compare, which relaxed
   atomics forbid.  Under ThreadSanitizer, which would report them, both
   are relaxed atomic loads. */
#define _PyTraceMalloc_EXACT 1
#define _PyTraceMalloc_SAMPLED (-1)
#if defined(__SANITIZE_THREAD__)
#  define _PyTraceMalloc_ATOMIC_READS 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define _PyTraceMalloc_ATOMIC_READS 1
#  endif
#endif
#if defined(__GNUC__) || defined(__clang__)
#  ifdef _PyTraceMalloc_ATOMIC_READS
#    define _PyTraceMalloc_MODE() \
         __atomic_load_n(&_Py_tracemalloc_config.tracing, __ATOMIC_RELAXED)
#    define _PyTraceMalloc_FILTER_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#  else
#    define _PyTraceMalloc_MODE() (_Py_tracemalloc_config.tracing)
#    define _PyTraceMalloc_FILTER_LOAD(p) (*(p))
#  endif
#  define _PyTraceMalloc_TRACING() __builtin_expect(_PyTraceMalloc_MODE(), 0)
   /* Release: the sampling interval, the filter and the epoch written
      before it are seen by a hook that saw the word (sample_interval()
      fences).  A plain store on x86-64. */
#  define _PyTraceMalloc_SET_TRACING(value) \
       __atomic_store_n(&_Py_tracemalloc_config.tracing, (value), \
                        __ATOMIC_RELEASE)
#  if defined(Py_ENABLE_SHARED) || defined(Py_BUILD_CORE_MODULE)
#    define _PyTraceMalloc_TLS_IE __attribute__((tls_model("initial-exec")))
#  else
     /* The interpreter's own executable: one instruction per access. */
#    define _PyTraceMalloc_TLS_IE __attribute__((tls_model("local-exec")))
#  endif
#else
#  define _PyTraceMalloc_MODE() (_Py_tracemalloc_config.tracing)
#  define _PyTraceMalloc_FILTER_LOAD(p) (*(p))
#  define _PyTraceMalloc_TRACING() (_Py_tracemalloc_config.tracing)
#  define _PyTraceMalloc_SET_TRACING(value) \
       (_Py_tracemalloc_config.tracing = (value))
#  define _PyTraceMalloc_TLS_IE
#endif
/* Sampling mode's mean interval while sampling, else 0: for the hooks,
   which weigh samples (Python/tracemalloc_sample.c). */
extern uint64_t _PyTraceMalloc_sample_interval;

/* Sampling mode's fast paths, inline in the allocator entry points: this
   thread's distance to its next sampling point, and the filter of sampled
   addresses (byte counters indexed by address bits; 0: certainly not a
   sampled block).  The engine owns both; see tracemalloc_sample.c.  The
   thread-local is initial-exec in a shared libpython, local-exec in the
   executable.  While tracing in exact mode every counter of the filter is
   non-zero, so that the free and re-trace paths test the filter alone,
   without asking the mode. */
extern _Thread_local int64_t _PyTraceMalloc_sample_left _PyTraceMalloc_TLS_IE;
#define _PyTraceMalloc_SAMPLE_FILTER_BITS 16
extern uint8_t _PyTraceMalloc_sample_filter[];

/* Blocks are 16-byte aligned: a block's counter is indexed by the address
   bits above those, modulo the filter's size (a pymalloc arena's blocks,
   1 MiB, map one to one). */
static inline size_t
_PyTraceMalloc_SampleFilterIndex(uintptr_t ptr)
{
    return (size_t)((ptr >> 4)
                    & (((size_t)1 << _PyTraceMalloc_SAMPLE_FILTER_BITS) - 1));
}

static inline int
_PyTraceMalloc_SampleFilterHit(const void *ptr)
{
    size_t i = _PyTraceMalloc_SampleFilterIndex((uintptr_t)ptr);
    return _PyTraceMalloc_FILTER_LOAD(&_PyTraceMalloc_sample_filter[i]) != 0;
}

/* Takes SIZE bytes off this thread's countdown to its next sampling
   point: 0 when the countdown ran out. */
static inline int
_PyTraceMalloc_CountDown(size_t size)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    /* One subtraction from the thread-local in memory, whose flags are the
       answer: compilers load, subtract, store and test again. */
    int left;
    __asm__("subq %2, %1"
            : "=@ccg" (left), "+m" (_PyTraceMalloc_sample_left)
            : "er" ((int64_t)size));
    return left;
#else
    return (_PyTraceMalloc_sample_left -= (int64_t)size) > 0;
#endif
}

/* Is an allocation of SIZE bytes left untraced in MODE (the mode word)?
   In sampling mode it takes SIZE off the countdown: 0 sends the call to
   the hook, which knows the countdown ran out.  In exact mode, 0. */
static inline int
_PyTraceMalloc_SampleSkip(int mode, size_t size)
{
    return mode < 0 && _PyTraceMalloc_CountDown(size);
}

/* The hooks proper (Python/tracemalloc_hooks.c): exact mode, and in
   sampling mode what the inline paths below send on (an allocation whose
   countdown ran out, a free or a resize of a block the filter may hold). */
PyAPI_FUNC(void *) _PyTraceMalloc_MallocHook(PyMemAllocatorEx *alloc,
                                             size_t size, int gil_held);
PyAPI_FUNC(void *) _PyTraceMalloc_CallocHook(PyMemAllocatorEx *alloc,
                                             size_t nelem, size_t elsize,
                                             int gil_held);
PyAPI_FUNC(void *) _PyTraceMalloc_ReallocHook(PyMemAllocatorEx *alloc,
                                              void *ptr, size_t size,
                                              int gil_held, int counted);
PyAPI_FUNC(void) _PyTraceMalloc_FreeHook(PyMemAllocatorEx *alloc, void *ptr,
                                         int gil_held);

/* Objects/object.c, before the re-trace of a new or reused object OP: 0 in
   sampling mode when its block is certainly not a sampled one (then there
   is nothing to re-trace).  The filter holds a sampled block at the
   addresses its object may have too (see sample_filter_add()). */
static inline int
_PyTraceMalloc_MayBeSampled(const void *op)
{
    return _PyTraceMalloc_SampleFilterHit(op);
}

/* Objects/object.c and floatobject.c: OP was just made in a block that
   was not allocated for it here (taken from a free list, resized, or
   initialised apart from its allocation): re-trace it at the current
   traceback, as upstream does.  The objects that _PyObject_Init() makes
   in a block allocated for them a moment ago skip this (their block was
   traced here by the hooks: _Py_NewReferenceFresh()).  A macro: the mode
   word is in _PyRuntime on 3.13, which this header cannot see. */
#define _PyTraceMalloc_RETRACE(op) \
    do { \
        if (_PyTraceMalloc_TRACING() && _PyTraceMalloc_MayBeSampled(op)) { \
            (void)_PyTraceMalloc_NewReference(op); \
        } \
    } while (0)

/* Objects/dictobject.c: BLOCK, which is not an object, was taken from a
   free list of its own (a dictionary's key table): re-trace it at the
   current traceback, as _PyTraceMalloc_RETRACE() does for an object
   taken from a free list.  _PyTraceMalloc_RetraceBlock() is called with
   tracing on and a block, through these macros only. */
extern int _PyTraceMalloc_RetraceBlock(void *block);
#define _PyTraceMalloc_RETRACE_BLOCK(block) \
    do { \
        if (_PyTraceMalloc_TRACING()) { \
            (void)_PyTraceMalloc_RetraceBlock(block); \
        } \
    } while (0)

/* Objects/floatobject.c: a float taken from its free list.  Its block is
   the object itself (no GC header, no pre-header), and no resize made it
   the hooks' fresh block (a float is never resized, and its free cleared
   that): the block's re-trace, without the object's arithmetic, behind
   the same inline filter test as _PyTraceMalloc_RETRACE(). */
#define _PyTraceMalloc_RETRACE_FLOAT(op) \
    do { \
        if (_PyTraceMalloc_TRACING() && _PyTraceMalloc_MayBeSampled(op)) { \
            (void)_PyTraceMalloc_RetraceBlock(op); \
        } \
    } while (0)

/* The entry points' traced paths.  _PyTraceMalloc_Malloc() and
   _PyTraceMalloc_Calloc() are macros that pass them the mode word: on 3.13
   it lives in _PyRuntime, which this header cannot see (pycore_runtime.h
   includes it), but their callers can. */
#define _PyTraceMalloc_Malloc(alloc, size, gil_held) \
    _PyTraceMalloc_MallocIn(_PyTraceMalloc_MODE(), (alloc), (size), \
                            (gil_held))
#define _PyTraceMalloc_Calloc(alloc, nelem, elsize, gil_held) \
    _PyTraceMalloc_CallocIn(_PyTraceMalloc_MODE(), (alloc), (nelem), \
                            (elsize), (gil_held))

static inline void *
_PyTraceMalloc_MallocIn(int mode, PyMemAllocatorEx *alloc, size_t size,
                        int gil_held)
{
    if (_PyTraceMalloc_SampleSkip(mode, size)) {
        return alloc->malloc(alloc->ctx, size);
    }
    return _PyTraceMalloc_MallocHook(alloc, size, gil_held);
}

static inline void *
_PyTraceMalloc_CallocIn(int mode, PyMemAllocatorEx *alloc, size_t nelem,
                        size_t elsize, int gil_held)
{
    /* The caller has checked that nelem * elsize does not overflow. */
    if (_PyTraceMalloc_SampleSkip(mode, nelem * elsize)) {
        return alloc->calloc(alloc->ctx, nelem, elsize);
    }
    return _PyTraceMalloc_CallocHook(alloc, nelem, elsize, gil_held);
}

static inline void *
_PyTraceMalloc_Realloc(PyMemAllocatorEx *alloc, void *ptr, size_t size,
                       int gil_held)
{
    int counted = 0;
    if (ptr != NULL && !_PyTraceMalloc_SampleFilterHit(ptr)) {
        /* Not a sampled block; the resized one is a new allocation. */
        if (_PyTraceMalloc_CountDown(size)) {
            return alloc->realloc(alloc->ctx, ptr, size);
        }
        counted = 1;
    }
    return _PyTraceMalloc_ReallocHook(alloc, ptr, size, gil_held, counted);
}

static inline void
_PyTraceMalloc_Free(PyMemAllocatorEx *alloc, void *ptr, int gil_held)
{
    if (!_PyTraceMalloc_SampleFilterHit(ptr)) {
        /* Sampling mode, and not a sampled block. */
        alloc->free(alloc->ctx, ptr);
        return;
    }
    _PyTraceMalloc_FreeHook(alloc, ptr, gil_held);
}

/* Leave this thread's allocations untraced until the matching resume
   (nests).  Other threads are still traced.  Both return the depth before
   the call. */
PyAPI_FUNC(int) _PyTraceMalloc_SuspendThread(void);
PyAPI_FUNC(int) _PyTraceMalloc_ResumeThread(void);

/* Objects/object.c: PyObject_Init() and PyObject_InitVar(), which
   CPython's own allocations never call, are initialising a block that an
   extension allocated, maybe at another line: no skipped re-trace (GIL
   held, tracing on). */
PyAPI_FUNC(void) _PyTraceMalloc_ForgetFresh(void);

/* Objects/codeobject.c: a code object dies; cached lines keyed by its
   address must not be reused. */
extern void _PyTraceMalloc_CodeFreed(void *code);

/* ---- pool slots: Objects/obmalloc_tracemalloc.h ------------------------ */
/* The slot array of one pymalloc pool: one slot per block of its size
   class, found from the block's offset in the pool. */
typedef struct {
    void *pool;                 /* the pool these slots describe */
    uint32_t szidx;             /* its size class when the array was made */
    uint32_t nslots;            /* blocks in the pool */
    uint32_t block_size;
    uint32_t reciprocal;        /* ceil(2**32 / block size): offset ->
                                   index without a division */
    uint32_t live;              /* slots in use */
    _PyTraceMalloc_Slot slots[];
} _PyTraceMalloc_PoolTraces;

/* pymalloc's constants that the fast path below needs (64-bit builds with
   the radix tree; obmalloc_tracemalloc.h checks them at compile time). */
#define _PyTraceMalloc_POOL_BITS 14
#define _PyTraceMalloc_POOL_OVERHEAD 48
#define _PyTraceMalloc_POOL_SZIDX_OFFSET 36
/* The largest request pymalloc serves from a pool: a block the allocator
   has just returned for more is never a pool's. */
#define _PyTraceMalloc_POOL_MAX_REQUEST 512

/* Recently used pools (Objects/obmalloc_tracemalloc.h). */
#define _PyTraceMalloc_POOL_CACHE_SIZE 64
typedef struct {
    void *pool;
    _PyTraceMalloc_PoolTraces *pt;
} _PyTraceMalloc_PoolCacheEntry;
extern _PyTraceMalloc_PoolCacheEntry _PyTraceMalloc_pool_cache[
    _PyTraceMalloc_POOL_CACHE_SIZE];
/* Offset of the caller's pointer in its block (the debug hooks' header). */
extern uint32_t _PyTraceMalloc_caller_skew;
/* 1 while the mem and obj domains have been pymalloc or the debug hooks
   over pymalloc since tracing started or was cleared: the hooks' blocks
   then lie exactly at the caller's skew.  0 under a user's allocator,
   whose own header may shift them (see _PyTraceMalloc_PoolSlotCached()). */
PyAPI_DATA(uint32_t) _PyTraceMalloc_blocks_exact;
/* 1 while the hooks take the lean paths (tests). */
PyAPI_FUNC(int) _PyTraceMalloc_LeanPaths(void);
/* Called by PyMem_SetAllocator(): a user's allocator may be coming. */
extern void _PyTraceMalloc_AllocatorChanged(int domain);

/* The slot of P in PT, the slot array of P's pool POOL (an address):
   its block's index from P's offset in the pool, by a multiplication.
   With CHECK, only the address a caller was given names the block (the
   block's start plus the caller skew): any other address inside it, or
   beyond the pool's last block, gives NULL and is kept in the table, as
   upstream keys traces by exact address.  The one copy of this
   arithmetic: the store's fast path below and obmalloc's slow path
   (_PyTraceMalloc_PoolSlot()) both use it. */
static inline _PyTraceMalloc_Slot *
_PyTraceMalloc_PoolTracesSlot(_PyTraceMalloc_PoolTraces *pt, uintptr_t pool,
                              const void *p, uint32_t **live, int check)
{
    uint32_t offset = (uint32_t)((uintptr_t)p - pool
                                 - _PyTraceMalloc_POOL_OVERHEAD);
    uint32_t index = (uint32_t)(((uint64_t)offset * pt->reciprocal) >> 32);
    if (check
        && (index >= pt->nslots
            || offset - index * pt->block_size
               != _PyTraceMalloc_caller_skew)) {
        return NULL;
    }
    *live = &pt->live;
    return &pt->slots[index];
}

/* Slow path of _PyTraceMalloc_PoolSlotCached(), which missed the pool
   cache (in obmalloc.c, which knows pymalloc's internals): the slot of P
   when P lies in a pymalloc pool, else NULL.  With CREATE, the pool's slot
   array is made on demand; *NOMEM is set if that fails.  *LIVE is the
   pool's count of used slots, for the caller to keep.  Always checks P
   (see _PyTraceMalloc_PoolTracesSlot()). */
extern _PyTraceMalloc_Slot *_PyTraceMalloc_PoolSlot(const void *p, int create,
                                                    int *nomem,
                                                    uint32_t **live);
/* Called by obmalloc before an arena goes back to the OS. */
extern void _PyTraceMalloc_ArenaFreed(uintptr_t arena_base,
                                      uintptr_t carved_end);
/* Visit the slot array of every pool that has live slots (under the
   lock): SLOTS[0..NSLOTS), of which LIVE have a node.  One call per pool,
   not per slot, so that a visitor's loop over the slots is inlined. */
typedef int (*_PyTraceMalloc_SlotsVisitor)(_PyTraceMalloc_Slot *slots,
                                           uint32_t nslots, uint32_t live,
                                           void *arg);
extern int _PyTraceMalloc_PoolSlotsForEach(_PyTraceMalloc_SlotsVisitor visit,
                                           void *arg);
extern void _PyTraceMalloc_PoolSlotsClear(void);
extern size_t _PyTraceMalloc_PoolSlotsMemory(void);
/* Hot path of the store: the slot of P when P's pool is in the pool
   cache (_PyTraceMalloc_PoolSlotInCache(), which sets *HIT and returns
   NULL otherwise, or when P is not a block's address in it); otherwise
   _PyTraceMalloc_PoolSlot().  Inline here because the
   store is another translation unit than obmalloc.c.

   BLOCK says that P is an address the allocator handed out to the hooks:
   the checks of _PyTraceMalloc_PoolTracesSlot() are then skipped as long
   as the allocators are known (_PyTraceMalloc_blocks_exact), which makes
   P's skew the caller skew (I2). */
static inline _PyTraceMalloc_Slot *
_PyTraceMalloc_PoolSlotInCache(const void *p, uint32_t **live, int block,
                               int *hit)
{
    uintptr_t pool = (uintptr_t)p
                     & ~(((uintptr_t)1 << _PyTraceMalloc_POOL_BITS) - 1);
    _PyTraceMalloc_PoolCacheEntry *e = &_PyTraceMalloc_pool_cache[
        (pool >> _PyTraceMalloc_POOL_BITS)
        & (_PyTraceMalloc_POOL_CACHE_SIZE - 1)];
    if ((uintptr_t)e->pool == pool
        && e->pt->szidx == *(const uint32_t *)(
               pool + _PyTraceMalloc_POOL_SZIDX_OFFSET)) {
        *hit = 1;
        return _PyTraceMalloc_PoolTracesSlot(
            e->pt, pool, p, live, !(block && _PyTraceMalloc_blocks_exact));
    }
    *hit = 0;
    return NULL;
}

static inline _PyTraceMalloc_Slot *
_PyTraceMalloc_PoolSlotCached(const void *p, int create, int *nomem,
                              uint32_t **live, int block)
{
    int hit;
    _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotInCache(p, live,
                                                                block, &hit);
    if (hit) {
        return slot;
    }
    return _PyTraceMalloc_PoolSlot(p, create, nomem, live);
}

/* Full check: no free block of any pool keeps a trace; returns the number
   of live slots and their total size, or -1 with *WHY set. */
extern int64_t _PyTraceMalloc_PoolSlotsCheck(uint64_t *total_size,
                                             const char **why);

/* ---- readers of the tree: Python/tracemalloc_tree.c, _peak.c ---------- */
/* A reader's view of node storage.  Pinned in the same locked section that
   copies the traces (or finds the one trace) to read: it keeps every node
   those traces name readable without the lock, with the same id, even if
   clear_traces() or stop() runs (from a finalizer, say) before the reader
   is done with it; compaction waits until the last unpin. */
#define _PyTraceMalloc_CCT_NCHUNKS 22
typedef struct {
    const void *chunks[_PyTraceMalloc_CCT_NCHUNKS];
    uint32_t nnodes;            /* node ids below this are readable */
    uint64_t sample;            /* sampling interval of the traces; 0: exact */
} _PyTraceMalloc_CCTView;
extern void _PyTraceMalloc_CCTUnpin(void);
/* Node count, node lookups that interned (cache_misses) and compactions
   so far, and the buckets of the site tables' index (for the tests). */
PyAPI_FUNC(void) _PyTraceMalloc_CCTStats(uint32_t *nnodes,
                                         uint64_t *cache_misses,
                                         uint64_t *compactions,
                                         size_t *cache_entries);
/* The site tables and line maps: how many, and their bytes (OUT[0..3]:
   tables, table bytes, maps, map bytes; for the tests and the memory
   report). */
PyAPI_FUNC(void) _PyTraceMalloc_FrameTableStats(size_t out[4]);
/* One node of VIEW, for a reader: 0 for node 0 and a thread's root (no
   frame); else its parent, line, depth and filename characters (DATA NULL
   for '<unknown>'). */
extern int _PyTraceMalloc_NodeInfo(const _PyTraceMalloc_CCTView *view,
                                   _PyTraceMalloc_Node node,
                                   _PyTraceMalloc_Node *parent,
                                   int *lineno, uint32_t *depth,
                                   const void **filename, int *kind,
                                   Py_ssize_t *length);
/* Native frames (Python/tracemalloc_nativeframes.c).  The mode:
   0 off, NATIVE (native traces carry their C stack) or ALL (the Python
   domains' traces too).  Set: 0, or -1 with an exception (native tracing
   off, libunwind missing). */
#define _PyTraceMalloc_NATIVE_FRAMES_NATIVE 1
#define _PyTraceMalloc_NATIVE_FRAMES_ALL 2
extern int _PyTraceMalloc_SetNativeFrames(int mode);
extern int _PyTraceMalloc_GetNativeFrames(void);
/* A C frame of a trace's stack: its return address, and for a call of
   the evaluation loop the number of Python frames it runs (-1 for the
   other C frames). */
typedef struct {
    uintptr_t pc;
    int64_t nframes;
} _PyTraceMalloc_NativeEntry;
/* Does NODE carry C frames? */
extern int _PyTraceMalloc_NodeIsNative(const _PyTraceMalloc_CCTView *view,
                                       _PyTraceMalloc_Node node);
/* NODE's C frames, innermost first (at most MAX), and in *PYTHON the
   node of its Python position. */
extern int _PyTraceMalloc_NodeNativeChain(
    const _PyTraceMalloc_CCTView *view, _PyTraceMalloc_Node node,
    _PyTraceMalloc_NativeEntry *entries, int max,
    _PyTraceMalloc_Node *python);
/* A return address symbolised (at snapshot time; cached for the process's
   life): any field may be NULL (line 0) when unknown.  OFFSET is the
   call's offset in LIBRARY. */
typedef struct {
    const char *function;
    const char *library;
    const char *file;
    int line;
    uintptr_t offset;
} _PyTraceMalloc_NativeSymbol;
extern const _PyTraceMalloc_NativeSymbol *_PyTraceMalloc_NativeSymbolize(
    uintptr_t pc);
/* What was live at the peak of traced memory, by (domain, node): SIZE
   bytes in COUNT blocks.  Copied into a malloc()ed array, with VIEW
   pinned, in one locked section.  Sampling mode (VIEW's sample): SIZE is
   the estimated bytes, COUNT the estimated blocks in units of
   1/_PyTraceMalloc_SAMPLE_COUNT_UNIT. */
typedef struct {
    unsigned int domain;
    _PyTraceMalloc_Node node;
    uint64_t size;
    uint64_t count;
} _PyTraceMalloc_PeakGroup;
#define _PyTraceMalloc_SAMPLE_COUNT_UNIT 1024
extern int _PyTraceMalloc_PeakCopy(_PyTraceMalloc_PeakGroup **groups,
                                   size_t *count,
                                   _PyTraceMalloc_CCTView *view);
/* The same for what is live now, sorted by (domain, node), and the
   engine's generation, with VIEW pinned PINS times: node ids keep their
   meaning while a pin is held and the generation stays the same (the leak
   checker's rounds). */
extern int _PyTraceMalloc_LiveCopy(_PyTraceMalloc_PeakGroup **groups,
                                   size_t *count, uint32_t *generation,
                                   _PyTraceMalloc_CCTView *view, int pins);
/* The same for what was allocated since start() or clear_traces(), freed
   or not (the allocation profiles); -2 (no exception) when tracing
   did not start with allocations=True. */
extern int _PyTraceMalloc_AllocCopy(_PyTraceMalloc_PeakGroup **groups,
                                    size_t *count,
                                    _PyTraceMalloc_CCTView *view);
/* The native id of the thread whose call paths NODE belongs to, or 0. */
extern unsigned long _PyTraceMalloc_NodeThread(
    const _PyTraceMalloc_CCTView *view, _PyTraceMalloc_Node node);

/* The label set of NODE's path: 1 and its characters (a str's kind and
   data), or 0 when it has none (Python/tracemalloc_labels.c). */
extern int _PyTraceMalloc_NodeLabel(const _PyTraceMalloc_CCTView *view,
                                    _PyTraceMalloc_Node node,
                                    const void **data, int *kind,
                                    Py_ssize_t *length);
/* Labels (Python/tracemalloc_labels.c): the ContextVar of the label set;
   after the current label set changed, unlink the running frames so that
   they look at the context again; the hook that labels new asyncio tasks
   (None: none); and, called by _asyncio's Task.__init__ (patch), the
   hook's call in the new task's CONTEXT.  Each -1 with an exception on
   failure. */
extern int _PyTraceMalloc_SetLabelVar(PyObject *var);
extern int _PyTraceMalloc_LabelSwitch(void);
extern int _PyTraceMalloc_SetTaskHook(PyObject *hook);
PyAPI_FUNC(int) _PyTraceMalloc_TaskCreated(PyObject *task, PyObject *coro,
                                           PyObject *context);
/* Python/context.c: TS entered or left a context (patch
   context-switch-hook). */
extern void _PyTraceMalloc_ContextSwitched(PyThreadState *ts);
/* And by Task.set_name(): the hook's call with coro None. */
PyAPI_FUNC(int) _PyTraceMalloc_TaskRenamed(PyObject *task,
                                           PyObject *context);

/* ---- engine: Python/tracemalloc.c ------------------------------------- */
/* start() and stop() raise (set an exception) on failure only. */
extern int _PyTraceMalloc_Start(int max_nframe);
/* Sampling mode (Python/tracemalloc_sample.c): start with a mean sampling
   interval of SAMPLE bytes (0: exact; EXPLICIT: see the definition); the
   interval while tracing (0: exact or not tracing); the weight of a sample
   of SIZE bytes (the blocks it stands for); a size option parsed ("512KiB":
   0 with *ERROR set when bad); a fixed seed (tests); the startup options. */
#define _PyTraceMalloc_SAMPLE_MAX (UINT64_C(1) << 48)
PyAPI_FUNC(int) _PyTraceMalloc_StartSampled(int max_nframe, uint64_t sample,
                                            int explicit, int allocations);
/* The dump threshold (Python/tracemalloc_dumpover.c): set it (0: off). */
PyAPI_FUNC(void) _PyTraceMalloc_SetDumpOver(uint64_t size);
/* Python/errors.c: a MemoryError was just set (patch memory-error-hook);
   arm or disarm the dump that the next one asks for. */
extern void _PyTraceMalloc_MemoryError(void);
PyAPI_FUNC(void) _PyTraceMalloc_SetDumpOnMemoryError(int armed);
/* A number that changes each time tracing starts. */
PyAPI_FUNC(uint64_t) _PyTraceMalloc_GetSession(void);
/* (pattern, option) of the startup dump pattern, a relative one joined to
   the directory the interpreter started in; None when not given. */
PyAPI_FUNC(PyObject *) _PyTraceMalloc_StartupDumpPattern(void);
/* Whether tracing keeps allocation totals (start(allocations=True)). */
PyAPI_FUNC(int) _PyTraceMalloc_GetAllocations(void);
PyAPI_FUNC(uint64_t) _PyTraceMalloc_GetSample(void);
PyAPI_FUNC(double) _PyTraceMalloc_SampleWeight(size_t size,
                                               uint64_t interval);
PyAPI_FUNC(uint64_t) _PyTraceMalloc_ParseSize(const char *text,
                                              const char **error);
PyAPI_FUNC(int) _PyTraceMalloc_SetSampleSeed(uint64_t seed);
extern int _PyTraceMalloc_ReadSampleOption(const PyConfig *config,
                                           const char **error);
extern int _PyTraceMalloc_StartupSample(void);
extern int _PyTraceMalloc_StartupNative(void);
extern void _PyTraceMalloc_Stop(void);
extern void _PyTraceMalloc_ClearTraces(void);
/* The node of PTR's trace in DOMAIN: 1 with VIEW pinned, else 0. */
extern int _PyTraceMalloc_GetTraceNode(unsigned int domain, uintptr_t ptr,
                                       _PyTraceMalloc_Node *node,
                                       _PyTraceMalloc_CCTView *view);
/* Where OBJ's memory block starts (before its GC header, if any). */
extern uintptr_t _PyTraceMalloc_ObjectBlock(PyObject *obj);
/* Empty the interpreter's free lists (Python/tracemalloc.c). */
extern void _PyTraceMalloc_ClearFreeLists(void);
extern size_t _PyTraceMalloc_EngineMemory(void);
extern void _PyTraceMalloc_GetTracedMemory(size_t *current, size_t *peak);
extern void _PyTraceMalloc_ResetPeak(void);

/* ---- lock and store: Python/tracemalloc_lock.c, tracemalloc_store.c ---- */

/* Engine exclusion, asymmetric: the GIL holder is the common case, so its
   side costs two plain stores and a load (no atomic read-modify-write);
   callers without the GIL (the raw domain, PyTraceMalloc_Track()) pay for
   both sides, with a process-wide barrier (membarrier(2)) that makes the
   GIL holder's plain stores visible.  See tracemalloc_lock.c. */
#include <stdatomic.h>
extern atomic_int _PyTraceMalloc_gil_busy;
extern atomic_int _PyTraceMalloc_foreign;
PyAPI_DATA(atomic_int) _PyTraceMalloc_asymmetric;
extern void _PyTraceMalloc_WaitForeign(void);
/* Entries through the engine lock's side without the GIL so far (tests). */
PyAPI_FUNC(uint64_t) _PyTraceMalloc_ForeignEntries(void);
/* Python/pystate.c: TSTATE (or NULL) is now the calling thread's current
   thread state. */
extern void _PyTraceMalloc_ThreadStateSwapped(PyThreadState *tstate);
/* Python/pylifecycle.c (3.13): an interpreter with a GIL of its own is
   being made, before it takes that GIL. */
extern void _PyTraceMalloc_OwnGILCreated(void);

static inline void
_PyTraceMalloc_Unlock(void);

/* Enter the engine while holding the GIL, unless a caller without the GIL
   is inside or waiting: then 0, with nothing held (the lean paths' common
   cases give up instead of waiting). */
static inline int
_PyTraceMalloc_TryLock(void)
{
    atomic_store_explicit(&_PyTraceMalloc_gil_busy, 1, memory_order_relaxed);
    if (atomic_load_explicit(&_PyTraceMalloc_asymmetric,
                             memory_order_relaxed)) {
        atomic_signal_fence(memory_order_seq_cst);
    }
    else {
        atomic_thread_fence(memory_order_seq_cst);
    }
    if (atomic_load_explicit(&_PyTraceMalloc_foreign, memory_order_acquire)) {
        _PyTraceMalloc_Unlock();
        return 0;
    }
    return 1;
}

/* Enter the engine while holding the GIL.  When a caller without the GIL
   is inside, wait for it (out of line) with priority over the next one. */
static inline void
_PyTraceMalloc_Lock(void)
{
    if (!_PyTraceMalloc_TryLock()) {
        _PyTraceMalloc_WaitForeign();
    }
}

static inline void
_PyTraceMalloc_Unlock(void)
{
    atomic_store_explicit(&_PyTraceMalloc_gil_busy, 0, memory_order_release);
}

typedef struct {
    unsigned int domain;
    _PyTraceMalloc_Node node;
    size_t size;
} _PyTraceMalloc_TraceCopy;
/* Copy every trace into a malloc()ed array and pin VIEW, in one locked
   section. */
extern int _PyTraceMalloc_StoreCopy(_PyTraceMalloc_TraceCopy **traces,
                                    size_t *count,
                                    _PyTraceMalloc_CCTView *view);
/* For Modules/_testtracemalloc.c (tests only): the full store check, and
   fault injection: the next N bookkeeping allocations of at least MIN_SIZE
   bytes fail (returns how many the previous call had left), or the next N
   process-wide barriers (returns 0 if this build has none). */
/* The exports' blocks kept untraced (count), and how many of them the
   program took back from a free list, traced at its line since start()
   (retraced); for the tests. */
PyAPI_FUNC(void) _PyTraceMalloc_HiddenStats(size_t *count,
                                            uint64_t *retraced);
PyAPI_FUNC(int) _PyTraceMalloc_StoreCheck(char *why, size_t why_size,
                                          uint64_t *ntraces);
PyAPI_FUNC(int) _PyTraceMalloc_FailBookkeeping(int n, size_t min_size);
PyAPI_FUNC(int) _PyTraceMalloc_FailBarrier(int n);
/* malloc() for the engine's own memory, honouring fault injection. */
extern void *_PyTraceMalloc_RawAlloc(size_t size, int zero);
/* An export's big buffers (the copy of the traces, the snapshot's
   columns) are fresh memory written once from end to end: on Linux, ask
   for transparent huge pages on the whole ones inside the SIZE bytes at P,
   then fault them all in with one call instead of a fault per page.
   Advice only: nothing changes if the system says no. */
PyAPI_FUNC(void) _PyTraceMalloc_AdviseBulk(void *p, size_t size);
/* malloc() for such a buffer, aligned on a huge page when it is big. */
extern void *_PyTraceMalloc_BulkAlloc(size_t size);

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_TRACEMALLOC_H */
