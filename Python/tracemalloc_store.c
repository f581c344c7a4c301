/* The trace store of the tracing engine: live block -> {size, node}.
 *
 * Two places hold traces:
 *  - pymalloc blocks of the default domain: the slot array of their pool
 *    (Objects/obmalloc_tracemalloc.h), found by address arithmetic;
 *  - everything else (large blocks, PYTHONMALLOC=malloc, a user's allocator,
 *    PyTraceMalloc_Track() in any domain): one open-addressing table keyed by
 *    (domain, pointer), records stored inline, linear probing with
 *    backward-shift deletion, so there are no tombstones and no per-trace
 *    allocation.
 * The running totals (current, peak) cover both.
 *
 * Everything here is protected by the engine lock, a spin lock that is never
 * held while calling back into Python or into a traced allocator, so it can
 * be taken from a raw-domain hook without the GIL.
 */

#include "Python.h"
#include "pycore_pystate.h"       // _PyThreadState_GET()
#include "pycore_tracemalloc.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

/* ---- the engine lock --------------------------------------------------- */

/* The GIL holder (one thread at a time) is the engine's usual caller and
   enters with plain stores: it raises `gil_busy`, then checks `foreign`.
   A caller without the GIL serialises with other such callers through
   `foreign_lock`, raises `foreign`, runs membarrier(2) so that every thread
   has a full barrier (the GIL holder's store of `gil_busy` is visible, or it
   will see `foreign`), then waits for `gil_busy` to drop.  If the GIL
   holder sees `foreign` it backs off until it drops.  This is Dekker's
   mutual exclusion with the fence moved to the rare side.  Without
   membarrier(2) both sides use real fences. */
atomic_int _PyTraceMalloc_gil_busy;
atomic_int _PyTraceMalloc_foreign;
int _PyTraceMalloc_asymmetric;
static atomic_flag tm_foreign_lock = ATOMIC_FLAG_INIT;
/* Raised by a GIL holder that found `foreign` up: the next caller without
   the GIL waits until it has been in, so that a steady stream of such
   callers (thread pools compressing, PyTraceMalloc_Track() from worker
   threads) cannot starve the interpreter.  The GIL side waits for at most
   one critical section of the other side. */
static atomic_int tm_gil_waiting;
/* Entries by callers without the GIL, for the tests (written under
   tm_foreign_lock). */
static uint64_t tm_foreign_entries;

/* PY_TRACEMALLOC_NO_MEMBARRIER builds both sides with real fences: for
   ThreadSanitizer, which cannot see the barrier that membarrier(2) puts on
   other threads, and would report the asymmetric protocol as a race. */
#if defined(__linux__) && !defined(PY_TRACEMALLOC_NO_MEMBARRIER)
#  include <sys/mman.h>
#  include <sys/syscall.h>
#  ifdef __NR_membarrier
#    define TM_HAVE_MEMBARRIER 1
     /* From <linux/membarrier.h>, which older systems lack. */
#    define TM_MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3)
#    define TM_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)
#  endif
#endif

static int tm_fail_barriers;    /* tests: barriers left to fail */

static void
tm_setup_barrier(void)
{
#ifdef TM_HAVE_MEMBARRIER
    if (syscall(__NR_membarrier, TM_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0, 0) == 0) {
        _PyTraceMalloc_asymmetric = 1;
    }
#endif
}

#ifdef TM_HAVE_MEMBARRIER
/* The fallback when membarrier(2) fails (the kernel documents ENOMEM):
   changing the protection of a page that this thread has written forces
   the kernel to shoot down that page's TLB entries on every CPU that runs
   a thread of the process, with an interrupt that serialises each of
   them: the same process-wide barrier, dearer.  (.NET's
   FlushProcessWriteBuffers() uses this on systems without membarrier.)
   Returns -1 if even that is not possible. */
