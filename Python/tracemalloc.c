/* The tracing engine: hook entry points, start/stop, and the C API.
 *
 * The hooks are called from the allocator API entry points in
 * Objects/obmalloc.c, after the allocator has run, and only when
 * _Py_tracemalloc_config.tracing is set.  They never allocate through a
 * traced API and never call PyGILState_Ensure(): the raw domain and
 * PyTraceMalloc_Track() may run without the GIL, and then read the calling
 * thread's own frames, which nobody else can change meanwhile.
 */

#include "Python.h"
#include "pycore_fileutils.h"     // _Py_write_noraise()
#include "pycore_frame.h"
#include "pycore_gc.h"
#include "pycore_object.h"        // _PyType_PreHeaderSize()
#include "pycore_pylifecycle.h"
#include "pycore_pystate.h"       // _PyThreadState_GET()
#include "pycore_traceback.h"     // _Py_DumpHexadecimal()
#include "pycore_tracemalloc.h"

/* One translation unit for the whole engine: the store and the
   call-context tree stay in files of their own, but are compiled here, so
   that the hot paths (hook -> store -> tree) inline into each other. */
#include "tracemalloc_store.c"
#include "tracemalloc_cct.c"

/* Allocations this thread makes that are not the user's: the engine's
   exports (tm_get_traces() builds its list suspended, like upstream), and
   the blocks a user allocator installed with PyMem_SetAllocator() gets for
   itself through the public API while serving a traced call (upstream's
   re-entrancy guard: the caller's block is traced, not the pieces it is
   made of).  Per thread: other threads' allocations are still traced.
   C11's _Thread_local: 3.11 has no thread-local helper of its own (its
   Py_tss_t API is a function call and a lookup). */
static _Thread_local int tm_untraced_depth;

int
_PyTraceMalloc_SuspendThread(void)
{
    return tm_untraced_depth++;
}

int
_PyTraceMalloc_ResumeThread(void)
{
    int depth = tm_untraced_depth;
    if (depth > 0) {
        tm_untraced_depth--;
    }
    return depth;
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
    if (gil_held || _PyTraceMalloc_HoldsGIL()) {
        *tstate = _PyThreadState_GET();
        _PyTraceMalloc_Lock();
        return 1;
    }
    _PyTraceMalloc_LockNoGIL();
    /* Read under the lock: once the runtime is finalizing, the thread
       states of daemon threads are freed (_PyThreadState_DeleteExcept()),
       and a daemon thread allocating without the GIL (zlib, bz2, lzma) must
       not read its own.  The finalizing thread stores the flag before it
       frees them, and each free passes through the engine lock, so a
       thread inside the lock either sees the flag or still has a live
       thread state.  Such allocations get the empty traceback. */
    if (_PyRuntimeState_GetFinalizing(&_PyRuntime) != NULL) {
        *tstate = NULL;
    }
    else {
        *tstate = PyGILState_GetThisThreadState();
    }
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
    last_removed.generation = _PyTraceMalloc_cct_generation;
}

/* The block traced last by the hooks of the default domain with the GIL:
   see "The fresh block" in Doc/internals/tracemalloc-engine.rst.  Between
   the allocation of an object's block and the _Py_NewReference() that
   follows it in CPython's own code (one C call, no Python code of its own
   in between), the re-trace would find the node just recorded: it is
   skipped.  Protected by the GIL: any thread's free or realloc of the
   block clears it, so an address reused later from a free list is never
   taken for it, whichever thread reuses it; PyObject_Init() clears it
   (an extension may initialise a block elsewhere than it allocated it). */
static uintptr_t fresh_block;

static inline void
fresh_forget(void *ptr)
{
    if ((uintptr_t)ptr == fresh_block) {
        fresh_block = 0;
    }
}

void
_PyTraceMalloc_ForgetFresh(void)
{
    fresh_block = 0;
}

/* Record PTR at the current position: 0, or -1 when the bookkeeping could
   not get memory.  Inline: the hooks call it with GIL_HELD constant.
   BLOCK: PTR is a block the allocator just returned (see store_add()). */
