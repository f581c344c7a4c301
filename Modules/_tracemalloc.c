/* _tracemalloc: the Python face of the tracing engine.
 *
 * Keeps CPython 3.11's surface, private functions included, so that
 * Lib/tracemalloc.py and upstream's Lib/test/test_tracemalloc.py work
 * unchanged.  Exports copy the traces under the engine lock, then build
 * Python objects without it (building them allocates, and allocation takes
 * the lock).  Identical tracebacks come out as the same tuple object.
 */

#include "Python.h"
#include "pycore_pymem.h"         // _Py_tracemalloc_config
#include "pycore_tracemalloc.h"

#include "clinic/_tracemalloc.c.h"

/*[clinic input]
module _tracemalloc
[clinic start generated code]*/
/*[clinic end generated code: output=da39a3ee5e6b4b0d input=708a98302fc46e5f]*/

/* ---- building frames ---------------------------------------------------- */

typedef struct {
    _PyTraceMalloc_CCTView view;
    int limit;
    PyObject **frame_by_node;       /* (filename, lineno), by node id */
    PyObject **traceback_by_node;   /* tuple of frames, by node id */
    PyObject *filenames;            /* dict: string address -> str */
    PyObject *unknown_frames;       /* (('<unknown>', 0),) */
} exporter;

/* VIEW was pinned by the caller; the exporter takes the pin over (and
   releases it in exporter_fini(), whatever happens here). */
