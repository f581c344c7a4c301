/* The trace store: live block -> {size, node}.
 *
 * Two places hold traces:
 *  - pymalloc blocks of the default domain: the slot array of their pool
 *    (Objects/obmalloc_tracemalloc.h), found by address arithmetic;
 *  - everything else (large blocks, PYTHONMALLOC=malloc, a user's allocator,
 *    PyTraceMalloc_Track() in any domain): one open-addressing table keyed by
 *    (domain, pointer), records stored inline, linear probing with
 *    backward-shift deletion, so there are no tombstones and no per-trace
 *    allocation.
 * The running totals (current, peak) cover both (I2).  Every change of a
 * trace goes through the peak accounting (I8).  Part of the engine's
 * translation unit (see tracemalloc_engine.h).
 */

/* ---- the table ---------------------------------------------------------- */

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
    size_t i = table_hash(domain, ptr) & tm.store.mask;
    for (;;) {
        table_entry *e = &tm.store.entries[i];
        if (e->ptr == 0 || (e->ptr == ptr && e->domain == domain)) {
            return e;
        }
        i = (i + 1) & tm.store.mask;
    }
}

static table_entry *
table_find(unsigned int domain, uintptr_t ptr)
{
    if (tm.store.entries == NULL) {
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
    size_t old_capacity = tm.store.entries ? tm.store.mask + 1 : 0;
    size_t capacity = old_capacity ? old_capacity * 2 : TABLE_MIN_CAPACITY;
    table_entry *entries = _PyTraceMalloc_RawAlloc(
        capacity * sizeof(table_entry), 1);
    if (entries == NULL) {
        return -1;
    }
    for (size_t i = 0; i < old_capacity; i++) {
        if (tm.store.entries[i].ptr != 0) {
            table_place(entries, capacity - 1, &tm.store.entries[i]);
        }
    }
    free(tm.store.entries);
    tm.store.entries = entries;
    tm.store.mask = capacity - 1;
    return 0;
}

/* Remove entry E, shifting back the entries of its probe run so that no
   lookup ever stops early at the hole. */
static void
table_delete(table_entry *e)
{
    size_t mask = tm.store.mask;
    size_t hole = (size_t)(e - tm.store.entries);
    size_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        table_entry *next = &tm.store.entries[i];
        if (next->ptr == 0) {
            break;
        }
        size_t home = table_hash(next->domain, next->ptr) & mask;
        /* NEXT may move into the hole if its home is not in (hole, i]. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            tm.store.entries[hole] = *next;
            hole = i;
        }
    }
    tm.store.entries[hole].ptr = 0;
    tm.store.used--;
}

static inline void
totals_add(size_t size)
{
    tm.store.current += size;
    if (tm.store.current > tm.store.peak) {
        tm.store.peak = tm.store.current;
        tm.peak.pending = 1;
    }
    if (tm.store.current >= tm.dumpover.next) {
        dumpover_crossed();
    }
}

/* The native domain's share of the totals: SUB bytes leave it, ADD
   enter (tracemalloc_native.c). */
static inline void
native_totals(unsigned int domain, size_t add, size_t sub)
{
    if (domain == _PyTraceMalloc_NATIVE_DOMAIN) {
        tm.store.native_current = tm.store.native_current + add - sub;
        if (tm.store.native_current > tm.store.native_peak) {
            tm.store.native_peak = tm.store.native_current;
        }
    }
}

/* ---- the store API ------------------------------------------------------ */

void
_PyTraceMalloc_StoreClear_unlocked(void)
{
    free(tm.store.entries);
    tm.store.entries = NULL;
    tm.store.mask = 0;
    tm.store.used = 0;
    tm.store.current = 0;
    tm.store.peak = 0;
    tm.store.ntraces = 0;
    tm.store.native_current = 0;
    tm.store.native_peak = 0;
    tm.store.tracked_in_table = 0;
    tm.peak.pending = 0;
    hidden_clear();
    if (tm.sample.interval) {
        sample_filter_clear();
    }
    _PyTraceMalloc_PoolSlotsClear();
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
    if (tm.store.entries == NULL && table_grow() < 0) {
        return -1;
    }
    table_entry *e = table_probe(domain, ptr);
    if (e->ptr != 0) {
        _PyTraceMalloc_Node old = stored_node(e->node);
        peak_before_decrease();
        peak_account_remove(domain, old, e->size);
        if (peak_account_add(domain, node, size) < 0) {
            /* Its totals exist: putting the old trace back cannot fail. */
            (void)peak_account_add(domain, old, e->size);
            return -1;
        }
        tm.store.current -= acct_size(e->size);
        native_totals(domain, 0, acct_size(e->size));
    }
    else {
        if ((tm.store.used + 1) * 4 > (tm.store.mask + 1) * 3) {
            if (table_grow() < 0) {
                return -1;
            }
            e = table_empty_entry(tm.store.entries, tm.store.mask, domain,
                                  ptr);
        }
        if (peak_account_add(domain, node, size) < 0) {
            return -1;
        }
        e->ptr = ptr;
        e->domain = domain;
        tm.store.used++;
        tm.store.ntraces++;
        if (tm.sample.interval) {
            sample_filter_add(ptr);
        }
    }
    e->node = node_to_stored(node);
    e->size = size;
    totals_add(acct_size(size));
    native_totals(domain, acct_size(size), 0);
    return 0;
}

Py_NO_INLINE static int store_remove_table(unsigned int domain,
                                          uintptr_t ptr,
                                          _PyTraceMalloc_Node *node,
                                          size_t *size);

/* A new trace of the pymalloc block PTR replaces a tracked trace of the
   same address in the table (tm.store.tracked_in_table, I2). */
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
   a call's register saves would cost more than the slot work.  POOLED is
   0 when PTR is known to lie outside pymalloc's pools (a block just
   returned for a request too large for them, or by the raw domain's
   allocator): the table then takes the trace without a pool lookup.
   Every lookup of an existing trace checks both places, so a wrong 0
   costs nothing but the lookup it skipped.  BLOCK is 1 when PTR is a
   block the allocator just returned (see _PyTraceMalloc_PoolSlotCached()). */
static inline int
store_add(unsigned int domain, uintptr_t ptr, size_t size,
          _PyTraceMalloc_Node node, int pooled, int block)
{
    if (pooled && domain == _PyTraceMalloc_DEFAULT_DOMAIN
        && size <= _PyTraceMalloc_SLOT_SIZE_MAX) {
        int nomem = 0;
        uint32_t *live;
        _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotCached(
            (const void *)ptr, 1, &nomem, &live, block);
        if (slot != NULL) {
            uint32_t old = _PyTraceMalloc_SlotNode(slot);
            if (old == 0) {
                (*live)++;
                tm.store.ntraces++;
                if (tm.store.tracked_in_table) {
                    store_drop_tracked(ptr);
                }
            }
            else {
                peak_before_decrease();
                peak_account_remove(domain, stored_node(old), slot->size);
                tm.store.current -= slot->size;
            }
            _PyTraceMalloc_SlotSetNode(slot, node_to_stored(node));
            slot->size = (uint16_t)size;
            (void)peak_account_add(domain, node, size);  /* cannot fail */
            totals_add(size);
            return 0;
        }
        if (nomem) {
            return -1;
        }
    }
    return store_add_table(domain, ptr, size, node);
}

static inline int store_remove_slot(uintptr_t ptr, _PyTraceMalloc_Node *node,
                                    size_t *size, int block);

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
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        uint32_t *live;
        _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotCached(
            (const void *)ptr, 0, NULL, &live, 0);
        if (slot != NULL && _PyTraceMalloc_SlotNode(slot) != 0) {
            if (size <= _PyTraceMalloc_SLOT_SIZE_MAX) {
                return store_add(domain, ptr, size, node, 1, 0);
            }
            /* Too big for a slot: the trace moves to the table. */
            _PyTraceMalloc_Node old_node;
            size_t old_size;
            (void)store_remove_slot(ptr, &old_node, &old_size, 0);
        }
    }
    int res = store_add_table(domain, ptr, size, node);
    if (res == 0 && domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        tm.store.tracked_in_table = 1;
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
    *node = stored_node(e->node);
    *size = e->size;
    peak_before_decrease();
    peak_account_remove(domain, *node, *size);
    tm.store.current -= acct_size(e->size);
    native_totals(domain, 0, acct_size(e->size));
    tm.store.ntraces--;
    if (tm.sample.interval) {
        sample_filter_remove(ptr);
    }
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
    uint32_t stored = slot != NULL ? _PyTraceMalloc_SlotNode(slot) : 0;
    if (stored == 0) {
        return 0;
    }
    *node = stored_node(stored);
    *size = slot->size;
    peak_before_decrease();
    peak_account_remove(_PyTraceMalloc_DEFAULT_DOMAIN, *node, *size);
    tm.store.current -= slot->size;
    tm.store.ntraces--;
    /* The size of an empty slot is never read. */
    _PyTraceMalloc_SlotSetNode(slot, 0);
    (*live)--;
    return 1;
}