static inline int
trace_add(unsigned int domain, void *ptr, size_t size, int gil_held,
          int pooled, int block)
{
    PyThreadState *tstate;
    int side = engine_enter(gil_held, &tstate);
    int res = 0;
    /* Checked again inside: stop() may have run since the caller looked at
       the flag, and a trace added now would outlive the tables. */
    if (_PyTraceMalloc_TRACING()) {
        cct_maybe_compact();
        _PyTraceMalloc_Node node = current_node(tstate);
        if (node == UINT32_MAX) {
            res = -1;
        }
        else {
            res = store_add(domain, (uintptr_t)ptr, size, node,
                            pooled && side, block);
            if (res == 0 && domain == _PyTraceMalloc_DEFAULT_DOMAIN
                && side) {
                /* Only with the GIL: objects are made with it. */
                fresh_block = (uintptr_t)ptr;
            }
        }
    }
    engine_leave(side);
    return res;
}

/* The same, out of line, for the paths that are not hot. */
Py_NO_INLINE static int
trace_add_slow(unsigned int domain, void *ptr, size_t size, int gil_held,
               int pooled, int block)
{
    return trace_add(domain, ptr, size, gil_held, pooled, block);
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
    if (ptr != NULL && tm_untraced_depth == 0
        && trace_add(_PyTraceMalloc_DEFAULT_DOMAIN, ptr, size, gil_held,
                     fresh_block_pooled(size, gil_held), 1) < 0) {
        alloc->free(alloc->ctx, ptr);
        return NULL;
    }
    return ptr;
}

/* The hot hook: the mem and obj domains (GIL held) get a copy of the
   whole path with the GIL side chosen at compile time. */
void *
_PyTraceMalloc_Malloc(PyMemAllocatorEx *alloc, size_t size, int gil_held)
{
    tm_untraced_depth++;
    void *ptr = alloc->malloc(alloc->ctx, size);
    tm_untraced_depth--;
    if (gil_held) {
        return traced_result(alloc, ptr, size, 1);
    }
    return traced_result(alloc, ptr, size, 0);
}

void *
_PyTraceMalloc_Calloc(PyMemAllocatorEx *alloc, size_t nelem, size_t elsize,
                      int gil_held)
{
    tm_untraced_depth++;
    void *ptr = alloc->calloc(alloc->ctx, nelem, elsize);
    tm_untraced_depth--;
    return traced_result(alloc, ptr, nelem * elsize, gil_held);
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
    engine_leave(side);
}

void
_PyTraceMalloc_Free(PyMemAllocatorEx *alloc, void *ptr, int gil_held)
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

void *
_PyTraceMalloc_Realloc(PyMemAllocatorEx *alloc, void *ptr, size_t size,
                       int gil_held)
{
    if (ptr == NULL) {
        return _PyTraceMalloc_Malloc(alloc, size, gil_held);
    }
    /* Take the old trace out first: once realloc() has moved the block,
       its old pool may be gone, and another thread may get its address. */
    _PyTraceMalloc_Node old_node = 0;
    size_t old_size = 0;
    PyThreadState *tstate;
    int side = engine_enter(gil_held, &tstate);
    if (side) {
        fresh_forget(ptr);
    }
    uint32_t generation = _PyTraceMalloc_cct_generation;
    int had_trace = store_remove(_PyTraceMalloc_DEFAULT_DOMAIN,
                                 (uintptr_t)ptr, &old_node, &old_size,
                                 store_where(gil_held, side), 1);
    if (had_trace) {
        remember_removed(ptr, old_node);
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
                && generation == _PyTraceMalloc_cct_generation) {
                (void)store_add(_PyTraceMalloc_DEFAULT_DOMAIN,
                                (uintptr_t)ptr, old_size, old_node,
                                gil_held && side, 1);
            }
            engine_leave(side);
        }
        return NULL;
    }
    /* Like upstream, the resized block is traced where it was resized.  If
       the bookkeeping fails now the block cannot be given back (realloc()
       may have shrunk it in place), so it stays untraced: the totals stay
       exact, one trace is missing. */
    if (tm_untraced_depth == 0) {
        (void)trace_add_slow(_PyTraceMalloc_DEFAULT_DOMAIN, ptr2, size,
                             gil_held, fresh_block_pooled(size, gil_held), 1);
    }
    return ptr2;
}

