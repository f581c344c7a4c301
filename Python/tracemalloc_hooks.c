/* The hooks: the traced variants of the allocator entry points, which
 * Objects/obmalloc.c calls only while tracing, and the re-trace of objects
 * reused from free lists (_Py_NewReference()).
 *
 * They never allocate through a traced API and never call
 * PyGILState_Ensure(): the raw domain and PyTraceMalloc_Track() may run
 * without the GIL, and then read the calling thread's own frames, which
 * nobody else can change meanwhile (I1).  Part of the engine's translation
 * unit (see tracemalloc_engine.h).
 */

/* Allocations this thread makes that are not the user's (I11): the
   engine's exports, and the blocks a user allocator installed with
   PyMem_SetAllocator() gets for itself through the public API while
   serving a traced call (upstream's re-entrancy guard).  C11's
   _Thread_local: 3.11 has no thread-local helper of its own (its Py_tss_t
   API is a function call and a lookup). */
static _Thread_local int tm_untraced_depth;

/* The part of tm_untraced_depth that suspensions make (the exports, the
   retention search: the tracer's own work), without the user allocators'
   own calls.  While the two are equal and not 0, the thread allocates for
   the tracer: its blocks of the mem and obj domains are kept as the
   exports' blocks (I15), untraced but re-traced when the program reuses
   them from a free list. */
static _Thread_local int tm_suspended;

int
_PyTraceMalloc_SuspendThread(void)
{
    tm_suspended++;
    return tm_untraced_depth++;
}

int
_PyTraceMalloc_ResumeThread(void)
{
    int depth = tm_untraced_depth;
    if (depth > 0) {
        tm_untraced_depth--;
    }
    if (tm_suspended > 0) {
        tm_suspended--;
    }
    return depth;
}

/* The untraced block PTR (not NULL) that this thread just got, with the
   GIL, from the mem or obj domain: the tracer's own when the whole
   untraced depth is suspensions (not a user allocator's own block). */
static inline int
export_level(void)
{
    return tm_suspended != 0 && tm_untraced_depth == tm_suspended;
}

/* Keep PTR, SIZE bytes just allocated at the export level, as an
   export's block.  Out of line: only the tracer's own allocations get
   here. */
Py_NO_INLINE static void
export_block(void *ptr, size_t size)
{
    PyThreadState *tstate;
    int side = engine_enter(1, &tstate);
    if (_PyTraceMalloc_TRACING()) {
        hidden_add((uintptr_t)ptr, size);
    }
    engine_leave(side);
}

/* A free or a resize found no trace of PTR: if it is an export's block,
   it is one no longer (its address may be handed out again, to be
   traced).  The lookup only when the set has blocks. */
Py_NO_INLINE static void
hidden_forget_slow(uintptr_t ptr)
{
    size_t size;
    (void)hidden_take(ptr, &size);
}

static inline void
hidden_forget(uintptr_t ptr)
{
    if (tm.hidden.used != 0) {
        hidden_forget_slow(ptr);
    }
}

/* Enter the engine from a hook.  GIL_HELD is 1 for the mem and obj
   domains, which the C API requires to hold the GIL; for the raw domain and
   the tracking API it is 0 and the engine finds out.  Returns the side to
   pass to engine_leave(); *TSTATE is the thread state whose frames describe
   the current call: with the GIL, the current one; without it, this
   thread's own, which no other thread can change meanwhile. */
static inline int
engine_enter(int gil_held, PyThreadState **tstate)
{
    if (gil_held) {
        if (base_one_gil()) {
            /* The usual case, decided without the thread state, which a
               free does not need (an allocation reads it for its frame). */
            *tstate = _PyThreadState_GET();
            _PyTraceMalloc_Lock();
            return 1;
        }
        /* Holds its interpreter's GIL; with a GIL of its own (an isolated
           3.13 interpreter) it is a caller without the engine's GIL, whose
           attached thread state is its own (see the adapter). */
        PyThreadState *current = _PyThreadState_GET();
        if (current == NULL || base_on_engine_gil(current)) {
            *tstate = current;
            _PyTraceMalloc_Lock();
            return 1;
        }
        _PyTraceMalloc_LockOwnGIL();
        *tstate = current;
        return 0;
    }
    if (_PyTraceMalloc_HoldsGIL()) {
        *tstate = _PyThreadState_GET();
        _PyTraceMalloc_Lock();
        return 1;
    }
    if (base_thread_holds_a_gil()) {
        /* 3.13: an isolated interpreter's thread (its own GIL). */
        _PyTraceMalloc_LockOwnGIL();
        *tstate = _PyThreadState_GET();
        return 0;
    }
    _PyTraceMalloc_LockNoGIL();
    /* Read under the lock: once the runtime is finalizing, the thread
       states of daemon threads are freed (_PyThreadState_DeleteExcept()),
       and a daemon thread allocating without the GIL (zlib, bz2, lzma) must
       not read its own.  The finalizing thread stores the flag before it
       frees them, and each free passes through the engine lock, so a
       thread inside the lock either sees the flag or still has a live
       thread state.  Such allocations get the empty traceback. */
    *tstate = base_runtime_finalizing() ? NULL : base_this_thread_state();
    return 0;
}