/* Where a hook on GIL_HELD's domain, having entered on SIDE, looks for a
   trace of the default domain (STORE_POOL_FIRST...). */
static inline int
store_where(int gil_held, int side)
{
    return !side ? STORE_TABLE_ONLY
                 : (gil_held ? STORE_POOL_FIRST : STORE_TABLE_FIRST);
}

/* Return 1 if a trace was removed (its node and size in *NODE and *SIZE),
   0 if PTR had none.  Inline for the hooks, as store_add().  WHERE says
   where to look (STORE_POOL_FIRST...).  BLOCK is 1 when PTR is a block the
   allocator handed out (the free hooks). */
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
    *node = stored_node(e->node);
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
        uint32_t stored = slot != NULL ? _PyTraceMalloc_SlotNode(slot) : 0;
        if (stored != 0) {
            *node = stored_node(stored);
            *size = slot->size;
            return 1;
        }
    }
    return store_get_table(domain, ptr, node, size);
}

/* Where the node of PTR's trace is kept (in stored form, see
   stored_node()) and its size, or NULL if it has no trace.  Inline for the
   re-trace of free-list objects: the pool slot is the usual case.  A
   slot's node is not aligned on 4 bytes: read and write it through
   node_ref_get() and node_ref_set(). */
typedef void *node_ref;

