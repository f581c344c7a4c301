/* The frame links: from the current frame to its node in two loads.
 *
 * Each _PyInterpreterFrame links to its caller's node (tracemalloc_parent,
 * I4) and to the site table of its code under that node
 * (tracemalloc_last, I7).  A site table (I5) holds the node of each line
 * of the code under that parent, indexed through the code's line map
 * (I6), the code's line table decoded once.  A frame is linked when it
 * first allocates (its caller's table gives the parent, the table index
 * its own table); a missing node is interned into its table once.  Part
 * of the engine's translation unit (see tracemalloc_engine.h).
 */

static inline size_t
code_epoch_slot(const PyCodeObject *code)
{
    /* Code objects are GC objects, 16-byte aligned, at least 200 bytes
       apart: the address bits above 4 spread them well enough, without a
       multiply on the hot path. */
    return ((uintptr_t)code >> 4) & ((1 << CODE_EPOCH_BITS) - 1);
}

/* The key of the table index: CODE under PARENT, mixed into 64 bits;
   callers keep its top bits.  The parent is mixed in by a multiplication
   of its own: recursion makes keys that differ only by consecutive parent
   ids, which this spreads evenly over the index. */
static inline uint64_t
site_hash(const PyCodeObject *code, _PyTraceMalloc_Node parent)
{
    const uint64_t k = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t x = (uint64_t)(uintptr_t)code >> 4;
    return ((x * k) ^ parent) * k;
}

/* FRAME's current instruction as an index of its table's `at`: the
   instruction's offset in bytes from the start of the code object, in
   code units.  The map's unit 0 is the offset -1, so `at` points before
   the map's idx by the offset of the first instruction, less one unit. */
static inline size_t
frame_unit(const _PyInterpreterFrame *frame)
{
    return (size_t)((const char *)base_frame_instr(frame)
                    - (const char *)base_frame_code(frame))
           / sizeof(_Py_CODEUNIT);
}

static inline size_t
first_unit(PyCodeObject *code)
{
    return (size_t)((const char *)base_code_first_instr(code)
                    - (const char *)code) / sizeof(_Py_CODEUNIT);
}

/* The line of CODE at instruction offset LASTI, decoded from the table's
   start (a line map's decode entry: rare). */
static int
line_decoded(PyCodeObject *code, int lasti)
{
    if (lasti < 0) {
        return base_code_firstlineno(code);   /* like PyCode_Addr2Line() */
    }
    PyCodeAddressRange bounds;
    _PyCode_InitAddressRange(code, &bounds);
    int line = _PyCode_CheckLineNumber(lasti * (int)sizeof(_Py_CODEUNIT),
                                       &bounds);
    return line < 0 ? 0 : line;
}

/* ---- the line maps (I6) ------------------------------------------------- */

static inline size_t
map_bucket(const PyCodeObject *code)
{
    const uint64_t k = UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)((((uint64_t)(uintptr_t)code >> 4) * k)
                    >> (64 - tm.framecache.maps_bits));
}

/* Double the map index when it has more maps than buckets (without
   memory, the chains get longer). */
static void
maps_grow(void)
{
    unsigned int bits = tm.framecache.maps_bits + 1;
    size_t n = (size_t)1 << bits;
    cct_code_map **maps = _PyTraceMalloc_RawAlloc(n * sizeof(*maps), 1);
    if (maps == NULL) {
        return;
    }
    size_t old = (size_t)1 << tm.framecache.maps_bits;
    cct_code_map **prev = tm.framecache.maps;
    tm.framecache.maps = maps;
    tm.framecache.maps_bits = bits;
    for (size_t i = 0; i < old; i++) {
        cct_code_map *m = prev[i];
        while (m != NULL) {
            cct_code_map *next = m->next;
            size_t b = map_bucket(m->code);
            m->next = maps[b];
            maps[b] = m;
            m = next;
        }
    }
    free(prev);
    tm.memory += (n - old) * sizeof(*maps);
}

