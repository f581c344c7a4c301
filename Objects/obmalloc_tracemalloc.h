/* Trace slots of pymalloc pools.
 *
 * Included at the end of the pymalloc section of Objects/obmalloc.c, because
 * it needs pymalloc's private pool layout.  Nothing here is called by
 * pymalloc itself except _PyTraceMalloc_ArenaFreed().
 *
 * Each pool that holds traced blocks owns a slot array with one
 * _PyTraceMalloc_Slot (6 bytes) per block of its size class, so a trace is
 * found from the block address by arithmetic alone: no hashing, no per-trace
 * allocation.  The pool header keeps the index of its slot array in the
 * registry below, in the 4 spare bytes of its `ref` union; the registry entry
 * keeps the pool address back, so a stale index (a pool recycled after
 * clear_traces(), or an index reused by another pool) is recognised.
 *
 * Protected by the engine lock; all callers hold it.
 */

#include "pycore_tracemalloc.h"

#include <stddef.h>                // offsetof()

#if defined(WITH_PYMALLOC) && WITH_PYMALLOC_RADIX_TREE
#  define TM_POOL_SLOTS 1
#else
#  define TM_POOL_SLOTS 0
#endif

/* Defined whatever the build: without pool slots the cache stays empty and
   the store's fast path always falls back to _PyTraceMalloc_PoolSlot(). */
_PyTraceMalloc_PoolCacheEntry _PyTraceMalloc_pool_cache[
    _PyTraceMalloc_POOL_CACHE_SIZE];
uint32_t _PyTraceMalloc_caller_skew;
uint32_t _PyTraceMalloc_blocks_exact;

#if TM_POOL_SLOTS

/* pymalloc's state, per base.  3.11 has one, in file statics.  3.13 has
   one per interpreter (struct _obmalloc_state): the main interpreter's,
   shared by the subinterpreters that share its GIL and obmalloc, and a
   heap copy for each isolated one.  Slots are kept for the main state's
   pools only, which the engine's GIL holder may read (I1); blocks of an
   isolated interpreter's own pools are traced in the table. */
#if PY_VERSION_HEX >= 0x030D0000
typedef pymem_block block;
#  define tm_in_traced_pool(p) \
       arena_map_is_used(&obmalloc_state_main, (pymem_block *)(p))
#else
#  define tm_in_traced_pool(p) arena_map_is_used((block *)(p))
#endif

/* The slot array of a pool: _PyTraceMalloc_PoolTraces, in the engine's
   header, so that the store's fast path can read it (see
   _PyTraceMalloc_PoolSlotCached()); the constants it uses must be
   pymalloc's. */
typedef _PyTraceMalloc_PoolTraces pool_traces;
_Static_assert(_PyTraceMalloc_POOL_BITS == POOL_BITS,
               "the engine's pool size is pymalloc's");
_Static_assert(_PyTraceMalloc_POOL_OVERHEAD == POOL_OVERHEAD,
               "the engine's pool header size is pymalloc's");
_Static_assert(_PyTraceMalloc_POOL_SZIDX_OFFSET
               == offsetof(struct pool_header, szidx),
               "the engine reads pymalloc's size class index");
_Static_assert(_PyTraceMalloc_POOL_MAX_REQUEST == SMALL_REQUEST_THRESHOLD,
               "the engine knows which requests pymalloc serves");

static struct {
    pool_traces **entries;  /* index 0 is never used: it means "none" */
    uint32_t len;           /* entries[1..len-1] are allocated or free */
    uint32_t cap;
    uint32_t *free_indexes; /* indexes of NULL entries, to reuse */
    uint32_t nfree;
    size_t memory;          /* bytes of slot arrays + registry */
} tm_pools;

/* Recently used pools: a pool found here is known to be a live pymalloc
   pool, so the radix-tree lookup and the registry check are skipped.
   Emptied whenever a slot array is freed or an arena goes away.  An empty
   entry names POOL_CACHE_EMPTY, which no POOL_ADDR() can equal (it is not
   pool-aligned): with NULL, every address below POOL_SIZE (NULL, tiny
   addresses passed to the C API) matched an empty entry.  Read by the
   store's inline fast path too. */
#define POOL_CACHE_EMPTY ((poolp)(uintptr_t)1)
#define POOL_CACHE_SIZE _PyTraceMalloc_POOL_CACHE_SIZE
#define tm_pool_cache _PyTraceMalloc_pool_cache

static inline size_t
pool_cache_index(poolp pool)
{
    return ((uintptr_t)pool >> POOL_BITS) & (POOL_CACHE_SIZE - 1);
}

static void
pool_cache_clear(void)
{
    for (size_t i = 0; i < POOL_CACHE_SIZE; i++) {
        tm_pool_cache[i].pool = POOL_CACHE_EMPTY;
        tm_pool_cache[i].pt = NULL;
    }
}

static size_t
pool_traces_size(uint32_t nslots)
{
    return sizeof(pool_traces) + (size_t)nslots * sizeof(_PyTraceMalloc_Slot);
}