static int
tm_page_barrier(void)
{
    static char *page;
    long size = sysconf(_SC_PAGESIZE);
    if (page == NULL) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return -1;
        }
        page = p;
    }
    if (mprotect(page, size, PROT_READ | PROT_WRITE) != 0) {
        return -1;
    }
    /* Dirty the page so that it is mapped, and its TLB entry present. */
    *(volatile char *)page += 1;
    if (mprotect(page, size, PROT_NONE) != 0) {
        return -1;
    }
    return 0;
}
#endif

/* Put a full barrier on every thread of the process (the GIL side fences
   with a compiler barrier only).  Called with tm_foreign_lock held. */
static void
tm_heavy_barrier(void)
{
#ifdef TM_HAVE_MEMBARRIER
    if (_PyTraceMalloc_asymmetric) {
        int failed = 1;
        if (tm_fail_barriers > 0) {
            tm_fail_barriers--;
        }
        else if (syscall(__NR_membarrier, TM_MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                         0, 0) == 0) {
            failed = 0;
        }
        if (!failed) {
            return;
        }
        /* From now on the GIL side uses real fences.  A GIL holder that
           entered with a compiler barrier before it sees this needs the
           process-wide barrier once more. */
        _PyTraceMalloc_asymmetric = 0;
        atomic_thread_fence(memory_order_seq_cst);
        if (tm_page_barrier() == 0) {
            return;
        }
        /* No barrier at all: the GIL side might be inside without us
           seeing it.  It takes the GIL side a handful of instructions to
           leave or to see `foreign`; a GIL holder inside the engine never
           blocks.  Yielding a few times lets it leave, and from its next
           entry on it fences for real. */
        for (int i = 0; i < 64; i++) {
            sched_yield();
        }
    }
#endif
    atomic_thread_fence(memory_order_seq_cst);
}

int
_PyTraceMalloc_FailBarrier(int n)
{
    while (atomic_flag_test_and_set_explicit(&tm_foreign_lock,
                                             memory_order_acquire)) {
        sched_yield();
    }
    tm_fail_barriers = n;
    atomic_flag_clear_explicit(&tm_foreign_lock, memory_order_release);
#ifdef TM_HAVE_MEMBARRIER
    return 1;
#else
    return 0;
#endif
}

/* Slow path of _PyTraceMalloc_Lock(): `foreign` was up.  Wait for it to
   drop, with tm_gil_waiting raised so that no new caller without the GIL
   gets in first, then enter with a real fence. */