/* Decode CODE's line table into a new map; NULL without memory.  Decoded
   forwards from the start, as _PyCode_CheckLineNumber() does, so that
   each unit gets the line that a decoding from the start finds, also in a
   table the compiler did not write (one given to code.replace()). */
static cct_code_map *
map_build(PyCodeObject *code)
{
    PyCodeAddressRange b;
    _PyCode_InitAddressRange(code, &b);
    size_t nunits = (size_t)(_PyCode_NBYTES(code) / sizeof(_Py_CODEUNIT));
    /* Runs: count them first, for one allocation. */
    uint32_t counted = 1;                 /* run 0: the offset -1 */
    int last = INT_MIN;
    while (_PyLineTable_NextAddressRange(&b)) {
        if (b.ar_end > b.ar_start && b.ar_line != last) {
            counted++;
            last = b.ar_line;
        }
    }
    /* After the runs, the entry of the units decoded at each use: those
       the table does not reach (one shorter than its code), and the runs
       past MAP_DECODE. */
    uint32_t decode = counted < MAP_DECODE ? counted : MAP_DECODE;
    uint32_t nruns = decode + 1;
    size_t bytes = sizeof(cct_code_map) + (nunits + 1) * sizeof(uint16_t);
    bytes = (bytes + sizeof(int) - 1) / sizeof(int) * sizeof(int);
    size_t lines_at = bytes;
    bytes += nruns * sizeof(int);
    cct_code_map *m = _PyTraceMalloc_RawAlloc(bytes, 0);
    if (m == NULL) {
        return NULL;
    }
    m->next = NULL;
    m->code = code;
    m->bytes = bytes;
    m->ntables = 0;
    m->tables_gen = 0;
    m->lines = (int *)((char *)m + lines_at);
    m->nruns = nruns;
    m->lines[0] = base_code_firstlineno(code);
    m->lines[decode] = 0;
    m->idx[0] = 0;
    for (size_t u = 1; u <= nunits; u++) {
        m->idx[u] = (uint16_t)decode;
    }
    _PyCode_InitAddressRange(code, &b);
    uint32_t run = 0;
    last = INT_MIN;
    while (_PyLineTable_NextAddressRange(&b)) {
        if (b.ar_end <= b.ar_start) {
            continue;
        }
        if (b.ar_line != last) {
            last = b.ar_line;
            if (run + 1 < decode) {
                run++;
                m->lines[run] = b.ar_line < 0 ? 0 : b.ar_line;
            }
            else {
                run = decode;
            }
        }
        size_t end = (size_t)b.ar_end / sizeof(_Py_CODEUNIT);
        for (size_t u = (size_t)b.ar_start / sizeof(_Py_CODEUNIT);
             u < end && u < nunits; u++) {
            m->idx[u + 1] = (uint16_t)run;
        }
    }
    return m;
}

/* CODE's line map, made if it has none; NULL without memory. */
static const cct_code_map *
map_get(PyCodeObject *code)
{
    size_t b = map_bucket(code);
    for (cct_code_map *m = tm.framecache.maps[b]; m != NULL; m = m->next) {
        if (m->code == code) {
            return m;
        }
    }
    cct_code_map *m = map_build(code);
    if (m == NULL) {
        return NULL;
    }
    if (tm.framecache.nmaps >= ((size_t)1 << tm.framecache.maps_bits)) {
        maps_grow();
        b = map_bucket(code);
    }
    m->next = tm.framecache.maps[b];
    tm.framecache.maps[b] = m;
    tm.framecache.nmaps++;
    tm.framecache.maps_bytes += m->bytes;
    tm.memory += m->bytes;
    return m;
}