static inline uint32_t
node_ref_get(node_ref ref)
{
    uint32_t stored;
    memcpy(&stored, ref, sizeof(stored));
    return stored;
}

static inline void
node_ref_set(node_ref ref, uint32_t stored)
{
    memcpy(ref, &stored, sizeof(stored));
}

static inline node_ref
store_node_ref(unsigned int domain, uintptr_t ptr, size_t *size)
{
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        uint32_t *live;
        _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotCached(
            (const void *)ptr, 0, NULL, &live, 0);
        if (slot != NULL) {
            if (_PyTraceMalloc_SlotNode(slot) == 0) {
                return NULL;
            }
            *size = slot->size;
            return slot->node;
        }
    }
    table_entry *e = table_find(domain, ptr);
    if (e == NULL) {
        return NULL;
    }
    *size = e->size;
    return &e->node;
}

/* Move the trace at REF, of SIZE, from its node to NODE. */
static inline void
store_move(node_ref ref, size_t size, _PyTraceMalloc_Node node)
{
    peak_account_move(stored_node(node_ref_get(ref)), node, size);
    node_ref_set(ref, node_to_stored(node));
}

/* Re-trace a reused free-list object of the default domain at NODE.
   Nothing to do when it already names it (a loop reusing the same object
   on the same line). */
