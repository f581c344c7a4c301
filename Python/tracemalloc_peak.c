/* Peak accounting: per call path, the totals of its live traces now and
 * when traced memory last reached its peak, for take_snapshot(peak=True).
 *
 * The live totals change with every trace; the peak totals are copied from
 * them lazily, only for the nodes changed since the last copy (the dirty
 * list), at the first decrease after a new peak (I8).  The default domain
 * keeps them by node id in two arrays: the 16-byte live record that every
 * trace writes, and the peak and allocation totals that a commit or an
 * allocation profile writes.  Traces of the other domains keep all of them
 * by (domain, node) in a small table.  Part of the engine's translation
 * unit (see tracemalloc_engine.h).
 */

/* Room for the totals and the dirty flag of NEED node ids, so that a node
   once made never fails to be counted (I8). */
static int
peak_reserve(size_t need)
{
    if (need <= tm.peak.dirty_cap) {
        return 0;
    }
    /* Each array is kept when the next fails: a bigger one is harmless,
       and dirty_cap only grows once all three have room. */
    _PyTraceMalloc_Node *dirty = realloc(tm.peak.dirty, need * sizeof(*dirty));
    if (dirty == NULL) {
        return -1;
    }
    tm.peak.dirty = dirty;
    cct_node_live *live = realloc(tm.peak.live, need * sizeof(*live));
    if (live == NULL) {
        return -1;
    }
    memset(live + tm.peak.dirty_cap, 0,
           (need - tm.peak.dirty_cap) * sizeof(*live));
    tm.peak.live = live;
    cct_node_peak *peaks = realloc(tm.peak.peaks, need * sizeof(*peaks));
    if (peaks == NULL) {
        return -1;
    }
    memset(peaks + tm.peak.dirty_cap, 0,
           (need - tm.peak.dirty_cap) * sizeof(*peaks));
    tm.memory += (need - tm.peak.dirty_cap)
                 * (sizeof(*dirty) + sizeof(*live) + sizeof(*peaks));
    tm.peak.peaks = peaks;
    tm.peak.dirty_cap = need;
    return 0;
}

/* The totals of default-domain node ID as one record, for the readers. */
static inline cct_totals
node_totals_read(_PyTraceMalloc_Node id)
{
    const cct_node_live *l = &tm.peak.live[id];
    const cct_node_peak *p = &tm.peak.peaks[id];
    return (cct_totals){
        .live_size = l->size, .live_count = l->count & ~CCT_LIVE_DIRTY,
        .peak_size = p->peak_size, .peak_count = p->peak_count,
        .alloc_size = p->alloc_size, .alloc_count = p->alloc_count};
}

static size_t
domain_totals_hash(unsigned int domain, _PyTraceMalloc_Node node)
{
    uint64_t x = (uint64_t)domain << 32 | node;
    return (size_t)((x * UINT64_C(0x9E3779B97F4A7C15)) >> 24);
}

/* Move every entry of the domain totals into TABLE and DIRTY (CAP entries
   each, allocated by the caller): never fails. */
static void
domain_totals_rebuild_into(cct_domain_totals *table, uint32_t *dirty,
                           size_t cap)
{
    for (size_t i = 0; i < cap; i++) {
        table[i].node = UINT32_MAX;
    }
    size_t ndirty = 0, n = 0;
    if (tm.peak.domains != NULL) {
        for (size_t i = 0; i <= tm.peak.domains_mask; i++) {
            cct_domain_totals *e = &tm.peak.domains[i];
            if (e->node == UINT32_MAX) {
                continue;
            }
            size_t j = domain_totals_hash(e->domain, e->node) & (cap - 1);
            while (table[j].node != UINT32_MAX) {
                j = (j + 1) & (cap - 1);
            }
            table[j] = *e;
            n++;
            if (e->dirty) {
                dirty[ndirty++] = (uint32_t)j;
            }
        }
        tm.memory -= (tm.peak.domains_mask + 1)
                      * (sizeof(*table) + sizeof(*dirty));
    }
    free(tm.peak.domains);
    free(tm.peak.domains_dirty);
    tm.peak.domains = table;
    tm.peak.domains_dirty = dirty;
    tm.peak.ndomains = n;
    tm.peak.ndomains_dirty = ndirty;
    tm.peak.domains_mask = cap - 1;
    tm.memory += cap * (sizeof(*table) + sizeof(*dirty));
}