static inline void
engine_leave(int side)
{
    if (side) {
        _PyTraceMalloc_Unlock();
    }
    else {
        _PyTraceMalloc_UnlockNoGIL();
    }
}

/* The last trace this thread took out before a free or a realloc.  The
   debug hooks find a damaged block inside the free, after the hook has
   taken its trace out: _PyMem_DumpTraceback() still shows where it came
   from. */
static _Thread_local struct {
    uintptr_t ptr;
    _PyTraceMalloc_Node node;
    uint32_t generation;
} last_removed;

static inline void
remember_removed(void *ptr, _PyTraceMalloc_Node node)
{
    if (_PyTraceMalloc_caller_skew == 0) {
        return;     /* no debug hooks: nobody asks */
    }
    last_removed.ptr = (uintptr_t)ptr;
    last_removed.node = node;
    last_removed.generation = tm.generation;
}

/* The block resized last by the hooks of the default domain with the GIL,
   while it may still be on its way to become an object again: the
   re-trace that _Py_NewReference() asks for after a resize (bytes, str
   and tuple resizes) finds the node just recorded, so
   _PyTraceMalloc_NewReference() takes the block out of here instead
   (I10).  A block allocated for a new object is not kept here: its object
   is made by _PyObject_Init(), which asks for no re-trace.  Protected by
   the GIL. */
static uintptr_t fresh_block;

static inline void
fresh_forget(void *ptr)
{
    if ((uintptr_t)ptr == fresh_block) {
        fresh_block = 0;
    }
}

/* start(), stop() and clear_traces(), under the engine lock: no fresh
   block survives into the next run or the next traces. */
static void
fresh_reset(void)
{
    if (_PyTraceMalloc_HoldsGIL()) {
        fresh_block = 0;
    }
}

void
_PyTraceMalloc_ForgetFresh(void)
{
    /* Only the engine's GIL holder sets it (3.13: an isolated
       interpreter's thread never does, and must not write it). */
    if (_PyTraceMalloc_HoldsGIL()) {
        fresh_block = 0;
    }
}

/* Record PTR at the current position: 0, or -1 when the bookkeeping could
   not get memory.  Inline: the hooks call it with GIL_HELD constant.
   BLOCK: PTR is a block the allocator just returned (see store_add()).
   RESIZED: PTR is a resized block (see fresh_block). */
static int trace_add_frames(unsigned int domain, void *ptr, size_t size,
                            int gil_held, int pooled, int block,
                            int resized);

/* STACK: the C stack to put under the Python position (native frames of
   every trace, tracemalloc_nativeframes.c), or NULL. */
static inline int
trace_add_ex(unsigned int domain, void *ptr, size_t size, int gil_held,
             int pooled, int block, int resized, const nf_stack *stack)
{
    PyThreadState *tstate;
    int side = engine_enter(gil_held, &tstate);
    int res = 0;
    /* Checked again inside: stop() may have run since the caller looked at
       the flag, and a trace added now would outlive the tables. */
    if (_PyTraceMalloc_TRACING()) {
        compact_if_due();
        _PyTraceMalloc_Node node = current_node(tstate);
        if (stack != NULL && stack->n) {
            node = nf_intern_stack(tstate, node, stack);
        }
        if (node == UINT32_MAX) {
            res = -1;
        }
        else {
            res = store_add(domain, (uintptr_t)ptr, size, node,
                            pooled && side, block);
            if (resized && res == 0 && gil_held
                && domain == _PyTraceMalloc_DEFAULT_DOMAIN && side) {
                /* Only the mem and obj domains, with the GIL: objects
                   are made there.  Not the raw domain, even with the GIL
                   held: its free may come without the GIL, which may not
                   clear the fresh block. */
                fresh_block = (uintptr_t)ptr;
            }
        }
    }
    engine_leave(side);
    return res;
}

static inline int
trace_add(unsigned int domain, void *ptr, size_t size, int gil_held,
          int pooled, int block, int resized)
{
    if (__builtin_expect(__atomic_load_n(&nf_all, __ATOMIC_RELAXED), 0)) {
        return trace_add_frames(domain, ptr, size, gil_held, pooled, block,
                                resized);
    }
    return trace_add_ex(domain, ptr, size, gil_held, pooled, block, resized,
                        NULL);
}

/* The same, out of line, for the paths that are not hot. */
Py_NO_INLINE static int
trace_add_slow(unsigned int domain, void *ptr, size_t size, int gil_held,
               int pooled, int block, int resized)
{
    return trace_add(domain, ptr, size, gil_held, pooled, block, resized);
}

/* May a block that ALLOC just returned for SIZE bytes lie in one of
   pymalloc's pools?  Not if pymalloc does not serve that size, nor if it
   comes from the raw domain (GIL_HELD 0), whose allocator is malloc()
   (pymalloc needs the GIL).  A wrong answer costs a lookup, not a trace
   (see store_add()). */
static inline int
fresh_block_pooled(size_t size, int gil_held)
{
    return gil_held && size <= _PyTraceMalloc_POOL_MAX_REQUEST;
}

/* ---- the lean paths ------------------------------------------------------ */

