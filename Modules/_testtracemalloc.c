/* _testtracemalloc: test-only entry points into the tracing engine.
 *
 * Kept out of the production _tracemalloc module: these walk the whole trace
 * store, inject failures, or read internal counters.  Built like
 * _testinternalcapi (only when the test modules are).
 */

#ifndef Py_BUILD_CORE_BUILTIN
#  define Py_BUILD_CORE_MODULE 1
#endif

#include "Python.h"
#include "pycore_tracemalloc.h"

PyDoc_STRVAR(check_consistency_doc,
"check_consistency($module, /)\n--\n\n"
"Walk the whole trace store: the traced size must equal the sum of the\n"
"live traces, the count their number, and no free pymalloc block may keep\n"
"a trace.  Returns the number of traces; raises AssertionError otherwise.");

static PyObject *
check_consistency(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    char why[256];
    uint64_t ntraces = 0;
    if (_PyTraceMalloc_StoreCheck(why, sizeof(why), &ntraces) < 0) {
        PyErr_SetString(PyExc_AssertionError, why);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(ntraces);
}

static int
int_arg(PyObject *arg, int *value)
{
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "the count is too large");
        return -1;
    }
    *value = (int)v;
    if (*value < 0) {
        PyErr_SetString(PyExc_ValueError, "the count must not be negative");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(fail_bookkeeping_doc,
"fail_bookkeeping($module, n, min_size=0, /)\n--\n\n"
"Make the next n allocations of the engine's own bookkeeping fail; with\n"
"min_size, only those of at least min_size bytes (the others succeed and\n"
"are not counted).  Returns how many failures the previous call had left\n"
"to inject.");

static PyObject *
fail_bookkeeping(PyObject *module, PyObject *args)
{
    PyObject *count;
    Py_ssize_t min_size = 0;
    int n;
    if (!PyArg_ParseTuple(args, "O|n:fail_bookkeeping", &count, &min_size)
        || int_arg(count, &n) < 0) {
        return NULL;
    }
    if (min_size < 0) {
        PyErr_SetString(PyExc_ValueError, "min_size must not be negative");
        return NULL;
    }
    return PyLong_FromLong(_PyTraceMalloc_FailBookkeeping(n, (size_t)min_size));
}

PyDoc_STRVAR(fail_barrier_doc,
"fail_barrier($module, n, /)\n--\n\n"
"Make the next n process-wide barriers (membarrier(2)) of the engine lock\n"
"fail, as the kernel may with ENOMEM.  Returns True if this build uses\n"
"membarrier at all.");

static PyObject *
fail_barrier(PyObject *module, PyObject *arg)
{
    int n;
    if (int_arg(arg, &n) < 0) {
        return NULL;
    }
    return PyBool_FromLong(_PyTraceMalloc_FailBarrier(n));
}

PyDoc_STRVAR(engine_stats_doc,
"engine_stats($module, /)\n--\n\n"
"Internal counters of the call-context tree, as a dict: nodes (ids in\n"
"use), cache_misses (node lookups that interned), compactions,\n"
"cache_entries (buckets of the site tables' index, 0 when not tracing),\n"
"asymmetric (1 while the engine lock uses membarrier(2)), blocks_exact\n"
"(1 while the mem and obj allocators are known ones, whose blocks the\n"
"hooks find without checks), lean (1 while the lean paths are on),\n"
"site_tables and site_table_bytes, line_maps and line_map_bytes,\n"
"export_blocks (blocks the exports made or took from a free list, kept\n"
"untraced until the program reuses one) and export_retraced (those the\n"
"program took back, traced at its line).");

static PyObject *
engine_stats(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    uint32_t nnodes;
    uint64_t misses, compactions;
    size_t entries;
    size_t tables[4];
    size_t hidden;
    uint64_t retraced;
    _PyTraceMalloc_CCTStats(&nnodes, &misses, &compactions, &entries);
    _PyTraceMalloc_FrameTableStats(tables);
    _PyTraceMalloc_HiddenStats(&hidden, &retraced);
    return Py_BuildValue("{sIsKsKsnsisisisnsnsnsnsnsK}",
                         "nodes", (unsigned int)nnodes,
                         "cache_misses", (unsigned long long)misses,
                         "compactions", (unsigned long long)compactions,
                         "cache_entries", (Py_ssize_t)entries,
                         "asymmetric", _PyTraceMalloc_asymmetric,
                         "blocks_exact", (int)_PyTraceMalloc_blocks_exact,
                         "lean", _PyTraceMalloc_LeanPaths(),
                         "site_tables", (Py_ssize_t)tables[0],
                         "site_table_bytes", (Py_ssize_t)tables[1],
                         "line_maps", (Py_ssize_t)tables[2],
                         "line_map_bytes", (Py_ssize_t)tables[3],
                         "export_blocks", (Py_ssize_t)hidden,
                         "export_retraced", (unsigned long long)retraced);
}

/* A user allocator of the mem domain written on the public raw API, as
   extensions do: each block is a raw block with a 16-byte header of its
   own.  Tracing must record the block the caller sees, once, not also the
   raw block it is carved from. */
#define HEADER 16

static void *
raw_backed_malloc(void *ctx, size_t size)
{
    char *p = PyMem_RawMalloc(size + HEADER);
    return p ? p + HEADER : NULL;
}

static void *
raw_backed_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (elsize != 0 && nelem > (PY_SSIZE_T_MAX - HEADER) / elsize) {
        return NULL;
    }
    char *p = PyMem_RawCalloc(1, nelem * elsize + HEADER);
    return p ? p + HEADER : NULL;
}