static int
domain_totals_alloc(size_t cap, cct_domain_totals **table, uint32_t **dirty)
{
    *table = _PyTraceMalloc_RawAlloc(cap * sizeof(**table), 0);
    *dirty = _PyTraceMalloc_RawAlloc(cap * sizeof(**dirty), 0);
    if (*table == NULL || *dirty == NULL) {
        free(*table);
        free(*dirty);
        return -1;
    }
    return 0;
}

static int
domain_totals_rebuild(size_t cap)
{
    cct_domain_totals *table;
    uint32_t *dirty;
    if (domain_totals_alloc(cap, &table, &dirty) < 0) {
        return -1;
    }
    domain_totals_rebuild_into(table, dirty, cap);
    return 0;
}

/* The totals of (DOMAIN, NODE), created if needed; NULL when out of
   memory (the trace is then refused, like any bookkeeping failure). */
static cct_totals *
domain_totals(unsigned int domain, _PyTraceMalloc_Node node, int create,
              uint32_t **dirty)
{
    if (tm.peak.domains == NULL || (create
            && (tm.peak.ndomains + 1) * 2 > tm.peak.domains_mask + 1)) {
        if (!create) {
            return NULL;
        }
        size_t cap = tm.peak.domains ? (tm.peak.domains_mask + 1) * 2 : 64;
        if (domain_totals_rebuild(cap) < 0) {
            return NULL;
        }
    }
    size_t i = domain_totals_hash(domain, node) & tm.peak.domains_mask;
    for (;;) {
        cct_domain_totals *e = &tm.peak.domains[i];
        if (e->node == node && e->domain == domain) {
            break;
        }
        if (e->node == UINT32_MAX) {
            if (!create) {
                return NULL;
            }
            memset(e, 0, sizeof(*e));
            e->domain = domain;
            e->node = node;
            tm.peak.ndomains++;
            break;
        }
        i = (i + 1) & tm.peak.domains_mask;
    }
    *dirty = &tm.peak.domains[i].dirty;
    return &tm.peak.domains[i].totals;
}

/* An entry of the other domains' totals changed. */
static inline void
mark_dirty_domain(cct_domain_totals *e)
{
    if (e->dirty) {
        return;
    }
    e->dirty = 1;
    tm.peak.domains_dirty[tm.peak.ndomains_dirty++] =
        (uint32_t)(e - tm.peak.domains);
}

/* Copy the live totals of every node changed since the last copy to its
   peak totals: the live state is the peak. */
Py_NO_INLINE static void
peak_commit(void)
{
    for (size_t i = 0; i < tm.peak.ndirty; i++) {
        _PyTraceMalloc_Node id = tm.peak.dirty[i];
        cct_node_live *l = &tm.peak.live[id];
        l->count &= ~CCT_LIVE_DIRTY;
        tm.peak.peaks[id].peak_size = l->size;
        tm.peak.peaks[id].peak_count = l->count;
    }
    tm.peak.ndirty = 0;
    for (size_t i = 0; i < tm.peak.ndomains_dirty; i++) {
        cct_domain_totals *e = &tm.peak.domains[tm.peak.domains_dirty[i]];
        e->totals.peak_size = e->totals.live_size;
        e->totals.peak_count = e->totals.live_count;
        e->dirty = 0;
    }
    tm.peak.ndomains_dirty = 0;
    tm.peak.pending = 0;
}

/* Before any decrease of a node's totals (I8). */
static inline void
peak_before_decrease(void)
{
#ifdef PY_TRACEMALLOC_NO_PEAK
    return;
#endif
    if (tm.peak.pending) {
        peak_commit();
    }
}