void
_PyTraceMalloc_WaitForeign(void)
{
    atomic_store_explicit(&_PyTraceMalloc_gil_busy, 0, memory_order_release);
    atomic_store(&tm_gil_waiting, 1);
    for (;;) {
        while (atomic_load_explicit(&_PyTraceMalloc_foreign,
                                    memory_order_acquire)) {
            sched_yield();
        }
        atomic_store_explicit(&_PyTraceMalloc_gil_busy, 1,
                              memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        if (!atomic_load_explicit(&_PyTraceMalloc_foreign,
                                  memory_order_acquire)) {
            break;
        }
        atomic_store_explicit(&_PyTraceMalloc_gil_busy, 0,
                              memory_order_release);
    }
    atomic_store(&tm_gil_waiting, 0);
}

void
_PyTraceMalloc_LockNoGIL(void)
{
    while (atomic_flag_test_and_set_explicit(&tm_foreign_lock,
                                             memory_order_acquire)) {
        sched_yield();
    }
    /* Let a waiting GIL holder in first (bounded: it leaves at once). */
    while (atomic_load(&tm_gil_waiting)) {
        sched_yield();
    }
    tm_foreign_entries++;
    atomic_store_explicit(&_PyTraceMalloc_foreign, 1, memory_order_relaxed);
    tm_heavy_barrier();
    while (atomic_load_explicit(&_PyTraceMalloc_gil_busy,
                                memory_order_acquire)) {
        sched_yield();
    }
}

uint64_t
_PyTraceMalloc_ForeignEntries(void)
{
    _PyTraceMalloc_LockNoGIL();
    uint64_t n = --tm_foreign_entries;      /* not this call's own */
    _PyTraceMalloc_UnlockNoGIL();
    return n;
}

void
_PyTraceMalloc_UnlockNoGIL(void)
{
    atomic_store_explicit(&_PyTraceMalloc_foreign, 0, memory_order_release);
    atomic_flag_clear_explicit(&tm_foreign_lock, memory_order_release);
}

/* The thread state this thread last made current (Python/pystate.c calls
   _PyTraceMalloc_ThreadStateSwapped() wherever the current thread state
   changes): whatever its interpreter, a subinterpreter's included, this
   thread holds the GIL exactly while it is the current one. */
static _Thread_local PyThreadState *tm_this_thread_tstate;

void
_PyTraceMalloc_ThreadStateSwapped(PyThreadState *tstate)
{
    tm_this_thread_tstate = tstate;
}

int
_PyTraceMalloc_HoldsGIL(void)
{
    /* Compares pointers only: the GIL holder's thread state is never
       dereferenced here. */
    PyThreadState *mine = tm_this_thread_tstate;
    return mine != NULL && mine == _PyThreadState_GET();
}

/* fork(): no caller without the GIL may be inside while the process is
   copied; the child starts with the engine free.  The forking thread holds
   the GIL and is not inside the engine itself. */
static void
tm_atfork_prepare(void)
{
    while (atomic_flag_test_and_set_explicit(&tm_foreign_lock,
                                             memory_order_acquire)) {
        sched_yield();
    }
}

static void
tm_atfork_parent(void)
{
    atomic_flag_clear_explicit(&tm_foreign_lock, memory_order_release);
}

static void
tm_atfork_child(void)
{
    atomic_store(&_PyTraceMalloc_foreign, 0);
    atomic_store(&_PyTraceMalloc_gil_busy, 0);
    atomic_store(&tm_gil_waiting, 0);
    atomic_flag_clear(&tm_foreign_lock);
    /* The child's thread is another thread: its frames' caches name the
       parent thread's root node (per-thread attribution).  A new
       generation makes them link again, under the child's own root. */
    if (++_PyTraceMalloc_cct_generation == 0) {
        _PyTraceMalloc_cct_generation = 1;      /* 0 marks reset frames */
    }
    /* membarrier registration is per process: register the child too. */
    _PyTraceMalloc_asymmetric = 0;
    tm_setup_barrier();
}

/* ---- the engine's own memory -------------------------------------------- */

/* Protected by the lock (tests only) */
static int tm_fail_countdown;
static size_t tm_fail_min_size;

int
_PyTraceMalloc_FailBookkeeping(int n, size_t min_size)
{
    _PyTraceMalloc_Lock();
    int left = tm_fail_countdown;
    tm_fail_countdown = n;
    tm_fail_min_size = min_size;
    _PyTraceMalloc_Unlock();
    return left;
}

void *
_PyTraceMalloc_RawAlloc(size_t size, int zero)
{
    if (tm_fail_countdown > 0 && size >= tm_fail_min_size) {
        tm_fail_countdown--;
        return NULL;
    }
    return zero ? calloc(1, size) : malloc(size);
}

/* ---- the table ---------------------------------------------------------- */

typedef struct {
    uintptr_t ptr;              /* 0: empty entry */
    unsigned int domain;
    _PyTraceMalloc_Node node;
    size_t size;
} table_entry;

static struct {
    /* Protected by the lock */
    table_entry *entries;
    size_t mask;                /* capacity - 1; capacity is a power of 2 */
    size_t used;
    /* Totals over the table and the pool slots */
    size_t current;
    size_t peak;
    size_t ntraces;
    /* The live traces are the peak now (set when `current` passes `peak`):
       the peak's per-node totals must be kept before the next decrease. */
    int peak_pending;
    /* 1 once PyTraceMalloc_Track() has put a default-domain trace in the
       table, whose address may be, or become, a pymalloc block's: a new
       trace in a pool slot must then replace the table's trace of the
       same address (one key, one trace).  Until the next clear. */
    int tracked_in_table;
    int atfork_registered;
} tm_store;

#define TABLE_MIN_CAPACITY 1024

static inline size_t
table_hash(unsigned int domain, uintptr_t ptr)
{
    /* Blocks are 16-byte aligned: drop the zero bits, then mix. */
    uint64_t x = ((uint64_t)ptr >> 4) ^ ((uint64_t)domain << 47);
    x *= UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(x >> 20);
}

/* The entry of (DOMAIN, PTR) in the table, or the empty entry where it
   would go (the table must exist). */
static inline table_entry *
table_probe(unsigned int domain, uintptr_t ptr)
{
    size_t i = table_hash(domain, ptr) & tm_store.mask;
    for (;;) {
        table_entry *e = &tm_store.entries[i];
        if (e->ptr == 0 || (e->ptr == ptr && e->domain == domain)) {
            return e;
        }
        i = (i + 1) & tm_store.mask;
    }
}

static table_entry *
table_find(unsigned int domain, uintptr_t ptr)
{
    if (tm_store.entries == NULL) {
        return NULL;
    }
    table_entry *e = table_probe(domain, ptr);
    return e->ptr != 0 ? e : NULL;
}

/* The empty entry of ENTRIES where (DOMAIN, PTR) goes (not in it yet). */
static table_entry *
table_empty_entry(table_entry *entries, size_t mask, unsigned int domain,
                  uintptr_t ptr)
{
    size_t i = table_hash(domain, ptr) & mask;
    while (entries[i].ptr != 0) {
        i = (i + 1) & mask;
    }
    return &entries[i];
}

static void
table_place(table_entry *entries, size_t mask, const table_entry *src)
{
    *table_empty_entry(entries, mask, src->domain, src->ptr) = *src;
}

Py_NO_INLINE static int
table_grow(void)
{
    size_t old_capacity = tm_store.entries ? tm_store.mask + 1 : 0;
    size_t capacity = old_capacity ? old_capacity * 2 : TABLE_MIN_CAPACITY;
    table_entry *entries = _PyTraceMalloc_RawAlloc(
        capacity * sizeof(table_entry), 1);
    if (entries == NULL) {
        return -1;
    }
    for (size_t i = 0; i < old_capacity; i++) {
        if (tm_store.entries[i].ptr != 0) {
            table_place(entries, capacity - 1, &tm_store.entries[i]);
        }
    }
    free(tm_store.entries);
    tm_store.entries = entries;
    tm_store.mask = capacity - 1;
    return 0;
}

/* Remove entry E, shifting back the entries of its probe run so that no
   lookup ever stops early at the hole. */
static void
table_delete(table_entry *e)
{
    size_t mask = tm_store.mask;
    size_t hole = (size_t)(e - tm_store.entries);
    size_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        table_entry *next = &tm_store.entries[i];
        if (next->ptr == 0) {
            break;
        }
        size_t home = table_hash(next->domain, next->ptr) & mask;
        /* NEXT may move into the hole if its home is not in (hole, i]. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            tm_store.entries[hole] = *next;
            hole = i;
        }
    }
    tm_store.entries[hole].ptr = 0;
    tm_store.used--;
}

/* Peak bookkeeping of the call-context tree (tracemalloc_cct.c, in this
   translation unit): per-node totals now and at the peak. */
static inline int cct_account_add(unsigned int domain,
                                  _PyTraceMalloc_Node node, size_t size);
static inline void cct_account_remove(unsigned int domain,
                                      _PyTraceMalloc_Node node, size_t size);
static inline void cct_peak_before_decrease(void);
static inline void cct_account_move(_PyTraceMalloc_Node from,
                                    _PyTraceMalloc_Node to, size_t size);

static inline void
totals_add(size_t size)
{
    tm_store.current += size;
    if (tm_store.current > tm_store.peak) {
        tm_store.peak = tm_store.current;
        tm_store.peak_pending = 1;
    }
}

/* ---- the store API ------------------------------------------------------ */

int
_PyTraceMalloc_StoreInit(void)
{
    if (!tm_store.atfork_registered) {
        if (pthread_atfork(tm_atfork_prepare, tm_atfork_parent,
                           tm_atfork_child) != 0) {
            return -1;
        }
        tm_store.atfork_registered = 1;
        tm_setup_barrier();
    }
    return 0;
}

void
_PyTraceMalloc_StoreClear_unlocked(void)
{
    free(tm_store.entries);
    tm_store.entries = NULL;
    tm_store.mask = 0;
    tm_store.used = 0;
    tm_store.current = 0;
    tm_store.peak = 0;
    tm_store.ntraces = 0;
    tm_store.peak_pending = 0;
    tm_store.tracked_in_table = 0;
    _PyTraceMalloc_PoolSlotsClear();
}

/* Traces keep the node 0 (no frame) as UINT32_MAX, which no real node
   reaches, so that 0 can mark an empty pool slot. */
static inline _PyTraceMalloc_Node
slot_node(const _PyTraceMalloc_Slot *slot)
{
    return slot->node == UINT32_MAX ? 0 : slot->node;
}

/* The table's part of store_add(): blocks outside pymalloc's pools, and
   the other domains.  One probe finds either PTR's entry or the empty
   entry where it goes. */
Py_NO_INLINE static int
store_add_table(unsigned int domain, uintptr_t ptr, size_t size,
                _PyTraceMalloc_Node node)
{
    if (ptr == 0) {
        return -1;      /* 0 marks empty entries: never traced */
    }
    if (tm_store.entries == NULL && table_grow() < 0) {
        return -1;
    }
    table_entry *e = table_probe(domain, ptr);
    if (e->ptr != 0) {
        _PyTraceMalloc_Node old = e->node == UINT32_MAX ? 0 : e->node;
        cct_peak_before_decrease();
        cct_account_remove(domain, old, e->size);
        if (cct_account_add(domain, node, size) < 0) {
            /* Its totals exist: putting the old trace back cannot fail. */
            (void)cct_account_add(domain, old, e->size);
            return -1;
        }
        tm_store.current -= e->size;
    }
    else {
        if ((tm_store.used + 1) * 4 > (tm_store.mask + 1) * 3) {
            if (table_grow() < 0) {
                return -1;
            }
            e = table_empty_entry(tm_store.entries, tm_store.mask, domain,
                                  ptr);
        }
        if (cct_account_add(domain, node, size) < 0) {
            return -1;
        }
        e->ptr = ptr;
        e->domain = domain;
        tm_store.used++;
        tm_store.ntraces++;
    }
    e->node = node ? node : UINT32_MAX;
    e->size = size;
    totals_add(size);
    return 0;
}

Py_NO_INLINE static int store_remove_table(unsigned int domain,
                                          uintptr_t ptr,
                                          _PyTraceMalloc_Node *node,
                                          size_t *size);

/* A new trace of the pymalloc block PTR replaces a tracked trace of the
   same address in the table (tracked_in_table). */
Py_NO_INLINE static void
store_drop_tracked(uintptr_t ptr)
{
    _PyTraceMalloc_Node node;
    size_t size;
    (void)store_remove_table(_PyTraceMalloc_DEFAULT_DOMAIN, ptr, &node,
                             &size);
}

/* Record a trace of PTR (replacing any): 0, or -1 when out of memory.  A
   pymalloc block costs a slot lookup and a few stores, anything else one
   table probe.  Inline for the hooks: the pool slot is the usual case, and
   a call's register saves were a fifth of its cost.  POOLED is 0 when PTR
   is known to lie outside pymalloc's pools (a block just returned for a
   request too large for them, or by the raw domain's allocator): the table
   then takes the trace without a pool lookup.  Every lookup of an existing
   trace checks both places, so a wrong 0 costs nothing but the lookup it
   skipped.  BLOCK is 1 when PTR is a block the allocator just returned
   (see _PyTraceMalloc_PoolSlotCached()). */
static inline int
store_add(unsigned int domain, uintptr_t ptr, size_t size,
          _PyTraceMalloc_Node node, int pooled, int block)
{
    if (pooled && domain == _PyTraceMalloc_DEFAULT_DOMAIN
        && size <= UINT32_MAX) {
        int nomem = 0;
        uint32_t *live;
        _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotCached(
            (const void *)ptr, 1, &nomem, &live, block);
        if (slot != NULL) {
            if (slot->node == 0) {
                (*live)++;
                tm_store.ntraces++;
                if (tm_store.tracked_in_table) {
                    store_drop_tracked(ptr);
                }
            }
            else {
                cct_peak_before_decrease();
                cct_account_remove(domain, slot_node(slot), slot->size);
                tm_store.current -= slot->size;
            }
            /* The node 0 (no frame) must still mark a used slot: store
               it as UINT32_MAX, which no real node reaches. */
            slot->node = node ? node : UINT32_MAX;
            slot->size = (uint32_t)size;
            (void)cct_account_add(domain, node, size);  /* cannot fail */
            totals_add(size);
            return 0;
        }
        if (nomem) {
            return -1;
        }
    }
    return store_add_table(domain, ptr, size, node);
}

/* PyTraceMalloc_Track() of (DOMAIN, PTR), with the GIL for the default
   domain.  A pool slot takes only the blocks the allocator handed out
   (the hooks' traces), so that no free block and no pool that pymalloc
   may empty, reuse or give back ever holds a trace: a tracked address
   replaces the trace in its slot if the slot has one, and otherwise goes
   to the table, where it stays until untracked or replaced. */
static int
store_track(unsigned int domain, uintptr_t ptr, size_t size,
            _PyTraceMalloc_Node node)
{
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN && size <= UINT32_MAX) {
        uint32_t *live;
        _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotCached(
            (const void *)ptr, 0, NULL, &live, 0);
        if (slot != NULL && slot->node != 0) {
            return store_add(domain, ptr, size, node, 1, 0);
        }
    }
    int res = store_add_table(domain, ptr, size, node);
    if (res == 0 && domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        tm_store.tracked_in_table = 1;
    }
    return res;
}

/* The table's part of store_remove(). */
Py_NO_INLINE static int
store_remove_table(unsigned int domain, uintptr_t ptr,
                   _PyTraceMalloc_Node *node, size_t *size)
{
    table_entry *e = table_find(domain, ptr);
    if (e == NULL) {
        return 0;
    }
    *node = e->node == UINT32_MAX ? 0 : e->node;
    *size = e->size;
    cct_peak_before_decrease();
    cct_account_remove(domain, *node, *size);
    tm_store.current -= e->size;
    tm_store.ntraces--;
    table_delete(e);
    return 1;
}

/* The pool slot's part of store_remove(): 1 if PTR's slot held a trace. */
static inline int
store_remove_slot(uintptr_t ptr, _PyTraceMalloc_Node *node, size_t *size,
                  int block)
{
    uint32_t *live;
    _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotCached(
        (const void *)ptr, 0, NULL, &live, block);
    if (slot == NULL || slot->node == 0) {
        return 0;
    }
    *node = slot_node(slot);
    *size = slot->size;
    cct_peak_before_decrease();
    cct_account_remove(_PyTraceMalloc_DEFAULT_DOMAIN, *node, *size);
    tm_store.current -= slot->size;
    tm_store.ntraces--;
    slot->node = 0;
    slot->size = 0;
    (*live)--;
    return 1;
}

/* Where store_remove() looks for a trace of the default domain: the pool
   slot first (the mem and obj domains), the table first (the raw domain's
   blocks come from malloc()), or only the table (a caller without the GIL,
   which may not read pymalloc's pools: only the raw domain's hooks get
   there, whose blocks are never pymalloc's). */
enum { STORE_POOL_FIRST, STORE_TABLE_FIRST, STORE_TABLE_ONLY };

static inline int
store_where(int gil_held, int side)
{
    return gil_held ? STORE_POOL_FIRST
                    : (side ? STORE_TABLE_FIRST : STORE_TABLE_ONLY);
}

/* Return 1 if a trace was removed (its node and size in *NODE and *SIZE),
   0 if PTR had none.  Inline for the hooks, as store_add().  BLOCK is 1
   when PTR is a block the allocator handed out (the free hooks). */
static inline int
store_remove(unsigned int domain, uintptr_t ptr, _PyTraceMalloc_Node *node,
             size_t *size, int where, int block)
{
    if (domain != _PyTraceMalloc_DEFAULT_DOMAIN) {
        return store_remove_table(domain, ptr, node, size);
    }
    switch (where) {
    case STORE_POOL_FIRST:
        return (store_remove_slot(ptr, node, size, block)
                || store_remove_table(domain, ptr, node, size));
    case STORE_TABLE_FIRST:
        return (store_remove_table(domain, ptr, node, size)
                || store_remove_slot(ptr, node, size, block));
    default:
        return store_remove_table(domain, ptr, node, size);
    }
}

int
_PyTraceMalloc_StoreRemove_unlocked(unsigned int domain, uintptr_t ptr,
                                    _PyTraceMalloc_Node *node, size_t *size)
{
    return store_remove(domain, ptr, node, size, STORE_POOL_FIRST, 0);
}

/* The table's part of _PyTraceMalloc_StoreGet_unlocked(), which is all
   a caller without the GIL may look at. */
static int
store_get_table(unsigned int domain, uintptr_t ptr,
                _PyTraceMalloc_Node *node, size_t *size)
{
    table_entry *e = table_find(domain, ptr);
    if (e == NULL) {
        return 0;
    }
    *node = e->node == UINT32_MAX ? 0 : e->node;
    *size = e->size;
    return 1;
}

int
_PyTraceMalloc_StoreGet_unlocked(unsigned int domain, uintptr_t ptr,
                                 _PyTraceMalloc_Node *node, size_t *size)
{
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        uint32_t *live;
        _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotCached(
            (const void *)ptr, 0, NULL, &live, 0);
        if (slot != NULL && slot->node != 0) {
            *node = slot_node(slot);
            *size = slot->size;
            return 1;
        }
    }
    return store_get_table(domain, ptr, node, size);
}

