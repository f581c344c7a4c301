/* The tracing engine: the translation unit's root, start/stop, the C API.
 *
 * The engine is one translation unit: this file includes the engine's
 * private header and each file of the engine (the table of files is in
 * tracemalloc_engine.h), so that the hot paths inline into each other
 * across files.  Here: start/stop/clear, the C API (PyTraceMalloc_Track()
 * and friends), and the exports of C data that Modules/_tracemalloc.c
 * turns into Python objects.
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
#include "pycore_tracemalloc_native.h"

#include "tracemalloc_engine.h"
#include "tracemalloc_memory.c"
#include "tracemalloc_lock.c"
#include "tracemalloc_sample.c"
#include "tracemalloc_store.c"
#include "tracemalloc_tree.c"
#include "tracemalloc_peak.c"
#include "tracemalloc_framecache.c"
#include "tracemalloc_labels.c"
#include "tracemalloc_compact.c"
#include "tracemalloc_hooks.c"
#include "tracemalloc_dumpover.c"
#include "tracemalloc_startup.c"
#include "tracemalloc_native.c"
#include "tracemalloc_nativeframes.c"

/* ---- start / stop ------------------------------------------------------- */

/* Forget every trace and every node (clear_traces(), stop(), start()):
   everything that holds node ids is emptied with the tree (I4, I5, I8). */
static void
engine_reset_unlocked(void)
{
    _PyTraceMalloc_StoreClear_unlocked();
    native_maps_clear();
    tree_reset();
    compact_schedule(1, 0);
    peak_clear();
    if (tm.framecache.tables != NULL) {
        /* Kept, emptied (shrunk if it can): clear_traces() cannot fail
           for want of memory, and tracing goes on with a working cache. */
        cache_clear(1);
    }
    engine_recount_memory();
    generation_bump();
    /* The fresh block was the last resize of a run, or of the traces
       just cleared: its free may since have gone unseen (tracing off, or
       an inline free in sampling mode), and another object may land at
       its address. */
    fresh_reset();
}

/* Make the tables ready for tracing; -1 when out of memory. */
static int
engine_start_unlocked(void)
{
    if (framecache_start() < 0) {
        return -1;
    }
    /* Node 0's peak totals, and room for the first chunk of nodes. */
    if (peak_reserve((size_t)1 << CHUNK0_BITS) < 0) {
        return -1;
    }
    tm.tree.nnodes = 1;
    compact_schedule(1, 0);
    return 0;
}

/* stop(): give back the caches and the peak totals too.  The caches are
   freed first, so that the reset does not empty them, nor shrink them
   into a new allocation. */
static void
engine_release_unlocked(void)
{
    framecache_release();
    engine_reset_unlocked();
    peak_release();
    tm.memory = 0;
}

/* The interval that -X tracemalloc_sample or PYTHONTRACEMALLOCSAMPLE asked
   for (the adapter's _PyTraceMalloc_Init() reads them), used by the start
   at startup. */
static uint64_t startup_sample;

/* Each successful start: the on-demand handler's way to tell the tracing
   that it started from a restart by the program. */
static uint64_t tracing_sessions;

int
_PyTraceMalloc_Start(int max_nframe)
{
    if (_PyTraceMalloc_StartSampled(max_nframe, startup_sample, 0, -1) < 0) {
        return -1;
    }
    if (startup_native && _PyTraceMalloc_StartNative() < 0) {
        return -1;
    }
    if (startup_native_frames
        && _PyTraceMalloc_SetNativeFrames(startup_native_frames) < 0) {
        return -1;
    }
    return 0;
}

/* Read the sampling options of CONFIG: 0 and the interval (0: none), or -1
   with *ERROR set to a message naming the option. */
int
_PyTraceMalloc_ReadSampleOption(const PyConfig *config, const char **error)
{
    static char message[200];
    const char *option;
    char buffer[64];
    startup_sample = 0;
    if (native_read_option(config, error) < 0) {
        return -1;
    }
    const char *text = startup_option(
        config, L"tracemalloc_sample", "-X tracemalloc_sample",
        "PYTHONTRACEMALLOCSAMPLE", buffer, sizeof(buffer), &option);
    if (text == NULL) {
        return 0;
    }
    const char *why;
    uint64_t value = _PyTraceMalloc_ParseSize(text, &why);
    if (why != NULL) {
        PyOS_snprintf(message, sizeof(message), "%s=%.40s: %s", option,
                      text, why);
        *error = message;
        return -1;
    }
    startup_sample = value;
    return 0;
}

/* A dump option (tracemalloc_startup.c) without any tracing option: sample
   at the default interval, the one the signal option starts with. */
