/* Compaction: the tree keeps only the call paths that something live
 * names, so that its memory follows live data (I9).
 *
 * When the node count reaches compact_at, the next traced allocation marks
 * every node that a live trace or the peak totals name, with its
 * ancestors, renumbers the survivors in place, rewrites every trace, and
 * lets the tree, the peak totals and the frame caches drop what is gone.
 * compact_at is then set so that a compaction's cost (linear in traces
 * plus nodes) is paid for by as many new nodes: amortised O(1) per node.
 * Part of the engine's translation unit (see tracemalloc_engine.h).
 */

/* tm.memory from scratch, after a compaction (or a reset) freed parts of
   the tree, the caches and the peak totals. */
static void
engine_recount_memory(void)
{
    tm.memory = tree_memory() + framecache_memory() + peak_memory();
}

typedef struct {
    uint32_t *remap;        /* old id -> new id; during marking, 1 = live */
    uint32_t nnodes;
    size_t ntraces;
    int corrupt;
} compact_state;

static void
compact_mark(uint32_t *ref, void *arg)
{
    compact_state *st = arg;
    st->ntraces++;
    _PyTraceMalloc_Node id = *ref;
    if (id == UINT32_MAX) {
        return;             /* the empty traceback */
    }
    while (id != 0) {
        if (id >= st->nnodes) {
            st->corrupt = 1;
            return;
        }
        if (st->remap[id] != 0) {
            return;         /* marked with its ancestors already */
        }
        st->remap[id] = 1;
        id = node_at(id)->parent;
    }
}

static void
compact_rewrite(uint32_t *ref, void *arg)
{
    compact_state *st = arg;
    if (*ref != UINT32_MAX) {
        *ref = st->remap[*ref];
    }
}

static void
compact_schedule(uint32_t live_nodes, size_t ntraces)
{
    uint64_t room = Py_MAX((uint64_t)live_nodes, (uint64_t)ntraces / 4);
    room = Py_MAX(room, (uint64_t)COMPACT_MIN);
    uint64_t at = (uint64_t)live_nodes + room;
    tm.tree.compact_at = at < NODE_LIMIT ? (uint32_t)at : NODE_LIMIT;
}

/* Drop every node that nothing live names, renumber the others (I9).
   Never fails: without memory for its work array, it tries again later.
   Not while a reader is pinned (I3). */
Py_NO_INLINE static void
compact_tree(void)
{
    uint32_t n = tm.tree.nnodes;
    if (tm.tree.pins > 0) {
        tm.tree.compact_at = n < NODE_LIMIT - COMPACT_MIN ? n + COMPACT_MIN
                                                      : NODE_LIMIT;
        return;
    }
    compact_state st = {NULL, n, 0, 0};
    /* Everything that can fail first: then nothing needs undoing. */
    cct_domain_totals *new_domains = NULL;
    uint32_t *new_domains_dirty = NULL;
    st.remap = _PyTraceMalloc_RawAlloc((size_t)n * sizeof(uint32_t), 1);
    if (st.remap == NULL
        || (tm.peak.domains != NULL
            && domain_totals_alloc(tm.peak.domains_mask + 1, &new_domains,
                                   &new_domains_dirty) < 0)) {
        free(st.remap);
        compact_schedule(n, 0);
        return;
    }
    _PyTraceMalloc_StoreForEachNode_unlocked(compact_mark, &st);
    /* Nodes of the peak's blocks stay too, freed or not, and so do the
       nodes of other domains' totals (I9). */
    size_t ntraces = st.ntraces;
    peak_for_each_node(compact_mark, &st);
    st.ntraces = ntraces;
    if (st.corrupt) {
        /* A trace names a node that does not exist: leave everything as it
           is (_check_consistency() reports it). */
        free(new_domains);
        free(new_domains_dirty);
        free(st.remap);
        compact_schedule(n, st.ntraces);
        return;
    }
    /* Renumber in place, in id order: a parent (smaller id) is always
       moved before its children, and a node only moves down. */
    uint32_t next = 1;
    for (uint32_t id = 1; id < n; id++) {
        if (st.remap[id] == 0) {
            continue;
        }
        cct_node node = *node_at(id);
        node.parent = st.remap[node.parent];
        /* The label node is the node itself, or an ancestor: kept and
           renumbered already (I13). */
        node.label = node.label == id ? next : st.remap[node.label];
        if (node.filename != NULL) {
            ((cct_string *)node.filename)->marked = 1;
        }
        st.remap[id] = next;
        *node_at(next) = node;
        next++;
    }
    _PyTraceMalloc_StoreForEachNode_unlocked(compact_rewrite, &st);
    peak_renumber(st.remap, n, next, new_domains, new_domains_dirty);
    free(st.remap);
    tm.tree.nnodes = next;
    tm.tree.compactions++;

    tree_free_unused(next);
    /* Ids changed: the (parent, code, offset) cache and every frame's
       cached parent are stale. */
    cache_clear(next);          /* and the line cache: filename copies
                                   were freed */
    generation_bump();
    engine_recount_memory();
    compact_schedule(next, st.ntraces);
    if ((uint64_t)next * 4 > (uint64_t)n * 3) {
        /* Three quarters of the nodes were live: the tree is growing (a
           program's start-up, imports), not churning, and each compaction
           empties every cache.  Room for three times the live nodes
           instead of once, so that a growing tree is compacted about half
           as often; a churning one keeps its bound. */
        uint64_t at = (uint64_t)next * 4;
        uint32_t grown = at < NODE_LIMIT ? (uint32_t)at : NODE_LIMIT;
        if (grown > tm.tree.compact_at) {
            tm.tree.compact_at = grown;
        }
    }
}

/* Called before computing a traceback, at a point where no node id is held
   outside the store (I9). */
static inline void
compact_if_due(void)
{
    if (tm.tree.nnodes >= tm.tree.compact_at) {
        compact_tree();
    }
}