static void *
raw_backed_realloc(void *ctx, void *ptr, size_t size)
{
    char *p = PyMem_RawRealloc(ptr ? (char *)ptr - HEADER : NULL,
                               size + HEADER);
    return p ? p + HEADER : NULL;
}

static void
raw_backed_free(void *ctx, void *ptr)
{
    if (ptr != NULL) {
        PyMem_RawFree((char *)ptr - HEADER);
    }
}

PyDoc_STRVAR(raw_backed_allocation_doc,
"raw_backed_allocation($module, size, /)\n--\n\n"
"With a user allocator for the mem domain that is built on the public\n"
"PyMem_Raw* API (a header of its own in front of each block) installed,\n"
"allocate SIZE bytes with PyMem_Malloc(), then resize them to 2*SIZE with\n"
"PyMem_Realloc(), and return (traceback of the caller's block, traceback\n"
"of the raw block under it) after each step, as a 4-tuple.  The allocator\n"
"is removed again before returning.");

static PyObject *
raw_backed_allocation(PyObject *module, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (size < 0 || size > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "size must be in [0; 1 MiB]");
        return NULL;
    }
    PyObject *result[4] = {NULL, NULL, NULL, NULL};
    PyMemAllocatorEx saved;
    PyMemAllocatorEx alloc = {NULL, raw_backed_malloc, raw_backed_calloc,
                              raw_backed_realloc, raw_backed_free};
    /* Nothing else may allocate or free in the mem domain while it is
       installed: only the engine's lookups run (they build tuples and
       strings in the object domain). */
    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &saved);
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &alloc);
    char *p = PyMem_Malloc((size_t)size);
    if (p != NULL) {
        result[0] = _PyTraceMalloc_GetTraceback(0, (uintptr_t)p);
        result[1] = _PyTraceMalloc_GetTraceback(0, (uintptr_t)(p - HEADER));
        char *q = PyMem_Realloc(p, 2 * (size_t)size);
        if (q != NULL) {
            p = q;
            result[2] = _PyTraceMalloc_GetTraceback(0, (uintptr_t)p);
            result[3] = _PyTraceMalloc_GetTraceback(
                0, (uintptr_t)(p - HEADER));
        }
        PyMem_Free(p);
    }
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &saved);
    if (p == NULL) {
        return PyErr_NoMemory();
    }
    for (int i = 0; i < 4; i++) {
        if (result[i] == NULL) {
            if (!PyErr_Occurred()) {
                result[i] = Py_NewRef(Py_None);
                continue;
            }
            for (int j = 0; j < 4; j++) {
                Py_XDECREF(result[j]);
            }
            return NULL;
        }
    }
    return Py_BuildValue("(NNNN)", result[0], result[1], result[2],
                         result[3]);
}