/* The guard of the lean paths: nonzero while exact tracing runs under one
   GIL without native frames on every trace, the conditions under which a
   traced call of the mem and obj domains (GIL held) needs none of the
   general path's tests (engine notes, "The lean paths").  Written under
   the engine lock by lean_update(), which every change of an input calls;
   read by the GIL holder's hooks.  Everything the lean paths do not
   assume (a user allocator, tracked traces, debug hooks' skew, a due
   compaction, a dump threshold) the store and the compaction check handle
   on the lean path as on the general one. */
static int tm_lean;

/* _TRACEMALLOC_GENERAL_PATH=1 in the environment keeps the lean paths off
   for the process (tests: the differential test's GeneralPathTest and
   test_tracemalloc_leanpath run the general path); -1 until read. */
static int lean_forced_off = -1;

static void
lean_update(void)
{
    if (lean_forced_off < 0) {
        const char *v = getenv("_TRACEMALLOC_GENERAL_PATH");
        lean_forced_off = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
    }
    /* Sampling under a user allocator routes every call to the hooks
       with the exact mode's word (sample_mode_word()): the interval
       tells. */
    int lean = _PyTraceMalloc_MODE() == _PyTraceMalloc_EXACT
               && tm.sample.interval == 0
               && base_one_gil()
               && !__atomic_load_n(&nf_all, __ATOMIC_RELAXED)
               && !lean_forced_off;
    __atomic_store_n(&tm_lean, lean, __ATOMIC_RELAXED);
}

/* An interpreter with a GIL of its own is being made (the adapter's hook,
   which runs with no GIL): the word goes to 0 under the engine lock, so
   that a start() computing it from the one-GIL flag read before the flag
   was cleared has finished first, and the new interpreter's threads,
   which allocate only after the hook returns, never see it set. */
__attribute__((unused)) static void
lean_own_gil(void)
{
    int side = engine_lock();
    lean_update();
    engine_leave(side);
}

int
_PyTraceMalloc_LeanPaths(void)
{
    return _PyTraceMalloc_FILTER_LOAD(&tm_lean);
}

static inline int
lean_on(int gil_held)
{
    return gil_held && _PyTraceMalloc_FILTER_LOAD(&tm_lean);
}

/* ---- the lean paths' common case -------------------------------------

   The pymalloc pair and the re-trace as they nearly always are: the
   block's pool in the pool cache, its slot holding the trace (or empty,
   for a new one), the current frame linked and its line in its site
   table, no peak waiting to be committed, no compaction or dump due, no
   thread without the GIL in the engine.  All inline with nothing called,
   so that the hooks save no register for them.  Anything else gives up
   before it changes anything, and the out-of-line lean path does the
   whole work. */

/* The common cases below are entered with the lock that _PyTraceMalloc_TryLock()
   took: done, they release it and return 1; not their case, they return 0
   with nothing done and the lock still held, for the out-of-line path. */

/* Trace PTR, a block of SIZE bytes just returned to the GIL holder. */
static inline int
lean_trace_fast(void *ptr, size_t size)
{
    _PyTraceMalloc_Node node;
    _PyTraceMalloc_Slot *slot;
    uint32_t *live;
    int hit;
    if (size > _PyTraceMalloc_POOL_MAX_REQUEST
        || tm.tree.nnodes >= tm.tree.compact_at
        || !tm.peak.lean
        || tm.store.tracked_in_table
        || tm.store.current + size >= tm.dumpover.next
        || (node = current_node_fast()) == 0
        || (slot = _PyTraceMalloc_PoolSlotInCache(ptr, &live, 1,
                                                  &hit)) == NULL
        || _PyTraceMalloc_SlotNode(slot) != 0) {
        return 0;
    }
    (*live)++;
    tm.store.ntraces++;
    _PyTraceMalloc_SlotSetNode(slot, node_to_stored(node));
    slot->size = (uint16_t)size;
    (void)peak_account_add(_PyTraceMalloc_DEFAULT_DOMAIN, node, size);
    tm.store.current += size;
    if (tm.store.current > tm.store.peak) {
        tm.store.peak = tm.store.current;
        tm.peak.pending = 1;
    }
    _PyTraceMalloc_Unlock();
    return 1;
}

/* Take out the trace of PTR, which the GIL holder frees. */
static inline int
lean_untrace_fast(void *ptr)
{
    uint32_t *live;
    int hit;
    _PyTraceMalloc_Slot *slot = _PyTraceMalloc_PoolSlotInCache(ptr, &live, 1,
                                                                &hit);
    uint32_t stored = slot != NULL ? _PyTraceMalloc_SlotNode(slot) : 0;
    if (stored == 0 || tm.peak.pending || !tm.peak.lean) {
        return 0;
    }
    fresh_forget(ptr);
    _PyTraceMalloc_Node node = stored_node(stored);
    size_t size = slot->size;
    peak_account_remove(_PyTraceMalloc_DEFAULT_DOMAIN, node, size);
    tm.store.current -= size;
    tm.store.ntraces--;
    _PyTraceMalloc_SlotSetNode(slot, 0);
    (*live)--;
    remember_removed(ptr, node);
    _PyTraceMalloc_Unlock();
    return 1;
}

