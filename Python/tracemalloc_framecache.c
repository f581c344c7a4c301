/* The frame caches: from the current frame to its node in one lookup.
 *
 * Each _PyInterpreterFrame links to its caller's node (tracemalloc_parent,
 * I4) and remembers the node of its last allocation's line
 * (tracemalloc_last, the memo, I7).  Behind them, the site cache maps
 * (parent, code, instruction offset) to a node (I5), and the line cache
 * maps (code, offset) to the line and the interned filename (I6); the
 * line table is decoded only when both miss.  The site cache's size
 * follows the tree.  Part of the engine's translation unit (see
 * tracemalloc_engine.h).
 */

static inline size_t
code_epoch_slot(const PyCodeObject *code)
{
    /* Code objects are GC objects, 16-byte aligned, at least 200 bytes
       apart: the address bits above 4 spread them well enough, without a
       multiply on the hot path. */
    return ((uintptr_t)code >> 4) & ((1 << CODE_EPOCH_BITS) - 1);
}

/* The key of the frame caches: CODE at offset LASTI under PARENT, mixed
   into 64 bits; callers keep its top bits.  The parent is mixed in by a
   multiplication of its own: recursion makes keys that differ only by
   consecutive parent ids, which this spreads evenly over the cache (a
   parent shifted into the bits of one multiplication crowded them into
   a few entries). */
static inline uint64_t
site_hash(const PyCodeObject *code, _PyTraceMalloc_Node parent, int lasti)
{
    const uint64_t k = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t x = ((uint64_t)(uintptr_t)code >> 4)
                 ^ ((uint64_t)(uint32_t)lasti << 40);
    return ((x * k) ^ parent) * k;
}

/* The memo (tracemalloc_last, I7): the node in bits 0-31, the line's
   instructions as a range in bytes from the start of the code object
   (memo_offset()): start in bits 32-47, length in bits 48-63. */
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
        return base_code_firstlineno(code);   /* like PyCode_Addr2Line() */
    }
    /* Decoded on from the code's cursor: a module body's sites, met in
       order, decode its table once in all rather than once each.  Only
       forwards: a site before the cursor decodes from the table's start,
       so that the line found is always the one a decoding from the start
       finds, also in a table that the compiler did not write (one given
       to code.replace()), which decoding backwards may read otherwise. */
    size_t slot = code_epoch_slot(code);
    cct_line_cursor *cursor = &tm.framecache.cursors[
        slot & (((size_t)1 << CURSOR_BITS) - 1)];
    uint32_t epoch = tm.framecache.code_epochs[slot];
    if (cursor->code != code || cursor->epoch != epoch
        || lasti * (int)sizeof(_Py_CODEUNIT) < cursor->bounds.ar_start) {
        _PyCode_InitAddressRange(code, &cursor->bounds);
        cursor->code = code;
        cursor->epoch = epoch;
    }
    int line = _PyCode_CheckLineNumber(lasti * (int)sizeof(_Py_CODEUNIT),
                                       &cursor->bounds);
    PyCodeAddressRange bounds = cursor->bounds;
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
    int base = (int)memo_offset(code, base_code_first_instr(code));
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
    return (size_t)1 << (64 - tm.framecache.cache_shift);
}

static void
cache_schedule_growth(void)
{
    tm.framecache.cache_evictions = 0;
    tm.framecache.cache_grow_at =
        64 - tm.framecache.cache_shift < CACHE_MAX_BITS ? cache_entries()
                                                        : SIZE_MAX;
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
    if (tm.framecache.cache != NULL) {
        old = cache_entries();
        for (size_t i = 0; keep && i < old; i++) {
            const cct_cache_entry *e = &tm.framecache.cache[i];
            if (e->code != NULL) {
                cache[site_hash(e->code, e->parent, e->lasti)
                      >> (64 - bits)] = *e;
            }
        }
        free(tm.framecache.cache);
    }
    tm.framecache.cache = cache;
    tm.framecache.cache_shift = 64 - bits;
    tm.memory = tm.memory - old * sizeof(*cache) + n * sizeof(*cache);
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
    if (64 - tm.framecache.cache_shift <= bits + 1
        || cache_resize(bits, 0) < 0) {
        memset(tm.framecache.cache, 0,
               cache_entries() * sizeof(*tm.framecache.cache));
        cache_schedule_growth();
    }
    memset(tm.framecache.lines, 0, LINES_SIZE);
}

/* The cache missed as many known paths as it has entries since the last
   resize: double it if it has fewer than four entries per node, else count
   again. */
Py_NO_INLINE static void
cache_grow(void)
{
    if (cache_entries() >= 4 * (size_t)tm.tree.nnodes
        || cache_resize(64 - tm.framecache.cache_shift + 1, 1) < 0) {
        cache_schedule_growth();
    }
}

/* After a miss of the site cache in entry E, for FRAME under PARENT:
   decode the line, intern the node, and put it in the cache and in the
   frame's memo.  UINT32_MAX when out of memory.  Out of line, so that the
   hits inlined in the hooks do not pay for its register saves. */