/* Where the node of PTR's trace is stored in the table, or NULL if it has
   no trace there.  Store the node with _PyTraceMalloc_StoreWriteNode(). */
uint32_t *
_PyTraceMalloc_StoreTableNodeRef_unlocked(unsigned int domain, uintptr_t ptr,
                                          size_t *size)
{
    table_entry *e = table_find(domain, ptr);
    if (e == NULL) {
        return NULL;
    }
    *size = e->size;
    return &e->node;
}

void
_PyTraceMalloc_StoreMove_unlocked(uint32_t *ref, size_t size,
                                  _PyTraceMalloc_Node node)
{
    _PyTraceMalloc_Node old = *ref == UINT32_MAX ? 0 : *ref;
    cct_account_move(old, node, size);
    _PyTraceMalloc_StoreWriteNode(ref, node);
}

typedef struct {
    void (*visit)(uint32_t *node, void *arg);
    void *arg;
} node_visit_state;

static int
visit_slot_node(_PyTraceMalloc_Slot *slot, void *arg)
{
    node_visit_state *st = arg;
    st->visit(&slot->node, st->arg);
    return 0;
}

void
_PyTraceMalloc_StoreForEachNode_unlocked(
    void (*visit)(uint32_t *node, void *arg), void *arg)
{
    node_visit_state st = {visit, arg};
    (void)_PyTraceMalloc_PoolSlotsForEach(visit_slot_node, &st);
    if (tm_store.entries != NULL) {
        for (size_t i = 0; i <= tm_store.mask; i++) {
            if (tm_store.entries[i].ptr != 0) {
                visit(&tm_store.entries[i].node, arg);
            }
        }
    }
}

