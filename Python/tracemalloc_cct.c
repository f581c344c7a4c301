/* The call-context tree (cct) of the tracing engine.
 *
 * A traceback is a node: (parent node, filename, line).  Nodes are interned,
 * so one id names one call path, and a trace stores only that 32-bit id.
 * The traceback limit N only decides how much of the path an export reports.
 *
 * Each _PyInterpreterFrame caches the node of its caller's call site in
 * `tracemalloc_parent` (generation << 32 | node).  The cache is reset
 * wherever a frame is linked to a new caller (frame initialisation, eval
 * entry, generator throw) and by every generation change (start, stop,
 * clear_traces), so it is valid for as long as the frame stays linked.  A
 * traced allocation then costs one lookup keyed by (cached parent, code,
 * instruction offset) in a direct-mapped cache, whatever N and whatever the
 * size of the function: the line is decoded only on a miss.
 *
 * Code objects are keys of that cache by address; when one dies the cache's
 * epoch changes (_PyTraceMalloc_CodeFreed), so an address reused by a new
 * code object is never answered with the old one's line.  Nodes never point
 * at code objects: they own a copy of the filename's characters, so they
 * cannot name the wrong file, hold no Python reference, and can be created
 * without the GIL.
 *
 * Node storage never moves (chunks of doubling size), so a node, once
 * published under the lock, can be read without it by an exporter that has
 * pinned the tree.  Everything else here is protected by the engine lock.
 *
 * Bounded by live data: a path seen once and gone must not cost memory
 * forever.  When the tree has grown past `compact_at`, the next traced
 * allocation compacts it (cct_compact()): the nodes that no live trace names,
 * directly or as an ancestor, are dropped, the survivors are renumbered in
 * place (a parent always has a smaller id than its children, so the order is
 * kept and moving down never overwrites a node not yet moved), every trace
 * is rewritten, and the generation changes so that no frame cache keeps an
 * old id.  `compact_at` is then set so that the work of a compaction is paid
 * for by as many new nodes as it kept or as a quarter of the live traces:
 * amortised O(1) per node, and at most about twice the live tree plus a
 * quarter of a node per trace.
 */

#include "Python.h"
#include "pycore_code.h"
#include "pycore_frame.h"
#include "pycore_tracemalloc.h"

/* ---- storage ------------------------------------------------------------ */

typedef struct cct_string {
    struct cct_string *next;    /* all strings, for freeing */
    Py_hash_t hash;
    Py_ssize_t length;
    int kind;                   /* PyUnicode kind: 1, 2 or 4 */
    int marked;                 /* named by a live node (compaction) */
    char data[];
} cct_string;

/* What the live traces naming one node (in one domain) add up to, now and
   when traced memory last reached its peak (see "peak" below). */
typedef struct {
    uint64_t live_size;
    uint64_t peak_size;
    uint32_t live_count;
    uint32_t peak_count;
} cct_totals;

typedef struct {
    _PyTraceMalloc_Node parent;
    int lineno;
    uint32_t depth;             /* frames on the path, this one included */
    uint32_t hash;
    const cct_string *filename; /* NULL: not a str, reported '<unknown>' */
} cct_node;

/* Peak bookkeeping of a node, in a flat array indexed by node id (0, the
   empty traceback, included): unlike nodes, only read under the lock, so
   it may move when it grows. */
typedef struct {
    cct_totals totals;          /* traces of the default domain */
    uint32_t dirty;             /* totals changed since the last peak */
    uint32_t unused;
} cct_node_peak;

/* Totals of the traces of the other domains (PyTraceMalloc_Track()), by
   (domain, node): few, so one open-addressing table. */
typedef struct {
    unsigned int domain;        /* with node == UINT32_MAX: empty */
    _PyTraceMalloc_Node node;
    uint32_t dirty;
    cct_totals totals;
} cct_domain_totals;

#define CHUNK0_BITS 10
/* 1024 * (2**22 - 1) nodes at most */
#define NCHUNKS _PyTraceMalloc_CCT_NCHUNKS
#define NODE_LIMIT ((uint32_t)(((uint64_t)1 << (CHUNK0_BITS + NCHUNKS)) \
                               - (1 << CHUNK0_BITS) - 1))

typedef struct cct_storage {
    cct_node *chunks[NCHUNKS];
    cct_string *strings;
    struct cct_storage *next_dead;  /* graveyard link */
} cct_storage;

typedef struct {
    const PyCodeObject *code;
    _PyTraceMalloc_Node parent;
    int lasti;
    _PyTraceMalloc_Node node;
    uint32_t epoch;             /* code_epochs[] of its code when filled */
    uint32_t range;             /* the line's instructions: see frame_memo() */
} cct_cache_entry;

/* The cache starts with 2^CACHE_MIN_BITS entries and doubles, up to
   2^CACHE_MAX_BITS, while it has fewer than four entries per node, each
   time it has missed as many known paths as it has entries (a miss
   that evicts a filled entry and finds the node already in the tree): deep
   recursion wants one entry per (parent, site), two or three per node, and
   a cache smaller than that misses at every level whatever its
   associativity.  Misses on new paths do not count: a program whose paths
   keep changing would pay for a big cache and gain nothing.  A compaction
   (or clear_traces()) that leaves far fewer nodes shrinks it again, so its
   size follows the tree, which compaction bounds by the live data. */
#define CACHE_MIN_BITS 13
#define CACHE_MAX_BITS 17

/* Second level, behind the cache: the line and the interned filename of
   (code, offset), whatever the caller.  A miss of the first level is
   mostly a known site under a new parent (recursion: every level has
   another), and decoding the line table from its start and hashing the
   filename cost hundreds of instructions; this makes it a probe here and
   one in the node index. */
typedef struct {
    const PyCodeObject *code;
    int lasti;
    uint32_t epoch;             /* code_epochs[] of its code when filled */
    int lineno;
    uint32_t range;             /* the line's instructions: see frame_memo() */
    const cct_string *filename; /* valid until a compaction */
} cct_line_entry;

#define LINE_BITS 11
#define LINES_SIZE (sizeof(cct_line_entry) << LINE_BITS)
/* A code object's death invalidates only the cache entries of the codes
   that share its slot here (1 in 1024), not the whole cache: code made and
   dropped in a loop (exec, namedtuple, dataclasses) leaves the cache of
   everything else warm. */
#define CODE_EPOCH_BITS 10
/* Below this many nodes the tree is never compacted (24 KiB of nodes). */
#define COMPACT_MIN 1024

uint32_t _PyTraceMalloc_cct_generation = 1;

static struct {
    /* Protected by the engine lock */
    cct_storage storage;
    uint32_t nnodes;            /* node ids in use: 1..nnodes-1 */
    uint32_t compact_at;        /* compact when nnodes reaches this */
    uint32_t *node_index;       /* open addressing over node ids */
    size_t node_index_mask;
    cct_string **string_index;  /* open addressing over strings */
    size_t string_index_mask;
    size_t nstrings;
    cct_cache_entry *cache;
    unsigned int cache_shift;   /* 64 - log2 of the cache's entries */
    size_t cache_evictions;     /* of known paths, since the last resize */
    size_t cache_grow_at;       /* evictions that make it grow */
    cct_line_entry *lines;
    uint32_t code_epochs[1 << CODE_EPOCH_BITS];  /* bumped as codes die */
    size_t memory;
    int pins;                   /* exporters reading nodes without the lock */
    cct_storage *graveyard;     /* storage to free when pins drops to 0 */
    /* Peak tracking (see "peak" below) */
    cct_node_peak *peaks;       /* by node id; room for */
    _PyTraceMalloc_Node *dirty; /* nodes whose totals changed; room for */
    size_t dirty_cap;           /* dirty_cap nodes in both, so that */
    size_t ndirty;              /* neither can fail when a node is used */
    cct_domain_totals *domains; /* open addressing, capacity mask + 1 */
    size_t domains_mask;
    size_t ndomains;
    uint32_t *domains_dirty;    /* indexes into `domains`, room for all */
    size_t ndomains_dirty;
    /* Statistics, for the tests and benchmarks */
    uint64_t cache_misses;
    uint64_t compactions;
} cct;