void
_PyTraceMalloc_StartupDefaultSample(void)
{
    startup_sample = 512 * 1024;
}

/* Whether the options asked for sampling (startup: tracing starts even
   without -X tracemalloc, with 1 frame; a dump option then leaves the
   sampling and the frames to them). */
int
_PyTraceMalloc_StartupSample(void)
{
    return startup_sample != 0;
}

/* Whether the options asked for native tracing (startup: tracing starts
   even without -X tracemalloc, with 1 frame; not an option that says how
   to trace, so a dump option alone still samples with its frames). */
int
_PyTraceMalloc_StartupNative(void)
{
    return startup_native;
}

/* Start tracing; SAMPLE is the mean sampling interval in bytes (0: exact).
   EXPLICIT: the caller asked for that mode (start(sample=...)): while
   tracing in the other mode, that is an error; otherwise (start()) the
   running mode goes on, as upstream's start() leaves tracing alone.
   ALLOCATIONS: 1 to keep the allocation totals of every call path (the
   allocation profiles), 0 not to, -1 not asked (0 when starting;
   while tracing, asking for the other setting is an error). */
int
_PyTraceMalloc_StartSampled(int max_nframe, uint64_t sample, int explicit,
                            int allocations)
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
    if (sample > _PyTraceMalloc_SAMPLE_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "the sampling interval must be in range [1; %llu] "
                     "bytes", (unsigned long long)_PyTraceMalloc_SAMPLE_MAX);
        return -1;
    }
    if (_PyTraceMalloc_TRACING()) {
        if (explicit && sample != sample_interval()) {
            PyErr_SetString(PyExc_RuntimeError,
                            "tracemalloc is already tracing in another mode "
                            "(see get_sample()): call stop() first");
            return -1;
        }
        if (allocations >= 0 && allocations != tm.peak.allocations) {
            PyErr_SetString(PyExc_RuntimeError,
                            allocations
                            ? "tracemalloc is already tracing without "
                              "allocation totals: call stop() first"
                            : "tracemalloc is already tracing with "
                              "allocation totals: call stop() first");
            return -1;
        }
        return 0;       /* like upstream: tracing goes on, limit included */
    }
    _Py_tracemalloc_config.max_nframe = max_nframe;
    if (engine_lock_init() < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "tracemalloc: cannot register fork handlers");
        return -1;
    }
    int side = engine_lock();
    engine_reset_unlocked();
    sample_configure(sample);
    tm.peak.allocations = allocations > 0;
    tm.peak.lean = !tm.sample.interval && !tm.peak.allocations;
    int res = engine_start_unlocked();
    if (res == 0) {
        _PyTraceMalloc_SET_TRACING(sample_mode_word());
    }
    else {
        engine_reset_unlocked();
    }
    lean_update();
    engine_leave(side);
    if (res < 0) {
        PyErr_NoMemory();
        return -1;
    }
    _Py_tracemalloc_config.initialized = TRACEMALLOC_INITIALIZED;
    tracing_sessions++;
    return 0;
}

uint64_t
_PyTraceMalloc_GetSession(void)
{
    return tracing_sessions;
}

int
_PyTraceMalloc_GetAllocations(void)
{
    return _PyTraceMalloc_TRACING() && tm.peak.allocations;
}

void
_PyTraceMalloc_Stop(void)
{
    if (!_PyTraceMalloc_TRACING()) {
        return;
    }
    _PyTraceMalloc_StopNative();
    int side = engine_lock();
    _PyTraceMalloc_SET_TRACING(0);
    lean_update();
    engine_release_unlocked();
    engine_leave(side);
}

void
_PyTraceMalloc_ClearTraces(void)
{
    if (!_PyTraceMalloc_TRACING()) {
        return;
    }
    int side = engine_lock();
    /* Keeps the cct's cache: cannot fail. */
    engine_reset_unlocked();
    if (tm.sample.interval) {
        /* The filter was emptied: sampling mode's inline paths again if
           the allocators are known now, else the hooks (set again). */
        sample_routed = 0;
        _PyTraceMalloc_SET_TRACING(sample_mode_word());
        lean_update();
    }
    engine_leave(side);
}

void
_PyTraceMalloc_Fini(void)
{
    _PyTraceMalloc_Stop();
    labels_fini();
    _Py_tracemalloc_config.initialized = TRACEMALLOC_FINALIZED;
}