/* CODE dies: its map goes with it, and its tables are stale. */
static void
map_drop(const PyCodeObject *code)
{
    if (tm.framecache.maps == NULL) {
        return;
    }
    cct_code_map **link = &tm.framecache.maps[map_bucket(code)];
    for (cct_code_map *m = *link; m != NULL; link = &m->next, m = m->next) {
        if (m->code == code) {
            if (m->tables_gen == tm.framecache.tables_gen) {
                tm.framecache.stale_tables += m->ntables;
            }
            *link = m->next;
            tm.framecache.nmaps--;
            tm.framecache.maps_bytes -= m->bytes;
            tm.memory -= m->bytes;
            free(m);
            return;
        }
    }
}

/* ---- the site tables (I5) ----------------------------------------------- */

static inline size_t
cache_entries(void)
{
    return (size_t)1 << tm.framecache.tables_bits;
}

static int
tables_resize(unsigned int bits)
{
    size_t n = (size_t)1 << bits;
    cct_site_table **tables = _PyTraceMalloc_RawAlloc(n * sizeof(*tables),
                                                      1);
    if (tables == NULL) {
        return -1;
    }
    cct_site_table **prev = tm.framecache.tables;
    size_t old = prev != NULL ? cache_entries() : 0;
    tm.framecache.tables = tables;
    tm.framecache.tables_bits = bits;
    for (size_t i = 0; i < old; i++) {
        cct_site_table *t = prev[i];
        while (t != NULL) {
            cct_site_table *next = t->next;
            size_t b = site_hash(t->code, t->parent) >> (64 - bits);
            t->next = tables[b];
            tables[b] = t;
            t = next;
        }
    }
    free(prev);
    tm.memory = tm.memory - old * sizeof(*tables) + n * sizeof(*tables);
    return 0;
}

/* Free every site table: their nodes are stale, or the engine stops. */
static void
tables_free(void)
{
    size_t n = cache_entries();
    for (size_t i = 0; i < n; i++) {
        cct_site_table *t = tm.framecache.tables[i];
        while (t != NULL) {
            cct_site_table *next = t->next;
            free(t);
            t = next;
        }
    }
    memset(tm.framecache.tables, 0, n * sizeof(*tm.framecache.tables));
    tm.memory -= tm.framecache.tables_bytes;
    tm.framecache.tables_bytes = 0;
    tm.framecache.ntables = 0;
    tm.framecache.stale_tables = 0;
    tm.framecache.tables_gen++;     /* every map's count is 0 again */
}

/* Free every site table (their nodes are stale: a compaction or a reset);
   the index is kept, emptied, or shrunk to fit LIVE_NODES nodes when it is
   more than twice too big and memory allows.  Cannot fail. */
static void
cache_clear(uint32_t live_nodes)
{
    tables_free();
    unsigned int bits = CACHE_MIN_BITS;
    while (bits < CACHE_MAX_BITS && ((size_t)1 << bits) < (size_t)live_nodes) {
        bits++;
    }
    if (tm.framecache.tables_bits > bits + 1) {
        (void)tables_resize(bits);
    }
}

/* The site table of CODE under PARENT, made if there is none.  NULL
   without memory for the table or the map (the caller then interns each
   node apart), or, with *NOMEM set, for the filename's copy (then no
   node can be made: the traced allocation fails, as upstream's). */