static inline size_t
code_epoch_slot(const PyCodeObject *code)
{
    /* Code objects are GC objects, 16-byte aligned, at least 200 bytes
       apart: the address bits above 4 spread them well enough, without a
       multiply on the hot path. */
    return ((uintptr_t)code >> 4) & ((1 << CODE_EPOCH_BITS) - 1);
}

static inline cct_node *
node_in(cct_node *const *chunks, _PyTraceMalloc_Node id)
{
    uint32_t v = id + (1u << CHUNK0_BITS);
    int k = 31 - __builtin_clz(v) - CHUNK0_BITS;
    return &chunks[k][v - ((1u << CHUNK0_BITS) << k)];
}

static inline cct_node *
node_at(_PyTraceMalloc_Node id)
{
    return node_in(cct.storage.chunks, id);
}

/* One past the last node id of chunk K. */
static inline size_t
chunk_end_id(int k)
{
    return ((size_t)1 << (CHUNK0_BITS + k + 1)) - ((size_t)1 << CHUNK0_BITS);
}

static int
dirty_reserve(size_t need)
{
    if (need <= cct.dirty_cap) {
        return 0;
    }
    _PyTraceMalloc_Node *dirty = realloc(cct.dirty, need * sizeof(*dirty));
    if (dirty == NULL) {
        return -1;
    }
    cct.dirty = dirty;
    cct_node_peak *peaks = realloc(cct.peaks, need * sizeof(*peaks));
    if (peaks == NULL) {
        return -1;      /* the bigger dirty list is kept: harmless */
    }
    memset(peaks + cct.dirty_cap, 0,
           (need - cct.dirty_cap) * sizeof(*peaks));
    cct.memory += (need - cct.dirty_cap) * (sizeof(*dirty) + sizeof(*peaks));
    cct.peaks = peaks;
    cct.dirty_cap = need;
    return 0;
}

static int
node_reserve(_PyTraceMalloc_Node id)
{
    uint32_t v = id + (1u << CHUNK0_BITS);
    int k = 31 - __builtin_clz(v) - CHUNK0_BITS;
    if (cct.storage.chunks[k] == NULL) {
        size_t n = (size_t)1 << (CHUNK0_BITS + k);
        cct.storage.chunks[k] = _PyTraceMalloc_RawAlloc(n * sizeof(cct_node),
                                                        1);
        if (cct.storage.chunks[k] == NULL) {
            return -1;
        }
        cct.memory += n * sizeof(cct_node);
    }
    /* The dirty list has room for every node id the chunks hold, so that
       marking a node dirty never fails. */
    return dirty_reserve(chunk_end_id(k));
}

/* ---- filenames ---------------------------------------------------------- */

static Py_hash_t
string_hash(const void *data, Py_ssize_t nbytes)
{
    /* FNV-1a: no need for Python's randomised hash here. */
    uint64_t h = UINT64_C(1469598103934665603);
    const unsigned char *p = data;
    for (Py_ssize_t i = 0; i < nbytes; i++) {
        h = (h ^ p[i]) * UINT64_C(1099511628211);
    }
    return (Py_hash_t)(h >> 1);
}

static int
string_index_rebuild(size_t cap)
{
    cct_string **index = _PyTraceMalloc_RawAlloc(cap * sizeof(*index), 1);
    if (index == NULL) {
        return -1;
    }
    for (cct_string *s = cct.storage.strings; s != NULL; s = s->next) {
        size_t i = (size_t)s->hash & (cap - 1);
        while (index[i] != NULL) {
            i = (i + 1) & (cap - 1);
        }
        index[i] = s;
    }
    if (cct.string_index) {
        cct.memory -= (cct.string_index_mask + 1) * sizeof(*index);
        free(cct.string_index);
    }
    cct.memory += cap * sizeof(*index);
    cct.string_index = index;
    cct.string_index_mask = cap - 1;
    return 0;
}

static int
string_index_grow(void)
{
    return string_index_rebuild(
        cct.string_index ? (cct.string_index_mask + 1) * 2 : 64);
}

/* The interned copy of FILENAME (a str or a str subclass, like upstream);
   NULL with *nomem set on failure, NULL alone when FILENAME is not a ready
   str. */
static const cct_string *
string_intern(PyObject *filename, int *nomem)
{
    if (filename == NULL || !PyUnicode_Check(filename)
        || !PyUnicode_IS_READY(filename)) {
        return NULL;
    }
    int kind = PyUnicode_KIND(filename);
    Py_ssize_t length = PyUnicode_GET_LENGTH(filename);
    const void *data = PyUnicode_DATA(filename);
    Py_ssize_t nbytes = length * kind;
    Py_hash_t hash = string_hash(data, nbytes);
    if (cct.string_index != NULL) {
        size_t i = (size_t)hash & cct.string_index_mask;
        for (cct_string *s; (s = cct.string_index[i]) != NULL;
             i = (i + 1) & cct.string_index_mask) {
            if (s->hash == hash && s->kind == kind && s->length == length
                && memcmp(s->data, data, nbytes) == 0) {
                return s;
            }
        }
    }
    if (cct.string_index == NULL
        || (cct.nstrings + 1) * 2 > cct.string_index_mask + 1) {
        if (string_index_grow() < 0) {
            *nomem = 1;
            return NULL;
        }
    }
    cct_string *s = _PyTraceMalloc_RawAlloc(sizeof(cct_string) + nbytes, 0);
    if (s == NULL) {
        *nomem = 1;
        return NULL;
    }
    s->hash = hash;
    s->length = length;
    s->kind = kind;
    s->marked = 0;
    memcpy(s->data, data, nbytes);
    s->next = cct.storage.strings;
    cct.storage.strings = s;
    cct.nstrings++;
    cct.memory += sizeof(cct_string) + nbytes;
    size_t i = (size_t)hash & cct.string_index_mask;
    while (cct.string_index[i] != NULL) {
        i = (i + 1) & cct.string_index_mask;
    }
    cct.string_index[i] = s;
    return s;
}

/* ---- nodes -------------------------------------------------------------- */

/* Per-thread attribution for free: every thread's call paths hang from a
   root node of its own, (0, &thread_root_marker, native thread id), with
   depth 0.  Exports stop before it (a path's frames are the nodes of depth
   1 and more) and report it as the path's thread.  It is made on the slow
   path only, when a thread's bottom frame fills its cache, so the hot path
   pays nothing and no trace grows. */
static cct_string thread_root_marker;

