#ifndef Py_TRACEMALLOC_ENGINE_H
#define Py_TRACEMALLOC_ENGINE_H

/* The tracing engine's private header: its types, its one state struct, and
 * the functions its files call in each other.
 *
 * The engine is one translation unit: Python/tracemalloc.c includes this
 * header, then each file below, so that the hot paths (hook -> store ->
 * frame cache -> peak) inline into each other across files.  Nothing
 * outside the engine includes this header; the rest of CPython sees
 * Include/internal/pycore_tracemalloc.h.
 *
 *  file                              concern
 *  --------------------------------  ---------------------------------------
 *  Python/tracemalloc.c              the unit's root: start/stop, the C API,
 *                                    C exports
 *  Python/tracemalloc_memory.c       the engine's own memory (malloc() with
 *                                    fault injection for the tests)
 *  Python/tracemalloc_lock.c         the engine lock (GIL side / no-GIL side)
 *                                    and fork handlers
 *  Python/tracemalloc_hooks.c        the traced allocator entry points and
 *                                    the re-trace of reused objects
 *  Python/tracemalloc_store.c        the trace store: pool slots + one table
 *  Python/tracemalloc_tree.c         the call-context tree: nodes, interned
 *                                    filenames, thread roots, pins
 *  Python/tracemalloc_framecache.c   the frame links, the site tables and
 *                                    the code objects' line maps
 *  Python/tracemalloc_peak.c         per-node totals now and at the peak
 *  Python/tracemalloc_compact.c      compaction of the tree
 *  Python/tracemalloc_labels.c       context labels: label nodes from the
 *                                    context's label set, at frame links
 *  Python/tracemalloc_startup.c      the startup options of on-demand
 *                                    profiles and dumps, and their hook
 *  Python/tracemalloc_dumpover.c     the dump threshold: a pending call
 *                                    when traced memory crosses it
 *  Python/tracemalloc_sample.c       sampling mode: the countdowns, the
 *                                    filter of sampled addresses, the
 *                                    estimator
 *  Python/tracemalloc_native.c       native memory: the interposers of
 *                                    malloc() and mmap(), the native domain
 *  Python/tracemalloc_nativeframes.c native frames: the C stack of a
 *                                    trace, captured, interned, spliced
 *                                    and symbolised
 *  Python/tracemalloc_base.h         the adapter: the interpreter's frame,
 *                                    code and thread-state fields, from
 *                                    tracemalloc_base311.h (one per base)
 *
 * Every invariant these files rely on (what each cache may hold, what
 * invalidates it, what may be touched without the GIL or the lock, what
 * compaction preserves) is stated once, in
 * Doc/internals/tracemalloc-engine.rst, section "Invariants", and named
 * there by the tag (I1, I2...) that the code cites.
 */

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

#include "Python.h"
#include "pycore_code.h"
#include "pycore_frame.h"
#include "pycore_pystate.h"       // _PyThreadState_GET()
#include "pycore_tracemalloc.h"
/* tracemalloc_hooks.c: recompute the lean paths' guard (tm_lean) after
   one of its inputs changed.  Declared before the adapter, which calls it
   when an interpreter with a GIL of its own is made. */
static void lean_update(void);
static void lean_own_gil(void);
#include "tracemalloc_base.h"     // the interpreter's fields, per base

#include <stdatomic.h>

/* ---- types ------------------------------------------------------------- */

/* An interned copy of a filename's characters (tree). */
typedef struct cct_string {
    struct cct_string *next;    /* all strings, for freeing */
    Py_hash_t hash;
    Py_ssize_t length;
    int kind;                   /* PyUnicode kind: 1, 2 or 4 */
    uint8_t marked;             /* named by a live node (compaction) */
    uint8_t is_label;           /* a label set, not a filename (labels) */
    uint8_t is_native;          /* a native node's marker: 1 a C frame,
                                   2 a segment (tracemalloc_nativeframes.c) */
    char data[];
} cct_string;

/* A node of the tree: one call path, (parent, filename, line).  A label
   node (tracemalloc_labels.c) is (parent, label set, 0): its filename is a
   string with is_label set, it counts no frame, and readers skip it. */