void
_PyTraceMalloc_StoreTotals_unlocked(size_t *current, size_t *peak)
{
    *current = tm_store.current;
    *peak = tm_store.peak;
}

void
_PyTraceMalloc_StoreResetPeak_unlocked(void)
{
    tm_store.peak = tm_store.current;
    tm_store.peak_pending = 1;      /* the live traces are the peak now */
}

size_t
_PyTraceMalloc_StoreMemory_unlocked(void)
{
    size_t table = tm_store.entries
                   ? (tm_store.mask + 1) * sizeof(table_entry) : 0;
    return table + _PyTraceMalloc_PoolSlotsMemory();
}

/* ---- export and checks -------------------------------------------------- */

typedef struct {
    _PyTraceMalloc_TraceCopy *out;
    size_t n;
    size_t cap;
} copy_state;

static int
copy_slot(_PyTraceMalloc_Slot *slot, void *arg)
{
    copy_state *st = arg;
    if (st->n == st->cap) {
        return -1;      /* the totals lied: caught by the caller */
    }
    _PyTraceMalloc_TraceCopy *t = &st->out[st->n++];
    t->domain = _PyTraceMalloc_DEFAULT_DOMAIN;
    t->node = slot_node(slot);
    t->size = slot->size;
    return 0;
}

int
_PyTraceMalloc_StoreCopy(_PyTraceMalloc_TraceCopy **traces, size_t *count,
                         _PyTraceMalloc_CCTView *view)
{
    _PyTraceMalloc_Lock();
    copy_state st = {NULL, 0, tm_store.ntraces};
    /* malloc(), not a traced API: the lock is held. */
    st.out = malloc((st.cap ? st.cap : 1) * sizeof(*st.out));
    if (st.out == NULL) {
        _PyTraceMalloc_Unlock();
        return -1;
    }
    _PyTraceMalloc_CCTPin_unlocked(view);
    int res = _PyTraceMalloc_PoolSlotsForEach(copy_slot, &st);
    if (res == 0 && tm_store.entries != NULL) {
        for (size_t i = 0; i <= tm_store.mask; i++) {
            table_entry *e = &tm_store.entries[i];
            if (e->ptr == 0) {
                continue;
            }
            if (st.n == st.cap) {
                res = -1;
                break;
            }
            _PyTraceMalloc_TraceCopy *t = &st.out[st.n++];
            t->domain = e->domain;
            t->node = e->node == UINT32_MAX ? 0 : e->node;
            t->size = e->size;
        }
    }
    _PyTraceMalloc_Unlock();
    if (res != 0 || st.n != st.cap) {
        _PyTraceMalloc_CCTUnpin();
        free(st.out);
        return -2;
    }
    *traces = st.out;
    *count = st.n;
    return 0;
}