/* PyMem_SetAllocator() is installing an allocator in DOMAIN.  Blocks of
   the mem and obj domains may now be shifted by a header of its own: from
   now on the hooks check each block's skew, like every other lookup (see
   _PyTraceMalloc_PoolSlotCached()).  A block traced before still lies at
   the caller skew, so its free finds it the same way.  In the raw domain
   too when sampling with native tracing, as start() and clear_traces()
   decide when they find an allocator of the user's in any domain
   (_PyTraceMalloc_PoolSlotsClear()): the hooks must then see every call,
   to raise the untraced depth around the allocator, whose own calls
   (malloc(), which native tracing interposes) would otherwise be sampled
   again.  Python's own raw allocator swaps (_PyMem_SetDefaultAllocator())
   come here too, but outside of start-up and finalization only from
   PyImport_ExtendInittab() and the path configuration's setters. */
void
_PyTraceMalloc_AllocatorChanged(int domain)
{
    if (!_PyTraceMalloc_TRACING()) {
        return;     /* the next start or clear computes it afresh */
    }
    if (domain == PYMEM_DOMAIN_RAW
        && !(tm.sample.interval && __atomic_load_n(&native_on,
                                                   __ATOMIC_RELAXED))) {
        /* Only sampling with native tracing needs the hooks to see a new
           raw allocator's calls (its malloc() would be sampled again);
           elsewhere a raw allocator changes nothing the hooks decide, and
           Python's own swaps of the raw allocator during start-up, under
           -X tracemalloc, must not leave the mem and obj domains' blocks
           checked one by one for the rest of the run. */
        return;
    }
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    _PyTraceMalloc_blocks_exact = 0;
    if (tm.sample.interval && _PyTraceMalloc_TRACING()) {
        /* Sampling: the hooks must see the new allocator's calls. */
        _PyTraceMalloc_SET_TRACING(sample_mode_word());
        lean_update();
    }
    engine_leave(side);
}

/* ---- the C API ---------------------------------------------------------- */

/* The default domain's traces may be in pymalloc's pools, which only the
   GIL holder may look at (I1): without the GIL, the tracking API takes it
   for that domain, as upstream's PyTraceMalloc_Track() always does.  Other
   domains live in the table alone. */
static inline int
track_needs_gil(unsigned int domain, PyGILState_STATE *state)
{
    if (domain != _PyTraceMalloc_DEFAULT_DOMAIN
        || base_thread_holds_a_gil()) {
        /* Other domains, the engine's GIL holder, and (3.13) a thread
           holding the GIL of an interpreter of its own, whose blocks are in
           the table (it enters as a caller without the engine's GIL). */
        return 0;
    }
    *state = PyGILState_Ensure();
    return 1;
}

/* The owner's domain wins over the native trace of the block it reports
   (numpy's data buffers, N2): under the engine lock, the native trace of
   PTR goes, and its allocation with it (counted once, in the owner's
   domain). */
static void
native_owner_wins(uintptr_t ptr)
{
    _PyTraceMalloc_Node node;
    size_t size;
    if (store_remove_table(_PyTraceMalloc_NATIVE_DOMAIN, ptr, &node,
                           &size)) {
        peak_account_unalloc(_PyTraceMalloc_NATIVE_DOMAIN, node, size);
    }
}