typedef struct {
    _PyTraceMalloc_Node parent;
    int lineno;
    uint32_t depth;             /* frames on the path, this one included */
    _PyTraceMalloc_Node label;  /* the nearest label node on the path, this
                                   one included; 0: none (I13) */
    const cct_string *filename; /* NULL: not a str, reported '<unknown>' */
} cct_node;

#define CHUNK0_BITS 10
/* 1024 * (2**22 - 1) nodes at most */
#define NCHUNKS _PyTraceMalloc_CCT_NCHUNKS
#define NODE_LIMIT ((uint32_t)(((uint64_t)1 << (CHUNK0_BITS + NCHUNKS)) \
                               - (1 << CHUNK0_BITS) - 1))

/* What a reader may hold on to without the lock (I3). */
typedef struct cct_storage {
    cct_node *chunks[NCHUNKS];  /* chunk k holds 1024 << k nodes */
    cct_string *strings;
    struct cct_storage *next_dead;  /* graveyard link */
} cct_storage;

/* What the live traces naming one node (in one domain) add up to, now and
   when traced memory last reached its peak (peak); and what was allocated
   there since start() or clear_traces(), freed or not (alloc: the
   allocation profiles; counted only with start(allocations=True)). */
typedef struct {
    uint64_t live_size;
    uint64_t peak_size;
    uint64_t live_count;        /* sampling mode: in 1/SAMPLE_COUNT_UNIT */
    uint64_t peak_count;
    uint64_t alloc_size;
    uint64_t alloc_count;       /* sampling mode: in 1/SAMPLE_COUNT_UNIT */
} cct_totals;

/* The live totals of a node of the default domain, by node id: the only
   per-node record that every traced allocation and free writes, 16 bytes
   so that the update touches one cache line and indexes with a shift.
   The top bit of `count` says that the node is on the dirty list (I8). */
typedef struct {
    uint64_t size;
    uint64_t count;             /* sampling mode: in 1/SAMPLE_COUNT_UNIT */
} cct_node_live;
#define CCT_LIVE_DIRTY ((uint64_t)1 << 63)

/* The rest of a default-domain node's totals, by node id: written at a
   peak commit, and by allocations when they are counted. */
typedef struct {
    uint64_t peak_size;
    uint64_t peak_count;
    uint64_t alloc_size;
    uint64_t alloc_count;
} cct_node_peak;

/* Totals of the traces of the other domains, by (domain, node). */
typedef struct {
    unsigned int domain;        /* with node == UINT32_MAX: empty */
    _PyTraceMalloc_Node node;
    uint32_t dirty;
    cct_totals totals;
} cct_domain_totals;

/* A code object's line map (I6): its line table decoded once, each code
   unit mapped to the index of its line's run of instructions (neighbouring
   location entries of one line are one run), and each run's line.  Unit 0
   of `idx` is the offset -1 (before the first instruction: the code's
   first line).  The last entry is the one of the units whose
   line is decoded again at each use: those the table does not reach (a
   table shorter than its code) and the runs past MAP_DECODE.  Holds no node and no filename: compaction
   keeps it; it dies with its code object (_PyTraceMalloc_CodeFreed()). */
typedef struct cct_code_map {
    struct cct_code_map *next;  /* in its bucket of the map index */
    const PyCodeObject *code;
    size_t bytes;
    int *lines;                 /* by run index: the line, 0 if none */
    uint32_t nruns;             /* runs, the decode entry (nruns - 1) last */
    /* Its code's site tables made since the tables were last freed
       (valid while tables_gen is the index's): stale when it dies. */
    uint32_t ntables;
    uint32_t tables_gen;
    uint16_t idx[];             /* by code unit + 1: the run index */
} cct_code_map;
#define MAP_DECODE 0xFFFF     /* the largest decode entry */

/* A site table (I5): the nodes of one code object's lines under one
   parent, by run index of its line map; 0 where none was looked up yet.
   A linked frame points to its table (tracemalloc_last, I7), so that the
   node of its current line is two loads away.  Valid while its code's
   epoch is the one recorded; every table dies at a compaction or reset
   (cache_clear()), since it names nodes. */