/* The live record of default-domain node NODE changes by SIZE bytes and
   COUNT blocks (DELTA 1: added, -1: removed, after
   peak_before_decrease()); the node goes on the dirty list the first
   time.  The whole of exact mode's per-trace accounting (tm.peak.lean):
   inline, with DELTA constant. */
static inline void
live_change(_PyTraceMalloc_Node node, uint64_t size, uint64_t count,
            int delta)
{
    cct_node_live *l = &tm.peak.live[node];
    uint64_t c = l->count;
    if (delta > 0) {
        l->size += size;
        c += count;
    }
    else {
        l->size -= size;
        c -= count;
    }
    if (!(c & CCT_LIVE_DIRTY)) {
        c |= CCT_LIVE_DIRTY;
        tm.peak.dirty[tm.peak.ndirty++] = node;
    }
    l->count = c;
}

/* peak_account() off the lean path: sampling mode's estimates, the
   allocation totals, the other domains. */
Py_NO_INLINE static int
peak_account_general(unsigned int domain, _PyTraceMalloc_Node node,
                     size_t size, int delta)
{
    /* Sampling mode counts estimates (tracemalloc_sample.c). */
    size_t units = acct_size(size);
    uint64_t count = acct_count(size);
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        live_change(node, units, count, delta);
        if (delta > 0 && tm.peak.allocations) {
            tm.peak.peaks[node].alloc_size += units;
            tm.peak.peaks[node].alloc_count += count;
        }
        return 0;
    }
    uint32_t *dirty;
    cct_totals *t = domain_totals(domain, node, delta > 0, &dirty);
    if (t == NULL) {
        /* Removing cannot get here: the add created the totals. */
        return -1;
    }
    if (delta > 0) {
        t->live_size += units;
        t->live_count += count;
        if (tm.peak.allocations) {
            t->alloc_size += units;
            t->alloc_count += count;
        }
    }
    else {
        t->live_size -= units;
        t->live_count -= count;
    }
    mark_dirty_domain((cct_domain_totals *)(
        (char *)dirty - offsetof(cct_domain_totals, dirty)));
    return 0;
}

/* A trace of SIZE naming (DOMAIN, NODE) is added (DELTA 1) or removed
   (DELTA -1, after peak_before_decrease()): 0, or -1 when out of memory
   (another domain's first trace at NODE).  Inline with DELTA constant:
   exact mode's default domain is one live_change(). */
static inline int
peak_account(unsigned int domain, _PyTraceMalloc_Node node, size_t size,
             int delta)
{
#ifdef PY_TRACEMALLOC_NO_PEAK
    /* Benchmarks only (the cost of peak tracking): no peak snapshots. */
    return 0;
#endif
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN && tm.peak.lean) {
        live_change(node, size, 1, delta);
        return 0;
    }
    return peak_account_general(domain, node, size, delta);
}

static inline int
peak_account_add(unsigned int domain, _PyTraceMalloc_Node node, size_t size)
{
    return peak_account(domain, node, size, 1);
}

static inline void
peak_account_remove(unsigned int domain, _PyTraceMalloc_Node node,
                    size_t size)
{
    (void)peak_account(domain, node, size, -1);
}

/* A free-list object of the default domain is reused at the node that
   its trace already names: only the allocation totals change (the caller
   checks that they are counted). */
static inline void
peak_account_alloc(_PyTraceMalloc_Node node, size_t size)
{
    cct_node_peak *p = &tm.peak.peaks[node];
    p->alloc_size += acct_size(size);
    p->alloc_count += acct_count(size);
}

/* A trace of SIZE at (DOMAIN, NODE) that was counted as an allocation
   when it was made is taken back from the allocation totals: one put back
   after a failed realloc() or munmap() (it is the same block, not a new
   allocation), or a native trace that the block's owner reports in its
   own domain (counted once, there). */