int
PyTraceMalloc_Track(unsigned int domain, uintptr_t ptr, size_t size)
{
    if (!_PyTraceMalloc_TRACING()) {
        return -2;
    }
    if (sample_interval() && !sample_take(size)) {
        /* Not sampled; it replaces any sampled trace of the address, as
           a tracked block replaces the previous one, and the native trace
           of the block its owner reports (the owner's domain wins, N2:
           the owner's draw alone decides). */
        if (sample_filter_hit((const void *)ptr)) {
            (void)PyTraceMalloc_Untrack(domain, ptr);
            if (native_on && domain != _PyTraceMalloc_NATIVE_DOMAIN) {
                PyThreadState *tstate;
                int side = engine_enter(0, &tstate);
                if (_PyTraceMalloc_TRACING()) {
                    native_owner_wins(ptr);
                }
                engine_leave(side);
            }
        }
        return 0;
    }
    PyGILState_STATE gil_state;
    int ensured = track_needs_gil(domain, &gil_state);
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    int res = 0;
    if (_PyTraceMalloc_TRACING()) {
        compact_if_due();
        _PyTraceMalloc_Node node = current_node(tstate);
        if (domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
            /* Tracked by its owner: not an export's block (I15). */
            hidden_forget(ptr);
        }
        res = node == UINT32_MAX ? -1
              : (side && !tm.sample.interval)
                ? store_track(domain, ptr, size, node)
              : store_add_table(domain, ptr, size, node);
        if (res == 0 && native_on
            && domain != _PyTraceMalloc_NATIVE_DOMAIN) {
            native_owner_wins(ptr);
        }
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
    if (sample_interval() && !sample_filter_hit((const void *)ptr)) {
        return 0;       /* sampling mode: not a sampled block */
    }
    PyGILState_STATE gil_state;
    int ensured = track_needs_gil(domain, &gil_state);
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    _PyTraceMalloc_Node node;
    size_t size;
    if (!store_remove(domain, ptr, &node, &size, store_where(1, side), 0)
        && domain == _PyTraceMalloc_DEFAULT_DOMAIN) {
        hidden_forget(ptr);
    }
    engine_leave(side);
    if (ensured) {
        PyGILState_Release(gil_state);
    }
    return 0;
}

/* ---- exports: C data only (Modules/_tracemalloc.c builds the objects) -- */

/* The node of PTR's trace in DOMAIN: 1, with VIEW pinned in the same
   locked section (I3), or 0 without a trace (nothing pinned). */
int
_PyTraceMalloc_GetTraceNode(unsigned int domain, uintptr_t ptr,
                            _PyTraceMalloc_Node *node,
                            _PyTraceMalloc_CCTView *view)
{
    if (!_PyTraceMalloc_TRACING()) {
        return 0;
    }
    size_t size;
    int side = engine_lock();
    /* Without the engine's GIL, only the table may be read (I1). */
    int found = side ? _PyTraceMalloc_StoreGet_unlocked(domain, ptr, node,
                                                        &size)
                     : store_get_table(domain, ptr, node, &size);
    if (found) {
        _PyTraceMalloc_CCTPin_unlocked(view);
    }
    engine_leave(side);
    return found;
}

uintptr_t
_PyTraceMalloc_ObjectBlock(PyObject *obj)
{
    return base_object_block(obj);
}

/* Empty the interpreter's free lists (as gc.collect() does, without the
   collection).  What they hold from before tracing started (or before
   clear_traces()) has no trace, and the program would get it untraced: a
   caller that measures in rounds (the leak checker) empties them at the
   start of each.  The exports' own objects need no such care: they are
   kept as the exports' blocks (I15) and traced when reused. */
void
_PyTraceMalloc_ClearFreeLists(void)
{
    base_clear_free_lists();
}

/* Bytes of the engine's own bookkeeping. */
size_t
_PyTraceMalloc_EngineMemory(void)
{
    int side = engine_lock();
    size_t size = _PyTraceMalloc_StoreMemory_unlocked()
                  + tm.memory + native_maps_memory();
    engine_leave(side);
    return size;
}

/* The traced size now and its peak (0 and 0 while not tracing). */
void
_PyTraceMalloc_GetTracedMemory(size_t *current, size_t *peak)
{
    *current = 0;
    *peak = 0;
    if (_Py_tracemalloc_config.tracing) {
        int side = engine_lock();
        _PyTraceMalloc_StoreTotals_unlocked(current, peak);
        engine_leave(side);
    }
}

void
_PyTraceMalloc_ResetPeak(void)
{
    if (_Py_tracemalloc_config.tracing) {
        int side = engine_lock();
        _PyTraceMalloc_StoreResetPeak_unlocked();
        engine_leave(side);
    }
}

/* Node count, interning lookups, compactions and the table index's
   buckets (for the tests). */
void
_PyTraceMalloc_CCTStats(uint32_t *nnodes, uint64_t *cache_misses,
                        uint64_t *compactions, size_t *entries)
{
    int side = engine_lock();
    *nnodes = tm.tree.nnodes;
    *cache_misses = tm.framecache.cache_misses;
    *compactions = tm.tree.compactions;
    *entries = tm.framecache.tables != NULL ? cache_entries() : 0;
    engine_leave(side);
}

void
_PyTraceMalloc_FrameTableStats(size_t out[4])
{
    int side = engine_lock();
    out[0] = tm.framecache.ntables;
    out[1] = tm.framecache.tables_bytes;
    out[2] = tm.framecache.nmaps;
    out[3] = tm.framecache.maps_bytes;
    engine_leave(side);
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
    /* Without the GIL, pymalloc's pools are not ours to read (I1). */
    int found = side ? _PyTraceMalloc_StoreGet_unlocked(
                           _PyTraceMalloc_DEFAULT_DOMAIN, (uintptr_t)ptr,
                           &node, &size)
                     : store_get_table(_PyTraceMalloc_DEFAULT_DOMAIN,
                                       (uintptr_t)ptr, &node, &size);
    if (!found && last_removed.ptr == (uintptr_t)ptr
        && last_removed.generation == tm.generation) {
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
