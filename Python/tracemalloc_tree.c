/* The call-context tree (cct): interned call paths.
 *
 * A traceback is a node: (parent node, filename, line).  Nodes are interned,
 * so one id names one call path, and a trace stores only that 32-bit id.
 * Nodes own a copy of the filename's characters (interned here too), hold
 * no Python reference, and can be made without the GIL.  Each thread's
 * paths hang from a root node of its own.  Node storage never moves, so a
 * pinned reader reads nodes without the lock (I3).  Part of the engine's
 * translation unit (see tracemalloc_engine.h).
 */

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
    return node_in(tm.tree.storage.chunks, id);
}

/* One past the last node id of chunk K. */
static inline size_t
chunk_end_id(int k)
{
    return ((size_t)1 << (CHUNK0_BITS + k + 1)) - ((size_t)1 << CHUNK0_BITS);
}

static int
node_reserve(_PyTraceMalloc_Node id)
{
    uint32_t v = id + (1u << CHUNK0_BITS);
    int k = 31 - __builtin_clz(v) - CHUNK0_BITS;
    if (tm.tree.storage.chunks[k] == NULL) {
        size_t n = (size_t)1 << (CHUNK0_BITS + k);
        tm.tree.storage.chunks[k] = _PyTraceMalloc_RawAlloc(n * sizeof(cct_node),
                                                        1);
        if (tm.tree.storage.chunks[k] == NULL) {
            return -1;
        }
        tm.memory += n * sizeof(cct_node);
    }
    /* The dirty list has room for every node id the chunks hold, so that
       marking a node dirty never fails. */
    return peak_reserve(chunk_end_id(k));
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

/* Put every interned string into INDEX, CAP empty entries. */
static void
string_index_fill(cct_string **index, size_t cap)
{
    for (cct_string *s = tm.tree.storage.strings; s != NULL; s = s->next) {
        size_t i = (size_t)s->hash & (cap - 1);
        while (index[i] != NULL) {
            i = (i + 1) & (cap - 1);
        }
        index[i] = s;
    }
}

static int
string_index_rebuild(size_t cap)
{
    cct_string **index = _PyTraceMalloc_RawAlloc(cap * sizeof(*index), 1);
    if (index == NULL) {
        return -1;
    }
    string_index_fill(index, cap);
    if (tm.tree.string_index) {
        tm.memory -= (tm.tree.string_index_mask + 1) * sizeof(*index);
        free(tm.tree.string_index);
    }
    tm.memory += cap * sizeof(*index);
    tm.tree.string_index = index;
    tm.tree.string_index_mask = cap - 1;
    return 0;
}

static int
string_index_grow(void)
{
    return string_index_rebuild(
        tm.tree.string_index ? (tm.tree.string_index_mask + 1) * 2 : 64);
}

/* The interned copy of FILENAME (a str or a str subclass, like upstream);
   NULL with *nomem set on failure, NULL alone when FILENAME is not a ready
   str. */
static const cct_string *
string_intern(PyObject *filename, int *nomem)
{
    return string_intern_ex(filename, 0, nomem);
}

/* string_intern() of a filename (IS_LABEL 0) or of a label set (1): a
   label set and a filename of the same characters are two strings. */
static const cct_string *
string_intern_ex(PyObject *filename, int is_label, int *nomem)
{
    if (filename == NULL || !PyUnicode_Check(filename)
        || !PyUnicode_IS_READY(filename)) {
        return NULL;
    }
    int kind = PyUnicode_KIND(filename);
    Py_ssize_t length = PyUnicode_GET_LENGTH(filename);
    const void *data = PyUnicode_DATA(filename);
    Py_ssize_t nbytes = length * kind;
    Py_hash_t hash = string_hash(data, nbytes) ^ is_label;
    if (tm.tree.string_index != NULL) {
        size_t i = (size_t)hash & tm.tree.string_index_mask;
        for (cct_string *s; (s = tm.tree.string_index[i]) != NULL;
             i = (i + 1) & tm.tree.string_index_mask) {
            if (s->hash == hash && s->kind == kind && s->length == length
                && s->is_label == is_label
                && memcmp(s->data, data, nbytes) == 0) {
                return s;
            }
        }
    }
    if (tm.tree.string_index == NULL
        || (tm.tree.nstrings + 1) * 2 > tm.tree.string_index_mask + 1) {
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
    s->is_label = (uint8_t)is_label;
    s->is_native = 0;
    memcpy(s->data, data, nbytes);
    s->next = tm.tree.storage.strings;
    tm.tree.storage.strings = s;
    tm.tree.nstrings++;
    tm.memory += sizeof(cct_string) + nbytes;
    size_t i = (size_t)hash & tm.tree.string_index_mask;
    while (tm.tree.string_index[i] != NULL) {
        i = (i + 1) & tm.tree.string_index_mask;
    }
    tm.tree.string_index[i] = s;
    return s;
}

/* ---- nodes -------------------------------------------------------------- */

/* The filename of every thread's root node (I12), made on the slow path
   only, when a thread's bottom frame is linked. */
static cct_string thread_root_marker;

static inline uint32_t
node_hash(_PyTraceMalloc_Node parent, const cct_string *filename, int lineno)
{
    uint64_t x = (uint64_t)parent * UINT64_C(0x9E3779B97F4A7C15);
    x ^= (uint64_t)(uintptr_t)filename * UINT64_C(0xC2B2AE3D27D4EB4F);
    x ^= (uint64_t)(uint32_t)lineno * UINT64_C(0x165667B19E3779F9);
    return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

/* Put every node id into INDEX, CAP empty entries. */
static void
node_index_fill(uint32_t *index, size_t cap)
{
    for (uint32_t id = 1; id < tm.tree.nnodes; id++) {
        const cct_node *n = node_at(id);
        size_t i = node_hash(n->parent, n->filename, n->lineno) & (cap - 1);
        while (index[i] != 0) {
            i = (i + 1) & (cap - 1);
        }
        index[i] = id;
    }
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
    node_index_fill(index, cap);
    if (tm.tree.node_index) {
        tm.memory -= (tm.tree.node_index_mask + 1) * sizeof(*index);
        free(tm.tree.node_index);
    }
    tm.memory += cap * sizeof(*index);
    tm.tree.node_index = index;
    tm.tree.node_index_mask = cap - 1;
    return 0;
}

static int
node_index_grow(void)
{
    return node_index_rebuild(
        tm.tree.node_index ? (tm.tree.node_index_mask + 1) * 2 : 1024);
}

/* The node (parent, filename, lineno), created if needed; 0 with *nomem
   set on failure. */
static _PyTraceMalloc_Node
node_intern(_PyTraceMalloc_Node parent, const cct_string *filename,
            int lineno, int *nomem)
{
    uint32_t hash = node_hash(parent, filename, lineno);
    if (tm.tree.node_index != NULL) {
        size_t i = hash & tm.tree.node_index_mask;
        for (uint32_t id; (id = tm.tree.node_index[i]) != 0;
             i = (i + 1) & tm.tree.node_index_mask) {
            cct_node *n = node_at(id);
            if (n->parent == parent && n->filename == filename
                && n->lineno == lineno) {
                return id;
            }
        }
    }
    if (tm.tree.nnodes >= NODE_LIMIT) {
        *nomem = 1;
        return 0;
    }
    if (tm.tree.node_index == NULL
        || ((size_t)tm.tree.nnodes + 1) * 2 > tm.tree.node_index_mask + 1) {
        if (node_index_grow() < 0) {
            *nomem = 1;
            return 0;
        }
    }
    _PyTraceMalloc_Node id = tm.tree.nnodes;
    if (node_reserve(id) < 0) {
        *nomem = 1;
        return 0;
    }
    cct_node *n = node_at(id);
    n->parent = parent;
    n->lineno = lineno;
    if (filename != NULL && filename->is_label) {
        /* A label node counts no frame, and is its own label (I13). */
        n->depth = parent ? node_at(parent)->depth : 0;
        n->label = id;
    }
    else if (filename != NULL && filename->is_native) {
        /* A native node counts no frame, and has its parent's label
           (NF2). */
        n->depth = parent ? node_at(parent)->depth : 0;
        n->label = parent ? node_at(parent)->label : 0;
    }
    else {
        n->depth = parent ? node_at(parent)->depth + 1
                          : (filename == &thread_root_marker ? 0 : 1);
        n->label = parent ? node_at(parent)->label : 0;
    }
    n->filename = filename;
    peak_node_created(id);
    tm.tree.nnodes++;
    size_t i = hash & tm.tree.node_index_mask;
    while (tm.tree.node_index[i] != 0) {
        i = (i + 1) & tm.tree.node_index_mask;
    }
    tm.tree.node_index[i] = id;
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
        && thread_root_cache.generation == tm.generation) {
        return thread_root_cache.node;
    }
    /* Linux thread ids fit in an int. */
    int tid = (int)(base_this_thread_native_id(tstate) & INT_MAX);
    _PyTraceMalloc_Node node = node_intern(0, &thread_root_marker, tid,
                                           nomem);
    if (!*nomem) {
        thread_root_cache.tstate = tstate;
        thread_root_cache.generation = tm.generation;
        thread_root_cache.node = node;
    }
    return node;
}

static size_t
chunk_first_id(int k)
{
    return ((size_t)1 << (CHUNK0_BITS + k)) - ((size_t)1 << CHUNK0_BITS);
}

/* Bytes of node chunks, filename copies and indexes. */
static size_t
tree_memory(void)
{
    size_t memory = 0;
    for (int k = 0; k < NCHUNKS; k++) {
        if (tm.tree.storage.chunks[k] != NULL) {
            memory += ((size_t)1 << (CHUNK0_BITS + k)) * sizeof(cct_node);
        }
    }
    for (cct_string *s = tm.tree.storage.strings; s != NULL; s = s->next) {
        memory += sizeof(cct_string) + (size_t)s->length * s->kind;
    }
    if (tm.tree.node_index != NULL) {
        memory += (tm.tree.node_index_mask + 1) * sizeof(uint32_t);
    }
    if (tm.tree.string_index != NULL) {
        memory += (tm.tree.string_index_mask + 1) * sizeof(cct_string *);
    }
    return memory;
}

static void
string_index_rehash_in_place(void)
{
    if (tm.tree.string_index == NULL) {
        return;
    }
    size_t cap = tm.tree.string_index_mask + 1;
    memset(tm.tree.string_index, 0, cap * sizeof(*tm.tree.string_index));
    string_index_fill(tm.tree.string_index, cap);
}

static void
node_index_rehash_in_place(void)
{
    if (tm.tree.node_index == NULL) {
        return;
    }
    size_t cap = tm.tree.node_index_mask + 1;
    memset(tm.tree.node_index, 0, cap * sizeof(*tm.tree.node_index));
    node_index_fill(tm.tree.node_index, cap);
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

/* Forget every node: ids restart at 1.  Whoever holds ids is reset with
   the tree (see engine_reset_unlocked()). */
static void
tree_reset(void)
{
    if (tm.tree.pins > 0) {
        /* A pinned reader still reads this storage (I3): hand it to the
           graveyard, the last unpin frees it. */
        cct_storage *dead = malloc(sizeof(*dead));
        if (dead != NULL) {
            *dead = tm.tree.storage;
            dead->next_dead = tm.tree.graveyard;
            tm.tree.graveyard = dead;
        }
        /* else: leak rather than free under a reader */
    }
    else {
        storage_free(&tm.tree.storage);
    }
    memset(&tm.tree.storage, 0, sizeof(tm.tree.storage));
    free(tm.tree.node_index);
    free(tm.tree.string_index);
    tm.tree.node_index = NULL;
    tm.tree.node_index_mask = 0;
    tm.tree.string_index = NULL;
    tm.tree.string_index_mask = 0;
    tm.tree.nstrings = 0;
    tm.tree.nnodes = 1;             /* 0 is the empty traceback */
}

uint32_t
_PyTraceMalloc_NodeCount(void)
{
    return tm.tree.nnodes;
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
    /* A native trace's C frames show no Python frame: its traceback is
       its Python position's (NF2). */
    while (n->filename != NULL && n->filename->is_native) {
        node = n->parent;
        if (node == 0) {
            return 0;
        }
        n = node_in((cct_node *const *)view->chunks, node);
    }
    if (n->depth == 0) {
        return 0;       /* a thread's root: the empty traceback */
    }
    /* Label nodes show no frame: the parent is the nearest frame (I13). */
    _PyTraceMalloc_Node up = n->parent;
    while (up != 0) {
        const cct_node *p = node_in((cct_node *const *)view->chunks, up);
        if (p->filename == NULL || !p->filename->is_label) {
            break;
        }
        up = p->parent;
    }
    *parent = up;
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
        if (n->filename == &thread_root_marker) {
            return (unsigned long)n->lineno;
        }
        node = n->parent;
    }
    return 0;
}

/* The label set of NODE's path (its nearest label node): 1 and its
   characters, or 0 when the path has none or an empty one (I13). */
int
_PyTraceMalloc_NodeLabel(const _PyTraceMalloc_CCTView *view,
                         _PyTraceMalloc_Node node, const void **data,
                         int *kind, Py_ssize_t *length)
{
    if (node == 0) {
        return 0;
    }
    const cct_node *n = node_in((cct_node *const *)view->chunks, node);
    if (n->label == 0) {
        return 0;
    }
    const cct_string *s = node_in((cct_node *const *)view->chunks,
                                  n->label)->filename;
    if (s == NULL || s->length == 0) {
        return 0;
    }
    *data = s->data;
    *kind = s->kind;
    *length = s->length;
    return 1;
}

void
_PyTraceMalloc_CCTView_unlocked(_PyTraceMalloc_CCTView *view)
{
    memcpy(view->chunks, tm.tree.storage.chunks, sizeof(view->chunks));
    view->nnodes = tm.tree.nnodes;
    view->sample = _PyTraceMalloc_TRACING() ? tm.sample.interval : 0;
}

/* Keep node storage readable, and ids stable, until the matching unpin
   (I3). */
void
_PyTraceMalloc_CCTPin_unlocked(_PyTraceMalloc_CCTView *view)
{
    _PyTraceMalloc_CCTView_unlocked(view);
    tm.tree.pins++;
}

void
_PyTraceMalloc_CCTUnpin(void)
{
    int side = engine_lock();
    assert(tm.tree.pins > 0);
    cct_storage *dead = NULL;
    if (--tm.tree.pins == 0) {
        dead = tm.tree.graveyard;
        tm.tree.graveyard = NULL;
    }
    engine_leave(side);
    while (dead != NULL) {
        cct_storage *next = dead->next_dead;
        storage_free(dead);
        free(dead);
        dead = next;
    }
}

/* After compaction renumbered the nodes below NNODES (already the node
   count): give back the chunks no node uses, the filenames no node names
   (compaction marked the others), and rebuild the indexes smaller.  If
   that fails for want of memory the old, larger indexes are rebuilt in
   place instead (their memory is already ours). */
static void
tree_free_unused(uint32_t nnodes)
{
    for (int k = 1; k < NCHUNKS; k++) {
        if (tm.tree.storage.chunks[k] != NULL && chunk_first_id(k) >= nnodes) {
            free(tm.tree.storage.chunks[k]);
            tm.tree.storage.chunks[k] = NULL;
        }
    }
    cct_string **link = &tm.tree.storage.strings;
    tm.tree.nstrings = 0;
    while (*link != NULL) {
        cct_string *s = *link;
        if (s->marked) {
            s->marked = 0;
            tm.tree.nstrings++;
            link = &s->next;
        }
        else {
            *link = s->next;
            free(s);
        }
    }
    size_t string_cap = 64;
    while (string_cap < tm.tree.nstrings * 2 + 2) {
        string_cap *= 2;
    }
    if (string_index_rebuild(string_cap) < 0) {
        string_index_rehash_in_place();
    }
    size_t node_cap = 1024;
    while (node_cap < (size_t)nnodes * 2 + 2) {
        node_cap *= 2;
    }
    if (node_index_rebuild(node_cap) < 0) {
        node_index_rehash_in_place();
    }
}