/* The re-trace of PTR, a block reused by the GIL holder (*FOUND: whether
   PTR had a trace).  The node first, so that a frame that the common case
   cannot link gives up before the slot lookup. */
static inline int
retrace_fast(uintptr_t ptr, int *found)
{
    _PyTraceMalloc_Node node;
    _PyTraceMalloc_Slot *slot;
    uint32_t *live;
    int hit;
    if (tm_untraced_depth > 0
        || tm.tree.nnodes >= tm.tree.compact_at
        || !tm.peak.lean
        || (node = current_node_fast()) == 0
        || (slot = _PyTraceMalloc_PoolSlotInCache((const void *)ptr, &live,
                                                  0, &hit)) == NULL) {
        return 0;
    }
    uint32_t stored = _PyTraceMalloc_SlotNode(slot);
    if (stored == 0 && tm.hidden.used != 0) {
        return 0;       /* maybe an export's block (I15) */
    }
    if (stored != node_to_stored(node) && stored != 0) {
        if (tm.peak.pending) {
            return 0;
        }
        peak_account_remove(_PyTraceMalloc_DEFAULT_DOMAIN,
                            stored_node(stored), slot->size);
        (void)peak_account_add(_PyTraceMalloc_DEFAULT_DOMAIN, node,
                               slot->size);
        _PyTraceMalloc_SlotSetNode(slot, node_to_stored(node));
    }
    _PyTraceMalloc_Unlock();
    /* 0: allocated before tracing started, no trace to move, and no
       export's block. */
    *found = stored != 0;
    return 1;
}

/* Trace PTR (not NULL), just returned by the allocator for SIZE bytes to
   the GIL holder, at the current position, under the lock, which it
   releases; free it and return NULL when the bookkeeping has no memory
   (as the general path). */
static inline void *
lean_trace_locked(PyMemAllocatorEx *alloc, void *ptr, size_t size)
{
    PyThreadState *tstate = _PyThreadState_GET();
    int res = -1;
    compact_if_due();
    _PyTraceMalloc_Node node = current_node(tstate);
    if (node != UINT32_MAX) {
        res = store_add(_PyTraceMalloc_DEFAULT_DOMAIN, (uintptr_t)ptr, size,
                        node, size <= _PyTraceMalloc_POOL_MAX_REQUEST, 1);
    }
    _PyTraceMalloc_Unlock();
    if (res < 0) {
        alloc->free(alloc->ctx, ptr);
        return NULL;
    }
    return ptr;
}

Py_NO_INLINE __attribute__((flatten)) static void *
lean_trace_locked_slow(PyMemAllocatorEx *alloc, void *ptr, size_t size)
{
    return lean_trace_locked(alloc, ptr, size);
}

Py_NO_INLINE __attribute__((flatten)) static void *
lean_trace_slow(PyMemAllocatorEx *alloc, void *ptr, size_t size)
{
    _PyTraceMalloc_Lock();
    return lean_trace_locked(alloc, ptr, size);
}

/* Trace PTR, just returned by the allocator for SIZE bytes to the GIL
   holder (see lean_trace_locked()). */
static inline void *
lean_trace(PyMemAllocatorEx *alloc, void *ptr, size_t size)
{
    if (ptr == NULL || tm_untraced_depth != 0) {
        if (ptr != NULL && export_level()) {
            export_block(ptr, size);
        }
        return ptr;
    }
    if (!_PyTraceMalloc_TryLock()) {
        return lean_trace_slow(alloc, ptr, size);
    }
    if (lean_trace_fast(ptr, size)) {
        return ptr;
    }
    return lean_trace_locked_slow(alloc, ptr, size);
}

static inline void *
lean_malloc(PyMemAllocatorEx *alloc, size_t size)
{
    /* Untraced around the allocator, as on the general path: native
       tracing must not see a C allocator's call made for this block. */
    tm_untraced_depth++;
    void *ptr = alloc->malloc(alloc->ctx, size);
    tm_untraced_depth--;
    return lean_trace(alloc, ptr, size);
}

static inline void *
lean_calloc(PyMemAllocatorEx *alloc, size_t nelem, size_t elsize)
{
    tm_untraced_depth++;
    void *ptr = alloc->calloc(alloc->ctx, nelem, elsize);
    tm_untraced_depth--;
    return lean_trace(alloc, ptr, nelem * elsize);
}

/* Take out the trace of PTR (not NULL), which the GIL holder frees, under
   the lock, which it releases; then free it. */
static inline void
lean_free_locked(PyMemAllocatorEx *alloc, void *ptr)
{
    _PyTraceMalloc_Node node;
    size_t size;
    fresh_forget(ptr);
    if (store_remove(_PyTraceMalloc_DEFAULT_DOMAIN, (uintptr_t)ptr, &node,
                     &size, STORE_POOL_FIRST, 1)) {
        remember_removed(ptr, node);
    }
    else {
        hidden_forget((uintptr_t)ptr);
    }
    _PyTraceMalloc_Unlock();
    alloc->free(alloc->ctx, ptr);
}