static inline void
store_retrace(node_ref ref, size_t size, _PyTraceMalloc_Node node)
{
    if (node_ref_get(ref) != node_to_stored(node)) {
        store_move(ref, size, node);
    }
    else if (tm.peak.allocations) {
        /* Reused where it was freed: the trace stays, but the object is
           a new allocation for the allocation totals. */
        peak_account_alloc(node, size);
    }
}

typedef struct {
    void (*visit)(uint32_t *node, void *arg);
    void *arg;
} node_visit_state;

static int
visit_slot_nodes(_PyTraceMalloc_Slot *slots, uint32_t nslots, uint32_t live,
                 void *arg)
{
    node_visit_state *st = arg;
    for (uint32_t j = 0; j < nslots; j++) {
        uint32_t stored = _PyTraceMalloc_SlotNode(&slots[j]);
        if (stored != 0) {
            st->visit(&stored, st->arg);
            _PyTraceMalloc_SlotSetNode(&slots[j], stored);
        }
    }
    return 0;
}

void
_PyTraceMalloc_StoreForEachNode_unlocked(
    void (*visit)(uint32_t *node, void *arg), void *arg)
{
    node_visit_state st = {visit, arg};
    (void)_PyTraceMalloc_PoolSlotsForEach(visit_slot_nodes, &st);
    if (tm.store.entries != NULL) {
        for (size_t i = 0; i <= tm.store.mask; i++) {
            if (tm.store.entries[i].ptr != 0) {
                visit(&tm.store.entries[i].node, arg);
            }
        }
    }
}

void
_PyTraceMalloc_StoreTotals_unlocked(size_t *current, size_t *peak)
{
    *current = tm.store.current;
    *peak = tm.store.peak;
}

void
_PyTraceMalloc_StoreResetPeak_unlocked(void)
{
    tm.store.peak = tm.store.current;
    tm.store.native_peak = tm.store.native_current;
    tm.peak.pending = 1;      /* the live traces are the peak now */
}

size_t
_PyTraceMalloc_StoreMemory_unlocked(void)
{
    size_t table = tm.store.entries
                   ? (tm.store.mask + 1) * sizeof(table_entry) : 0;
    return table + _PyTraceMalloc_PoolSlotsMemory() + hidden_memory();
}

/* ---- the exports' blocks ------------------------------------------------ */

/* What code run with its thread's tracing suspended (the exports of
   Modules/_tracemalloc.c, the retention search: the tracer's own work,
   _PyTraceMalloc_SuspendThread()) allocates in the default domain, and
   the objects it takes from a free list with a trace, are not the
   program's memory: no output may count them.  But once the tracer drops
   them, the free lists hand them to the program, whose line must then
   own them, as if the tracer had never run (upstream: its traces move
   from the export's line to the program's).  So they are kept here, by
   address with their size, apart from the traces (I15): nothing that
   reads the store sees them, and the re-trace of a block the store does
   not hold looks here before it gives up (hidden_retrace()).  A free or
   a resize that finds no trace takes its block out of here; the hot
   paths, which find one, never look.

   An export makes up to millions of objects one after the other, in
   neighbouring blocks: the set is a map of address windows (a pool's
   16 KiB), each with the sizes of its 16-byte-aligned blocks (0: not
   kept), found through a small open-addressing index of windows and the
   window used last.  One entry per object of a flat table was a cache
   miss at each insertion and removal (3.5 times the cost of the raw
   export of 900,000 traces).  Only the blocks that free lists may hand
   out are kept: aligned, of 1 to 65,535 bytes (objects from free lists
   are a few hundred bytes at most).

   Memory is malloc()'s, as the table's; without it, a block is simply
   not kept (it stays untraced, as it was before this set existed). */

#define HIDDEN_WINDOW_BITS _PyTraceMalloc_POOL_BITS
#define HIDDEN_WINDOW_BLOCKS (1 << (HIDDEN_WINDOW_BITS - 4))
#define HIDDEN_INDEX_MIN 64