typedef struct cct_site_table {
    const uint16_t *at;         /* map->idx, indexed by frame_unit() */
    struct cct_site_table *next;  /* in its bucket of the table index */
    const PyCodeObject *code;
    const cct_code_map *map;
    const cct_string *filename;
    /* The table its frames' last callee was linked to: a call, or a
       generator resumed, from the same line links without the index. */
    struct cct_site_table *callee;
    _PyTraceMalloc_Node parent;
    uint32_t epoch;             /* code_epochs[] of its code when made */
    _PyTraceMalloc_Node nodes[];  /* map->nruns */
} cct_site_table;

/* The table index has 2^CACHE_MIN_BITS to 2^CACHE_MAX_BITS buckets, about
   one per table; the map index 2^MAPS_MIN_BITS and up, one per map.  A
   dying code object invalidates the tables of the codes that share its
   slot among 2^CODE_EPOCH_BITS. */
#define CACHE_MIN_BITS 13
#define CACHE_MAX_BITS 20
#define MAPS_MIN_BITS 10
#define CODE_EPOCH_BITS 10
/* Below this many nodes the tree is never compacted. */
#define COMPACT_MIN 1024

/* An entry of the store's table: a trace outside the pool slots. */
typedef struct {
    uintptr_t ptr;              /* 0: empty entry */
    unsigned int domain;
    _PyTraceMalloc_Node node;   /* stored form: see stored_node() */
    size_t size;
} table_entry;

#define TABLE_MIN_CAPACITY 1024

/* ---- state ------------------------------------------------------------- */

/* All the engine's mutable state but the pool slots (in obmalloc.c's
   include, same protection), the lock's shared words (declared in
   pycore_tracemalloc.h for the inline lock) and four thread-locals (hooks
   and tree: each thread's own). */
static struct {
    /* Protected by the engine lock, read without it only by a pinned
       reader (I3). */
    struct {
        cct_storage storage;
        uint32_t nnodes;            /* node ids in use: 1..nnodes-1 */
        uint32_t *node_index;       /* open addressing over node ids */
        size_t node_index_mask;
        cct_string **string_index;  /* open addressing over strings */
        size_t string_index_mask;
        size_t nstrings;
        int pins;                   /* readers holding a view (I3) */
        cct_storage *graveyard;     /* storage to free at the last unpin */
        uint32_t compact_at;        /* compact when nnodes reaches this */
        uint64_t compactions;       /* statistics, for the tests */
    } tree;

    /* Protected by the engine lock. */
    struct {
        cct_site_table **tables;    /* the table index (I5), by (code, parent) */
        unsigned int tables_bits;
        size_t ntables;
        size_t tables_bytes;        /* of the tables themselves */
        size_t stale_tables;        /* of dead codes or stale epochs */
        uint32_t tables_gen;        /* bumped each time all are freed */
        cct_code_map **maps;        /* the map index (I6), by code */
        unsigned int maps_bits;
        size_t nmaps;
        size_t maps_bytes;          /* of the maps themselves */
        uint32_t code_epochs[1 << CODE_EPOCH_BITS];  /* bumped as codes die */
        uint64_t cache_misses;      /* statistics, for the tests */
    } framecache;

    /* Protected by the engine lock; written under it, and read without it
       by the GIL holder's hooks, which compare it with their frame's
       generation (I4).  Never 0: 0 marks a reset frame. */
    uint32_t generation;