static cct_site_table *
table_get(PyCodeObject *code, _PyTraceMalloc_Node parent, int *nomem)
{
    uint32_t epoch = tm.framecache.code_epochs[code_epoch_slot(code)];
    size_t b = site_hash(code, parent) >> (64 - tm.framecache.tables_bits);
    for (cct_site_table *t = tm.framecache.tables[b]; t != NULL;
         t = t->next) {
        if (t->code == code && t->parent == parent) {
            if (t->epoch == epoch) {
                return t;
            }
            /* Another code of its epoch slot died, or its own code (the
               address is reused): replaced below.  Its code pointer goes,
               so that it is counted once and never matched again; a frame
               still linked to it reads neither. */
            t->code = NULL;
            tm.framecache.stale_tables++;
        }
    }
    /* A table of an older epoch stays in its chain until the next
       cache_clear(): a frame linked to it may still use it (its code
       lives; another code of its epoch slot died). */
    const cct_string *filename = string_intern(base_code_filename(code),
                                               nomem);
    if (*nomem) {
        return NULL;
    }
    const cct_code_map *map = map_get(code);
    if (map == NULL) {
        return NULL;
    }
    size_t bytes = sizeof(cct_site_table)
                   + map->nruns * sizeof(_PyTraceMalloc_Node);
    cct_site_table *t = _PyTraceMalloc_RawAlloc(bytes, 1);
    if (t == NULL) {
        return NULL;
    }
    t->at = map->idx + 1 - first_unit(code);
    t->code = code;
    t->map = map;
    t->filename = filename;
    t->parent = parent;
    t->epoch = epoch;
    cct_code_map *owner = (cct_code_map *)map;
    if (owner->tables_gen != tm.framecache.tables_gen) {
        owner->tables_gen = tm.framecache.tables_gen;
        owner->ntables = 0;
    }
    owner->ntables++;
    if (tm.framecache.ntables >= cache_entries()
        && tm.framecache.tables_bits < CACHE_MAX_BITS
        && tables_resize(tm.framecache.tables_bits + 1) == 0) {
        b = site_hash(code, parent) >> (64 - tm.framecache.tables_bits);
    }
    t->next = tm.framecache.tables[b];
    tm.framecache.tables[b] = t;
    tm.framecache.ntables++;
    tm.framecache.tables_bytes += bytes;
    tm.memory += bytes;
    return t;
}

/* The node of FRAME's current line in its table T (under T's parent),
   interned and kept in T.  UINT32_MAX when out of memory.  Out of line,
   so that the hits inlined in the hooks do not pay for its register
   saves. */
Py_NO_INLINE static _PyTraceMalloc_Node
table_fill(const _PyInterpreterFrame *frame, cct_site_table *t)
{
    size_t run = t->at[frame_unit(frame)];
    tm.framecache.cache_misses++;
    int line;
    if (run == t->map->nruns - 1) {
        line = line_decoded(base_frame_code(frame), base_frame_lasti(frame));
    }
    else {
        line = t->map->lines[run];
    }
    int nomem = 0;
    _PyTraceMalloc_Node node = node_intern(t->parent, t->filename, line,
                                           &nomem);
    if (nomem) {
        return UINT32_MAX;
    }
    if (run != t->map->nruns - 1) {
        t->nodes[run] = node;
    }
    return node;
}

/* The node of FRAME at its current instruction under PARENT, for a frame
   without a table: through the table index, else interned apart.
   UINT32_MAX when out of memory. */
Py_NO_INLINE static _PyTraceMalloc_Node
site_node(_PyTraceMalloc_Node parent, _PyInterpreterFrame *frame)
{
    PyCodeObject *code = base_frame_code(frame);
    int nomem = 0;
    cct_site_table *t = table_get(code, parent, &nomem);
    if (t != NULL) {
        _PyTraceMalloc_Node node = t->nodes[t->at[frame_unit(frame)]];
        return node ? node : table_fill(frame, t);
    }
    if (nomem) {
        return UINT32_MAX;
    }
    tm.framecache.cache_misses++;
    const cct_string *filename = string_intern(base_code_filename(code),
                                               &nomem);
    if (nomem) {
        return UINT32_MAX;
    }
    _PyTraceMalloc_Node node = node_intern(
        parent, filename, line_decoded(code, base_frame_lasti(frame)),
        &nomem);
    return nomem ? UINT32_MAX : node;
}

/* Link FRAME under PARENT in GENERATION (I4): its parent and its table
   (none without memory for it: its nodes are then looked up apart).  -1,
   FRAME left unlinked, when its filename cannot be copied. */
static inline int
frame_link(_PyInterpreterFrame *frame, uint64_t generation,
           _PyTraceMalloc_Node parent)
{
    int nomem = 0;
    cct_site_table *t = table_get(base_frame_code(frame), parent, &nomem);
    if (nomem) {
        return -1;
    }
    frame->tracemalloc_parent = generation | parent;
    frame->tracemalloc_last = (uint64_t)(uintptr_t)t;
    return 0;
}