static inline uint32_t
node_hash(_PyTraceMalloc_Node parent, const cct_string *filename, int lineno)
{
    uint64_t x = (uint64_t)parent * UINT64_C(0x9E3779B97F4A7C15);
    x ^= (uint64_t)(uintptr_t)filename * UINT64_C(0xC2B2AE3D27D4EB4F);
    x ^= (uint64_t)(uint32_t)lineno * UINT64_C(0x165667B19E3779F9);
    return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

/* Rebuild the node index with CAP entries (a power of 2).  The capacity is
   a size_t: with 2**31 nodes or more, a 32-bit doubling would wrap to 0. */
static int
node_index_rebuild(size_t cap)
{
    if (cap > SIZE_MAX / sizeof(uint32_t)) {
        return -1;
    }
    uint32_t *index = _PyTraceMalloc_RawAlloc(cap * sizeof(*index), 1);
    if (index == NULL) {
        return -1;
    }
    for (uint32_t id = 1; id < cct.nnodes; id++) {
        size_t i = node_at(id)->hash & (cap - 1);
        while (index[i] != 0) {
            i = (i + 1) & (cap - 1);
        }
        index[i] = id;
    }
    if (cct.node_index) {
        cct.memory -= (cct.node_index_mask + 1) * sizeof(*index);
        free(cct.node_index);
    }
    cct.memory += cap * sizeof(*index);
    cct.node_index = index;
    cct.node_index_mask = cap - 1;
    return 0;
}

static int
node_index_grow(void)
{
    return node_index_rebuild(
        cct.node_index ? (cct.node_index_mask + 1) * 2 : 1024);
}

/* The node (parent, filename, lineno), created if needed; 0 with *nomem
   set on failure. */
static _PyTraceMalloc_Node
node_intern(_PyTraceMalloc_Node parent, const cct_string *filename,
            int lineno, int *nomem)
{
    uint32_t hash = node_hash(parent, filename, lineno);
    if (cct.node_index != NULL) {
        size_t i = hash & cct.node_index_mask;
        for (uint32_t id; (id = cct.node_index[i]) != 0;
             i = (i + 1) & cct.node_index_mask) {
            cct_node *n = node_at(id);
            if (n->hash == hash && n->parent == parent
                && n->filename == filename && n->lineno == lineno) {
                return id;
            }
        }
    }
    if (cct.nnodes >= NODE_LIMIT) {
        *nomem = 1;
        return 0;
    }
    if (cct.node_index == NULL
        || ((size_t)cct.nnodes + 1) * 2 > cct.node_index_mask + 1) {
        if (node_index_grow() < 0) {
            *nomem = 1;
            return 0;
        }
    }
    _PyTraceMalloc_Node id = cct.nnodes;
    if (node_reserve(id) < 0) {
        *nomem = 1;
        return 0;
    }
    cct_node *n = node_at(id);
    n->parent = parent;
    n->lineno = lineno;
    n->depth = parent ? node_at(parent)->depth + 1
                      : (filename == &thread_root_marker ? 0 : 1);
    n->hash = hash;
    n->filename = filename;
    memset(&cct.peaks[id], 0, sizeof(cct.peaks[id]));
    cct.nnodes++;
    size_t i = hash & cct.node_index_mask;
    while (cct.node_index[i] != 0) {
        i = (i + 1) & cct.node_index_mask;
    }
    cct.node_index[i] = id;
    return id;
}

/* The root node of TSTATE's call paths; 0 with *nomem set on failure. */
static _Thread_local struct {
    PyThreadState *tstate;
    uint32_t generation;
    _PyTraceMalloc_Node node;
} thread_root_cache;

static _PyTraceMalloc_Node
thread_root(PyThreadState *tstate, int *nomem)
{
    /* Cached per thread: allocations without any Python frame (C code
       holding a thread state) ask for it every time. */
    if (thread_root_cache.tstate == tstate
        && thread_root_cache.generation == _PyTraceMalloc_cct_generation) {
        return thread_root_cache.node;
    }
    /* TSTATE is the calling thread's: ask the OS, not the thread state,
       whose id is stale in a forked child until PyOS_AfterFork_Child()
       updates it, after the child's first allocations.  Linux thread ids
       fit in an int (pid_max is at most 2**22). */
#ifdef PY_HAVE_THREAD_NATIVE_ID
    int tid = (int)(PyThread_get_thread_native_id() & INT_MAX);
#else
    int tid = (int)(tstate->native_thread_id & INT_MAX);
#endif
    _PyTraceMalloc_Node node = node_intern(0, &thread_root_marker, tid,
                                           nomem);
    if (!*nomem) {
        thread_root_cache.tstate = tstate;
        thread_root_cache.generation = _PyTraceMalloc_cct_generation;
        thread_root_cache.node = node;
    }
    return node;
}

/* ---- peak ---------------------------------------------------------------
 *
 * take_snapshot(peak=True) reports what was live when traced memory last
 * reached its peak.  Each node keeps the totals (size, count) of the live
 * traces that name it, and the same totals as they were at the peak.  A
 * node whose live totals change is pushed on a dirty list (once).  When the
 * traced size passes its peak, `peak_pending` says that the live totals are
 * the peak now; the first decrease after that (a free, a re-trace) first
 * copies the live totals of the dirty nodes to their peak totals: the nodes
 * not on the list have not changed since the last copy.  Each change is
 * copied at most once, so the cost is amortised O(1) per traced operation,
 * whatever the number of nodes (Fil's lazy copy at the peak, made
 * incremental).  Traces of the other domains keep the same totals by
 * (domain, node) in a small table.
 */

static inline cct_totals *
node_totals(_PyTraceMalloc_Node node, uint32_t **dirty)
{
    cct_node_peak *p = &cct.peaks[node];
    *dirty = &p->dirty;
    return &p->totals;
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
    if (cct.domains != NULL) {
        for (size_t i = 0; i <= cct.domains_mask; i++) {
            cct_domain_totals *e = &cct.domains[i];
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
        cct.memory -= (cct.domains_mask + 1)
                      * (sizeof(*table) + sizeof(*dirty));
    }
    free(cct.domains);
    free(cct.domains_dirty);
    cct.domains = table;
    cct.domains_dirty = dirty;
    cct.ndomains = n;
    cct.ndomains_dirty = ndirty;
    cct.domains_mask = cap - 1;
    cct.memory += cap * (sizeof(*table) + sizeof(*dirty));
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
    if (cct.domains == NULL || (create
            && (cct.ndomains + 1) * 2 > cct.domains_mask + 1)) {
        if (!create) {
            return NULL;
        }
        size_t cap = cct.domains ? (cct.domains_mask + 1) * 2 : 64;
        if (domain_totals_rebuild(cap) < 0) {
            return NULL;
        }
    }
    size_t i = domain_totals_hash(domain, node) & cct.domains_mask;
    for (;;) {
        cct_domain_totals *e = &cct.domains[i];
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
            cct.ndomains++;
            break;
        }
        i = (i + 1) & cct.domains_mask;
    }
    *dirty = &cct.domains[i].dirty;
    return &cct.domains[i].totals;
}

static inline void
mark_dirty(unsigned int domain, _PyTraceMalloc_Node node, uint32_t *dirty)
{
    if (*dirty) {
        return;
    }
    *dirty = 1;
    if (domain != _PyTraceMalloc_DEFAULT_DOMAIN) {
        cct_domain_totals *e = (cct_domain_totals *)(
            (char *)dirty - offsetof(cct_domain_totals, dirty));
        cct.domains_dirty[cct.ndomains_dirty++] = (uint32_t)(e - cct.domains);
    }
    else {
        cct.dirty[cct.ndirty++] = node;
    }
}

/* Copy the live totals of every node changed since the last copy to its
   peak totals: the live state is the peak. */
Py_NO_INLINE static void
cct_peak_commit(void)
{
    for (size_t i = 0; i < cct.ndirty; i++) {
        uint32_t *dirty;
        cct_totals *t = node_totals(cct.dirty[i], &dirty);
        t->peak_size = t->live_size;
        t->peak_count = t->live_count;
        *dirty = 0;
    }
    cct.ndirty = 0;
    for (size_t i = 0; i < cct.ndomains_dirty; i++) {
        cct_domain_totals *e = &cct.domains[cct.domains_dirty[i]];
        e->totals.peak_size = e->totals.live_size;
        e->totals.peak_count = e->totals.live_count;
        e->dirty = 0;
    }
    cct.ndomains_dirty = 0;
    tm_store.peak_pending = 0;
}

/* Before any decrease of a node's totals. */
static inline void
cct_peak_before_decrease(void)
{
#ifdef PY_TRACEMALLOC_NO_PEAK
    return;
#endif
    if (tm_store.peak_pending) {
        cct_peak_commit();
    }
}

/* A trace of SIZE naming (DOMAIN, NODE) is added: 0, or -1 when out of
   memory (another domain's first trace at NODE). */
static inline int
cct_account_add(unsigned int domain, _PyTraceMalloc_Node node, size_t size)
{
#ifdef PY_TRACEMALLOC_NO_PEAK
    /* Benchmarks only (the cost of peak tracking): no peak snapshots. */
    return 0;
#endif
    uint32_t *dirty;
    cct_totals *t;
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        t = node_totals(node, &dirty);
    }
    else {
        t = domain_totals(domain, node, 1, &dirty);
        if (t == NULL) {
            return -1;
        }
    }
    t->live_size += size;
    t->live_count++;
    mark_dirty(domain, node, dirty);
    return 0;
}

