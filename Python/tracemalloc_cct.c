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
 * published under the lock, can be read without it.  Everything else here is
 * protected by the engine lock.
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
    char data[];
} cct_string;

typedef struct {
    _PyTraceMalloc_Node parent;
    int lineno;
    uint32_t depth;             /* frames on the path, this one included */
    uint32_t hash;
    const cct_string *filename; /* NULL: not a str, reported '<unknown>' */
} cct_node;

#define CHUNK0_BITS 10
#define NCHUNKS _PyTraceMalloc_CCT_NCHUNKS             /* 1024 * (2**22 - 1) nodes at most */
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
    uint32_t epoch;
} cct_cache_entry;

#define CACHE_BITS 13

uint32_t _PyTraceMalloc_cct_generation = 1;

static struct {
    /* Protected by the engine lock */
    cct_storage storage;
    uint32_t nnodes;            /* node ids in use: 1..nnodes-1 */
    uint32_t *node_index;       /* open addressing over node ids */
    uint32_t node_index_mask;
    cct_string **string_index;  /* open addressing over strings */
    size_t string_index_mask;
    size_t nstrings;
    cct_cache_entry *cache;
    uint32_t epoch;             /* bumped when a code object dies */
    size_t memory;
    /* Protected by the GIL */
    int pins;
    cct_storage *graveyard;
} cct;

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
    return 0;
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
string_index_grow(void)
{
    size_t cap = cct.string_index ? (cct.string_index_mask + 1) * 2 : 64;
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

/* The interned copy of FILENAME; NULL with *nomem set on failure, NULL
   alone when FILENAME is not a ready str. */
static const cct_string *
string_intern(PyObject *filename, int *nomem)
{
    if (filename == NULL || !PyUnicode_CheckExact(filename)
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

static inline uint32_t
node_hash(_PyTraceMalloc_Node parent, const cct_string *filename, int lineno)
{
    uint64_t x = (uint64_t)parent * UINT64_C(0x9E3779B97F4A7C15);
    x ^= (uint64_t)(uintptr_t)filename * UINT64_C(0xC2B2AE3D27D4EB4F);
    x ^= (uint64_t)(uint32_t)lineno * UINT64_C(0x165667B19E3779F9);
    return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

static int
node_index_grow(void)
{
    uint32_t cap = cct.node_index ? (cct.node_index_mask + 1) * 2 : 1024;
    uint32_t *index = _PyTraceMalloc_RawAlloc(cap * sizeof(*index), 1);
    if (index == NULL) {
        return -1;
    }
    for (uint32_t id = 1; id < cct.nnodes; id++) {
        uint32_t i = node_at(id)->hash & (cap - 1);
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

/* The node (parent, filename, lineno), created if needed; 0 with *nomem
   set on failure. */
static _PyTraceMalloc_Node
node_intern(_PyTraceMalloc_Node parent, const cct_string *filename,
            int lineno, int *nomem)
{
    uint32_t hash = node_hash(parent, filename, lineno);
    if (cct.node_index != NULL) {
        uint32_t i = hash & cct.node_index_mask;
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
        || (cct.nnodes + 1) * 2 > cct.node_index_mask + 1) {
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
    n->depth = parent ? node_at(parent)->depth + 1 : 1;
    n->hash = hash;
    n->filename = filename;
    cct.nnodes++;
    uint32_t i = hash & cct.node_index_mask;
    while (cct.node_index[i] != 0) {
        i = (i + 1) & cct.node_index_mask;
    }
    cct.node_index[i] = id;
    return id;
}

/* ---- frames ------------------------------------------------------------- */

/* Slow path of frame_node(): decode the line and intern the node. */
Py_NO_INLINE static _PyTraceMalloc_Node
frame_node_miss(cct_cache_entry *e, _PyTraceMalloc_Node parent,
                PyCodeObject *code, int lasti, int *nomem)
{
    int lineno = PyCode_Addr2Line(code, lasti * (int)sizeof(_Py_CODEUNIT));
    if (lineno < 0) {
        lineno = 0;
    }
    const cct_string *filename = string_intern(code->co_filename, nomem);
    if (*nomem) {
        return 0;
    }
    _PyTraceMalloc_Node node = node_intern(parent, filename, lineno, nomem);
    if (*nomem) {
        return 0;
    }
    e->code = code;
    e->parent = parent;
    e->lasti = lasti;
    e->node = node;
    e->epoch = cct.epoch;
    return node;
}

/* Hot path: the node of FRAME at its current instruction, its caller's
   node being PARENT.  Cost: a hash and one compare on a hit. */
static inline _PyTraceMalloc_Node
frame_node(_PyTraceMalloc_Node parent, _PyInterpreterFrame *frame,
           int *nomem)
{
    PyCodeObject *code = frame->f_code;
    int lasti = _PyInterpreterFrame_LASTI(frame);
    uint64_t x = ((uint64_t)(uintptr_t)code >> 4) ^ ((uint64_t)parent << 20)
                 ^ ((uint64_t)(uint32_t)lasti << 40);
    x *= UINT64_C(0x9E3779B97F4A7C15);
    cct_cache_entry *e = &cct.cache[x >> (64 - CACHE_BITS)];
    if (e->code == code && e->parent == parent && e->lasti == lasti
        && e->epoch == cct.epoch) {
        return e->node;
    }
    return frame_node_miss(e, parent, code, lasti, nomem);
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
current_node_slow(_PyInterpreterFrame *frame, uint64_t generation)
{
    int nomem = 0;
    _PyInterpreterFrame *inline_pending[PENDING_INLINE];
    _PyInterpreterFrame **pending = inline_pending;
    size_t npending = 0, cap = PENDING_INLINE;
    _PyInterpreterFrame *f = frame;
    _PyTraceMalloc_Node node = 0;
    while (f != NULL) {
        if ((f->tracemalloc_parent & ~(uint64_t)UINT32_MAX) == generation) {
            node = frame_node((uint32_t)f->tracemalloc_parent, f, &nomem);
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
    while (!nomem && npending > 0) {
        f = pending[--npending];
        f->tracemalloc_parent = generation | node;
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
    _PyInterpreterFrame *frame = skip_incomplete(
        tstate->cframe->current_frame);
    if (frame == NULL) {
        return 0;
    }
    uint64_t generation = (uint64_t)_PyTraceMalloc_cct_generation << 32;
    if ((frame->tracemalloc_parent & ~(uint64_t)UINT32_MAX) != generation) {
        return current_node_slow(frame, generation);
    }
    int nomem = 0;
    _PyTraceMalloc_Node node = frame_node((uint32_t)frame->tracemalloc_parent,
                                          frame, &nomem);
    return nomem ? UINT32_MAX : node;
}

void
_PyTraceMalloc_CodeFreed(void *code)
{
    (void)code;
    _PyTraceMalloc_Lock();
    cct.epoch++;
    _PyTraceMalloc_Unlock();
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
    cct.memory = 0;
    if (cct.cache != NULL) {
        /* Kept, emptied: clear_traces() cannot fail for want of memory,
           and tracing goes on with a working cache. */
        size_t size = sizeof(cct_cache_entry) << CACHE_BITS;
        memset(cct.cache, 0, size);
        cct.memory = size;
    }
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
        size_t size = sizeof(cct_cache_entry) << CACHE_BITS;
        cct.cache = _PyTraceMalloc_RawAlloc(size, 1);
        if (cct.cache == NULL) {
            return -1;
        }
        cct.memory += size;
    }
    cct.nnodes = 1;
    return 0;
}

/* Give back the cache too (stop()). */
void
_PyTraceMalloc_CCTRelease_unlocked(void)
{
    _PyTraceMalloc_CCTReset_unlocked();
    free(cct.cache);
    cct.cache = NULL;
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

void
_PyTraceMalloc_CCTView_unlocked(_PyTraceMalloc_CCTView *view)
{
    memcpy(view->chunks, cct.storage.chunks, sizeof(view->chunks));
    view->nnodes = cct.nnodes;
}

void
_PyTraceMalloc_CCTPin(_PyTraceMalloc_CCTView *view)
{
    _PyTraceMalloc_Lock();
    _PyTraceMalloc_CCTView_unlocked(view);
    _PyTraceMalloc_Unlock();
    cct.pins++;
}

void
_PyTraceMalloc_CCTUnpin(void)
{
    assert(cct.pins > 0);
    if (--cct.pins == 0) {
        cct_storage *dead = cct.graveyard;
        cct.graveyard = NULL;
        while (dead != NULL) {
            cct_storage *next = dead->next_dead;
            storage_free(dead);
            free(dead);
            dead = next;
        }
    }
}