/* The node of FRAME at its current instruction, FRAME being linked under
   PARENT (its valid tracemalloc_parent, I4) or not linked (then its
   tracemalloc_last is 0): its table's entry, else interned into the
   table.  UINT32_MAX when out of memory. */
static inline _PyTraceMalloc_Node
frame_node(_PyTraceMalloc_Node parent, _PyInterpreterFrame *frame)
{
    cct_site_table *t = (cct_site_table *)(uintptr_t)frame->tracemalloc_last;
    if (t != NULL) {
        _PyTraceMalloc_Node node = t->nodes[t->at[frame_unit(frame)]];
        return node ? node : table_fill(frame, t);
    }
    return site_node(parent, frame);
}

static inline _PyInterpreterFrame *
skip_incomplete(_PyInterpreterFrame *frame)
{
    /* Like upstream, frames that have not started their first traceable
       instruction (copying free variables, making cells) are not shown. */
    while (frame != NULL && base_frame_is_incomplete(frame)) {
        frame = base_frame_caller(frame);
    }
    return frame;
}

#define PENDING_INLINE 64

/* Slow path of current_node(): FRAME's caller is not linked either.  Walk up to the first frame with a valid cache (or the
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
    /* With labels, only the running segment is linked (I13): the pending
       frames up to the first one entered from C.  And none by a thread
       that cannot read its context (no GIL): a link under its path's label
       set would give that set to the frames' next allocations with the
       GIL, after a label switch too.  Such a thread walks again at its next
       allocation, until one with the GIL links the frames. */
    int labels = labels_in_use();
    int unreadable = labels && labels_unknown(tstate);
    size_t segment = SIZE_MAX;
    while (f != NULL) {
        if ((f->tracemalloc_parent & ~(uint64_t)UINT32_MAX) == generation) {
            node = frame_node((uint32_t)f->tracemalloc_parent, f);
            nomem = node == UINT32_MAX;
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
        if (labels && segment == SIZE_MAX && base_frame_entered_from_c(f)) {
            segment = npending;
        }
        pending[npending++] = f;
        f = skip_incomplete(base_frame_caller(f));
    }
    if (at_bottom && !nomem) {
        node = thread_root(tstate, &nomem);
    }
    if (labels && segment == SIZE_MAX) {
        segment = npending - 1;
    }
    while (!nomem && npending > 0) {
        f = pending[--npending];
        if (labels && (npending > segment || unreadable)) {
            /* An older segment, or no context to read: its node for the
               path, no link. */
            f->tracemalloc_parent = 0;
            f->tracemalloc_last = 0;
            node = site_node(node, f);
            nomem = node == UINT32_MAX;
            continue;
        }
        if (labels && npending == segment) {
            node = label_parent(tstate, node);
            if (node == UINT32_MAX) {
                nomem = 1;
                break;
            }
        }
        if (frame_link(f, generation, node) < 0) {
            nomem = 1;
            break;
        }
        node = frame_node(node, f);
        nomem = node == UINT32_MAX;
    }
    if (pending != inline_pending) {
        free(pending);
    }
    return nomem ? UINT32_MAX : node;
}

/* current_node() when the current frame is not linked in this generation
   (I4): no thread state, no frame, an incomplete frame, or a frame not
   linked yet.  A new frame under a linked caller (a call) is linked at
   once; otherwise current_node_slow() walks the stack. */
