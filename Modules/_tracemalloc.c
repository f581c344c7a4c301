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

/* ---- building frames ---------------------------------------------------- */

typedef struct {
    _PyTraceMalloc_CCTView view;
    int limit;
    PyObject **frame_by_node;       /* (filename, lineno), by node id */
    PyObject **traceback_by_node;   /* tuple of frames, by node id */
    PyObject *filenames;            /* dict: string address -> str */
    PyObject *unknown_frames;       /* (('<unknown>', 0),) */
} exporter;

static int
exporter_init(exporter *ex, int limit, int tables)
{
    memset(ex, 0, sizeof(*ex));
    _PyTraceMalloc_CCTPin(&ex->view);
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
    if (ex->frame_by_node != NULL) {
        for (uint32_t i = 0; i < ex->view.nnodes; i++) {
            Py_XDECREF(ex->frame_by_node[i]);
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
    if (node == 0) {
        *total = 1;
        if (ex->unknown_frames == NULL) {
            ex->unknown_frames = Py_BuildValue("((si))", "<unknown>", 0);
        }
        return Py_XNewRef(ex->unknown_frames);
    }
    _PyTraceMalloc_Node parent;
    int lineno, kind;
    uint32_t depth;
    const void *data;
    Py_ssize_t length;
    _PyTraceMalloc_NodeInfo(&ex->view, node, &parent, &lineno, &depth,
                            &data, &kind, &length);
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
_PyTraceMalloc_NodeToFrames(_PyTraceMalloc_Node node)
{
    exporter ex;
    PyObject *frames = NULL;
    if (exporter_init(&ex, _Py_tracemalloc_config.max_nframe, 0) == 0) {
        uint32_t total;
        frames = node_frames(&ex, node, &total);
    }
    exporter_fini(&ex);
    return frames;
}

/* ---- module functions --------------------------------------------------- */

PyDoc_STRVAR(is_tracing_doc,
"is_tracing($module, /)\n--\n\n"
"True if memory allocations are being traced.");

static PyObject *
tm_is_tracing(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(_Py_tracemalloc_config.tracing);
}

PyDoc_STRVAR(clear_traces_doc,
"clear_traces($module, /)\n--\n\n"
"Forget every trace recorded so far; tracing goes on.");

static PyObject *
tm_clear_traces(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    _PyTraceMalloc_ClearTraces();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(start_doc,
"start($module, nframe=1, /)\n--\n\n"
"Start tracing memory allocations, keeping up to nframe frames of each\n"
"allocation's traceback (1 to 65535).  Calling it while tracing only\n"
"changes the limit.");

static PyObject *
tm_start(PyObject *module, PyObject *args)
{
    int nframe = 1;
    if (!PyArg_ParseTuple(args, "|i:start", &nframe)) {
        return NULL;
    }
    if (_PyTraceMalloc_Start(nframe) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(stop_doc,
"stop($module, /)\n--\n\n"
"Stop tracing memory allocations and forget every trace.");

static PyObject *
tm_stop(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    _PyTraceMalloc_Stop();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_traceback_limit_doc,
"get_traceback_limit($module, /)\n--\n\n"
"The most frames a trace's traceback reports.");

static PyObject *
tm_get_traceback_limit(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(_Py_tracemalloc_config.max_nframe);
}

PyDoc_STRVAR(get_tracemalloc_memory_doc,
"get_tracemalloc_memory($module, /)\n--\n\n"
"Bytes of memory the tracing engine uses for its own bookkeeping.");

static PyObject *
tm_get_tracemalloc_memory(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    _PyTraceMalloc_Lock();
    size_t size = _PyTraceMalloc_StoreMemory_unlocked()
                  + _PyTraceMalloc_CCTMemory_unlocked();
    _PyTraceMalloc_Unlock();
    return PyLong_FromSize_t(size);
}

PyDoc_STRVAR(get_traced_memory_doc,
"get_traced_memory($module, /)\n--\n\n"
"(current, peak): bytes in traced blocks now, and the most there were\n"
"since tracing started or reset_peak() was called.");

static PyObject *
tm_get_traced_memory(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    size_t current = 0, peak = 0;
    if (_Py_tracemalloc_config.tracing) {
        _PyTraceMalloc_Lock();
        _PyTraceMalloc_StoreTotals_unlocked(&current, &peak);
        _PyTraceMalloc_Unlock();
    }
    return Py_BuildValue("nn", (Py_ssize_t)current, (Py_ssize_t)peak);
}

PyDoc_STRVAR(reset_peak_doc,
"reset_peak($module, /)\n--\n\n"
"Make the peak of get_traced_memory() the current traced size.");

static PyObject *
tm_reset_peak(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    if (_Py_tracemalloc_config.tracing) {
        _PyTraceMalloc_Lock();
        _PyTraceMalloc_StoreResetPeak_unlocked();
        _PyTraceMalloc_Unlock();
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_traces_doc,
"_get_traces($module, /)\n--\n\n"
"Every trace as a (domain, size, frames, total_nframe) tuple; frames are\n"
"(filename, lineno) tuples, most recent first.  Private: use\n"
"tracemalloc.take_snapshot().");

static PyObject *
tm_get_traces(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyObject *result = PyList_New(0);
    if (result == NULL || !_Py_tracemalloc_config.tracing) {
        return result;
    }
    _PyTraceMalloc_TraceCopy *traces;
    size_t count;
    int res = _PyTraceMalloc_StoreCopy(&traces, &count);
    if (res < 0) {
        Py_DECREF(result);
        if (res == -2) {
            PyErr_SetString(PyExc_RuntimeError,
                            "tracemalloc: trace count mismatch; the trace "
                            "store is inconsistent");
            return NULL;
        }
        return PyErr_NoMemory();
    }
    /* Taken after the copy, with the GIL held since: every node the copy
       names is in the view. */
    exporter ex;
    if (exporter_init(&ex, _Py_tracemalloc_config.max_nframe, 1) < 0) {
        goto error;
    }
    Py_SETREF(result, PyList_New((Py_ssize_t)count));
    if (result == NULL) {
        goto error;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t total;
        PyObject *frames = node_frames(&ex, traces[i].node, &total);
        if (frames == NULL) {
            goto error;
        }
        PyObject *item = Py_BuildValue("(InNI)", traces[i].domain,
                                       (Py_ssize_t)traces[i].size, frames,
                                       total);
        if (item == NULL) {
            goto error;
        }
        PyList_SET_ITEM(result, (Py_ssize_t)i, item);
    }
    exporter_fini(&ex);
    free(traces);
    return result;

error:
    exporter_fini(&ex);
    free(traces);
    Py_XDECREF(result);
    return NULL;
}

PyDoc_STRVAR(get_object_traceback_doc,
"_get_object_traceback($module, obj, /)\n--\n\n"
"The frames tuple of where obj was allocated, or None.  Private: use\n"
"tracemalloc.get_object_traceback().");

static PyObject *
tm_get_object_traceback(PyObject *module, PyObject *obj)
{
    return _PyTraceMalloc_GetObjectTraceback(obj);
}

PyDoc_STRVAR(check_consistency_doc,
"_check_consistency($module, /)\n--\n\n"
"Walk the whole trace store: the traced size must equal the sum of the\n"
"live traces, the count their number, and no free pymalloc block may keep\n"
"a trace.  Returns the number of traces; raises AssertionError otherwise.\n"
"For the fork's tests.");

static PyObject *
tm_check_consistency(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    char why[256];
    uint64_t ntraces = 0;
    if (_PyTraceMalloc_StoreCheck(why, sizeof(why), &ntraces) < 0) {
        PyErr_SetString(PyExc_AssertionError, why);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(ntraces);
}

PyDoc_STRVAR(fail_bookkeeping_doc,
"_fail_bookkeeping($module, n, /)\n--\n\n"
"Make the next n allocations of the engine's own bookkeeping fail, to\n"
"test out-of-memory handling.  For the fork's tests.");

static PyObject *
tm_fail_bookkeeping(PyObject *module, PyObject *arg)
{
    int n = _PyLong_AsInt(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    _PyTraceMalloc_FailBookkeeping(n);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"is_tracing", tm_is_tracing, METH_NOARGS, is_tracing_doc},
    {"clear_traces", tm_clear_traces, METH_NOARGS, clear_traces_doc},
    {"_get_object_traceback", tm_get_object_traceback, METH_O,
     get_object_traceback_doc},
    {"_get_traces", tm_get_traces, METH_NOARGS, get_traces_doc},
    {"start", tm_start, METH_VARARGS, start_doc},
    {"stop", tm_stop, METH_NOARGS, stop_doc},
    {"get_traceback_limit", tm_get_traceback_limit, METH_NOARGS,
     get_traceback_limit_doc},
    {"get_tracemalloc_memory", tm_get_tracemalloc_memory, METH_NOARGS,
     get_tracemalloc_memory_doc},
    {"get_traced_memory", tm_get_traced_memory, METH_NOARGS,
     get_traced_memory_doc},
    {"reset_peak", tm_reset_peak, METH_NOARGS, reset_peak_doc},
    {"_check_consistency", tm_check_consistency, METH_NOARGS,
     check_consistency_doc},
    {"_fail_bookkeeping", tm_fail_bookkeeping, METH_O, fail_bookkeeping_doc},
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