/* A user allocator of the raw domain built on the C allocator, as an
   embedding application installs one: its calls reach malloc() and the
   rest, which native tracing interposes.  Tracing must record the block
   the caller sees, once, not also the C allocator's block under it. */
static void *
c_backed_malloc(void *ctx, size_t size)
{
    return malloc(size ? size : 1);
}

static void *
c_backed_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (nelem == 0 || elsize == 0) {
        nelem = elsize = 1;
    }
    return calloc(nelem, elsize);
}

static void *
c_backed_realloc(void *ctx, void *ptr, size_t size)
{
    return realloc(ptr, size ? size : 1);
}

static void
c_backed_free(void *ctx, void *ptr)
{
    free(ptr);
}

/* The raw allocator that c_backed_install() replaced, while installed. */
static PyMemAllocatorEx c_backed_saved;
static int c_backed_installed;

static void
c_backed_install(void)
{
    PyMemAllocatorEx alloc = {NULL, c_backed_malloc, c_backed_calloc,
                              c_backed_realloc, c_backed_free};
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &c_backed_saved);
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &alloc);
    c_backed_installed = 1;
}

static void
c_backed_remove(void)
{
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &c_backed_saved);
    c_backed_installed = 0;
}

PyDoc_STRVAR(set_c_backed_raw_allocator_doc,
"set_c_backed_raw_allocator($module, on, /)\n--\n\n"
"Install (ON true) or remove a user allocator of the raw domain built on\n"
"malloc() and free().  While it is installed, every raw block is the C\n"
"allocator's, and so must be every raw block freed: not for\n"
"PYTHONMALLOC=debug (its raw blocks carry a header) nor mimalloc.");

static PyObject *
set_c_backed_raw_allocator(PyObject *module, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    if (on && !c_backed_installed) {
        c_backed_install();
    }
    else if (!on && c_backed_installed) {
        c_backed_remove();
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(c_backed_raw_allocation_doc,
"c_backed_raw_allocation($module, count, size, measure, /)\n--\n\n"
"With the allocator of set_c_backed_raw_allocator() installed (while\n"
"tracing, if tracing is on), allocate COUNT blocks of SIZE bytes with\n"
"PyMem_RawMalloc(), and return what measure() returns then minus what it\n"
"returned before the allocator was installed.  The blocks are freed and\n"
"the allocator removed before returning.  Not for PYTHONMALLOC=debug nor\n"
"mimalloc (see set_c_backed_raw_allocator()).");

static PyObject *
c_backed_raw_allocation(PyObject *module, PyObject *args)
{
    Py_ssize_t count, size;
    PyObject *measure;
    if (!PyArg_ParseTuple(args, "nnO", &count, &size, &measure)) {
        return NULL;
    }
    if (count < 1 || count > 1000000 || size < 1 || size > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError,
                        "count must be in [1; 10**6], size in [1; 1 MiB]");
        return NULL;
    }
    if (c_backed_installed) {
        PyErr_SetString(PyExc_RuntimeError, "the allocator is installed");
        return NULL;
    }
    void **blocks = PyMem_RawCalloc((size_t)count, sizeof(void *));
    if (blocks == NULL) {
        return PyErr_NoMemory();
    }
    PyObject *before = PyObject_CallNoArgs(measure);
    if (before == NULL) {
        PyMem_RawFree(blocks);
        return NULL;
    }
    c_backed_install();
    int nomem = 0;
    for (Py_ssize_t i = 0; i < count && !nomem; i++) {
        blocks[i] = PyMem_RawMalloc((size_t)size);
        nomem = blocks[i] == NULL;
    }
    PyObject *after = nomem ? NULL : PyObject_CallNoArgs(measure);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyMem_RawFree(blocks[i]);
    }
    c_backed_remove();
    PyMem_RawFree(blocks);
    PyObject *result = NULL;
    if (after != NULL) {
        result = PyNumber_Subtract(after, before);
    }
    else if (nomem) {
        PyErr_NoMemory();
    }
    Py_DECREF(before);
    Py_XDECREF(after);
    return result;
}