typedef struct hidden_window {
    uintptr_t window;           /* address >> HIDDEN_WINDOW_BITS */
    uint32_t count;             /* blocks kept (sizes not 0) */
    uint16_t size[HIDDEN_WINDOW_BLOCKS];    /* by (address % window) / 16 */
} hidden_window;

static inline size_t
hidden_window_hash(uintptr_t window, size_t mask)
{
    uint64_t x = (uint64_t)window;
    x ^= x >> 31;
    x *= UINT64_C(0x9E3779B97F4A7C15);
    x ^= x >> 29;
    return (size_t)x & mask;
}

/* The index's slot of WINDOW, or the empty slot where it would go (the
   index must exist). */
static inline hidden_window **
hidden_window_slot(uintptr_t window)
{
    size_t i = hidden_window_hash(window, tm.hidden.mask);
    for (;;) {
        hidden_window **slot = &tm.hidden.windows[i];
        if (*slot == NULL || (*slot)->window == window) {
            return slot;
        }
        i = (i + 1) & tm.hidden.mask;
    }
}

/* Rehash the index into CAPACITY slots: -1 when out of memory, the index
   unchanged. */
static int
hidden_index_resize(size_t capacity)
{
    hidden_window **windows = _PyTraceMalloc_RawAlloc(
        capacity * sizeof(hidden_window *), 1);
    if (windows == NULL) {
        return -1;
    }
    size_t mask = capacity - 1;
    for (size_t i = 0; tm.hidden.windows != NULL && i <= tm.hidden.mask;
         i++) {
        hidden_window *w = tm.hidden.windows[i];
        if (w != NULL) {
            size_t j = hidden_window_hash(w->window, mask);
            while (windows[j] != NULL) {
                j = (j + 1) & mask;
            }
            windows[j] = w;
        }
    }
    free(tm.hidden.windows);
    tm.hidden.windows = windows;
    tm.hidden.mask = mask;
    return 0;
}

/* The window of PTR, or NULL when it has none (CREATE: make it; NULL then
   means out of memory). */
static hidden_window *
hidden_window_get(uintptr_t ptr, int create)
{
    uintptr_t window = ptr >> HIDDEN_WINDOW_BITS;
    hidden_window *last = tm.hidden.last;
    if (last != NULL && last->window == window) {
        return last;
    }
    if (tm.hidden.windows == NULL) {
        if (!create || hidden_index_resize(HIDDEN_INDEX_MIN) < 0) {
            return NULL;
        }
    }
    hidden_window **slot = hidden_window_slot(window);
    if (*slot == NULL) {
        if (!create) {
            return NULL;
        }
        if ((tm.hidden.nwindows + 1) * 2 > tm.hidden.mask + 1) {
            if (hidden_index_resize((tm.hidden.mask + 1) * 2) < 0) {
                return NULL;
            }
            slot = hidden_window_slot(window);
        }
        hidden_window *w = _PyTraceMalloc_RawAlloc(sizeof(hidden_window), 1);
        if (w == NULL) {
            return NULL;
        }
        w->window = window;
        *slot = w;
        tm.hidden.nwindows++;
    }
    tm.hidden.last = *slot;
    return *slot;
}

/* Free W, which keeps no block, and take it out of the index. */
static void
hidden_window_drop(hidden_window *w)
{
    hidden_window **slot = hidden_window_slot(w->window);
    /* Backward-shift deletion, as table_delete(). */
    size_t mask = tm.hidden.mask;
    size_t hole = (size_t)(slot - tm.hidden.windows);
    size_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        hidden_window *next = tm.hidden.windows[i];
        if (next == NULL) {
            break;
        }
        size_t home = hidden_window_hash(next->window, mask);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            tm.hidden.windows[hole] = next;
            hole = i;
        }
    }
    tm.hidden.windows[hole] = NULL;
    tm.hidden.nwindows--;
    if (tm.hidden.last == w) {
        tm.hidden.last = NULL;
    }
    free(w);
}