Py_NO_INLINE static _PyTraceMalloc_Node
frame_node_miss(_PyInterpreterFrame *frame, _PyTraceMalloc_Node parent,
                cct_cache_entry *e)
{
    int nomem = 0;
    PyCodeObject *code = base_frame_code(frame);
    int lasti = base_frame_lasti(frame);
    tm.framecache.cache_misses++;
    uint32_t epoch = tm.framecache.code_epochs[code_epoch_slot(code)];
    /* Keyed without the parent: every caller's entry for the site. */
    cct_line_entry *le = &tm.framecache.lines[site_hash(code, 0, lasti)
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
        filename = string_intern(base_code_filename(code), &nomem);
        if (nomem) {
            return UINT32_MAX;
        }
        le->code = code;
        le->lasti = lasti;
        le->epoch = epoch;
        le->lineno = lineno;
        le->range = range;
        le->filename = filename;
    }
    uint32_t nnodes = tm.tree.nnodes;
    _PyTraceMalloc_Node node = node_intern(parent, filename, lineno, &nomem);
    if (nomem) {
        return UINT32_MAX;
    }
    /* A path seen before, whose entry another key took: the cache is too
       small for the tree (a new path would have missed anyway). */
    if (e->code != NULL && tm.tree.nnodes == nnodes
        && ++tm.framecache.cache_evictions >= tm.framecache.cache_grow_at) {
        cache_grow();
        e = &tm.framecache.cache[site_hash(code, parent, lasti)
                                 >> tm.framecache.cache_shift];
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
    uint32_t at = memo_offset(base_frame_code(frame),
                              base_frame_instr(frame));
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
    PyCodeObject *code = base_frame_code(frame);
    int lasti = base_frame_lasti(frame);
    cct_cache_entry *e = &tm.framecache.cache[site_hash(code, parent, lasti)
                                              >> tm.framecache.cache_shift];
    if (e->code == code && e->parent == parent && e->lasti == lasti
        && e->epoch == tm.framecache.code_epochs[code_epoch_slot(code)]) {
        *node = e->node;
        memo_set(frame, e->range, e->node);
        return 1;
    }
    *entry = e;
    return 0;
}

/* The node of FRAME at its current instruction, its caller's node being
   PARENT (the frame's valid tracemalloc_parent, I4): the memo (I7), else
   the site cache (I5), else the line decoded into the entry just probed.
   UINT32_MAX when out of memory. */
static inline _PyTraceMalloc_Node
frame_node(_PyTraceMalloc_Node parent, _PyInterpreterFrame *frame)
{
    _PyTraceMalloc_Node node;
    cct_cache_entry *e;
    if (frame_memo(frame, &node) || site_cached(frame, parent, &node, &e)) {
        return node;
    }
    return frame_node_miss(frame, parent, e);
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
        f->tracemalloc_last = LAST_NONE;
        if (labels && (npending > segment || unreadable)) {
            /* An older segment, or no context to read: its node for the
               path, no link. */
            f->tracemalloc_parent = 0;
            node = frame_node(node, f);
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
        f->tracemalloc_parent = generation | node;
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
    if (tstate == NULL || tm.framecache.cache == NULL) {
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
        frame->tracemalloc_parent = generation | parent;
        frame->tracemalloc_last = LAST_NONE;
    }
    return frame_node((uint32_t)frame->tracemalloc_parent, frame);
}

/* Hot path, inline in the hooks: the node of TSTATE's current position,
   UINT32_MAX when out of memory.  When the current frame is linked (I4),
   which implies a started engine, its memo, a hit in the site cache or the
   line decoded into the entry just probed; otherwise out of line. */
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

void
_PyTraceMalloc_CodeFreed(void *code)
{
    int side = engine_lock();
    tm.framecache.code_epochs[code_epoch_slot(code)]++;
    engine_leave(side);
}

/* ---- lifecycle ---------------------------------------------------------- */

/* Every frame's link and memo, and every thread's root cache, belong to
   one generation; bumping it invalidates them all at once (I4). */
static void
generation_bump(void)
{
    tm.generation++;
    if (tm.generation == 0) {
        tm.generation = 1;      /* 0 marks reset frames */
    }
}

/* start(): the caches, if stop() gave them back.  -1 without memory. */
static int
framecache_start(void)
{
    if (tm.framecache.cache != NULL) {
        return 0;
    }
    tm.framecache.lines = _PyTraceMalloc_RawAlloc(LINES_ALLOC, 1);
    if (tm.framecache.lines == NULL
        || cache_resize(CACHE_MIN_BITS, 0) < 0) {
        free(tm.framecache.lines);
        tm.framecache.lines = NULL;
        return -1;
    }
    tm.framecache.cursors = (cct_line_cursor *)(
        (char *)tm.framecache.lines + LINES_SIZE);
    tm.memory += LINES_ALLOC;
    return 0;
}

/* stop(): give the caches back. */
static void
framecache_release(void)
{
    free(tm.framecache.cache);
    free(tm.framecache.lines);
    tm.framecache.cache = NULL;
    tm.framecache.lines = NULL;
    tm.framecache.cursors = NULL;
}

static size_t
framecache_memory(void)
{
    if (tm.framecache.cache == NULL) {
        return 0;
    }
    return cache_entries() * sizeof(*tm.framecache.cache) + LINES_ALLOC;
}