Py_NO_INLINE static _PyTraceMalloc_Node
current_node_unlinked(PyThreadState *tstate)
{
    if (tstate == NULL || tm.framecache.tables == NULL) {
        return 0;
    }
    _PyInterpreterFrame *frame = skip_incomplete(base_current_frame(tstate));
    uint64_t generation = (uint64_t)tm.generation << 32;
    if (frame == NULL) {
        /* No Python frame (a C thread, or before the first frame): the
           empty traceback, of this thread. */
        int nomem = 0;
        _PyTraceMalloc_Node root = thread_root(tstate, &nomem);
        return nomem ? UINT32_MAX : root;
    }
    if ((frame->tracemalloc_parent & ~(uint64_t)UINT32_MAX) != generation) {
        _PyInterpreterFrame *caller = skip_incomplete(
            base_frame_caller(frame));
        if (caller == NULL
            || (caller->tracemalloc_parent & ~(uint64_t)UINT32_MAX)
               != generation) {
            return current_node_slow(tstate, frame, generation);
        }
        _PyTraceMalloc_Node parent = frame_node(
            (uint32_t)caller->tracemalloc_parent, caller);
        if (parent != UINT32_MAX && labels_in_use()) {
            parent = label_parent(tstate, parent);
        }
        if (parent == UINT32_MAX) {
            return UINT32_MAX;
        }
        /* The caller's last callee, if it is this frame's table. */
        cct_site_table *ct = (cct_site_table *)(uintptr_t)
                             caller->tracemalloc_last;
        PyCodeObject *code = base_frame_code(frame);
        cct_site_table *t = ct != NULL ? ct->callee : NULL;
        if (t != NULL && t->code == code && t->parent == parent
            && t->epoch == tm.framecache.code_epochs[code_epoch_slot(code)]) {
            frame->tracemalloc_parent = generation | parent;
            frame->tracemalloc_last = (uint64_t)(uintptr_t)t;
        }
        else {
            if (frame_link(frame, generation, parent) < 0) {
                return UINT32_MAX;
            }
            if (ct != NULL && frame->tracemalloc_last != 0) {
                ct->callee = (cct_site_table *)(uintptr_t)
                             frame->tracemalloc_last;
            }
        }
    }
    return frame_node((uint32_t)frame->tracemalloc_parent, frame);
}

/* Hot path, inline in the hooks: the node of TSTATE's current position,
   UINT32_MAX when out of memory.  When the current frame is linked (I4),
   which implies a started engine, its table's entry for its line (I7);
   otherwise out of line. */
static inline _PyTraceMalloc_Node
current_node(PyThreadState *tstate)
{
    if (tstate != NULL) {
        _PyInterpreterFrame *frame = base_current_frame(tstate);
        if (frame != NULL
            && (uint32_t)(frame->tracemalloc_parent >> 32)
               == tm.generation) {
            return frame_node((uint32_t)frame->tracemalloc_parent, frame);
        }
    }
    return current_node_unlinked(tstate);
}

/* current_node() when nothing is to be made or called: the node of the
   current position if the current frame is linked and its site table
   knows its line, or if it is a new frame (a call, a resumed generator)
   whose linked caller's last callee is its table; else 0 (for the lean
   paths' common cases).  The second case is current_node_unlinked()'s
   first, with no label in use. */
static inline _PyTraceMalloc_Node
current_node_fast(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    if (tstate == NULL) {
        return 0;
    }
    _PyInterpreterFrame *frame = base_current_frame(tstate);
    if (frame == NULL) {
        return 0;
    }
    uint32_t generation = tm.generation;
    cct_site_table *t;
    if ((uint32_t)(frame->tracemalloc_parent >> 32) == generation) {
        t = (cct_site_table *)(uintptr_t)frame->tracemalloc_last;
    }
    else {
        if (base_frame_is_incomplete(frame) || labels_in_use()) {
            return 0;
        }
        /* Past the entry frame of a generator resumed from C. */
        _PyInterpreterFrame *caller = skip_incomplete(
            base_frame_caller(frame));
        if (caller == NULL
            || (uint32_t)(caller->tracemalloc_parent >> 32) != generation) {
            return 0;
        }
        cct_site_table *ct = (cct_site_table *)(uintptr_t)
                             caller->tracemalloc_last;
        if (ct == NULL) {
            return 0;
        }
        _PyTraceMalloc_Node parent = ct->nodes[ct->at[frame_unit(caller)]];
        PyCodeObject *code = base_frame_code(frame);
        t = ct->callee;
        if (parent == 0 || t == NULL || t->code != code
            || t->parent != parent
            || t->epoch != tm.framecache.code_epochs[code_epoch_slot(code)]) {
            return 0;
        }
        frame->tracemalloc_parent = ((uint64_t)generation << 32) | parent;
        frame->tracemalloc_last = (uint64_t)(uintptr_t)t;
    }
    return t != NULL ? t->nodes[t->at[frame_unit(frame)]] : 0;
}