Py_NO_INLINE __attribute__((flatten)) static void
lean_free_locked_slow(PyMemAllocatorEx *alloc, void *ptr)
{
    lean_free_locked(alloc, ptr);
}

Py_NO_INLINE __attribute__((flatten)) static void
lean_free_slow(PyMemAllocatorEx *alloc, void *ptr)
{
    _PyTraceMalloc_Lock();
    lean_free_locked(alloc, ptr);
}

/* The GIL holder frees PTR (not NULL). */
static inline void
lean_free(PyMemAllocatorEx *alloc, void *ptr)
{
    if (!_PyTraceMalloc_TryLock()) {
        lean_free_slow(alloc, ptr);
        return;
    }
    if (lean_untrace_fast(ptr)) {
        alloc->free(alloc->ctx, ptr);
        return;
    }
    lean_free_locked_slow(alloc, ptr);
}

/* ---- hooks ------------------------------------------------------------ */

/* The traced variants of the allocator API (Objects/obmalloc.c calls them
   only while tracing).  Each calls the allocator with this thread marked
   untraced, so that a user allocator built on the public API gets its own
   blocks untraced, then records the caller's block. */

/* After a successful allocation: trace PTR, or free it and fail (as
   upstream, a block that cannot be traced is not handed out). */
static inline void *
traced_result(PyMemAllocatorEx *alloc, void *ptr, size_t size, int gil_held)
{
    if (ptr == NULL) {
        return NULL;
    }
    if (tm_untraced_depth != 0) {
        if (gil_held && export_level()) {
            export_block(ptr, size);
        }
        return ptr;
    }
    if (trace_add(_PyTraceMalloc_DEFAULT_DOMAIN, ptr, size, gil_held,
                  fresh_block_pooled(size, gil_held), 1, 0) < 0) {
        alloc->free(alloc->ctx, ptr);
        return NULL;
    }
    return ptr;
}

/* ---- sampling mode -------------------------------------------------------- */

/* The countdown of this thread ran out within the allocation of PTR (SIZE
   bytes, maybe NULL): trace it if it is sampled and the user's, else hand
   it out untraced.  As in exact mode, a sample that cannot be recorded is
   not handed out. */
static void *
sampled_result(PyMemAllocatorEx *alloc, void *ptr, size_t size, int gil_held)
{
    if (!sample_crossed(size) || ptr == NULL) {
        return ptr;
    }
    if (tm_untraced_depth != 0) {
        /* A sampled block of the tracer's: kept as an export's, so that
           the program's reuse of it is sampled as a block of its own
           would be. */
        if (gil_held && export_level()) {
            export_block(ptr, size);
        }
        return ptr;
    }
    if (trace_add_slow(_PyTraceMalloc_DEFAULT_DOMAIN, ptr, size, gil_held,
                       0, 1, 0) < 0) {
        alloc->free(alloc->ctx, ptr);
        return NULL;
    }
    return ptr;
}

Py_NO_INLINE static void *
sampled_malloc(PyMemAllocatorEx *alloc, size_t size, int gil_held)
{
    tm_untraced_depth++;
    void *ptr = alloc->malloc(alloc->ctx, size);
    tm_untraced_depth--;
    return sampled_result(alloc, ptr, size, gil_held);
}

Py_NO_INLINE static void *
sampled_calloc(PyMemAllocatorEx *alloc, size_t nelem, size_t elsize,
               int gil_held)
{
    tm_untraced_depth++;
    void *ptr = alloc->calloc(alloc->ctx, nelem, elsize);
    tm_untraced_depth--;
    return sampled_result(alloc, ptr, nelem * elsize, gil_held);
}

/* The hooks that the inline entry points of pycore_tracemalloc.h call:
   always in exact mode; in sampling mode once this thread's countdown ran
   out (the caller took SIZE off it) or for a block the filter may hold.
   Exact mode's paths are out of line, so that no register is saved before
   the mode is known.  The hot one, malloc of the mem and obj domains (GIL
   held), gets a copy of the whole path with the GIL side chosen at
   compile time. */
Py_NO_INLINE static void *
exact_malloc(PyMemAllocatorEx *alloc, size_t size, int gil_held)
{
    tm_untraced_depth++;
    void *ptr = alloc->malloc(alloc->ctx, size);
    tm_untraced_depth--;
    if (gil_held) {
        return traced_result(alloc, ptr, size, 1);
    }
    return traced_result(alloc, ptr, size, 0);
}

/* Sampling mode with a user allocator (see sample_mode_word()): the
   inline entry points send every call here, with the countdown left
   alone.  1 if an allocation of SIZE bytes is not sampled: it is one the
   user allocator makes for itself while serving a call (left off the
   countdown, as exact mode leaves it untraced), or
   the countdown did not run out within it.  0: go on as the inline path
   does when the countdown ran out. */
static inline int
routed_skip(size_t size)
{
    if (_PyTraceMalloc_MODE() < 0) {
        return 0;       /* the inline path took SIZE off already */
    }
    return tm_untraced_depth > 0 || (sample_left -= (int64_t)size) > 0;
}

Py_NO_INLINE static void *
routed_malloc(PyMemAllocatorEx *alloc, size_t size)
{
    tm_untraced_depth++;
    void *ptr = alloc->malloc(alloc->ctx, size);
    tm_untraced_depth--;
    return ptr;
}