    /* Protected by the engine lock (I8). */
    struct {
        cct_node_live *live;        /* by node id; room for */
        cct_node_peak *peaks;       /* by node id; room for */
        _PyTraceMalloc_Node *dirty; /* nodes whose totals changed; room for */
        size_t dirty_cap;           /* dirty_cap nodes in both, so that */
        size_t ndirty;              /* neither can fail when a node is used */
        cct_domain_totals *domains; /* open addressing, capacity mask + 1 */
        size_t domains_mask;
        size_t ndomains;
        uint32_t *domains_dirty;    /* indexes into `domains`, room for all */
        size_t ndomains_dirty;
        /* The live traces are the peak now (set when `current` passes
           `peak`): the peak totals must be copied before a decrease. */
        int pending;
        /* start(allocations=True): the allocation totals are reported,
           so compaction keeps the nodes that have some (I9).  Written
           under the lock while tracing is off. */
        int allocations;
        /* Exact mode without allocation totals: a default-domain trace
           changes its node's live record and nothing else, inline (see
           peak_account()).  Set by start() with the two it depends on. */
        int lean;
    } peak;

    /* Bytes of tree, frame caches and peak totals.  Protected by the
       engine lock. */
    size_t memory;

    /* Protected by the engine lock (I1, I2). */
    struct {
        table_entry *entries;
        size_t mask;                /* capacity - 1; a power of 2 */
        size_t used;
        /* Totals over the table and the pool slots */
        size_t current;
        size_t peak;
        size_t ntraces;
        /* The native domain's share of current, and its own peak
           (tracemalloc_native.c) */
        size_t native_current;
        size_t native_peak;
        /* 1 once PyTraceMalloc_Track() has put a default-domain trace in
           the table, whose address may be, or become, a pymalloc block's:
           a new trace in a pool slot must then replace the table's trace
           of the same address (one key, one trace, I2).  Until the next
           clear. */
        int tracked_in_table;
    } store;

    /* The exports' blocks (tracemalloc_store.c, "The exports' blocks"):
       the default domain's blocks that code run with its thread's tracing
       suspended allocated, or took from a free list with a trace, by
       address, with their size; apart from the traces, so that nothing
       reports them, until the program reuses one.  A map of address
       windows.  Protected by the engine lock (I15). */
    struct {
        struct hidden_window **windows; /* the index, by address window */
        size_t mask;                /* its capacity - 1; a power of 2 */
        size_t nwindows;
        struct hidden_window *last; /* the window used last, or NULL */
        size_t used;                /* blocks kept */
        uint64_t retraced;          /* taken back by a re-trace (tests) */
    } hidden;

    /* Sampling (tracemalloc_sample.c).  interval: written under the
       engine lock while tracing is off, read under it (the hooks read
       their own copy, _PyTraceMalloc_sample_interval).  epoch, threads and seed:
       atomics, read by any thread whose countdown runs out. */
    struct {
        uint64_t interval;          /* mean bytes between samples; 0: exact */
        uint32_t epoch;             /* bumped by start() and by a new seed */
        uint64_t threads;           /* threads that drew in this epoch */
        uint64_t seed;
        int seeded;                 /* the seed was set (tests) */
    } sample;

    /* The lock's private words (tracemalloc_lock.c): atomics. */
    struct {
        atomic_flag foreign_lock;   /* among callers without the GIL */
        atomic_int gil_waiting;     /* a GIL holder waits: let it in first */
        int atfork_registered;      /* under the GIL (start()) */
        uint64_t foreign_entries;   /* by foreign_lock: entries without
                                       the GIL, for the tests */
    } lock;

    /* The dump threshold (tracemalloc_dumpover.c):
       when traced memory reaches `next`, `crossed` records it, `next`
       doubles and a pending call asks the main thread to write a
       profile.  next: UINT64_MAX when off.  Protected by the engine
       lock; `next` is also read by totals_add() under it. */
    struct {
        uint64_t next;
        uint64_t crossed;           /* traced memory at the last crossing */
        uint64_t threshold;         /* the crossing that was asked for */
        int pending;                /* a pending call is queued */
        int on_memory_error;        /* dump at the next MemoryError */
    } dumpover;

    /* Context labels (tracemalloc_labels.c).  Written
       and read with the GIL.  var: the ContextVar whose value is the
       current label set (a str, or None), given once by the package;
       task_hook: the package's function that labels a new asyncio task,
       or NULL.  (Whether labels were ever used: labels_used, an atomic of
       tracemalloc_labels.c.) */
    struct {
        PyObject *var;
        PyObject *task_hook;
    } labels;