static void
peak_account_unalloc(unsigned int domain, _PyTraceMalloc_Node node,
                     size_t size)
{
#ifdef PY_TRACEMALLOC_NO_PEAK
    return;
#endif
    if (!tm.peak.allocations) {
        return;     /* not counted */
    }
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        tm.peak.peaks[node].alloc_size -= acct_size(size);
        tm.peak.peaks[node].alloc_count -= acct_count(size);
        return;
    }
    uint32_t *dirty;
    cct_totals *t = domain_totals(domain, node, 0, &dirty);
    if (t != NULL) {
        t->alloc_size -= acct_size(size);
        t->alloc_count -= acct_count(size);
    }
}

/* A free-list object of the default domain is re-traced from node FROM to
   node TO (the hottest of the three on numeric code). */
static inline void
peak_account_move(_PyTraceMalloc_Node from, _PyTraceMalloc_Node to,
                  size_t size)
{
    peak_before_decrease();
#ifndef PY_TRACEMALLOC_NO_PEAK
    if (tm.peak.lean) {
        live_change(from, size, 1, -1);
        live_change(to, size, 1, 1);
        return;
    }
#endif
    peak_account_remove(_PyTraceMalloc_DEFAULT_DOMAIN, from, size);
    (void)peak_account_add(_PyTraceMalloc_DEFAULT_DOMAIN, to, size);
}

/* Which totals of a node totals_copy_unlocked() copies. */
enum { TOTALS_PEAK, TOTALS_LIVE, TOTALS_ALLOC };

static inline _PyTraceMalloc_PeakGroup
totals_group(const cct_totals *t, int which, unsigned int domain,
             _PyTraceMalloc_Node node)
{
    uint64_t size = which == TOTALS_PEAK ? t->peak_size
                    : which == TOTALS_LIVE ? t->live_size : t->alloc_size;
    uint64_t count = which == TOTALS_PEAK ? t->peak_count
                     : which == TOTALS_LIVE ? t->live_count : t->alloc_count;
    return (_PyTraceMalloc_PeakGroup){domain, node, size, count};
}

/* Every (domain, node) whose WHICH totals count blocks, into a malloc()ed
   array (*FIRST_OTHER: the index of the first group of another domain
   than the default one); -1 when out of memory.  Under the lock. */
static int
totals_copy_unlocked(int which, _PyTraceMalloc_PeakGroup **groups,
                     size_t *count, size_t *first_other)
{
    uint32_t nnodes = tm.peak.peaks != NULL ? tm.tree.nnodes : 0;
    size_t n = 0;
    for (uint32_t id = 0; id < nnodes; id++) {
        cct_totals t = node_totals_read(id);
        n += totals_group(&t, which, 0, id).count != 0;
    }
    if (tm.peak.domains != NULL) {
        for (size_t i = 0; i <= tm.peak.domains_mask; i++) {
            cct_domain_totals *e = &tm.peak.domains[i];
            n += (e->node != UINT32_MAX
                  && totals_group(&e->totals, which, 0, 0).count != 0);
        }
    }
    _PyTraceMalloc_PeakGroup *out = malloc((n ? n : 1) * sizeof(*out));
    if (out == NULL) {
        return -1;
    }
    size_t k = 0;
    for (uint32_t id = 0; id < nnodes; id++) {
        cct_totals t = node_totals_read(id);
        _PyTraceMalloc_PeakGroup g = totals_group(
            &t, which, _PyTraceMalloc_DEFAULT_DOMAIN, id);
        if (g.count) {
            out[k++] = g;
        }
    }
    *first_other = k;
    if (tm.peak.domains != NULL) {
        for (size_t i = 0; i <= tm.peak.domains_mask; i++) {
            cct_domain_totals *e = &tm.peak.domains[i];
            if (e->node == UINT32_MAX) {
                continue;
            }
            _PyTraceMalloc_PeakGroup g = totals_group(&e->totals, which,
                                                      e->domain, e->node);
            if (g.count) {
                out[k++] = g;
            }
        }
    }
    *groups = out;
    *count = k;
    return 0;
}

/* The WHICH totals (TOTALS_PEAK or TOTALS_ALLOC) of every (domain, node)
   that has some, with the view pinned, in one locked section: -1 when out
   of memory, -2 for the allocation totals when tracing did not start with
   allocations=True (the totals of dropped call paths are lost). */