/* A trace is removed (cct_peak_before_decrease() was called). */
static inline void
cct_account_remove(unsigned int domain, _PyTraceMalloc_Node node,
                   size_t size)
{
#ifdef PY_TRACEMALLOC_NO_PEAK
    return;
#endif
    uint32_t *dirty;
    cct_totals *t;
    if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        t = node_totals(node, &dirty);
    }
    else {
        t = domain_totals(domain, node, 0, &dirty);
        if (t == NULL) {
            return;     /* cannot happen: its add created it */
        }
    }
    t->live_size -= size;
    t->live_count--;
    mark_dirty(domain, node, dirty);
}

/* A free-list object of the default domain is re-traced from node FROM to
   node TO (the hottest of the three on numeric code). */
static inline void
cct_account_move(_PyTraceMalloc_Node from, _PyTraceMalloc_Node to,
                 size_t size)
{
#ifdef PY_TRACEMALLOC_NO_PEAK
    return;
#endif
    cct_peak_before_decrease();
    cct_node_peak *a = &cct.peaks[from], *b = &cct.peaks[to];
    a->totals.live_size -= size;
    a->totals.live_count--;
    b->totals.live_size += size;
    b->totals.live_count++;
    if (!a->dirty) {
        a->dirty = 1;
        cct.dirty[cct.ndirty++] = from;
    }
    if (!b->dirty) {
        b->dirty = 1;
        cct.dirty[cct.ndirty++] = to;
    }
}

/* The totals at the peak: every (domain, node) with blocks then, with the
   view pinned, in one locked section. */
int
_PyTraceMalloc_PeakCopy(_PyTraceMalloc_PeakGroup **groups, size_t *count,
                        _PyTraceMalloc_CCTView *view)
{
    _PyTraceMalloc_Lock();
    cct_peak_before_decrease();
    size_t n = 0;
    for (uint32_t id = 0; id < cct.nnodes; id++) {
        n += cct.peaks[id].totals.peak_count != 0;
    }
    if (cct.domains != NULL) {
        for (size_t i = 0; i <= cct.domains_mask; i++) {
            n += (cct.domains[i].node != UINT32_MAX
                  && cct.domains[i].totals.peak_count != 0);
        }
    }
    _PyTraceMalloc_PeakGroup *out = malloc((n ? n : 1) * sizeof(*out));
    if (out == NULL) {
        _PyTraceMalloc_Unlock();
        return -1;
    }
    size_t k = 0;
    for (uint32_t id = 0; id < cct.nnodes; id++) {
        cct_totals *t = &cct.peaks[id].totals;
        if (t->peak_count) {
            out[k++] = (_PyTraceMalloc_PeakGroup){
                _PyTraceMalloc_DEFAULT_DOMAIN, id, t->peak_size,
                t->peak_count};
        }
    }
    if (cct.domains != NULL) {
        for (size_t i = 0; i <= cct.domains_mask; i++) {
            cct_domain_totals *e = &cct.domains[i];
            if (e->node != UINT32_MAX && e->totals.peak_count) {
                out[k++] = (_PyTraceMalloc_PeakGroup){
                    e->domain, e->node, e->totals.peak_size,
                    e->totals.peak_count};
            }
        }
    }
    _PyTraceMalloc_CCTPin_unlocked(view);
    _PyTraceMalloc_Unlock();
    *groups = out;
    *count = k;
    return 0;
}

/* ---- frames ------------------------------------------------------------- */

/* The key of the frame caches: CODE at offset LASTI under PARENT, mixed
   into 64 bits; callers keep its top bits.  The parent is mixed in by a
   multiplication of its own: recursion makes keys that differ only by
   consecutive parent ids, which this spreads evenly over the cache (with
   the parent shifted into the bits of one multiplication, 30,000 levels
   took 15,000 entries of 131,072). */
static inline uint64_t
site_hash(const PyCodeObject *code, _PyTraceMalloc_Node parent, int lasti)
{
    const uint64_t k = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t x = ((uint64_t)(uintptr_t)code >> 4)
                 ^ ((uint64_t)(uint32_t)lasti << 40);
    return ((x * k) ^ parent) * k;
}

/* The per-frame memo of the last allocation site (tracemalloc_last): the
   node, and above it the RANGE of instructions that share its line, in
   bytes from the start of the code object (memo_offset()): start in bits
   32-47 and length in bits 48-63.  Any allocation of the
   frame inside that range has the same node: a line that allocates at
   several instructions (`d = sqrt(dx * dx + dy * dy)`) is looked up once
   per visit, not once per instruction.  The code cannot change under a
   live frame nor be freed, so a hit needs no epoch.  The memo is reset
   whenever the frame's parent is set, as the node depends on it; a length
   of 0 (LAST_NONE) never matches. */
#define LAST_NONE ((uint64_t)0)
#define RANGE_MAX 0xFFFF

/* Where the memo's range is counted from: bytes from the start of the code
   object, so that the check needs no address of its bytecode. */
static inline uint32_t
memo_offset(const PyCodeObject *code, const _Py_CODEUNIT *instr)
{
    return (uint32_t)((const char *)instr - (const char *)code);
}

/* The line of CODE at instruction offset LASTI (0 if it has none), and in
   *RANGE the instructions around LASTI that have the same line, packed
   for the memo (0: none that fits in 16 bits). */