/* A user allocator of the mem domain that wraps the one it replaces (for
   pymalloc: blocks in its pools) and shifts every block by a header of its
   own, so that the caller's pointer is not where a pool block starts. */
static PyMemAllocatorEx shifted_base;

static void *
shifted_malloc(void *ctx, size_t size)
{
    char *p = shifted_base.malloc(shifted_base.ctx, size + HEADER);
    return p ? p + HEADER : NULL;
}

static void *
shifted_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (elsize != 0 && nelem > (PY_SSIZE_T_MAX - HEADER) / elsize) {
        return NULL;
    }
    char *p = shifted_base.calloc(shifted_base.ctx, 1,
                                  nelem * elsize + HEADER);
    return p ? p + HEADER : NULL;
}

static void *
shifted_realloc(void *ctx, void *ptr, size_t size)
{
    char *p = shifted_base.realloc(shifted_base.ctx,
                                   ptr ? (char *)ptr - HEADER : NULL,
                                   size + HEADER);
    return p ? p + HEADER : NULL;
}

static void
shifted_free(void *ctx, void *ptr)
{
    if (ptr != NULL) {
        shifted_base.free(shifted_base.ctx, (char *)ptr - HEADER);
    }
}

PyDoc_STRVAR(shifted_allocation_doc,
"shifted_allocation($module, count, size, /)\n--\n\n"
"With a user allocator installed for the mem domain that wraps the\n"
"current one and puts a 16-byte header of its own in front of each block,\n"
"allocate COUNT blocks of SIZE bytes with PyMem_Malloc() and return the\n"
"traceback of each (None if it has no trace); the blocks are freed and the\n"
"allocator removed before returning.");

static PyObject *
shifted_allocation(PyObject *module, PyObject *args)
{
    Py_ssize_t count, size;
    if (!PyArg_ParseTuple(args, "nn", &count, &size)) {
        return NULL;
    }
    if (count < 1 || count > 4096 || size < 0 || size > 4096) {
        PyErr_SetString(PyExc_ValueError,
                        "count must be in [1; 4096], size in [0; 4096]");
        return NULL;
    }
    PyObject *result = PyList_New(count);
    if (result == NULL) {
        return NULL;
    }
    void **blocks = PyMem_RawCalloc((size_t)count, sizeof(void *));
    if (blocks == NULL) {
        Py_DECREF(result);
        return PyErr_NoMemory();
    }
    PyMemAllocatorEx saved;
    PyMemAllocatorEx alloc = {NULL, shifted_malloc, shifted_calloc,
                              shifted_realloc, shifted_free};
    /* As in raw_backed_allocation(): nothing else may use the mem domain
       while it is installed (the lookups use the object domain).  The
       tracebacks are many objects: no collection may run meanwhile and
       free another block of the mem domain through this allocator. */
    int gc_was_enabled = PyGC_Disable();
    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &saved);
    shifted_base = saved;
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &alloc);
    int nomem = 0;
    for (Py_ssize_t i = 0; i < count && !nomem; i++) {
        blocks[i] = PyMem_Malloc((size_t)size);
        nomem = blocks[i] == NULL;
    }
    for (Py_ssize_t i = 0; i < count && !nomem; i++) {
        PyObject *tb = _PyTraceMalloc_GetTraceback(0, (uintptr_t)blocks[i]);
        if (tb == NULL && PyErr_Occurred()) {
            nomem = 1;
            break;
        }
        PyList_SET_ITEM(result, i, tb ? tb : Py_NewRef(Py_None));
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyMem_Free(blocks[i]);
    }
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &saved);
    if (gc_was_enabled) {
        PyGC_Enable();
    }
    PyMem_RawFree(blocks);
    if (nomem) {
        Py_DECREF(result);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    return result;
}

/* Single allocator operations for the peak oracle: each call does exactly
   one malloc, calloc, realloc or free (or a track/untrack), so that a test
   whose own Python code runs untraced (suspend()) knows that the traced
   size moved once, in one direction (a growing realloc: down, then up
   past where it was). */