static int
groups_copy(int which, _PyTraceMalloc_PeakGroup **groups, size_t *count,
            _PyTraceMalloc_CCTView *view)
{
    int side = engine_lock();
    int res = 0;
    size_t first_other;
    if (which == TOTALS_ALLOC && !tm.peak.allocations) {
        res = -2;
    }
    else {
        if (which == TOTALS_PEAK) {
            peak_before_decrease();
        }
        res = totals_copy_unlocked(which, groups, count, &first_other);
        if (res == 0) {
            _PyTraceMalloc_CCTPin_unlocked(view);
        }
    }
    engine_leave(side);
    return res;
}

/* The totals at the peak: every (domain, node) with blocks then. */
int
_PyTraceMalloc_PeakCopy(_PyTraceMalloc_PeakGroup **groups, size_t *count,
                        _PyTraceMalloc_CCTView *view)
{
    return groups_copy(TOTALS_PEAK, groups, count, view);
}

/* What was allocated since start() or clear_traces(), freed or not, by
   (domain, node). */
int
_PyTraceMalloc_AllocCopy(_PyTraceMalloc_PeakGroup **groups, size_t *count,
                         _PyTraceMalloc_CCTView *view)
{
    return groups_copy(TOTALS_ALLOC, groups, count, view);
}

/* A node was just made at ID: no trace names it yet. */
static inline void
peak_node_created(_PyTraceMalloc_Node id)
{
    memset(&tm.peak.live[id], 0, sizeof(tm.peak.live[id]));
    memset(&tm.peak.peaks[id], 0, sizeof(tm.peak.peaks[id]));
}

/* The tree was reset: every total is 0 now and at the peak.  The per-node
   array is kept, zeroed: node 0's totals must exist as long as tracing
   goes on, and clear_traces() cannot fail. */
static void
peak_clear(void)
{
    if (tm.peak.peaks != NULL) {
        memset(tm.peak.live, 0, tm.peak.dirty_cap * sizeof(*tm.peak.live));
        memset(tm.peak.peaks, 0, tm.peak.dirty_cap * sizeof(*tm.peak.peaks));
    }
    tm.peak.ndirty = 0;
    free(tm.peak.domains);
    free(tm.peak.domains_dirty);
    tm.peak.domains = NULL;
    tm.peak.domains_dirty = NULL;
    tm.peak.domains_mask = 0;
    tm.peak.ndomains = 0;
    tm.peak.ndomains_dirty = 0;
    tm.peak.pending = 0;
}

/* stop(): after peak_clear(), give the per-node arrays back too. */
static void
peak_release(void)
{
    free(tm.peak.live);
    free(tm.peak.peaks);
    free(tm.peak.dirty);
    tm.peak.live = NULL;
    tm.peak.peaks = NULL;
    tm.peak.dirty = NULL;
    tm.peak.dirty_cap = 0;
}

static size_t
peak_memory(void)
{
    size_t memory = tm.peak.dirty_cap
                    * (sizeof(*tm.peak.dirty) + sizeof(*tm.peak.live)
                       + sizeof(*tm.peak.peaks));
    if (tm.peak.domains != NULL) {
        memory += (tm.peak.domains_mask + 1)
                  * (sizeof(*tm.peak.domains)
                     + sizeof(*tm.peak.domains_dirty));
    }
    return memory;
}

/* Whether compaction keeps totals T and their node: traces now or at the
   peak, or allocations while they are reported (I9). */
static inline int
totals_kept(const cct_totals *t)
{
    return t->peak_count != 0 || t->live_count != 0
           || (tm.peak.allocations && t->alloc_count != 0);
}

/* Call VISIT on every node that has traces now or had some at the peak,
   or allocations while they are reported, in any domain (compaction keeps
   them, I9). */