/* ---- objects ------------------------------------------------------------ */

static inline uintptr_t
object_block(PyObject *op)
{
    /* The block starts before the object when the type has a GC header
       (and, in 3.11, the managed-dict pre-header). */
    return (uintptr_t)((char *)op - _PyType_PreHeaderSize(Py_TYPE(op)));
}

/* The re-trace proper of _PyTraceMalloc_NewReference(), out of line so
   that its register saves are not paid by the new objects it skips. */
Py_NO_INLINE static int
retrace_object(uintptr_t ptr)
{
    int found = 0;
    _PyTraceMalloc_Lock();
    if (tm_untraced_depth > 0) {
        /* Reused by the engine's own export: the block is the tracer's
           now, not the user's (upstream would trace it at the line that
           called the export). */
        _PyTraceMalloc_Node node;
        size_t size;
        (void)_PyTraceMalloc_StoreRemove_unlocked(
            _PyTraceMalloc_DEFAULT_DOMAIN, ptr, &node, &size);
        _PyTraceMalloc_Unlock();
        return -1;
    }
    cct_maybe_compact();
    /* Objects allocated before tracing started have no trace: find the
       trace first, and compute the traceback only for traced objects. */
    size_t size;
    uint32_t *ref = _PyTraceMalloc_StoreNodeRef_unlocked(
        _PyTraceMalloc_DEFAULT_DOMAIN, ptr, &size);
    if (ref != NULL) {
        _PyTraceMalloc_Node node = current_node(_PyThreadState_GET());
        if (node != UINT32_MAX) {
            _PyTraceMalloc_StoreRetrace_unlocked(ref, size, node);
            found = 1;
        }
    }
    _PyTraceMalloc_Unlock();
    return found ? 0 : -1;
}

/* Hottest path of all on numeric code: every object taken from a free
   list (floats, tuples, frames...) gets the current traceback. */
int
_PyTraceMalloc_NewReference(PyObject *op)
{
    if (!_PyTraceMalloc_TRACING()) {
        return -1;
    }
    uintptr_t ptr = object_block(op);
    if (ptr == fresh_block) {
        /* Traced a moment ago, here (see fresh_block). */
        fresh_block = 0;
        return 0;
    }
    return retrace_object(ptr);
}

/* ---- start / stop ------------------------------------------------------- */

static void
engine_clear_unlocked(void)
{
    _PyTraceMalloc_StoreClear_unlocked();
    _PyTraceMalloc_CCTReset_unlocked();
}

int
_PyTraceMalloc_Start(int max_nframe)
{
    if (_Py_tracemalloc_config.initialized == TRACEMALLOC_FINALIZED) {
        /* A late __del__ must not restart tracing that nothing would stop
           (upstream's message). */
        PyErr_SetString(PyExc_RuntimeError,
                        "the tracemalloc module has been unloaded");
        return -1;
    }
    if (max_nframe < 1 || (unsigned long)max_nframe > UINT16_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "the number of frames must be in range [1; %lu]",
                     (unsigned long)UINT16_MAX);
        return -1;
    }
    if (_PyTraceMalloc_TRACING()) {
        return 0;       /* like upstream: tracing goes on, limit included */
    }
    _Py_tracemalloc_config.max_nframe = max_nframe;
    if (_PyTraceMalloc_StoreInit() < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "tracemalloc: cannot register fork handlers");
        return -1;
    }
    _PyTraceMalloc_Lock();
    engine_clear_unlocked();
    int res = _PyTraceMalloc_CCTStart_unlocked();
    if (res == 0) {
        _PyTraceMalloc_SET_TRACING(1);
    }
    else {
        engine_clear_unlocked();
    }
    _PyTraceMalloc_Unlock();
    if (res < 0) {
        PyErr_NoMemory();
        return -1;
    }
    _Py_tracemalloc_config.initialized = TRACEMALLOC_INITIALIZED;
    return 0;
}