static int
exporter_init(exporter *ex, const _PyTraceMalloc_CCTView *view, int limit,
              int tables)
{
    memset(ex, 0, sizeof(*ex));
    ex->view = *view;
    ex->limit = limit;
    ex->filenames = PyDict_New();
    if (ex->filenames == NULL) {
        return -1;
    }
    if (tables) {
        size_t n = ex->view.nnodes ? ex->view.nnodes : 1;
        ex->frame_by_node = PyMem_Calloc(n, sizeof(PyObject *));
        ex->traceback_by_node = PyMem_Calloc(n, sizeof(PyObject *));
        if (ex->frame_by_node == NULL || ex->traceback_by_node == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

static void
exporter_fini(exporter *ex)
{
    /* Either table may be missing: the second calloc can fail. */
    for (uint32_t i = 0; i < ex->view.nnodes; i++) {
        if (ex->frame_by_node != NULL) {
            Py_XDECREF(ex->frame_by_node[i]);
        }
        if (ex->traceback_by_node != NULL) {
            Py_XDECREF(ex->traceback_by_node[i]);
        }
    }
    PyMem_Free(ex->frame_by_node);
    PyMem_Free(ex->traceback_by_node);
    Py_XDECREF(ex->filenames);
    Py_XDECREF(ex->unknown_frames);
    _PyTraceMalloc_CCTUnpin();
}

static PyObject *
make_frame(exporter *ex, const void *data, int kind, Py_ssize_t length,
           int lineno)
{
    PyObject *filename;
    if (data == NULL) {
        filename = PyUnicode_FromString("<unknown>");
    }
    else {
        PyObject *key = PyLong_FromVoidPtr((void *)data);
        if (key == NULL) {
            return NULL;
        }
        filename = PyDict_GetItemWithError(ex->filenames, key);
        if (filename != NULL) {
            Py_INCREF(filename);
        }
        else if (!PyErr_Occurred()) {
            filename = PyUnicode_FromKindAndData(kind, data, length);
            if (filename != NULL
                && PyDict_SetItem(ex->filenames, key, filename) < 0) {
                Py_CLEAR(filename);
            }
        }
        Py_DECREF(key);
    }
    if (filename == NULL) {
        return NULL;
    }
    PyObject *frame = Py_BuildValue("(Ni)", filename, lineno);
    return frame;
}

/* A new reference to the (filename, lineno) tuple of NODE (not 0). */
static PyObject *
node_frame(exporter *ex, _PyTraceMalloc_Node node, _PyTraceMalloc_Node *parent)
{
    int lineno, kind;
    uint32_t depth;
    const void *data;
    Py_ssize_t length;
    _PyTraceMalloc_NodeInfo(&ex->view, node, parent, &lineno, &depth,
                            &data, &kind, &length);
    if (ex->frame_by_node != NULL && ex->frame_by_node[node] != NULL) {
        return Py_NewRef(ex->frame_by_node[node]);
    }
    PyObject *frame = make_frame(ex, data, kind, length, lineno);
    if (frame != NULL && ex->frame_by_node != NULL) {
        ex->frame_by_node[node] = Py_NewRef(frame);
    }
    return frame;
}

/* A new reference to the frames tuple of NODE, most recent first, at most
   ex->limit frames, and its total frame count. */
static PyObject *
node_frames(exporter *ex, _PyTraceMalloc_Node node, uint32_t *total)
{
    _PyTraceMalloc_Node parent;
    int lineno, kind;
    uint32_t depth;
    const void *data;
    Py_ssize_t length;
    if (!_PyTraceMalloc_NodeInfo(&ex->view, node, &parent, &lineno, &depth,
                                 &data, &kind, &length)) {
        /* No frame (node 0, or only a thread's root): like upstream. */
        *total = 1;
        if (ex->unknown_frames == NULL) {
            ex->unknown_frames = Py_BuildValue("((si))", "<unknown>", 0);
        }
        return Py_XNewRef(ex->unknown_frames);
    }
    *total = depth < UINT16_MAX ? depth : UINT16_MAX;
    if (ex->traceback_by_node != NULL && ex->traceback_by_node[node] != NULL) {
        return Py_NewRef(ex->traceback_by_node[node]);
    }
    Py_ssize_t n = (Py_ssize_t)Py_MIN((uint32_t)ex->limit, depth);
    PyObject *frames = PyTuple_New(n);
    if (frames == NULL) {
        return NULL;
    }
    _PyTraceMalloc_Node cur = node;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *frame = node_frame(ex, cur, &cur);
        if (frame == NULL) {
            Py_DECREF(frames);
            return NULL;
        }
        PyTuple_SET_ITEM(frames, i, frame);
    }
    if (ex->traceback_by_node != NULL) {
        ex->traceback_by_node[node] = Py_NewRef(frames);
    }
    return frames;
}

PyObject *
_PyTraceMalloc_NodeToFrames(_PyTraceMalloc_CCTView *view,
                            _PyTraceMalloc_Node node)
{
    exporter ex;
    PyObject *frames = NULL;
    if (exporter_init(&ex, view, _Py_tracemalloc_config.max_nframe, 0) == 0) {
        uint32_t total;
        frames = node_frames(&ex, node, &total);
    }
    exporter_fini(&ex);
    return frames;
}

/* One trace as the exports give it: (domain, size, frames, total_nframe),
   plus the native id of the allocating thread with THREADS.  The size is a
   size_t, as PyTraceMalloc_Track() takes it: unsigned, like upstream's
   (not -1 for 2**64 - 1). */
static PyObject *
trace_tuple(exporter *ex, unsigned int domain, uint64_t size,
            PyObject *frames, uint32_t total, _PyTraceMalloc_Node node,
            int threads)
{
    if (threads) {
        return Py_BuildValue("(IKOIk)", domain, (unsigned long long)size,
                             frames, total,
                             _PyTraceMalloc_NodeThread(&ex->view, node));
    }
    return Py_BuildValue("(IKOI)", domain, (unsigned long long)size, frames,
                         total);
}

static PyObject *
build_traces(_PyTraceMalloc_TraceCopy *traces, size_t count,
             const _PyTraceMalloc_CCTView *view, int threads)
{
    exporter ex;
    PyObject *result = NULL;
    if (exporter_init(&ex, view, _Py_tracemalloc_config.max_nframe, 1) < 0) {
        goto done;
    }
    result = PyList_New((Py_ssize_t)count);
    if (result == NULL) {
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t total;
        PyObject *frames = node_frames(&ex, traces[i].node, &total);
        if (frames == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyObject *item = trace_tuple(&ex, traces[i].domain, traces[i].size,
                                     frames, total, traces[i].node, threads);
        Py_DECREF(frames);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
done:
    exporter_fini(&ex);
    return result;
}

/* ---- module functions --------------------------------------------------- */

/*[clinic input]
_tracemalloc.is_tracing

True if memory allocations are being traced.
[clinic start generated code]*/

static PyObject *
_tracemalloc_is_tracing_impl(PyObject *module)
/*[clinic end generated code: output=2d763b42601cd3ef input=e09df762d7f3fa67]*/
{
    return PyBool_FromLong(_Py_tracemalloc_config.tracing);
}

/*[clinic input]
_tracemalloc.clear_traces

Forget every trace recorded so far; tracing goes on.
[clinic start generated code]*/

static PyObject *
_tracemalloc_clear_traces_impl(PyObject *module)
/*[clinic end generated code: output=a86080ee41b84197 input=ce7a48d35bd3f758]*/
{
    _PyTraceMalloc_ClearTraces();
    Py_RETURN_NONE;
}

/*[clinic input]
_tracemalloc._get_traces

Every trace, as (domain, size, frames, total_nframe) tuples.

frames is a tuple of (filename, lineno) tuples, most recent call first,
at most get_traceback_limit() of them.  Private: use take_snapshot().
[clinic start generated code]*/

static PyObject *
_tracemalloc__get_traces_impl(PyObject *module)
/*[clinic end generated code: output=e9929876ced4b5cc input=0c6750a8f2b3b7fc]*/
{
    return _tracemalloc__get_traces_ex_impl(module, 0, 0);
}

/* The peak's traces: each group's blocks get the average size of the
   group (the remainder spread over the first ones), so that sizes and
   counts add up exactly per traceback; the blocks of one group share their
   tuples. */
static PyObject *
build_peak_traces(_PyTraceMalloc_PeakGroup *groups, size_t ngroups,
                  const _PyTraceMalloc_CCTView *view, int threads)
{
    exporter ex;
    PyObject *result = NULL;
    if (exporter_init(&ex, view, _Py_tracemalloc_config.max_nframe, 1) < 0) {
        goto done;
    }
    result = PyList_New(0);
    for (size_t i = 0; result != NULL && i < ngroups; i++) {
        _PyTraceMalloc_PeakGroup *g = &groups[i];
        uint32_t total;
        PyObject *frames = node_frames(&ex, g->node, &total);
        if (frames == NULL) {
            Py_CLEAR(result);
            break;
        }
        uint64_t base = g->size / g->count, extra = g->size % g->count;
        PyObject *items[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            if ((k == 0 && extra == 0) || (k == 1 && g->count == extra)) {
                continue;
            }
            items[k] = trace_tuple(&ex, g->domain, base + (k == 0), frames,
                                   total, g->node, threads);
            if (items[k] == NULL) {
                Py_CLEAR(result);
            }
        }
        Py_DECREF(frames);
        for (uint32_t j = 0; result != NULL && j < g->count; j++) {
            if (PyList_Append(result, items[j < extra ? 0 : 1]) < 0) {
                Py_CLEAR(result);
            }
        }
        Py_XDECREF(items[0]);
        Py_XDECREF(items[1]);
    }
done:
    exporter_fini(&ex);
    return result;
}

/*[clinic input]
_tracemalloc._get_traces_ex

    *
    peak: bool = False
    threads: bool = False

Like _get_traces(), with the fork's additions.

With peak=True, the traces live when traced memory last reached its peak
(since tracing started or reset_peak()): exact sizes and counts per
traceback; each block gets the average size of its traceback's blocks.
With threads=True, each tuple has a fifth item: the native id of the
thread that allocated the block (0 if unknown).
Private: use take_snapshot(peak=..., threads=...).
[clinic start generated code]*/

static PyObject *
_tracemalloc__get_traces_ex_impl(PyObject *module, int peak, int threads)
/*[clinic end generated code: output=0b520b99635114ec input=f0f3bd0ffda752aa]*/
{
    if (!_Py_tracemalloc_config.tracing) {
        return PyList_New(0);
    }
    _PyTraceMalloc_CCTView view;
    PyObject *result = NULL;
    /* The export's own objects are not the user's memory. */
    _PyTraceMalloc_SuspendThread();
    if (peak) {
        _PyTraceMalloc_PeakGroup *groups;
        size_t ngroups;
        if (_PyTraceMalloc_PeakCopy(&groups, &ngroups, &view) < 0) {
            PyErr_NoMemory();
        }
        else {
            result = build_peak_traces(groups, ngroups, &view, threads);
            free(groups);
        }
    }
    else {
        _PyTraceMalloc_TraceCopy *traces;
        size_t count;
        int res = _PyTraceMalloc_StoreCopy(&traces, &count, &view);
        if (res == -2) {
            PyErr_SetString(PyExc_RuntimeError,
                            "tracemalloc: trace count mismatch; the trace "
                            "store is inconsistent");
        }
        else if (res < 0) {
            PyErr_NoMemory();
        }
        else {
            result = build_traces(traces, count, &view, threads);
            free(traces);
        }
    }
    _PyTraceMalloc_ResumeThread();
    return result;
}

/*[clinic input]
_tracemalloc._get_object_traceback

    obj: object
    /

The frames tuple of where obj was allocated, or None.

Private: use tracemalloc.get_object_traceback().
[clinic start generated code]*/

static PyObject *
_tracemalloc__get_object_traceback(PyObject *module, PyObject *obj)
/*[clinic end generated code: output=41ee0553a658b0aa input=6f717d8a322fca58]*/
{
    return _PyTraceMalloc_GetObjectTraceback(obj);
}

/*[clinic input]
_tracemalloc.start

    nframe: int = 1
    /

Start tracing memory allocations.

Each traceback keeps up to nframe frames (1 to 65535).  Called while
tracing, it only changes the limit.
[clinic start generated code]*/

static PyObject *
_tracemalloc_start_impl(PyObject *module, int nframe)
/*[clinic end generated code: output=caae05c23c159d3c input=398844fc35a4c82c]*/
{
    if (_PyTraceMalloc_Start(nframe) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/*[clinic input]
_tracemalloc.stop

Stop tracing memory allocations and forget every trace.
[clinic start generated code]*/

static PyObject *
_tracemalloc_stop_impl(PyObject *module)
/*[clinic end generated code: output=c3c42ae03e3955cd input=390fe215bbfaf679]*/
{
    _PyTraceMalloc_Stop();
    Py_RETURN_NONE;
}

/*[clinic input]
_tracemalloc.get_traceback_limit

The most frames a trace's traceback reports.
[clinic start generated code]*/

static PyObject *
_tracemalloc_get_traceback_limit_impl(PyObject *module)
/*[clinic end generated code: output=d556d9306ba95567 input=665d483d07ce346e]*/
{
    return PyLong_FromLong(_Py_tracemalloc_config.max_nframe);
}

/*[clinic input]
_tracemalloc.get_tracemalloc_memory

Bytes of memory the tracing engine uses for its own bookkeeping.
[clinic start generated code]*/

static PyObject *
_tracemalloc_get_tracemalloc_memory_impl(PyObject *module)
/*[clinic end generated code: output=e3f14e280a55f5aa input=70bb48cdc7fea44a]*/
{
    _PyTraceMalloc_Lock();
    size_t size = _PyTraceMalloc_StoreMemory_unlocked()
                  + _PyTraceMalloc_CCTMemory_unlocked();
    _PyTraceMalloc_Unlock();
    return PyLong_FromSize_t(size);
}

/*[clinic input]
_tracemalloc.get_traced_memory

The traced size now and its peak, as a (current, peak) tuple.

The peak is the most traced memory since tracing started or since
reset_peak() was called.
[clinic start generated code]*/

static PyObject *
_tracemalloc_get_traced_memory_impl(PyObject *module)
/*[clinic end generated code: output=5b167189adb9e782 input=703d8fd71e67fbd2]*/
{
    size_t current = 0, peak = 0;
    if (_Py_tracemalloc_config.tracing) {
        _PyTraceMalloc_Lock();
        _PyTraceMalloc_StoreTotals_unlocked(&current, &peak);
        _PyTraceMalloc_Unlock();
    }
    return Py_BuildValue("nn", (Py_ssize_t)current, (Py_ssize_t)peak);
}

/*[clinic input]
_tracemalloc.reset_peak

Make the peak of get_traced_memory() the current traced size.
[clinic start generated code]*/

static PyObject *
_tracemalloc_reset_peak_impl(PyObject *module)
/*[clinic end generated code: output=140c2870f691dbb2 input=c6c437823682cc3c]*/
{
    if (_Py_tracemalloc_config.tracing) {
        _PyTraceMalloc_Lock();
        _PyTraceMalloc_StoreResetPeak_unlocked();
        _PyTraceMalloc_Unlock();
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    _TRACEMALLOC_IS_TRACING_METHODDEF
    _TRACEMALLOC_CLEAR_TRACES_METHODDEF
    _TRACEMALLOC__GET_TRACES_METHODDEF
    _TRACEMALLOC__GET_TRACES_EX_METHODDEF
    _TRACEMALLOC__GET_OBJECT_TRACEBACK_METHODDEF
    _TRACEMALLOC_START_METHODDEF
    _TRACEMALLOC_STOP_METHODDEF
    _TRACEMALLOC_GET_TRACEBACK_LIMIT_METHODDEF
    _TRACEMALLOC_GET_TRACEMALLOC_MEMORY_METHODDEF
    _TRACEMALLOC_GET_TRACED_MEMORY_METHODDEF
    _TRACEMALLOC_RESET_PEAK_METHODDEF
    {NULL, NULL}
};

PyDoc_STRVAR(module_doc,
"Trace Python memory allocations: the engine behind tracemalloc.");

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_tracemalloc",
    .m_doc = module_doc,
    .m_size = 0,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__tracemalloc(void)
{
    return PyModule_Create(&module_def);
}