static int
line_of(PyCodeObject *code, int lasti, uint32_t *range)
{
    *range = 0;
    if (lasti < 0) {
        return code->co_firstlineno;    /* like PyCode_Addr2Line() */
    }
    PyCodeAddressRange bounds;
    _PyCode_InitAddressRange(code, &bounds);
    int line = _PyCode_CheckLineNumber(lasti * (int)sizeof(_Py_CODEUNIT),
                                       &bounds);
    int start = bounds.ar_start, end = bounds.ar_end;
    /* The location table cuts a line into entries of at most 8
       instructions (one per column span): join the neighbours that have
       the same line. */
    PyCodeAddressRange b = bounds;
    while (end - start < RANGE_MAX && _PyLineTable_NextAddressRange(&b)
           && b.ar_line == line) {
        end = b.ar_end;
    }
    b = bounds;
    while (end - start < RANGE_MAX
           && _PyLineTable_PreviousAddressRange(&b) && b.ar_line == line) {
        start = b.ar_start;
    }
    /* In the memo's unit (memo_offset()). */
    int base = (int)memo_offset(code, _PyCode_CODE(code));
    start += base;
    end += base;
    if (end - start > RANGE_MAX) {
        /* Keep the instruction at LASTI. */
        start = base + lasti * (int)sizeof(_Py_CODEUNIT);
        end = start + (int)sizeof(_Py_CODEUNIT);
    }
    if (end <= RANGE_MAX && end > start) {
        *range = (uint32_t)start | ((uint32_t)(end - start) << 16);
    }
    return line < 0 ? 0 : line;
}

/* Remember in FRAME's memo that the instructions of RANGE (a line) have
   NODE. */
static inline void
memo_set(_PyInterpreterFrame *frame, uint32_t range, _PyTraceMalloc_Node node)
{
    frame->tracemalloc_last = ((uint64_t)range << 32) | node;
}

/* ---- the shared cache's size -------------------------------------------- */

static inline size_t
cache_entries(void)
{
    return (size_t)1 << (64 - cct.cache_shift);
}

static void
cache_schedule_growth(void)
{
    cct.cache_evictions = 0;
    cct.cache_grow_at = 64 - cct.cache_shift < CACHE_MAX_BITS
                        ? cache_entries() : SIZE_MAX;
}

/* Replace the shared cache with one of 2^BITS entries, empty, or with the
   old entries when KEEP (growth: doubling a direct-mapped cache splits each
   entry's slot in two, so none is lost).  -1 without memory: the old cache
   is kept. */
static int
cache_resize(unsigned int bits, int keep)
{
    size_t n = (size_t)1 << bits;
    cct_cache_entry *cache = _PyTraceMalloc_RawAlloc(n * sizeof(*cache), 1);
    if (cache == NULL) {
        return -1;
    }
    size_t old = 0;
    if (cct.cache != NULL) {
        old = cache_entries();
        for (size_t i = 0; keep && i < old; i++) {
            const cct_cache_entry *e = &cct.cache[i];
            if (e->code != NULL) {
                cache[site_hash(e->code, e->parent, e->lasti)
                      >> (64 - bits)] = *e;
            }
        }
        free(cct.cache);
    }
    cct.cache = cache;
    cct.cache_shift = 64 - bits;
    cct.memory = cct.memory - old * sizeof(*cache) + n * sizeof(*cache);
    cache_schedule_growth();
    return 0;
}

/* Empty the shared cache (its keys are stale), shrunk to fit LIVE_NODES
   nodes when it is more than twice too big.  Cannot fail: without memory
   for a smaller one the old one is emptied. */
static void
cache_clear(uint32_t live_nodes)
{
    unsigned int bits = CACHE_MIN_BITS;
    while (bits < CACHE_MAX_BITS
           && ((size_t)1 << bits) < 2 * (size_t)live_nodes) {
        bits++;
    }
    if (64 - cct.cache_shift <= bits + 1 || cache_resize(bits, 0) < 0) {
        memset(cct.cache, 0, cache_entries() * sizeof(*cct.cache));
        cache_schedule_growth();
    }
    memset(cct.lines, 0, LINES_SIZE);
}

/* The cache missed as many known paths as it has entries since the last
   resize: double it if it has fewer than four entries per node, else count
   again. */
Py_NO_INLINE static void
cache_grow(void)
{
    if (cache_entries() >= 4 * (size_t)cct.nnodes
        || cache_resize(64 - cct.cache_shift + 1, 1) < 0) {
        cache_schedule_growth();
    }
}

/* After a miss of the shared cache in entry E, for FRAME under PARENT:
   decode the line, intern the node, and put it in the cache and in the
   frame's memo. */
Py_NO_INLINE static _PyTraceMalloc_Node
frame_node_miss(_PyInterpreterFrame *frame, _PyTraceMalloc_Node parent,
                cct_cache_entry *e, int *nomem)
{
    PyCodeObject *code = frame->f_code;
    int lasti = _PyInterpreterFrame_LASTI(frame);
    cct.cache_misses++;
    uint32_t epoch = cct.code_epochs[code_epoch_slot(code)];
    /* Keyed without the parent: every caller's entry for the site. */
    cct_line_entry *le = &cct.lines[site_hash(code, 0, lasti)
                                    >> (64 - LINE_BITS)];
    int lineno;
    uint32_t range;
    const cct_string *filename;
    if (le->code == code && le->lasti == lasti && le->epoch == epoch) {
        lineno = le->lineno;
        range = le->range;
        filename = le->filename;
    }
    else {
        lineno = line_of(code, lasti, &range);
        filename = string_intern(code->co_filename, nomem);
        if (*nomem) {
            return 0;
        }
        le->code = code;
        le->lasti = lasti;
        le->epoch = epoch;
        le->lineno = lineno;
        le->range = range;
        le->filename = filename;
    }
    uint32_t nnodes = cct.nnodes;
    _PyTraceMalloc_Node node = node_intern(parent, filename, lineno, nomem);
    if (*nomem) {
        return 0;
    }
    /* A path seen before, whose entry another key took: the cache is too
       small for the tree (a new path would have missed anyway). */
    if (e->code != NULL && cct.nnodes == nnodes
        && ++cct.cache_evictions >= cct.cache_grow_at) {
        cache_grow();
        e = &cct.cache[site_hash(code, parent, lasti) >> cct.cache_shift];
    }
    e->code = code;
    e->parent = parent;
    e->lasti = lasti;
    e->node = node;
    e->epoch = epoch;
    e->range = range;
    memo_set(frame, range, node);
    return node;
}

/* 1 and the node in *NODE if FRAME's memo covers its current instruction
   (the caller knows its parent is valid). */
static inline int
frame_memo(const _PyInterpreterFrame *frame, _PyTraceMalloc_Node *node)
{
    uint64_t last = frame->tracemalloc_last;
    uint32_t at = memo_offset(frame->f_code, frame->prev_instr);
    if (at - (uint32_t)((last >> 32) & RANGE_MAX)
        < (uint32_t)(last >> 48)) {
        *node = (uint32_t)last;
        return 1;
    }
    return 0;
}

/* 1 and the node in *NODE if the shared cache knows FRAME's current
   instruction under PARENT (its valid tracemalloc_parent); the frame's
   memo is then set.  Otherwise 0, and *ENTRY is the cache entry to fill.
   Cost of a hit: a hash, three compares and the load of the code's
   epoch. */
static inline int
site_cached(_PyInterpreterFrame *frame, _PyTraceMalloc_Node parent,
            _PyTraceMalloc_Node *node, cct_cache_entry **entry)
{
    PyCodeObject *code = frame->f_code;
    int lasti = _PyInterpreterFrame_LASTI(frame);
    cct_cache_entry *e = &cct.cache[site_hash(code, parent, lasti)
                                    >> cct.cache_shift];
    if (e->code == code && e->parent == parent && e->lasti == lasti
        && e->epoch == cct.code_epochs[code_epoch_slot(code)]) {
        *node = e->node;
        memo_set(frame, e->range, e->node);
        return 1;
    }
    *entry = e;
    return 0;
}