int
_PyTraceMalloc_StoreCheck(char *why, size_t why_size, uint64_t *ntraces)
{
    const char *reason = NULL;
    _PyTraceMalloc_Lock();
    uint64_t slot_size = 0;
    int64_t slot_count = _PyTraceMalloc_PoolSlotsCheck(&slot_size, &reason);
    uint64_t table_size = 0, table_count = 0;
    uint32_t nnodes = _PyTraceMalloc_NodeCount();
    if (slot_count >= 0 && tm_store.entries != NULL) {
        for (size_t i = 0; i <= tm_store.mask; i++) {
            table_entry *e = &tm_store.entries[i];
            if (e->ptr == 0) {
                continue;
            }
            table_count++;
            table_size += e->size;
            if (e->node >= nnodes && e->node != UINT32_MAX) {
                reason = "a table trace names a node that does not exist";
                break;
            }
            if (table_find(e->domain, e->ptr) != e) {
                reason = "a table entry cannot be found from its key";
                break;
            }
        }
        if (reason == NULL && table_count != tm_store.used) {
            reason = "the table's entry count is wrong";
        }
    }
    size_t current = tm_store.current, count = tm_store.ntraces;
    _PyTraceMalloc_Unlock();
    if (reason == NULL && slot_count >= 0) {
        if ((uint64_t)slot_count + table_count != count) {
            reason = "the trace count differs from the traces found";
        }
        else if (slot_size + table_size != current) {
            reason = "the traced size differs from the sum of the traces";
        }
    }
    if (reason != NULL) {
        PyOS_snprintf(why, why_size, "%s (current=%zu, sum=%llu, count=%zu)",
                      reason, current,
                      (unsigned long long)(slot_size + table_size), count);
        return -1;
    }
    *ntraces = count;
    return 0;
}