    /* Fault injection for the tests.  Protected by the engine lock
       (fail_barriers: by lock.foreign_lock). */
    struct {
        int bookkeeping;            /* engine allocations left to fail */
        size_t min_size;            /* of at least this many bytes */
        int barriers;               /* process-wide barriers left to fail */
    } faults;
} tm = {
    .generation = 1,
    .lock = {.foreign_lock = ATOMIC_FLAG_INIT},
    .dumpover = {.next = UINT64_MAX},
};

/* ---- functions the engine's files call in each other ------------------- */

/* The stored form of a trace's node: the node 0 (no frame) is kept as
   UINT32_MAX, which no real node reaches, so that 0 can mark an empty
   pool slot. */
static inline _PyTraceMalloc_Node
stored_node(uint32_t stored)
{
    return stored == UINT32_MAX ? 0 : stored;
}

static inline uint32_t
node_to_stored(_PyTraceMalloc_Node node)
{
    return node ? node : UINT32_MAX;
}

/* tracemalloc_lock.c: enter/leave without the GIL (or not knowing); does
   the calling thread hold the GIL (pointers compared only)? */
extern void _PyTraceMalloc_LockNoGIL(void);
extern void _PyTraceMalloc_UnlockNoGIL(void);
extern void _PyTraceMalloc_LockOwnGIL(void);
extern int _PyTraceMalloc_HoldsGIL(void);
static int engine_lock_init(void);

/* tracemalloc_hooks.c */
static inline int engine_enter(int gil_held, PyThreadState **tstate);
/* engine_enter() for the paths that are not hooks (start/stop, exports,
   the code-freed hook): any thread, with or without a GIL.  Returns the
   side for engine_leave(). */
static inline int
engine_lock(void)
{
    PyThreadState *caller;
    return engine_enter(0, &caller);
}
static inline void engine_leave(int side);

/* tracemalloc_store.c; the _unlocked functions need the engine lock. */
extern void _PyTraceMalloc_StoreClear_unlocked(void);
extern int _PyTraceMalloc_StoreRemove_unlocked(unsigned int domain,
                                               uintptr_t ptr,
                                               _PyTraceMalloc_Node *node,
                                               size_t *size);
extern int _PyTraceMalloc_StoreGet_unlocked(unsigned int domain, uintptr_t ptr,
                                            _PyTraceMalloc_Node *node,
                                            size_t *size);
/* Call VISIT on where every trace keeps its node (stored form). */
extern void _PyTraceMalloc_StoreForEachNode_unlocked(
    void (*visit)(uint32_t *node, void *arg), void *arg);
extern void _PyTraceMalloc_StoreTotals_unlocked(size_t *current,
                                                size_t *peak);
extern void _PyTraceMalloc_StoreResetPeak_unlocked(void);
extern size_t _PyTraceMalloc_StoreMemory_unlocked(void);
static inline int store_add(unsigned int domain, uintptr_t ptr, size_t size,
                            _PyTraceMalloc_Node node, int pooled, int block);
/* Where store_remove() looks for a trace of the default domain: the pool
   slot first (the mem and obj domains), the table first (the raw domain's
   blocks come from malloc()), or only the table (a caller without the GIL,
   which may not read pymalloc's pools: only the raw domain's hooks get
   there, whose blocks are never pymalloc's). */
enum { STORE_POOL_FIRST, STORE_TABLE_FIRST, STORE_TABLE_ONLY };
static inline int store_remove(unsigned int domain, uintptr_t ptr,
                               _PyTraceMalloc_Node *node, size_t *size,
                               int where, int block);
static int store_track(unsigned int domain, uintptr_t ptr, size_t size,
                       _PyTraceMalloc_Node node);
static int store_get_table(unsigned int domain, uintptr_t ptr,
                           _PyTraceMalloc_Node *node, size_t *size);
/* The exports' blocks (tm.hidden), under the engine lock. */
static void hidden_add(uintptr_t ptr, size_t size);
static int hidden_take(uintptr_t ptr, size_t *size);
static void hidden_clear(void);
static size_t hidden_memory(void);