/* The node of FRAME at its current instruction, its caller's node being
   PARENT (the frame's valid tracemalloc_parent): the memo, else the shared
   cache, else the line is decoded. */
static inline _PyTraceMalloc_Node
frame_node(_PyTraceMalloc_Node parent, _PyInterpreterFrame *frame,
           int *nomem)
{
    _PyTraceMalloc_Node node;
    cct_cache_entry *e;
    if (frame_memo(frame, &node) || site_cached(frame, parent, &node, &e)) {
        return node;
    }
    return frame_node_miss(frame, parent, e, nomem);
}

static inline _PyInterpreterFrame *
skip_incomplete(_PyInterpreterFrame *frame)
{
    /* Like upstream, frames that have not started their first traceable
       instruction (copying free variables, making cells) are not shown. */
    while (frame != NULL && _PyFrame_IsIncomplete(frame)) {
        frame = frame->previous;
    }
    return frame;
}

#define PENDING_INLINE 64

/* Slow path of _PyTraceMalloc_CurrentNode_unlocked(): FRAME's caller is
   not cached.  Walk up to the first frame with a valid cache (or the
   bottom), then fill the caches on the way back down: each frame is decoded
   once per linking, never once per allocation. */
Py_NO_INLINE static _PyTraceMalloc_Node
current_node_slow(PyThreadState *tstate, _PyInterpreterFrame *frame,
                  uint64_t generation)
{
    int nomem = 0;
    _PyInterpreterFrame *inline_pending[PENDING_INLINE];
    _PyInterpreterFrame **pending = inline_pending;
    size_t npending = 0, cap = PENDING_INLINE;
    _PyInterpreterFrame *f = frame;
    _PyTraceMalloc_Node node = 0;
    int at_bottom = 1;
    while (f != NULL) {
        if ((f->tracemalloc_parent & ~(uint64_t)UINT32_MAX) == generation) {
            node = frame_node((uint32_t)f->tracemalloc_parent, f, &nomem);
            at_bottom = 0;
            break;
        }
        if (npending == cap) {
            _PyInterpreterFrame **bigger = malloc(
                2 * cap * sizeof(*bigger));
            if (bigger == NULL) {
                nomem = 1;
                break;
            }
            memcpy(bigger, pending, npending * sizeof(*bigger));
            if (pending != inline_pending) {
                free(pending);
            }
            pending = bigger;
            cap *= 2;
        }
        pending[npending++] = f;
        f = skip_incomplete(f->previous);
    }
    if (at_bottom && !nomem) {
        node = thread_root(tstate, &nomem);
    }
    while (!nomem && npending > 0) {
        f = pending[--npending];
        f->tracemalloc_parent = generation | node;
        f->tracemalloc_last = LAST_NONE;
        node = frame_node(node, f, &nomem);
    }
    if (pending != inline_pending) {
        free(pending);
    }
    return nomem ? UINT32_MAX : node;
}

/* Hot path: the node of the current position of TSTATE.  When the frame's
   caller is cached (the usual case), one probe of the direct-mapped cache. */
_PyTraceMalloc_Node
_PyTraceMalloc_CurrentNode_unlocked(PyThreadState *tstate)
{
    if (tstate == NULL || cct.cache == NULL) {
        return 0;
    }
    _PyInterpreterFrame *frame = tstate->cframe->current_frame;
    uint64_t generation = (uint64_t)_PyTraceMalloc_cct_generation << 32;
    /* A frame with a valid cache is complete: the cache is reset when a
       frame is initialised and only filled once it has started, so the
       usual case needs no completeness check. */
    if (frame == NULL || (frame->tracemalloc_parent & ~(uint64_t)UINT32_MAX)
                         != generation) {
        frame = skip_incomplete(frame);
        if (frame == NULL) {
            /* No Python frame (a C thread, or before the first frame): the
               empty traceback, of this thread. */
            int nomem = 0;
            _PyTraceMalloc_Node root = thread_root(tstate, &nomem);
            return nomem ? UINT32_MAX : root;
        }
        if ((frame->tracemalloc_parent & ~(uint64_t)UINT32_MAX)
            != generation) {
            /* The usual miss: a new frame under a caller whose cache is
               valid (a call).  Link it without the walk. */
            _PyInterpreterFrame *caller = skip_incomplete(frame->previous);
            if (caller == NULL
                || (caller->tracemalloc_parent & ~(uint64_t)UINT32_MAX)
                   != generation) {
                return current_node_slow(tstate, frame, generation);
            }
            int nomem = 0;
            _PyTraceMalloc_Node parent = frame_node(
                (uint32_t)caller->tracemalloc_parent, caller, &nomem);
            if (nomem) {
                return UINT32_MAX;
            }
            frame->tracemalloc_parent = generation | parent;
            frame->tracemalloc_last = LAST_NONE;
        }
    }
    int nomem = 0;
    _PyTraceMalloc_Node node = frame_node((uint32_t)frame->tracemalloc_parent,
                                          frame, &nomem);
    return nomem ? UINT32_MAX : node;
}

/* frame_node_miss() for the hooks: UINT32_MAX when out of memory. */
Py_NO_INLINE static _PyTraceMalloc_Node
frame_node_miss_hook(_PyInterpreterFrame *frame, _PyTraceMalloc_Node parent,
                     cct_cache_entry *e)
{
    int nomem = 0;
    _PyTraceMalloc_Node node = frame_node_miss(frame, parent, e, &nomem);
    return nomem ? UINT32_MAX : node;
}

/* The hooks' inline front of _PyTraceMalloc_CurrentNode_unlocked(): when
   the current frame's cache is valid, its memo (an allocation on the line
   of the frame's last one), a hit in the shared cache, or the line decoded
   into the entry just probed (not probed again).  A valid frame cache
   implies a started engine: every reset bumps the generation. */
static inline _PyTraceMalloc_Node
current_node(PyThreadState *tstate)
{
    if (tstate != NULL) {
        _PyInterpreterFrame *frame = tstate->cframe->current_frame;
        if (frame != NULL
            && (uint32_t)(frame->tracemalloc_parent >> 32)
               == _PyTraceMalloc_cct_generation) {
            _PyTraceMalloc_Node parent = (uint32_t)frame->tracemalloc_parent;
            _PyTraceMalloc_Node node;
            cct_cache_entry *e;
            if (frame_memo(frame, &node)
                || site_cached(frame, parent, &node, &e)) {
                return node;
            }
            return frame_node_miss_hook(frame, parent, e);
        }
    }
    return _PyTraceMalloc_CurrentNode_unlocked(tstate);
}

void
_PyTraceMalloc_CodeFreed(void *code)
{
    _PyTraceMalloc_Lock();
    cct.code_epochs[code_epoch_slot(code)]++;
    _PyTraceMalloc_Unlock();
}

/* ---- compaction --------------------------------------------------------- */

static size_t
chunk_first_id(int k)
{
    return ((size_t)1 << (CHUNK0_BITS + k)) - ((size_t)1 << CHUNK0_BITS);
}