Py_NO_INLINE static void *
routed_calloc(PyMemAllocatorEx *alloc, size_t nelem, size_t elsize)
{
    tm_untraced_depth++;
    void *ptr = alloc->calloc(alloc->ctx, nelem, elsize);
    tm_untraced_depth--;
    return ptr;
}

Py_NO_INLINE static void *
malloc_general(PyMemAllocatorEx *alloc, size_t size, int gil_held)
{
    if (sample_interval()) {
        if (routed_skip(size)) {
            return routed_malloc(alloc, size);
        }
        return sampled_malloc(alloc, size, gil_held);
    }
    return exact_malloc(alloc, size, gil_held);
}

/* Flattened: the lean path inline, with nothing called on it but the
   allocator (the general path and the slow lookups stay out of line). */
__attribute__((flatten)) void *
_PyTraceMalloc_MallocHook(PyMemAllocatorEx *alloc, size_t size, int gil_held)
{
    if (lean_on(gil_held)) {
        return lean_malloc(alloc, size);
    }
    return malloc_general(alloc, size, gil_held);
}

Py_NO_INLINE static void *
exact_calloc(PyMemAllocatorEx *alloc, size_t nelem, size_t elsize,
             int gil_held)
{
    tm_untraced_depth++;
    void *ptr = alloc->calloc(alloc->ctx, nelem, elsize);
    tm_untraced_depth--;
    return traced_result(alloc, ptr, nelem * elsize, gil_held);
}

Py_NO_INLINE static void *
calloc_general(PyMemAllocatorEx *alloc, size_t nelem, size_t elsize,
               int gil_held)
{
    if (sample_interval()) {
        if (routed_skip(nelem * elsize)) {
            return routed_calloc(alloc, nelem, elsize);
        }
        return sampled_calloc(alloc, nelem, elsize, gil_held);
    }
    return exact_calloc(alloc, nelem, elsize, gil_held);
}

/* Flattened: the lean path inline, with nothing called on it but the
   allocator (the general path and the slow lookups stay out of line). */
__attribute__((flatten)) void *
_PyTraceMalloc_CallocHook(PyMemAllocatorEx *alloc, size_t nelem,
                          size_t elsize, int gil_held)
{
    if (lean_on(gil_held)) {
        return lean_calloc(alloc, nelem, elsize);
    }
    return calloc_general(alloc, nelem, elsize, gil_held);
}

/* Forget PTR's trace, then free it: before the free, while its pool header
   is still readable and before another thread can get the address. */
static inline void
trace_remove(void *ptr, int gil_held)
{
    PyThreadState *tstate;
    _PyTraceMalloc_Node node;
    size_t size;
    int side = engine_enter(gil_held, &tstate);
    if (side) {
        fresh_forget(ptr);
    }
    if (store_remove(_PyTraceMalloc_DEFAULT_DOMAIN, (uintptr_t)ptr,
                     &node, &size, store_where(gil_held, side), 1)) {
        remember_removed(ptr, node);
    }
    else {
        hidden_forget((uintptr_t)ptr);
    }
    engine_leave(side);
}

Py_NO_INLINE static void
free_general(PyMemAllocatorEx *alloc, void *ptr, int gil_held)
{
    if (ptr != NULL) {
        if (gil_held) {
            trace_remove(ptr, 1);
        }
        else {
            trace_remove(ptr, 0);
        }
    }
    alloc->free(alloc->ctx, ptr);
}

/* Flattened: the lean path inline, with nothing called on it but the
   allocator (the general path and the slow lookups stay out of line). */
__attribute__((flatten)) void
_PyTraceMalloc_FreeHook(PyMemAllocatorEx *alloc, void *ptr, int gil_held)
{
    if (lean_on(gil_held) && ptr != NULL) {
        lean_free(alloc, ptr);
        return;
    }
    free_general(alloc, ptr, gil_held);
}

/* SAMPLED: 0 in exact mode; in sampling mode 1, or 2 when the caller has
   already taken SIZE off the countdown. */