/* tracemalloc_tree.c; the _unlocked functions need the engine lock. */
extern uint32_t _PyTraceMalloc_NodeCount(void);
/* Pin VIEW (I3); a reader inside the engine lock needs no pin. */
extern void _PyTraceMalloc_CCTPin_unlocked(_PyTraceMalloc_CCTView *view);
extern void _PyTraceMalloc_CCTView_unlocked(_PyTraceMalloc_CCTView *view);
static inline cct_node *node_at(_PyTraceMalloc_Node id);
static inline uint32_t node_hash(_PyTraceMalloc_Node parent,
                                 const cct_string *filename, int lineno);
static _PyTraceMalloc_Node node_intern(_PyTraceMalloc_Node parent,
                                       const cct_string *filename,
                                       int lineno, int *nomem);
static const cct_string *string_intern(PyObject *filename, int *nomem);
static const cct_string *string_intern_ex(PyObject *str, int is_label,
                                          int *nomem);
static _PyTraceMalloc_Node thread_root(PyThreadState *tstate, int *nomem);
static void tree_free_unused(uint32_t nnodes);
static void tree_reset(void);
static size_t tree_memory(void);

/* tracemalloc_framecache.c */
static inline _PyTraceMalloc_Node current_node(PyThreadState *tstate);
static int framecache_start(void);
static void framecache_release(void);
static void cache_clear(uint32_t live_nodes);
static size_t framecache_memory(void);
static void generation_bump(void);

/* tracemalloc_labels.c */
static _PyTraceMalloc_Node label_parent(PyThreadState *tstate,
                                        _PyTraceMalloc_Node parent);
static inline int labels_in_use(void);
static inline int labels_unknown(PyThreadState *tstate);

/* tracemalloc_peak.c */
static int peak_reserve(size_t need);
static inline void peak_node_created(_PyTraceMalloc_Node id);
static inline void peak_before_decrease(void);
static inline int peak_account_add(unsigned int domain,
                                   _PyTraceMalloc_Node node, size_t size);
static inline void peak_account_remove(unsigned int domain,
                                       _PyTraceMalloc_Node node, size_t size);
static void dumpover_crossed(void);
static inline void peak_account_alloc(_PyTraceMalloc_Node node, size_t size);
static inline void peak_account_move(_PyTraceMalloc_Node from,
                                     _PyTraceMalloc_Node to, size_t size);
static void peak_clear(void);
static void peak_release(void);
static size_t peak_memory(void);
static int domain_totals_alloc(size_t cap, cct_domain_totals **table,
                               uint32_t **dirty);
static void domain_totals_rebuild_into(cct_domain_totals *table,
                                       uint32_t *dirty, size_t cap);

/* tracemalloc_sample.c */
static inline size_t acct_size(size_t size);
static inline uint64_t acct_count(size_t size);
static inline void sample_filter_add(uintptr_t ptr);
static inline void sample_filter_remove(uintptr_t ptr);
static void sample_after_fork(void);

/* tracemalloc_native.c: native tracing is on (the interposers' branch) */
static int native_on;
/* tracemalloc_nativeframes.c: a capture of the C stack, the return
   addresses innermost first, without the engine's own frames; the mode
   (0, or _PyTraceMalloc_NATIVE_FRAMES_*) and whether the Python domains'
   traces carry their C stack too (nf_all, read by trace_add()). */
#define NF_MAX 64
typedef struct nf_stack {
    int n;
    uintptr_t pcs[NF_MAX];
} nf_stack;
static int nf_mode;
static int nf_all;
static void nf_capture(nf_stack *stack);
static _PyTraceMalloc_Node nf_intern_stack(PyThreadState *tstate,
                                           _PyTraceMalloc_Node node,
                                           const nf_stack *stack);
static void nf_after_fork(void);

/* tracemalloc_compact.c */
static inline void compact_if_due(void);
static void compact_schedule(uint32_t live_nodes, size_t ntraces);
static void engine_recount_memory(void);

#endif /* !Py_TRACEMALLOC_ENGINE_H */