/* cct.memory from scratch (after a compaction freed parts of everything). */
static void
cct_recount_memory(void)
{
    size_t memory = 0;
    for (int k = 0; k < NCHUNKS; k++) {
        if (cct.storage.chunks[k] != NULL) {
            memory += ((size_t)1 << (CHUNK0_BITS + k)) * sizeof(cct_node);
        }
    }
    for (cct_string *s = cct.storage.strings; s != NULL; s = s->next) {
        memory += sizeof(cct_string) + (size_t)s->length * s->kind;
    }
    if (cct.node_index != NULL) {
        memory += (cct.node_index_mask + 1) * sizeof(uint32_t);
    }
    if (cct.string_index != NULL) {
        memory += (cct.string_index_mask + 1) * sizeof(cct_string *);
    }
    if (cct.cache != NULL) {
        memory += cache_entries() * sizeof(*cct.cache) + LINES_SIZE;
    }
    memory += cct.dirty_cap * (sizeof(*cct.dirty) + sizeof(*cct.peaks));
    if (cct.domains != NULL) {
        memory += (cct.domains_mask + 1)
                  * (sizeof(*cct.domains) + sizeof(*cct.domains_dirty));
    }
    cct.memory = memory;
}

static void
string_index_rehash_in_place(void)
{
    if (cct.string_index == NULL) {
        return;
    }
    size_t cap = cct.string_index_mask + 1;
    memset(cct.string_index, 0, cap * sizeof(*cct.string_index));
    for (cct_string *s = cct.storage.strings; s != NULL; s = s->next) {
        size_t i = (size_t)s->hash & (cap - 1);
        while (cct.string_index[i] != NULL) {
            i = (i + 1) & (cap - 1);
        }
        cct.string_index[i] = s;
    }
}