static void
peak_for_each_node(void (*visit)(uint32_t *node, void *arg), void *arg)
{
    for (uint32_t id = 1; id < tm.tree.nnodes; id++) {
        cct_totals t = node_totals_read(id);
        if (totals_kept(&t)) {
            uint32_t ref = id;
            visit(&ref, arg);
        }
    }
    if (tm.peak.domains != NULL) {
        for (size_t i = 0; i <= tm.peak.domains_mask; i++) {
            cct_domain_totals *e = &tm.peak.domains[i];
            if (e->node != UINT32_MAX && e->node != 0
                && totals_kept(&e->totals)) {
                uint32_t ref = e->node;
                visit(&ref, arg);
            }
        }
    }
}

/* Compaction renumbered the OLD_COUNT nodes to NEW_COUNT: REMAP[id] is the
   new id of a kept node, 0 for a dropped one.  The totals follow their
   node (moving down in id order never overwrites one not yet moved), the
   dirty list is rebuilt from the flags, and other domains' totals are
   renumbered into NEW_DOMAINS and NEW_DIRTY (allocated by the caller, the
   size of the current table), those empty now and at the peak dropped. */
static void
peak_renumber(const uint32_t *remap, uint32_t old_count, uint32_t new_count,
              cct_domain_totals *new_domains, uint32_t *new_dirty)
{
    for (uint32_t id = 1; id < old_count; id++) {
        if (remap[id] != 0) {
            tm.peak.live[remap[id]] = tm.peak.live[id];
            tm.peak.peaks[remap[id]] = tm.peak.peaks[id];
        }
    }
    memset(tm.peak.live + new_count, 0,
           (old_count - new_count) * sizeof(*tm.peak.live));
    memset(tm.peak.peaks + new_count, 0,
           (old_count - new_count) * sizeof(*tm.peak.peaks));
    tm.peak.ndirty = 0;
    for (uint32_t id = 0; id < new_count; id++) {
        if (tm.peak.live[id].count & CCT_LIVE_DIRTY) {
            tm.peak.dirty[tm.peak.ndirty++] = id;
        }
    }
    if (tm.peak.domains != NULL) {
        for (size_t i = 0; i <= tm.peak.domains_mask; i++) {
            cct_domain_totals *e = &tm.peak.domains[i];
            if (e->node == UINT32_MAX) {
                continue;
            }
            if (!totals_kept(&e->totals)) {
                e->node = UINT32_MAX;
                tm.peak.ndomains--;
            }
            else {
                e->node = remap[e->node];
            }
        }
        domain_totals_rebuild_into(new_domains, new_dirty,
                                   tm.peak.domains_mask + 1);
    }
}

/* ---- the live totals, for the leak checker's rounds --------------------- */

static int
live_group_compare(const void *a, const void *b)
{
    const _PyTraceMalloc_PeakGroup *x = a, *y = b;
    if (x->domain != y->domain) {
        return x->domain < y->domain ? -1 : 1;
    }
    return x->node < y->node ? -1 : x->node > y->node;
}

/* Every (domain, node) with blocks now, by (domain, node), with the view
   pinned, in one locked section; *GENERATION is the engine's generation,
   which changes when node ids may have changed meaning (clear_traces(),
   a fork; not compaction while a pin is held).  The view is pinned PINS
   times (1 or 2), each released by a _PyTraceMalloc_CCTUnpin().  Sampling
   mode: estimates, as for the peak. */
int
_PyTraceMalloc_LiveCopy(_PyTraceMalloc_PeakGroup **groups, size_t *count,
                        uint32_t *generation, _PyTraceMalloc_CCTView *view,
                        int pins)
{
    int side = engine_lock();
    size_t k, first_other;
    _PyTraceMalloc_PeakGroup *out;
    if (totals_copy_unlocked(TOTALS_LIVE, &out, &k, &first_other) < 0) {
        engine_leave(side);
        return -1;
    }
    *generation = tm.generation;
    for (int pin = 0; pin < pins; pin++) {
        _PyTraceMalloc_CCTPin_unlocked(view);
    }
    engine_leave(side);
    /* Domain 0 is in node order already; the others are in hash order. */
    if (k - first_other > 1) {
        qsort(out + first_other, k - first_other, sizeof(*out),
              live_group_compare);
    }
    *groups = out;
    *count = k;
    return 0;
}