static void
pool_traces_free(uint32_t index)
{
    pool_traces *pt = tm_pools.entries[index];
    tm_pools.memory -= pool_traces_size(pt->nslots);
    pool_cache_clear();
    free(pt);
    tm_pools.entries[index] = NULL;
    tm_pools.free_indexes[tm_pools.nfree++] = index;
}

static pool_traces *
pool_traces_lookup(poolp pool)
{
    uint32_t index = pool->ref.tracemalloc_slots;
    if (index == 0 || index >= tm_pools.len) {
        return NULL;
    }
    pool_traces *pt = tm_pools.entries[index];
    if (pt == NULL || pt->pool != pool) {
        return NULL;
    }
    return pt;
}

/* Slow path: give POOL a slot array for its current size class. */
Py_NO_INLINE static pool_traces *
pool_traces_create(poolp pool, int *nomem)
{
    pool_traces *old = pool_traces_lookup(pool);
    uint32_t index;
    if (old != NULL) {
        /* The pool was emptied and reused for another size class: its
           blocks are all new, so the old array carries nothing. */
        assert(old->live == 0);
        index = pool->ref.tracemalloc_slots;
        pool_traces_free(index);
    }
    if (tm_pools.nfree == 0 && tm_pools.len == tm_pools.cap) {
        uint32_t cap = tm_pools.cap ? tm_pools.cap * 2 : 64;
        pool_traces **entries = realloc(tm_pools.entries,
                                        cap * sizeof(*entries));
        if (entries == NULL) {
            *nomem = 1;
            return NULL;
        }
        tm_pools.entries = entries;
        uint32_t *free_indexes = realloc(tm_pools.free_indexes,
                                         cap * sizeof(*free_indexes));
        if (free_indexes == NULL) {
            *nomem = 1;
            return NULL;
        }
        tm_pools.free_indexes = free_indexes;
        tm_pools.memory += (cap - tm_pools.cap)
                           * (sizeof(*entries) + sizeof(*free_indexes));
        tm_pools.cap = cap;
        if (tm_pools.len == 0) {
            tm_pools.entries[0] = NULL;
            tm_pools.len = 1;
        }
    }
    uint32_t szidx = pool->szidx;
    uint32_t nslots = NUMBLOCKS(szidx);
    pool_traces *pt = _PyTraceMalloc_RawAlloc(pool_traces_size(nslots), 1);
    if (pt == NULL) {
        *nomem = 1;
        return NULL;
    }
    pt->pool = pool;
    pt->szidx = szidx;
    pt->nslots = nslots;
    uint32_t block_size = INDEX2SIZE(szidx);
    pt->block_size = block_size;
    pt->reciprocal = (uint32_t)((((uint64_t)1 << 32) + block_size - 1)
                                / block_size);
    pt->live = 0;
    if (tm_pools.nfree > 0) {
        index = tm_pools.free_indexes[--tm_pools.nfree];
    }
    else {
        index = tm_pools.len++;
    }
    tm_pools.entries[index] = pt;
    tm_pools.memory += pool_traces_size(nslots);
    pool->ref.tracemalloc_slots = index;
    return pt;
}

/* The pool cache missed (the caller, _PyTraceMalloc_PoolSlotCached(),
   probed it): one radix-tree lookup (the same one pymalloc's free does)
   and a registry check, then the pool goes into the cache. */
_PyTraceMalloc_Slot *
_PyTraceMalloc_PoolSlot(const void *p, int create, int *nomem,
                        uint32_t **live)
{
    poolp pool = POOL_ADDR(p);
    if (!tm_in_traced_pool(p)) {
        return NULL;
    }
    pool_traces *pt = pool_traces_lookup(pool);
    if (pt == NULL || pt->szidx != pool->szidx) {
        if (!create) {
            return NULL;
        }
        pt = pool_traces_create(pool, nomem);
        if (pt == NULL) {
            return NULL;
        }
    }
    size_t ci = pool_cache_index(pool);
    tm_pool_cache[ci].pool = pool;
    tm_pool_cache[ci].pt = pt;
    assert(pt->block_size == INDEX2SIZE(pt->szidx));
    return _PyTraceMalloc_PoolTracesSlot(pt, (uintptr_t)pool, p, live, 1);
}

void
_PyTraceMalloc_ArenaFreed(uintptr_t arena_base, uintptr_t carved_end)
{
    if (tm_pools.len == 0) {
        return;     /* never traced since the last clear */
    }
    _PyTraceMalloc_Lock();
    pool_cache_clear();
    uintptr_t first = (arena_base + POOL_SIZE - 1)
                      & ~(uintptr_t)(POOL_SIZE - 1);
    for (uintptr_t p = first; p < carved_end; p += POOL_SIZE) {
        poolp pool = (poolp)p;
        if (pool_traces_lookup(pool) != NULL) {
            pool_traces_free(pool->ref.tracemalloc_slots);
        }
    }
    _PyTraceMalloc_Unlock();
}