static inline int
hidden_keeps(uintptr_t ptr, size_t size)
{
    return ptr != 0 && (ptr & 15) == 0 && size != 0 && size <= UINT16_MAX;
}

static inline size_t
hidden_block(uintptr_t ptr)
{
    return (ptr & (((uintptr_t)1 << HIDDEN_WINDOW_BITS) - 1)) >> 4;
}

/* Keep PTR, a block of SIZE bytes that has no trace, as an export's. */
static void
hidden_add(uintptr_t ptr, size_t size)
{
    if (!hidden_keeps(ptr, size)) {
        return;
    }
    hidden_window *w = hidden_window_get(ptr, 1);
    if (w == NULL) {
        return;
    }
    uint16_t *kept = &w->size[hidden_block(ptr)];
    if (*kept == 0) {
        w->count++;
        tm.hidden.used++;
        if (tm.sample.interval) {
            /* Its free and its re-trace must reach the hooks. */
            sample_filter_add(ptr);
        }
    }
    *kept = (uint16_t)size;
}

/* Take PTR out of the set: 1 with its size in *SIZE, 0 if it is not
   there.  Cheap when the set is empty, which it is unless the program
   uses the exports. */
static int
hidden_take(uintptr_t ptr, size_t *size)
{
    if (tm.hidden.used == 0 || (ptr & 15) != 0) {
        return 0;
    }
    hidden_window *w = hidden_window_get(ptr, 0);
    if (w == NULL) {
        return 0;
    }
    uint16_t *kept = &w->size[hidden_block(ptr)];
    if (*kept == 0) {
        return 0;
    }
    *size = *kept;
    *kept = 0;
    tm.hidden.used--;
    if (--w->count == 0) {
        hidden_window_drop(w);
    }
    if (tm.sample.interval) {
        sample_filter_remove(ptr);
    }
    return 1;
}

/* Forget every export's block: with the traces (clear_traces(), stop(),
   start()), since upstream's reuse of an object freed before them finds
   no trace either. */
static void
hidden_clear(void)
{
    for (size_t i = 0; tm.hidden.windows != NULL && i <= tm.hidden.mask;
         i++) {
        free(tm.hidden.windows[i]);
    }
    free(tm.hidden.windows);
    tm.hidden.windows = NULL;
    tm.hidden.mask = 0;
    tm.hidden.nwindows = 0;
    tm.hidden.used = 0;
    tm.hidden.last = NULL;
}

static size_t
hidden_memory(void)
{
    return tm.hidden.windows == NULL ? 0
        : (tm.hidden.mask + 1) * sizeof(hidden_window *)
          + tm.hidden.nwindows * sizeof(hidden_window);
}

/* Blocks in the set, and how many the program took back (tests). */
void
_PyTraceMalloc_HiddenStats(size_t *count, uint64_t *retraced)
{
    int side = engine_lock();
    *count = tm.hidden.used;
    *retraced = tm.hidden.retraced;
    engine_leave(side);
}

/* ---- export and checks -------------------------------------------------- */

typedef struct {
    _PyTraceMalloc_TraceCopy *out;
    size_t n;
    size_t cap;
} copy_state;

static int
copy_slots(_PyTraceMalloc_Slot *slots, uint32_t nslots, uint32_t live,
           void *arg)
{
    copy_state *st = arg;
    if (live > st->cap - st->n) {
        return -1;      /* the totals lied: caught by the caller */
    }
    _PyTraceMalloc_TraceCopy *t = &st->out[st->n];
    uint32_t found = 0;
    for (uint32_t j = 0; j < nslots && found < live; j++) {
        uint32_t stored = _PyTraceMalloc_SlotNode(&slots[j]);
        if (stored != 0) {
            t[found].domain = _PyTraceMalloc_DEFAULT_DOMAIN;
            t[found].node = stored_node(stored);
            t[found].size = slots[j].size;
            found++;
        }
    }
    if (found != live) {
        return -1;      /* the pool's count lied: caught by the caller */
    }
    st->n += live;
    return 0;
}