/* Stale tables (of dead codes, or of an epoch slot that a dying code
   bumped) stay in the index until the tables are freed, which only
   compactions and resets did; a program that keeps compiling and dropping
   code makes no new node, so no compaction came, and its index and chains
   grew without bound.  Once the stale tables outnumber half the others
   (and 1024), all are freed and the frames relink (I4, I5): no table
   pointer is held here, outside the engine's own calls, and the
   generation's change makes every frame's pointer stale at once. */
static void
tables_flush_if_stale(void)
{
    /* A dead code's table may be counted twice (at its death, and when a
       new code at its address misses it): an estimate, never below. */
    size_t stale = tm.framecache.stale_tables;
    size_t live = tm.framecache.ntables > stale
                  ? tm.framecache.ntables - stale : 0;
    if (tm.framecache.tables == NULL || stale <= 1024 + live / 2) {
        return;
    }
    cache_clear(tm.tree.nnodes);
    generation_bump();
}

void
_PyTraceMalloc_CodeFreed(void *code)
{
    int side = engine_lock();
    tm.framecache.code_epochs[code_epoch_slot(code)]++;
    map_drop(code);
    tables_flush_if_stale();
    engine_leave(side);
}

/* ---- lifecycle ---------------------------------------------------------- */

/* Every frame's link and table, and every thread's root cache, belong to
   one generation; bumping it invalidates them all at once (I4). */
static void
generation_bump(void)
{
    tm.generation++;
    if (tm.generation == 0) {
        tm.generation = 1;      /* 0 marks reset frames */
    }
}

/* start(): the indexes, if stop() gave them back.  -1 without memory. */
static int
framecache_start(void)
{
    if (tm.framecache.tables != NULL) {
        return 0;
    }
    size_t nmaps = (size_t)1 << MAPS_MIN_BITS;
    tm.framecache.maps = _PyTraceMalloc_RawAlloc(
        nmaps * sizeof(*tm.framecache.maps), 1);
    if (tm.framecache.maps == NULL || tables_resize(CACHE_MIN_BITS) < 0) {
        free(tm.framecache.maps);
        tm.framecache.maps = NULL;
        return -1;
    }
    tm.framecache.maps_bits = MAPS_MIN_BITS;
    tm.memory += nmaps * sizeof(*tm.framecache.maps);
    return 0;
}

/* stop(): give back the tables, the maps and their indexes. */
static void
framecache_release(void)
{
    if (tm.framecache.tables == NULL) {
        return;
    }
    tables_free();
    free(tm.framecache.tables);
    tm.framecache.tables = NULL;
    tm.framecache.tables_bits = 0;
    size_t nmaps = (size_t)1 << tm.framecache.maps_bits;
    for (size_t i = 0; i < nmaps; i++) {
        cct_code_map *m = tm.framecache.maps[i];
        while (m != NULL) {
            cct_code_map *next = m->next;
            free(m);
            m = next;
        }
    }
    free(tm.framecache.maps);
    tm.framecache.maps = NULL;
    tm.framecache.nmaps = 0;
    tm.framecache.maps_bytes = 0;
}

static size_t
framecache_memory(void)
{
    if (tm.framecache.tables == NULL) {
        return 0;
    }
    return cache_entries() * sizeof(*tm.framecache.tables)
           + tm.framecache.tables_bytes
           + ((size_t)1 << tm.framecache.maps_bits)
             * sizeof(*tm.framecache.maps)
           + tm.framecache.maps_bytes;
}