int
_PyTraceMalloc_PoolSlotsForEach(_PyTraceMalloc_SlotsVisitor visit, void *arg)
{
    for (uint32_t i = 1; i < tm_pools.len; i++) {
        pool_traces *pt = tm_pools.entries[i];
        if (pt == NULL || pt->live == 0) {
            continue;
        }
        int res = visit(pt->slots, pt->nslots, pt->live, arg);
        if (res) {
            return res;
        }
    }
    return 0;
}

void
_PyTraceMalloc_PoolSlotsClear(void)
{
    for (uint32_t i = 1; i < tm_pools.len; i++) {
        free(tm_pools.entries[i]);
    }
    free(tm_pools.entries);
    free(tm_pools.free_indexes);
    memset(&tm_pools, 0, sizeof(tm_pools));
    /* Offset of the caller's pointer in its block: 2 words under the
       debug hooks, else 0. */
    _PyTraceMalloc_caller_skew = _PyMem_DebugEnabled() ? 2 * sizeof(size_t)
                                                        : 0;
    /* Exact for the allocators Python knows (PYTHONMALLOC's), whose skew
       that is; unknown under a user's, until the next clear. */
    _PyTraceMalloc_blocks_exact = _PyMem_GetCurrentAllocatorName() != NULL;
    pool_cache_clear();
}

size_t
_PyTraceMalloc_PoolSlotsMemory(void)
{
    return tm_pools.memory;
}

int64_t
_PyTraceMalloc_PoolSlotsCheck(uint64_t *total_size, const char **why)
{
    int64_t count = 0;
    uint64_t size = 0;
    uint8_t *is_free = NULL;
    for (uint32_t i = 1; i < tm_pools.len; i++) {
        pool_traces *pt = tm_pools.entries[i];
        if (pt == NULL) {
            continue;
        }
        poolp pool = pt->pool;
        if (!tm_in_traced_pool(pool)) {
            *why = "a slot array outlives its arena";
            goto fail;
        }
        if (pool->ref.tracemalloc_slots != i) {
            *why = "a pool does not point back at its slot array";
            goto fail;
        }
        uint32_t live = 0;
        for (uint32_t j = 0; j < pt->nslots; j++) {
            if (_PyTraceMalloc_SlotNode(&pt->slots[j]) != 0) {
                live++;
                size += pt->slots[j].size;
            }
        }
        if (live != pt->live) {
            *why = "a pool's live-slot count is wrong";
            goto fail;
        }
        count += live;
        if (live == 0) {
            continue;
        }
        if (pool->szidx != pt->szidx) {
            *why = "traced blocks in a pool of another size class";
            goto fail;
        }
        /* Every block on the pool's free list and every never-used block
           must have an empty slot: a freed block keeps no trace. */
        uint32_t block_size = INDEX2SIZE(pt->szidx);
        is_free = calloc(pt->nslots, 1);
        if (is_free == NULL) {
            *why = "out of memory in the check";
            goto fail;
        }
        for (block *b = pool->freeblock; b != NULL; b = *(block **)b) {
            uint32_t idx = (uint32_t)(b - ((block *)pool + POOL_OVERHEAD))
                           / block_size;
            if (idx < pt->nslots) {
                is_free[idx] = 1;
            }
        }
        for (uint32_t j = 0; j < pt->nslots; j++) {
            uint32_t offset = POOL_OVERHEAD + j * block_size;
            if (offset >= pool->nextoffset && offset <= pool->maxnextoffset) {
                is_free[j] = 1;     /* never carved yet */
            }
            if (is_free[j] && _PyTraceMalloc_SlotNode(&pt->slots[j]) != 0) {
                *why = "a free pymalloc block still has a trace";
                goto fail;
            }
        }
        free(is_free);
        is_free = NULL;
    }
    *total_size = size;
    return count;
fail:
    free(is_free);
    return -1;
}

#else  /* !TM_POOL_SLOTS: every trace lives in the table */

_PyTraceMalloc_Slot *
_PyTraceMalloc_PoolSlot(const void *p, int create, int *nomem,
                        uint32_t **live)
{
    return NULL;
}

void
_PyTraceMalloc_ArenaFreed(uintptr_t arena_base, uintptr_t carved_end)
{
}

int
_PyTraceMalloc_PoolSlotsForEach(_PyTraceMalloc_SlotsVisitor visit, void *arg)
{
    return 0;
}

void
_PyTraceMalloc_PoolSlotsClear(void)
{
    /* Nothing is ever cached, but the store's fast path compares with
       these entries: none may look like the pool at address 0. */
    for (size_t i = 0; i < _PyTraceMalloc_POOL_CACHE_SIZE; i++) {
        _PyTraceMalloc_pool_cache[i].pool = (void *)(uintptr_t)1;
        _PyTraceMalloc_pool_cache[i].pt = NULL;
    }
    /* Unused without slots; kept as in the pool build for the tests. */
    _PyTraceMalloc_blocks_exact = _PyMem_GetCurrentAllocatorName() != NULL;
}

size_t
_PyTraceMalloc_PoolSlotsMemory(void)
{
    return 0;
}

int64_t
_PyTraceMalloc_PoolSlotsCheck(uint64_t *total_size, const char **why)
{
    *total_size = 0;
    return 0;
}

#endif /* TM_POOL_SLOTS */