int
_PyTraceMalloc_StoreCopy(_PyTraceMalloc_TraceCopy **traces, size_t *count,
                         _PyTraceMalloc_CCTView *view)
{
    int side = engine_lock();
    copy_state st = {NULL, 0, tm.store.ntraces};
    /* malloc(), not a traced API: the lock is held. */
    st.out = _PyTraceMalloc_BulkAlloc((st.cap ? st.cap : 1) * sizeof(*st.out));
    if (st.out == NULL) {
        engine_leave(side);
        return -1;
    }
    _PyTraceMalloc_CCTPin_unlocked(view);
    int res = _PyTraceMalloc_PoolSlotsForEach(copy_slots, &st);
    if (res == 0 && tm.store.entries != NULL) {
        for (size_t i = 0; i <= tm.store.mask; i++) {
            table_entry *e = &tm.store.entries[i];
            if (e->ptr == 0) {
                continue;
            }
            if (st.n == st.cap) {
                res = -1;
                break;
            }
            _PyTraceMalloc_TraceCopy *t = &st.out[st.n++];
            t->domain = e->domain;
            t->node = stored_node(e->node);
            t->size = e->size;
        }
    }
    engine_leave(side);
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
    int side = engine_lock();
    uint64_t slot_size = 0;
    int64_t slot_count = _PyTraceMalloc_PoolSlotsCheck(&slot_size, &reason);
    uint64_t table_size = 0, table_count = 0;
    uint32_t nnodes = _PyTraceMalloc_NodeCount();
    if (slot_count >= 0 && tm.store.entries != NULL) {
        for (size_t i = 0; i <= tm.store.mask; i++) {
            table_entry *e = &tm.store.entries[i];
            if (e->ptr == 0) {
                continue;
            }
            table_count++;
            table_size += acct_size(e->size);
            if (e->node >= nnodes && e->node != UINT32_MAX) {
                reason = "a table trace names a node that does not exist";
                break;
            }
            if (table_find(e->domain, e->ptr) != e) {
                reason = "a table entry cannot be found from its key";
                break;
            }
        }
        if (reason == NULL && table_count != tm.store.used) {
            reason = "the table's entry count is wrong";
        }
    }
    if (reason == NULL && slot_count >= 0 && tm.hidden.windows != NULL) {
        /* I15: an export's block has no trace. */
        size_t hidden_count = 0, nwindows = 0;
        for (size_t i = 0; i <= tm.hidden.mask && reason == NULL; i++) {
            hidden_window *w = tm.hidden.windows[i];
            if (w == NULL) {
                continue;
            }
            nwindows++;
            uint32_t kept = 0;
            for (size_t j = 0; j < HIDDEN_WINDOW_BLOCKS; j++) {
                if (w->size[j] == 0) {
                    continue;
                }
                kept++;
                uintptr_t ptr = (w->window << HIDDEN_WINDOW_BITS) | (j << 4);
                _PyTraceMalloc_Node node;
                size_t size;
                int traced = side
                    ? _PyTraceMalloc_StoreGet_unlocked(
                          _PyTraceMalloc_DEFAULT_DOMAIN, ptr, &node, &size)
                    : store_get_table(_PyTraceMalloc_DEFAULT_DOMAIN, ptr,
                                      &node, &size);
                if (traced) {
                    reason = "an export's block has a trace too";
                    break;
                }
            }
            if (reason == NULL && (kept == 0 || kept != w->count)) {
                reason = "an export window's count is wrong";
            }
            if (reason == NULL && *hidden_window_slot(w->window) != w) {
                reason = "an export window cannot be found from its key";
            }
            hidden_count += kept;
        }
        if (reason == NULL && (hidden_count != tm.hidden.used
                               || nwindows != tm.hidden.nwindows)) {
            reason = "the count of the exports' blocks is wrong";
        }
    }
    size_t current = tm.store.current, count = tm.store.ntraces;
    engine_leave(side);
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