static void *
realloc_traced(PyMemAllocatorEx *alloc, void *ptr, size_t size, int gil_held,
               int sampled)
{
    /* Take the old trace out first: once realloc() has moved the block,
       its old pool may be gone, and another thread may get its address. */
    _PyTraceMalloc_Node old_node = 0;
    size_t old_size = 0;
    PyThreadState *tstate;
    int side = engine_enter(gil_held, &tstate);
    if (side) {
        fresh_forget(ptr);
    }
    uint32_t generation = tm.generation;
    int had_trace = store_remove(_PyTraceMalloc_DEFAULT_DOMAIN,
                                 (uintptr_t)ptr, &old_node, &old_size,
                                 store_where(gil_held, side), 1);
    /* An export's block resized: by the program, the new block is its
       (traced here, as upstream traces the resize of an untraced
       block); by an export, an export's block again. */
    int had_hidden = 0;
    if (had_trace) {
        remember_removed(ptr, old_node);
    }
    else if (tm.hidden.used != 0) {
        had_hidden = hidden_take((uintptr_t)ptr, &old_size);
    }
    engine_leave(side);

    tm_untraced_depth++;
    void *ptr2 = alloc->realloc(alloc->ctx, ptr, size);
    tm_untraced_depth--;
    if (ptr2 == NULL) {
        if (had_trace) {
            /* The old block lives on: put its trace back.  This reuses
               the room just freed, so it cannot fail for lack of memory. */
            side = engine_enter(gil_held, &tstate);
            /* Not if clear_traces(), stop() or a compaction ran meanwhile:
               the trace was cleared, or its node id means another path. */
            if (_PyTraceMalloc_TRACING()
                && generation == tm.generation
                && store_add(_PyTraceMalloc_DEFAULT_DOMAIN,
                             (uintptr_t)ptr, old_size, old_node,
                             !sampled && gil_held && side, 1) == 0) {
                /* The same block: not an allocation again. */
                peak_account_unalloc(_PyTraceMalloc_DEFAULT_DOMAIN,
                                     old_node, old_size);
            }
            engine_leave(side);
        }
        else if (had_hidden) {
            side = engine_enter(gil_held, &tstate);
            if (_PyTraceMalloc_TRACING() && generation == tm.generation) {
                hidden_add((uintptr_t)ptr, old_size);
            }
            engine_leave(side);
        }
        return NULL;
    }
    /* Like upstream, the resized block is traced where it was resized.  If
       the bookkeeping fails now the block cannot be given back (realloc()
       may have shrunk it in place), so it stays untraced: the totals stay
       exact, one trace is missing. */
    if (sampled) {
        /* The resized block is a new allocation of SIZE bytes for the
           countdown. */
        if (sampled == 1 && (tm_untraced_depth > 0
                             || (sample_left -= (int64_t)size) > 0)) {
            /* Not sampled, or a user allocator's own block (left off the
               countdown, see routed_skip()). */
            return ptr2;
        }
        if (!sample_crossed(size)) {
            return ptr2;
        }
    }
    if (tm_untraced_depth == 0) {
        (void)trace_add_slow(_PyTraceMalloc_DEFAULT_DOMAIN, ptr2, size,
                             gil_held,
                             !sampled && fresh_block_pooled(size, gil_held),
                             1, 1);
    }
    else if (gil_held && export_level()) {
        export_block(ptr2, size);
    }
    return ptr2;
}

Py_NO_INLINE static void *
realloc_exact(PyMemAllocatorEx *alloc, void *ptr, size_t size, int gil_held)
{
    return realloc_traced(alloc, ptr, size, gil_held, 0);
}

Py_NO_INLINE static void *
realloc_sampled(PyMemAllocatorEx *alloc, void *ptr, size_t size,
                int gil_held, int counted)
{
    return realloc_traced(alloc, ptr, size, gil_held, counted ? 2 : 1);
}

/* COUNTED: the caller took SIZE off the countdown (sampling mode, a block
   the filter does not hold). */
void *
_PyTraceMalloc_ReallocHook(PyMemAllocatorEx *alloc, void *ptr, size_t size,
                           int gil_held, int counted)
{
    if (ptr == NULL) {
        /* An allocation (the inline path left the countdown alone). */
        return _PyTraceMalloc_Malloc(alloc, size, gil_held);
    }
    if (sample_interval()) {
        /* A block the filter may hold (its trace goes first), or one whose
           resize used up the countdown. */
        return realloc_sampled(alloc, ptr, size, gil_held, counted);
    }
    return realloc_exact(alloc, ptr, size, gil_held);
}

/* ---- objects ------------------------------------------------------------ */

/* Reused by the tracer's own code (an export): the block is the
   tracer's now, not the program's (upstream would trace it at the line
   that called the export): its trace goes, and the block is kept as an
   export's (I15), so that the program's next reuse of it is traced. */
Py_NO_INLINE static void
retrace_by_export(uintptr_t ptr)
{
    _PyTraceMalloc_Node node;
    size_t size;
    if (_PyTraceMalloc_StoreRemove_unlocked(_PyTraceMalloc_DEFAULT_DOMAIN,
                                            ptr, &node, &size)
        && export_level()) {
        hidden_add(ptr, size);
    }
}

/* The program reuses PTR, which has no trace: if it is an export's block,
   it gets its trace here, at the current position, as upstream moves the
   trace that its export's line gave it.  1 if it was one and is traced
   now.  SIDE: the engine was entered with the engine's GIL (pool slots
   may be used). */
Py_NO_INLINE static int
hidden_retrace(uintptr_t ptr, PyThreadState *tstate, int side)
{
    size_t size;
    if (!hidden_take(ptr, &size)) {
        return 0;
    }
    _PyTraceMalloc_Node node = current_node(tstate);
    if (node == UINT32_MAX) {
        return 0;       /* no memory: it stays untraced */
    }
    int pooled = side && !tm.sample.interval
                 && size <= _PyTraceMalloc_POOL_MAX_REQUEST;
    if (store_add(_PyTraceMalloc_DEFAULT_DOMAIN, ptr, size, node, pooled,
                  0) < 0) {
        return 0;
    }
    tm.hidden.retraced++;
    return 1;
}