#define NBLOCKS 4096
static struct {
    void *ptr;
    int kind;
} blocks[NBLOCKS];

enum { KIND_RAW, KIND_MEM, KIND_OBJ, KIND_TRACK };
#define TRACK_DOMAIN 7

PyDoc_STRVAR(alloc_op_doc,
"alloc_op($module, op, index, size, kind, /)\n--\n\n"
"op: 'malloc', 'calloc', 'realloc' or 'free' on block INDEX (0-4095)\n"
"with the allocator of KIND: 0 raw (called without the GIL), 1 mem,\n"
"2 obj, 3 PyTraceMalloc_Track() in domain 7 (a made-up address).\n"
"The operation is traced even if this thread is suspended (once).");

static PyObject *
alloc_op(PyObject *module, PyObject *args)
{
    const char *op;
    int index, kind;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "sini:alloc_op", &op, &index, &size,
                          &kind)) {
        return NULL;
    }
    if (index < 0 || index >= NBLOCKS || size < 0 || size > (1 << 24)
        || kind < KIND_RAW || kind > KIND_TRACK) {
        PyErr_SetString(PyExc_ValueError, "argument out of range");
        return NULL;
    }
    int is_free = strcmp(op, "free") == 0;
    int is_realloc = strcmp(op, "realloc") == 0;
    int is_calloc = strcmp(op, "calloc") == 0;
    if (!is_free && !is_realloc && !is_calloc && strcmp(op, "malloc")) {
        PyErr_SetString(PyExc_ValueError, "unknown op");
        return NULL;
    }
    void *ptr = blocks[index].ptr;
    if ((ptr == NULL) != (!is_free && !is_realloc)) {
        PyErr_SetString(PyExc_ValueError, ptr ? "block in use"
                                              : "no such block");
        return NULL;
    }
    if (ptr != NULL) {
        kind = blocks[index].kind;
    }
    void *res = NULL;
    int failed = 0;
    int suspended = _PyTraceMalloc_ResumeThread();
    switch (kind) {
    case KIND_RAW:
        Py_BEGIN_ALLOW_THREADS
        if (is_free) {
            PyMem_RawFree(ptr);
        }
        else if (is_realloc) {
            res = PyMem_RawRealloc(ptr, size);
        }
        else if (is_calloc) {
            res = PyMem_RawCalloc(1, size);
        }
        else {
            res = PyMem_RawMalloc(size);
        }
        Py_END_ALLOW_THREADS
        break;
    case KIND_MEM:
        if (is_free) {
            PyMem_Free(ptr);
        }
        else if (is_realloc) {
            res = PyMem_Realloc(ptr, size);
        }
        else {
            res = is_calloc ? PyMem_Calloc(1, size) : PyMem_Malloc(size);
        }
        break;
    case KIND_OBJ:
        if (is_free) {
            PyObject_Free(ptr);
        }
        else if (is_realloc) {
            res = PyObject_Realloc(ptr, size);
        }
        else {
            res = is_calloc ? PyObject_Calloc(1, size)
                            : PyObject_Malloc(size);
        }
        break;
    case KIND_TRACK: {
        uintptr_t addr = ptr ? (uintptr_t)ptr
                             : ((uintptr_t)0x10000 + (uintptr_t)index * 64);
        if (is_free) {
            failed = PyTraceMalloc_Untrack(TRACK_DOMAIN, addr) < 0;
        }
        else {
            failed = PyTraceMalloc_Track(TRACK_DOMAIN, addr,
                                         (size_t)size) < 0;
            res = (void *)addr;
        }
        break;
    }
    }
    if (suspended) {
        _PyTraceMalloc_SuspendThread();
    }
    if (is_free) {
        blocks[index].ptr = NULL;
    }
    else if (res == NULL || failed) {
        /* A failed realloc keeps the old block. */
        return PyErr_NoMemory();
    }
    else {
        blocks[index].ptr = res;
        blocks[index].kind = kind;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(free_all_doc,
"free_all($module, /)\n--\n\n"
"Free every block left by alloc_op().");

static PyObject *
free_all(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    for (int i = 0; i < NBLOCKS; i++) {
        void *ptr = blocks[i].ptr;
        if (ptr == NULL) {
            continue;
        }
        switch (blocks[i].kind) {
        case KIND_RAW: PyMem_RawFree(ptr); break;
        case KIND_MEM: PyMem_Free(ptr); break;
        case KIND_OBJ: PyObject_Free(ptr); break;
        case KIND_TRACK:
            (void)PyTraceMalloc_Untrack(TRACK_DOMAIN, (uintptr_t)ptr);
            break;
        }
        blocks[i].ptr = NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(suspend_doc,
"suspend($module, /)\n--\n\n"
"Leave this thread's allocations untraced until resume() (nests).");

static PyObject *
suspend(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    _PyTraceMalloc_SuspendThread();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(resume_doc,
"resume($module, /)\n--\n\n"
"Undo one suspend().");

static PyObject *
resume(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    _PyTraceMalloc_ResumeThread();
    Py_RETURN_NONE;
}

/* C threads without a Python thread state, tracking and untracking in a
   loop: a steady stream of callers that enter the engine without the GIL
   (numpy's PyTraceMalloc_Track() from worker threads). */
#include <pthread.h>

typedef struct {
    unsigned int domain;
    long iterations;
} storm_arg;

static void *
storm_thread(void *p)
{
    storm_arg *arg = p;
    uintptr_t base = (uintptr_t)0x100000 * (arg->domain + 1);
    for (long i = 0; i < arg->iterations; i++) {
        uintptr_t addr = base + (uintptr_t)(i % 64) * 16;
        (void)PyTraceMalloc_Track(arg->domain, addr, 64);
        (void)PyTraceMalloc_Untrack(arg->domain, addr);
    }
    return NULL;
}

PyDoc_STRVAR(foreign_storm_doc,
"foreign_storm($module, nthreads, iterations, /)\n--\n\n"
"Run NTHREADS C threads (no Python thread state) that each track and\n"
"untrack a block ITERATIONS times, with the GIL released; return when\n"
"they are all done.");

static PyObject *
foreign_storm(PyObject *module, PyObject *args)
{
    int nthreads;
    long iterations;
    if (!PyArg_ParseTuple(args, "il:foreign_storm", &nthreads, &iterations)) {
        return NULL;
    }
    if (nthreads < 1 || nthreads > 16 || iterations < 0) {
        PyErr_SetString(PyExc_ValueError, "argument out of range");
        return NULL;
    }
    pthread_t threads[16];
    storm_arg targs[16];
    int started = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; started < nthreads; started++) {
        targs[started].domain = 100 + (unsigned int)started;
        targs[started].iterations = iterations;
        if (pthread_create(&threads[started], NULL, storm_thread,
                           &targs[started]) != 0) {
            break;
        }
    }
    for (int i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
    }
    Py_END_ALLOW_THREADS
    if (started < nthreads) {
        PyErr_SetString(PyExc_RuntimeError, "cannot start a thread");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- helpers of test_tracemalloc_edgecases ---------------------------- */

PyDoc_STRVAR(track_freed_pool_block_doc,
"track_freed_pool_block($module, size, other_size, count, /)\n--\n\n"
"Allocate COUNT blocks of SIZE bytes with PyObject_Malloc(), free one in\n"
"the middle and PyTraceMalloc_Track() its address in domain 0 (a legal\n"
"call on a block the allocator owns), then free the others, so that their\n"
"pools empty, and allocate COUNT blocks of OTHER_SIZE (another size\n"
"class), which reuses the emptied pools, and free them.  Returns the\n"
"tracked address, and whether the allocator handed it out again meanwhile\n"
"(the new block's trace then replaced the tracked one, and its free\n"
"removed it); otherwise the trace must live until it is untracked.");

static PyObject *
track_freed_pool_block(PyObject *module, PyObject *args)
{
    Py_ssize_t size, other_size, count;
    if (!PyArg_ParseTuple(args, "nnn:track_freed_pool_block", &size,
                          &other_size, &count)) {
        return NULL;
    }
    if (size <= 0 || other_size <= 0 || count < 3 || count > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "argument out of range");
        return NULL;
    }
    void **blocks = PyMem_RawCalloc((size_t)count, sizeof(void *));
    if (blocks == NULL) {
        return PyErr_NoMemory();
    }
    int failed = 0;
    for (Py_ssize_t i = 0; i < count && !failed; i++) {
        blocks[i] = PyObject_Malloc((size_t)size);
        failed = blocks[i] == NULL;
    }
    uintptr_t tracked = 0;
    if (!failed) {
        Py_ssize_t mid = count / 2;
        PyObject_Free(blocks[mid]);
        tracked = (uintptr_t)blocks[mid];
        blocks[mid] = NULL;
        if (PyTraceMalloc_Track(0, tracked, 100) < 0) {
            failed = 1;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject_Free(blocks[i]);
        blocks[i] = NULL;
    }
    int reused = 0;
    for (Py_ssize_t i = 0; i < count && !failed; i++) {
        blocks[i] = PyObject_Malloc((size_t)other_size);
        failed = blocks[i] == NULL;
        reused |= (uintptr_t)blocks[i] == tracked;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject_Free(blocks[i]);
    }
    PyMem_RawFree(blocks);
    if (failed) {
        return PyErr_NoMemory();
    }
    return Py_BuildValue("Ni", PyLong_FromVoidPtr((void *)tracked), reused);
}

/* An extension that allocates an object's block at one place and
   initialises it at another, with nothing traced in between. */
static PyObject *stashed_block;

PyDoc_STRVAR(object_malloc_doc,
"object_malloc($module, /)\n--\n\n"
"PyObject_Malloc() the block of a plain object() and keep it; returns\n"
"None, so that the call allocates nothing else.");

static PyObject *
object_malloc(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    if (stashed_block != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a block is already stashed");
        return NULL;
    }
    stashed_block = PyObject_Malloc(PyBaseObject_Type.tp_basicsize);
    if (stashed_block == NULL) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(object_init_doc,
"object_init($module, /)\n--\n\n"
"PyObject_Init() the block of object_malloc() as an object() instance and\n"
"return it.");

static PyObject *
object_init(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyObject *op = stashed_block;
    if (op == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no block stashed");
        return NULL;
    }
    stashed_block = NULL;
    return PyObject_Init(op, &PyBaseObject_Type);
}

static void *reallocated_block;

PyDoc_STRVAR(track_freed_then_reallocate_doc,
"track_freed_then_reallocate($module, size, /)\n--\n\n"
"PyObject_Malloc(SIZE), free it, PyTraceMalloc_Track(0, ...) its address\n"
"for 100 bytes, then PyObject_Malloc(SIZE) until the allocator hands the\n"
"address out again (pymalloc: at once) and keep that block; returns the\n"
"address, or None if the allocator did not reuse it.  free_reallocated()\n"
"frees it.");

static PyObject *
track_freed_then_reallocate(PyObject *module, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size <= 0) {
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError,
                                                      "bad size");
    }
    if (reallocated_block != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a block is already kept");
        return NULL;
    }
    void *p = PyObject_Malloc((size_t)size);
    if (p == NULL) {
        return PyErr_NoMemory();
    }
    PyObject_Free(p);
    if (PyTraceMalloc_Track(0, (uintptr_t)p, 100) < 0) {
        return PyErr_NoMemory();
    }
    void *q = PyObject_Malloc((size_t)size);
    if (q != p) {
        /* Not pymalloc (ASan's malloc keeps freed blocks in quarantine). */
        PyObject_Free(q);
        (void)PyTraceMalloc_Untrack(0, (uintptr_t)p);
        Py_RETURN_NONE;
    }
    reallocated_block = q;
    return PyLong_FromVoidPtr(q);
}

PyDoc_STRVAR(free_reallocated_doc,
"free_reallocated($module, /)\n--\n\n"
"Free the block kept by track_freed_then_reallocate().");

static PyObject *
free_reallocated(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyObject_Free(reallocated_block);
    reallocated_block = NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(raw_malloc_with_gil_doc,
"raw_malloc_with_gil($module, size, /)\n--\n\n"
"PyMem_RawMalloc(SIZE) called with the GIL held; returns the address.");

static PyObject *
raw_malloc_with_gil(PyObject *module, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size < 0) {
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError,
                                                      "negative size");
    }
    void *p = PyMem_RawMalloc((size_t)size);
    if (p == NULL) {
        return PyErr_NoMemory();
    }
    return PyLong_FromVoidPtr(p);
}

PyDoc_STRVAR(raw_free_with_gil_doc,
"raw_free_with_gil($module, address, /)\n--\n\n"
"PyMem_RawFree() of an address from raw_malloc_with_gil().");

static PyObject *
raw_free_with_gil(PyObject *module, PyObject *arg)
{
    void *p = PyLong_AsVoidPtr(arg);
    if (p == NULL && PyErr_Occurred()) {
        return NULL;
    }
    PyMem_RawFree(p);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(keep_in_static_doc,
"keep_in_static($module, obj, /)\n--\n\n"
"Keep a strong reference to OBJ in a C static, as a leaking extension\n"
"would (None drops it); return the object kept before.  The retention\n"
"search sees no Python referrer for OBJ.");

static PyObject *kept_in_static = NULL;

static PyObject *
keep_in_static(PyObject *module, PyObject *obj)
{
    PyObject *old = kept_in_static;
    kept_in_static = obj == Py_None ? NULL : Py_NewRef(obj);
    if (old == NULL) {
        Py_RETURN_NONE;
    }
    return old;
}

PyDoc_STRVAR(foreign_entries_doc,
"foreign_entries($module, /)\n--\n\n"
"How many times the engine has been entered by a caller it found not to\n"
"hold the GIL (the expensive side of the engine lock).");

static PyObject *
foreign_entries(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(_PyTraceMalloc_ForeignEntries());
}

static PyMethodDef methods[] = {
    {"track_freed_pool_block", track_freed_pool_block, METH_VARARGS,
     track_freed_pool_block_doc},
    {"track_freed_then_reallocate", track_freed_then_reallocate, METH_O,
     track_freed_then_reallocate_doc},
    {"free_reallocated", free_reallocated, METH_NOARGS, free_reallocated_doc},
    {"object_malloc", object_malloc, METH_NOARGS, object_malloc_doc},
    {"object_init", object_init, METH_NOARGS, object_init_doc},
    {"raw_malloc_with_gil", raw_malloc_with_gil, METH_O,
     raw_malloc_with_gil_doc},
    {"raw_free_with_gil", raw_free_with_gil, METH_O, raw_free_with_gil_doc},
    {"foreign_entries", foreign_entries, METH_NOARGS, foreign_entries_doc},
    {"foreign_storm", foreign_storm, METH_VARARGS, foreign_storm_doc},
    {"alloc_op", alloc_op, METH_VARARGS, alloc_op_doc},
    {"free_all", free_all, METH_NOARGS, free_all_doc},
    {"suspend", suspend, METH_NOARGS, suspend_doc},
    {"resume", resume, METH_NOARGS, resume_doc},
    {"raw_backed_allocation", raw_backed_allocation, METH_O,
     raw_backed_allocation_doc},
    {"shifted_allocation", shifted_allocation, METH_VARARGS,
     shifted_allocation_doc},
    {"c_backed_raw_allocation", c_backed_raw_allocation, METH_VARARGS,
     c_backed_raw_allocation_doc},
    {"set_c_backed_raw_allocator", set_c_backed_raw_allocator, METH_O,
     set_c_backed_raw_allocator_doc},
    {"check_consistency", check_consistency, METH_NOARGS,
     check_consistency_doc},
    {"fail_bookkeeping", fail_bookkeeping, METH_VARARGS,
     fail_bookkeeping_doc},
    {"fail_barrier", fail_barrier, METH_O, fail_barrier_doc},
    {"engine_stats", engine_stats, METH_NOARGS, engine_stats_doc},
    {"keep_in_static", keep_in_static, METH_O, keep_in_static_doc},
    {NULL, NULL}
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_testtracemalloc",
    .m_doc = "Test-only entry points into the tracemalloc engine.",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__testtracemalloc(void)
{
    return PyModule_Create(&module_def);
}