static void
node_index_rehash_in_place(void)
{
    if (cct.node_index == NULL) {
        return;
    }
    size_t cap = cct.node_index_mask + 1;
    memset(cct.node_index, 0, cap * sizeof(*cct.node_index));
    for (uint32_t id = 1; id < cct.nnodes; id++) {
        size_t i = node_at(id)->hash & (cap - 1);
        while (cct.node_index[i] != 0) {
            i = (i + 1) & (cap - 1);
        }
        cct.node_index[i] = id;
    }
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
cct_schedule_compaction(uint32_t live_nodes, size_t ntraces)
{
    uint64_t room = Py_MAX((uint64_t)live_nodes, (uint64_t)ntraces / 4);
    room = Py_MAX(room, (uint64_t)COMPACT_MIN);
    uint64_t at = (uint64_t)live_nodes + room;
    cct.compact_at = at < NODE_LIMIT ? (uint32_t)at : NODE_LIMIT;
}

/* Drop every node that no live trace names; see the comment at the top of
   the file.  Never fails: without memory for its work array, it tries again
   later.  Not while an exporter reads nodes without the lock. */
Py_NO_INLINE static void
cct_compact(void)
{
    uint32_t n = cct.nnodes;
    if (cct.pins > 0) {
        cct.compact_at = n < NODE_LIMIT - COMPACT_MIN ? n + COMPACT_MIN
                                                      : NODE_LIMIT;
        return;
    }
    compact_state st = {NULL, n, 0, 0};
    /* Everything that can fail first: then nothing needs undoing. */
    cct_domain_totals *new_domains = NULL;
    uint32_t *new_domains_dirty = NULL;
    st.remap = _PyTraceMalloc_RawAlloc((size_t)n * sizeof(uint32_t), 1);
    if (st.remap == NULL
        || (cct.domains != NULL
            && domain_totals_alloc(cct.domains_mask + 1, &new_domains,
                                   &new_domains_dirty) < 0)) {
        free(st.remap);
        cct_schedule_compaction(n, 0);
        return;
    }
    _PyTraceMalloc_StoreForEachNode_unlocked(compact_mark, &st);
    /* Nodes of the peak's blocks stay too, freed or not, and so do the
       nodes of other domains' totals. */
    size_t ntraces = st.ntraces;
    for (uint32_t id = 1; id < n && !st.corrupt; id++) {
        cct_totals *t = &cct.peaks[id].totals;
        if (t->peak_count != 0 || t->live_count != 0) {
            uint32_t ref = id;
            compact_mark(&ref, &st);
        }
    }
    if (cct.domains != NULL) {
        for (size_t i = 0; i <= cct.domains_mask && !st.corrupt; i++) {
            cct_domain_totals *e = &cct.domains[i];
            if (e->node != UINT32_MAX && e->node != 0
                && (e->totals.peak_count != 0 || e->totals.live_count != 0)) {
                uint32_t ref = e->node;
                compact_mark(&ref, &st);
            }
        }
    }
    st.ntraces = ntraces;
    if (st.corrupt) {
        /* A trace names a node that does not exist: leave everything as it
           is (_check_consistency() reports it). */
        free(new_domains);
        free(new_domains_dirty);
        free(st.remap);
        cct_schedule_compaction(n, st.ntraces);
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
        node.hash = node_hash(node.parent, node.filename, node.lineno);
        if (node.filename != NULL) {
            ((cct_string *)node.filename)->marked = 1;
        }
        st.remap[id] = next;
        *node_at(next) = node;
        cct.peaks[next] = cct.peaks[id];
        next++;
    }
    _PyTraceMalloc_StoreForEachNode_unlocked(compact_rewrite, &st);
    /* Peak bookkeeping follows the new ids: the dirty list is rebuilt from
       the flags, other domains' totals are renumbered (those that are
       empty now and at the peak are dropped). */
    memset(cct.peaks + next, 0, (n - next) * sizeof(*cct.peaks));
    cct.ndirty = 0;
    for (uint32_t id = 0; id < next; id++) {
        if (cct.peaks[id].dirty) {
            cct.dirty[cct.ndirty++] = id;
        }
    }
    if (cct.domains != NULL) {
        for (size_t i = 0; i <= cct.domains_mask; i++) {
            cct_domain_totals *e = &cct.domains[i];
            if (e->node == UINT32_MAX) {
                continue;
            }
            if (e->totals.peak_count == 0 && e->totals.live_count == 0) {
                e->node = UINT32_MAX;
                cct.ndomains--;
            }
            else {
                e->node = st.remap[e->node];
            }
        }
        domain_totals_rebuild_into(new_domains, new_domains_dirty,
                                   cct.domains_mask + 1);
    }
    free(st.remap);
    cct.nnodes = next;
    cct.compactions++;

    /* Give back the chunks that no node uses any more. */
    for (int k = 1; k < NCHUNKS; k++) {
        if (cct.storage.chunks[k] != NULL && chunk_first_id(k) >= next) {
            free(cct.storage.chunks[k]);
            cct.storage.chunks[k] = NULL;
        }
    }
    /* And the filenames no node names. */
    cct_string **link = &cct.storage.strings;
    cct.nstrings = 0;
    while (*link != NULL) {
        cct_string *s = *link;
        if (s->marked) {
            s->marked = 0;
            cct.nstrings++;
            link = &s->next;
        }
        else {
            *link = s->next;
            free(s);
        }
    }
    /* Smaller indexes.  If that fails for want of memory the old, larger
       ones are rebuilt in place instead (their memory is already ours). */
    size_t string_cap = 64;
    while (string_cap < cct.nstrings * 2 + 2) {
        string_cap *= 2;
    }
    if (string_index_rebuild(string_cap) < 0) {
        string_index_rehash_in_place();
    }
    size_t node_cap = 1024;
    while (node_cap < (size_t)next * 2 + 2) {
        node_cap *= 2;
    }
    if (node_index_rebuild(node_cap) < 0) {
        node_index_rehash_in_place();
    }
    /* Ids changed: the (parent, code, offset) cache and every frame's
       cached parent are stale. */
    cache_clear(next);          /* and the line cache: filename copies
                                   were freed */
    _PyTraceMalloc_cct_generation++;
    if (_PyTraceMalloc_cct_generation == 0) {
        _PyTraceMalloc_cct_generation = 1;
    }
    cct_recount_memory();
    cct_schedule_compaction(next, st.ntraces);
}

/* Called before computing a traceback, at a point where no node id is held
   outside the store. */
static inline void
cct_maybe_compact(void)
{
    if (cct.nnodes >= cct.compact_at) {
        cct_compact();
    }
}

/* ---- lifecycle and export ----------------------------------------------- */

static void
storage_free(cct_storage *st)
{
    for (int k = 0; k < NCHUNKS; k++) {
        free(st->chunks[k]);
    }
    cct_string *s = st->strings;
    while (s != NULL) {
        cct_string *next = s->next;
        free(s);
        s = next;
    }
}

void
_PyTraceMalloc_CCTReset_unlocked(void)
{
    if (cct.pins > 0) {
        /* An export is reading nodes without the lock: hand the storage
           to it, it frees it when done. */
        cct_storage *dead = malloc(sizeof(*dead));
        if (dead != NULL) {
            *dead = cct.storage;
            dead->next_dead = cct.graveyard;
            cct.graveyard = dead;
        }
        /* else: leak rather than free under a reader */
    }
    else {
        storage_free(&cct.storage);
    }
    memset(&cct.storage, 0, sizeof(cct.storage));
    free(cct.node_index);
    free(cct.string_index);
    cct.node_index = NULL;
    cct.node_index_mask = 0;
    cct.string_index = NULL;
    cct.string_index_mask = 0;
    cct.nstrings = 0;
    cct.nnodes = 1;             /* 0 is the empty traceback */
    cct_schedule_compaction(1, 0);
    /* Kept, zeroed: node 0's totals must exist as long as tracing goes on,
       and clear_traces() cannot fail. */
    if (cct.peaks != NULL) {
        memset(cct.peaks, 0, cct.dirty_cap * sizeof(*cct.peaks));
    }
    cct.ndirty = 0;
    free(cct.domains);
    free(cct.domains_dirty);
    cct.domains = NULL;
    cct.domains_dirty = NULL;
    cct.domains_mask = 0;
    cct.ndomains = 0;
    cct.ndomains_dirty = 0;
    tm_store.peak_pending = 0;
    if (cct.cache != NULL) {
        /* Kept, emptied (shrunk if it can): clear_traces() cannot fail
           for want of memory, and tracing goes on with a working cache. */
        cache_clear(1);
    }
    cct_recount_memory();
    _PyTraceMalloc_cct_generation++;
    if (_PyTraceMalloc_cct_generation == 0) {
        _PyTraceMalloc_cct_generation = 1;  /* 0 marks reset frames */
    }
}

/* Make the tables ready for tracing; -1 when out of memory. */
int
_PyTraceMalloc_CCTStart_unlocked(void)
{
    if (cct.cache == NULL) {
        cct.lines = _PyTraceMalloc_RawAlloc(LINES_SIZE, 1);
        if (cct.lines == NULL || cache_resize(CACHE_MIN_BITS, 0) < 0) {
            free(cct.lines);
            cct.lines = NULL;
            return -1;
        }
        cct.memory += LINES_SIZE;
    }
    /* Node 0's peak totals, and room for the first chunk of nodes. */
    if (dirty_reserve((size_t)1 << CHUNK0_BITS) < 0) {
        return -1;
    }
    cct.nnodes = 1;
    cct_schedule_compaction(1, 0);
    return 0;
}

/* Give back the cache too (stop()).  Freed first, so that the reset does
   not empty it, nor shrink it into a new allocation. */
void
_PyTraceMalloc_CCTRelease_unlocked(void)
{
    free(cct.cache);
    free(cct.lines);
    cct.cache = NULL;
    cct.lines = NULL;
    _PyTraceMalloc_CCTReset_unlocked();
    free(cct.peaks);
    free(cct.dirty);
    cct.peaks = NULL;
    cct.dirty = NULL;
    cct.dirty_cap = 0;
    cct.memory = 0;
}

uint32_t
_PyTraceMalloc_NodeCount(void)
{
    return cct.nnodes;
}

size_t
_PyTraceMalloc_CCTMemory_unlocked(void)
{
    return cct.memory;
}

int
_PyTraceMalloc_NodeInfo(const _PyTraceMalloc_CCTView *view,
                        _PyTraceMalloc_Node node, _PyTraceMalloc_Node *parent,
                        int *lineno, uint32_t *depth, const void **filename,
                        int *kind, Py_ssize_t *length)
{
    if (node == 0) {
        return 0;
    }
    const cct_node *n = node_in((cct_node *const *)view->chunks, node);
    if (n->depth == 0) {
        return 0;       /* a thread's root: the empty traceback */
    }
    *parent = n->parent;
    *lineno = n->lineno;
    *depth = n->depth;
    if (n->filename != NULL) {
        *filename = n->filename->data;
        *kind = n->filename->kind;
        *length = n->filename->length;
    }
    else {
        *filename = NULL;
        *kind = 0;
        *length = 0;
    }
    return 1;
}

/* The native id of the thread whose paths NODE's path hangs from, 0 when
   none (node 0: a thread without a Python thread state). */
unsigned long
_PyTraceMalloc_NodeThread(const _PyTraceMalloc_CCTView *view,
                          _PyTraceMalloc_Node node)
{
    while (node != 0) {
        const cct_node *n = node_in((cct_node *const *)view->chunks, node);
        if (n->depth == 0) {
            return (unsigned long)n->lineno;
        }
        node = n->parent;
    }
    return 0;
}

void
_PyTraceMalloc_CCTView_unlocked(_PyTraceMalloc_CCTView *view)
{
    memcpy(view->chunks, cct.storage.chunks, sizeof(view->chunks));
    view->nnodes = cct.nnodes;
}

/* Keep node storage readable, and ids stable, until the matching unpin:
   no compaction runs meanwhile, and a reset hands the storage to the
   graveyard instead of freeing it. */
void
_PyTraceMalloc_CCTPin_unlocked(_PyTraceMalloc_CCTView *view)
{
    _PyTraceMalloc_CCTView_unlocked(view);
    cct.pins++;
}

void
_PyTraceMalloc_CCTUnpin(void)
{
    _PyTraceMalloc_Lock();
    assert(cct.pins > 0);
    cct_storage *dead = NULL;
    if (--cct.pins == 0) {
        dead = cct.graveyard;
        cct.graveyard = NULL;
    }
    _PyTraceMalloc_Unlock();
    while (dead != NULL) {
        cct_storage *next = dead->next_dead;
        storage_free(dead);
        free(dead);
        dead = next;
    }
}

void
_PyTraceMalloc_CCTStats(uint32_t *nnodes, uint64_t *cache_misses,
                        uint64_t *compactions, size_t *entries)
{
    _PyTraceMalloc_Lock();
    *nnodes = cct.nnodes;
    *cache_misses = cct.cache_misses;
    *compactions = cct.compactions;
    *entries = cct.cache != NULL ? cache_entries() : 0;
    _PyTraceMalloc_Unlock();
}