/* The re-trace proper of _PyTraceMalloc_NewReference(), by the engine's
   GIL holder, under the lock, which it releases: out of line, after the
   lean path's common case (retrace_fast()) and on the general path, so
   that its register saves are paid by neither that case nor the new
   objects the general path skips. */
static inline int
retrace_gil_locked(uintptr_t ptr)
{
    int found = 0;
    if (tm_untraced_depth > 0) {
        retrace_by_export(ptr);
        _PyTraceMalloc_Unlock();
        return -1;
    }
    compact_if_due();
    /* Objects allocated before tracing started have no trace: find the
       trace first, and compute the traceback only for traced objects. */
    size_t size;
    node_ref ref = store_node_ref(_PyTraceMalloc_DEFAULT_DOMAIN, ptr,
                                  &size);
    if (ref != NULL) {
        _PyTraceMalloc_Node node = current_node(_PyThreadState_GET());
        if (node != UINT32_MAX) {
            store_retrace(ref, size, node);
            found = 1;
        }
    }
    else if (tm.hidden.used != 0) {
        found = hidden_retrace(ptr, _PyThreadState_GET(), 1);
    }
    _PyTraceMalloc_Unlock();
    return found ? 0 : -1;
}

Py_NO_INLINE __attribute__((flatten)) static int
retrace_locked_slow(uintptr_t ptr)
{
    return retrace_gil_locked(ptr);
}

Py_NO_INLINE __attribute__((flatten)) static int
retrace_object(uintptr_t ptr)
{
    _PyTraceMalloc_Lock();
    return retrace_gil_locked(ptr);
}

/* The lean path's re-trace of PTR. */
static inline int
retrace_lean(uintptr_t ptr)
{
    if (!_PyTraceMalloc_TryLock()) {
        return retrace_object(ptr);
    }
    int found;
    if (retrace_fast(ptr, &found)) {
        return found ? 0 : -1;
    }
    return retrace_locked_slow(ptr);
}

/* The re-trace for a thread of an interpreter with a GIL of its own
   (3.13): without the engine's GIL, its blocks are in the table (I1). */
Py_NO_INLINE static int
retrace_object_foreign(uintptr_t ptr)
{
    int found = 0;
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    if (tm_untraced_depth == 0) {
        /* As retrace_object(): compaction first, then the lookup. */
        compact_if_due();
        table_entry *e = table_find(_PyTraceMalloc_DEFAULT_DOMAIN, ptr);
        if (e != NULL) {
            _PyTraceMalloc_Node node = current_node(tstate);
            if (node != UINT32_MAX) {
                store_retrace(&e->node, e->size, node);
                found = 1;
            }
        }
        else if (tm.hidden.used != 0) {
            found = hidden_retrace(ptr, tstate, 0);
        }
    }
    engine_leave(side);
    return found ? 0 : -1;
}

/* Hottest path of all on numeric code: every object taken from a free
   list (floats, tuples, frames...) gets the current traceback. */
__attribute__((flatten)) int
_PyTraceMalloc_NewReference(PyObject *op)
{
    if (!_PyTraceMalloc_TRACING()) {
        return -1;
    }
    uintptr_t ptr = base_object_block(op);
    /* Objects are made with a GIL held: under the lean guard's one GIL,
       the engine's, in exact mode. */
    int lean = lean_on(1);
    if (!lean) {
        if (sample_interval() && !sample_filter_hit((const void *)ptr)) {
            return -1;      /* sampling mode: not a sampled block */
        }
        if (!base_on_engine_gil(_PyThreadState_GET())) {
            return retrace_object_foreign(ptr);
        }
    }
    if (ptr == fresh_block) {
        /* Traced a moment ago, here (see fresh_block). */
        fresh_block = 0;
        return 0;
    }
    return lean ? retrace_lean(ptr) : retrace_object(ptr);
}

/* A block of the default domain was taken from a free list of its own (a
   dictionary's key table, popped by new_keys_object(); a float, whose
   block is the object): re-trace it at the current traceback, as
   _PyTraceMalloc_NewReference() does for an object, so that the line
   that reuses it owns it, not the line that allocated it first.  The
   block is its own address, and it is never the block a resize just
   traced (fresh_block): it was freed to its list since, and a free
   clears that.  Called by _PyTraceMalloc_RETRACE_BLOCK() and
   _PyTraceMalloc_RETRACE_FLOAT() only, which have seen tracing on (the
   caller holds a GIL, so stop() has not run since) and BLOCK is not
   NULL. */
__attribute__((flatten)) int
_PyTraceMalloc_RetraceBlock(void *block)
{
    assert(_PyTraceMalloc_TRACING() && block != NULL);
    uintptr_t ptr = (uintptr_t)block;
    /* Popped with a GIL held: the lean path when its guard is on, as
       for an object (small dicts are made at every other line). */
    if (lean_on(1)) {
        return retrace_lean(ptr);
    }
    if (sample_interval() && !sample_filter_hit(block)) {
        return -1;      /* sampling mode: not a sampled block */
    }
    if (!base_on_engine_gil(_PyThreadState_GET())) {
        return retrace_object_foreign(ptr);
    }
    return retrace_object(ptr);
}