void
_PyTraceMalloc_Stop(void)
{
    if (!_PyTraceMalloc_TRACING()) {
        return;
    }
    _PyTraceMalloc_Lock();
    _PyTraceMalloc_SET_TRACING(0);
    _PyTraceMalloc_StoreClear_unlocked();
    _PyTraceMalloc_CCTRelease_unlocked();
    _PyTraceMalloc_Unlock();
}

void
_PyTraceMalloc_ClearTraces(void)
{
    if (!_PyTraceMalloc_TRACING()) {
        return;
    }
    _PyTraceMalloc_Lock();
    /* Keeps the cct's cache: cannot fail. */
    engine_clear_unlocked();
    _PyTraceMalloc_Unlock();
}

int
_PyTraceMalloc_Init(int nframe)
{
    if (nframe == 0) {
        return 0;
    }
    return _PyTraceMalloc_Start(nframe);
}

void
_PyTraceMalloc_Fini(void)
{
    _PyTraceMalloc_Stop();
    _Py_tracemalloc_config.initialized = TRACEMALLOC_FINALIZED;
}

/* PyMem_SetAllocator() is installing an allocator in DOMAIN.  Blocks of
   the mem and obj domains may now be shifted by a header of its own: from
   now on the hooks check each block's skew, like every other lookup (see
   _PyTraceMalloc_PoolSlotCached()).  A block traced before still lies at
   the caller skew, so its free finds it the same way. */
void
_PyTraceMalloc_AllocatorChanged(int domain)
{
    if (domain == PYMEM_DOMAIN_RAW || !_PyTraceMalloc_TRACING()) {
        return;     /* the next start or clear computes it afresh */
    }
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    _PyTraceMalloc_blocks_exact = 0;
    engine_leave(side);
}

/* ---- the C API ---------------------------------------------------------- */

/* The default domain's traces may be in pymalloc's pools, which only the
   GIL holder may look at: without the GIL, the tracking API takes it for
   that domain, as upstream's PyTraceMalloc_Track() always does.  Other
   domains live in the table alone. */
static inline int
track_needs_gil(unsigned int domain, PyGILState_STATE *state)
{
    if (domain != _PyTraceMalloc_DEFAULT_DOMAIN
        || _PyTraceMalloc_HoldsGIL()) {
        return 0;
    }
    *state = PyGILState_Ensure();
    return 1;
}

int
PyTraceMalloc_Track(unsigned int domain, uintptr_t ptr, size_t size)
{
    if (!_PyTraceMalloc_TRACING()) {
        return -2;
    }
    PyGILState_STATE gil_state;
    int ensured = track_needs_gil(domain, &gil_state);
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    int res = 0;
    if (_PyTraceMalloc_TRACING()) {
        cct_maybe_compact();
        _PyTraceMalloc_Node node = current_node(tstate);
        res = node == UINT32_MAX ? -1 : store_track(domain, ptr, size, node);
    }
    engine_leave(side);
    if (ensured) {
        PyGILState_Release(gil_state);
    }
    return res;
}

int
PyTraceMalloc_Untrack(unsigned int domain, uintptr_t ptr)
{
    if (!_PyTraceMalloc_TRACING()) {
        return -2;
    }
    PyGILState_STATE gil_state;
    int ensured = track_needs_gil(domain, &gil_state);
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    _PyTraceMalloc_Node node;
    size_t size;
    (void)store_remove(domain, ptr, &node, &size, STORE_POOL_FIRST, 0);
    engine_leave(side);
    if (ensured) {
        PyGILState_Release(gil_state);
    }
    return 0;
}

PyObject *
_PyTraceMalloc_GetTraceback(unsigned int domain, uintptr_t ptr)
{
    if (!_PyTraceMalloc_TRACING()) {
        Py_RETURN_NONE;
    }
    _PyTraceMalloc_Node node;
    size_t size;
    _PyTraceMalloc_CCTView view;
    _PyTraceMalloc_Lock();
    int found = _PyTraceMalloc_StoreGet_unlocked(domain, ptr, &node, &size);
    if (found) {
        _PyTraceMalloc_CCTPin_unlocked(&view);
    }
    _PyTraceMalloc_Unlock();
    if (!found) {
        Py_RETURN_NONE;
    }
    /* Takes over the pin. */
    return _PyTraceMalloc_NodeToFrames(&view, node);
}

PyObject *
_PyTraceMalloc_GetObjectTraceback(PyObject *obj)
{
    return _PyTraceMalloc_GetTraceback(_PyTraceMalloc_DEFAULT_DOMAIN,
                                       object_block(obj));
}

/* ---- fatal-error helpers ------------------------------------------------ */

#define PUTS(fd, str) _Py_write_noraise(fd, str, (int)strlen(str))

/* Used by the debug hooks and _PyObject_AssertFailed(): may run in a
   crashing process, so it allocates nothing and only reads. */
void
_PyMem_DumpTraceback(int fd, const void *ptr)
{
    if (!_PyTraceMalloc_TRACING()) {
        PUTS(fd, "Enable tracemalloc to get the memory block "
                 "allocation traceback\n\n");
        return;
    }
    _PyTraceMalloc_Node node;
    size_t size;
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    /* Without the GIL, pymalloc's pools are not ours to read. */
    int found = side ? _PyTraceMalloc_StoreGet_unlocked(
                           _PyTraceMalloc_DEFAULT_DOMAIN, (uintptr_t)ptr,
                           &node, &size)
                     : store_get_table(_PyTraceMalloc_DEFAULT_DOMAIN,
                                       (uintptr_t)ptr, &node, &size);
    if (!found && last_removed.ptr == (uintptr_t)ptr
        && last_removed.generation == _PyTraceMalloc_cct_generation) {
        /* Being freed or resized by this thread right now. */
        node = last_removed.node;
        found = 1;
    }
    if (!found) {
        engine_leave(side);
        return;
    }
    /* Stay inside the engine while reading nodes: nothing here allocates
       or calls back into Python. */
    _PyTraceMalloc_CCTView view;
    _PyTraceMalloc_CCTView_unlocked(&view);
    PUTS(fd, "Memory block allocated at (most recent call first):\n");
    int limit = _Py_tracemalloc_config.max_nframe;
    for (int i = 0; i < limit; i++) {
        _PyTraceMalloc_Node parent;
        int lineno, kind;
        uint32_t depth;
        const void *data;
        Py_ssize_t length;
        if (!_PyTraceMalloc_NodeInfo(&view, node, &parent, &lineno, &depth,
                                     &data, &kind, &length)) {
            if (i == 0) {
                PUTS(fd, "  File \"<unknown>\", line 0\n");
            }
            break;
        }
        PUTS(fd, "  File \"");
        if (data == NULL) {
            PUTS(fd, "<unknown>");
        }
        else {
            /* ASCII with escapes, like faulthandler's _Py_DumpASCII(). */
            for (Py_ssize_t j = 0; j < length; j++) {
                Py_UCS4 ch = PyUnicode_READ(kind, data, j);
                if (' ' <= ch && ch <= 126) {
                    char c = (char)ch;
                    _Py_write_noraise(fd, &c, 1);
                }
                else if (ch <= 0xff) {
                    PUTS(fd, "\\x");
                    _Py_DumpHexadecimal(fd, ch, 2);
                }
                else if (ch <= 0xffff) {
                    PUTS(fd, "\\u");
                    _Py_DumpHexadecimal(fd, ch, 4);
                }
                else {
                    PUTS(fd, "\\U");
                    _Py_DumpHexadecimal(fd, ch, 8);
                }
            }
        }
        PUTS(fd, "\", line ");
        _Py_DumpDecimal(fd, (size_t)lineno);
        PUTS(fd, "\n");
        node = parent;
    }
    PUTS(fd, "\n");
    engine_leave(side);
}
