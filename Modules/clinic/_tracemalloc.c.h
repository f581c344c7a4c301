/*[clinic input]
preserve
[clinic start generated code]*/

PyDoc_STRVAR(_tracemalloc_is_tracing__doc__,
"is_tracing($module, /)\n"
"--\n"
"\n"
"True if memory allocations are being traced.");

#define _TRACEMALLOC_IS_TRACING_METHODDEF    \
    {"is_tracing", (PyCFunction)_tracemalloc_is_tracing, METH_NOARGS, _tracemalloc_is_tracing__doc__},

static PyObject *
_tracemalloc_is_tracing_impl(PyObject *module);

static PyObject *
_tracemalloc_is_tracing(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc_is_tracing_impl(module);
}

PyDoc_STRVAR(_tracemalloc_clear_traces__doc__,
"clear_traces($module, /)\n"
"--\n"
"\n"
"Forget every trace recorded so far; tracing goes on.");

#define _TRACEMALLOC_CLEAR_TRACES_METHODDEF    \
    {"clear_traces", (PyCFunction)_tracemalloc_clear_traces, METH_NOARGS, _tracemalloc_clear_traces__doc__},

static PyObject *
_tracemalloc_clear_traces_impl(PyObject *module);

static PyObject *
_tracemalloc_clear_traces(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc_clear_traces_impl(module);
}

PyDoc_STRVAR(_tracemalloc__get_traces__doc__,
"_get_traces($module, /)\n"
"--\n"
"\n"
"Every trace, as (domain, size, frames, total_nframe) tuples.\n"
"\n"
"frames is a tuple of (filename, lineno) tuples, most recent call first,\n"
"at most get_traceback_limit() of them.  Private: use take_snapshot().");

#define _TRACEMALLOC__GET_TRACES_METHODDEF    \
    {"_get_traces", (PyCFunction)_tracemalloc__get_traces, METH_NOARGS, _tracemalloc__get_traces__doc__},

static PyObject *
_tracemalloc__get_traces_impl(PyObject *module);

static PyObject *
_tracemalloc__get_traces(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc__get_traces_impl(module);
}

PyDoc_STRVAR(_tracemalloc__get_traces_ex__doc__,
"_get_traces_ex($module, /, *, peak=False, threads=False)\n"
"--\n"
"\n"
"Like _get_traces(), with the fork\'s additions.\n"
"\n"
"With peak=True, the traces live when traced memory last reached its peak\n"
"(since tracing started or reset_peak()): exact sizes and counts per\n"
"traceback; each block gets the average size of its traceback\'s blocks.\n"
"With threads=True, each tuple has a fifth item: the native id of the\n"
"thread that allocated the block (0 if unknown).\n"
"Private: use take_snapshot(peak=..., threads=...).");

#define _TRACEMALLOC__GET_TRACES_EX_METHODDEF    \
    {"_get_traces_ex", _PyCFunction_CAST(_tracemalloc__get_traces_ex), METH_FASTCALL|METH_KEYWORDS, _tracemalloc__get_traces_ex__doc__},

static PyObject *
_tracemalloc__get_traces_ex_impl(PyObject *module, int peak, int threads);

static PyObject *
_tracemalloc__get_traces_ex(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *return_value = NULL;
    static const char * const _keywords[] = {"peak", "threads", NULL};
    static _PyArg_Parser _parser = {NULL, _keywords, "_get_traces_ex", 0};
    PyObject *argsbuf[2];
    Py_ssize_t noptargs = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0) - 0;
    int peak = 0;
    int threads = 0;

    args = _PyArg_UnpackKeywords(args, nargs, NULL, kwnames, &_parser, 0, 0, 0, argsbuf);
    if (!args) {
        goto exit;
    }
    if (!noptargs) {
        goto skip_optional_kwonly;
    }
    if (args[0]) {
        peak = PyObject_IsTrue(args[0]);
        if (peak < 0) {
            goto exit;
        }
        if (!--noptargs) {
            goto skip_optional_kwonly;
        }
    }
    threads = PyObject_IsTrue(args[1]);
    if (threads < 0) {
        goto exit;
    }
skip_optional_kwonly:
    return_value = _tracemalloc__get_traces_ex_impl(module, peak, threads);

exit:
    return return_value;
}

PyDoc_STRVAR(_tracemalloc__get_columns__doc__,
"_get_columns($module, /, *, peak=False, threads=False)\n"
"--\n"
"\n"
"The traces of _get_traces_ex() as columns.\n"
"\n"
"Return a SnapshotColumns named tuple (frames, total_nframe, threads,\n"
"domains, sizes, indexes): one item of the three lists per distinct call\n"
"context (its frames tuple, its total frame count, and with threads=True\n"
"the native id of its thread; else threads is None), and three bytes\n"
"objects holding one item per trace in native byte order: the domain\n"
"(uint32), the size (uint64) and the index of the trace\'s call context in\n"
"the lists (uint32).\n"
"Private: use take_snapshot().");

#define _TRACEMALLOC__GET_COLUMNS_METHODDEF    \
    {"_get_columns", _PyCFunction_CAST(_tracemalloc__get_columns), METH_FASTCALL|METH_KEYWORDS, _tracemalloc__get_columns__doc__},

static PyObject *
_tracemalloc__get_columns_impl(PyObject *module, int peak, int threads);

static PyObject *
_tracemalloc__get_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *return_value = NULL;
    static const char * const _keywords[] = {"peak", "threads", NULL};
    static _PyArg_Parser _parser = {NULL, _keywords, "_get_columns", 0};
    PyObject *argsbuf[2];
    Py_ssize_t noptargs = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0) - 0;
    int peak = 0;
    int threads = 0;

    args = _PyArg_UnpackKeywords(args, nargs, NULL, kwnames, &_parser, 0, 0, 0, argsbuf);
    if (!args) {
        goto exit;
    }
    if (!noptargs) {
        goto skip_optional_kwonly;
    }
    if (args[0]) {
        peak = PyObject_IsTrue(args[0]);
        if (peak < 0) {
            goto exit;
        }
        if (!--noptargs) {
            goto skip_optional_kwonly;
        }
    }
    threads = PyObject_IsTrue(args[1]);
    if (threads < 0) {
        goto exit;
    }
skip_optional_kwonly:
    return_value = _tracemalloc__get_columns_impl(module, peak, threads);

exit:
    return return_value;
}

PyDoc_STRVAR(_tracemalloc__traceback_totals__doc__,
"_traceback_totals($module, indexes, sizes, ntracebacks, /)\n"
"--\n"
"\n"
"Sum the sizes and count the traces per call context index.\n"
"\n"
"Return (sizes, counts), two lists of ntracebacks ints.  The buffers are\n"
"columns as _get_columns() returns them.  Private.");

#define _TRACEMALLOC__TRACEBACK_TOTALS_METHODDEF    \
    {"_traceback_totals", _PyCFunction_CAST(_tracemalloc__traceback_totals), METH_FASTCALL, _tracemalloc__traceback_totals__doc__},

static PyObject *
_tracemalloc__traceback_totals_impl(PyObject *module, Py_buffer *indexes,
                                    Py_buffer *sizes, Py_ssize_t ntracebacks);

static PyObject *
_tracemalloc__traceback_totals(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *return_value = NULL;
    Py_buffer indexes = {NULL, NULL};
    Py_buffer sizes = {NULL, NULL};
    Py_ssize_t ntracebacks;

    if (!_PyArg_CheckPositional("_traceback_totals", nargs, 3, 3)) {
        goto exit;
    }
    if (PyObject_GetBuffer(args[0], &indexes, PyBUF_SIMPLE) != 0) {
        goto exit;
    }
    if (!PyBuffer_IsContiguous(&indexes, 'C')) {
        _PyArg_BadArgument("_traceback_totals", "argument 1", "contiguous buffer", args[0]);
        goto exit;
    }
    if (PyObject_GetBuffer(args[1], &sizes, PyBUF_SIMPLE) != 0) {
        goto exit;
    }
    if (!PyBuffer_IsContiguous(&sizes, 'C')) {
        _PyArg_BadArgument("_traceback_totals", "argument 2", "contiguous buffer", args[1]);
        goto exit;
    }
    {
        Py_ssize_t ival = -1;
        PyObject *iobj = _PyNumber_Index(args[2]);
        if (iobj != NULL) {
            ival = PyLong_AsSsize_t(iobj);
            Py_DECREF(iobj);
        }
        if (ival == -1 && PyErr_Occurred()) {
            goto exit;
        }
        ntracebacks = ival;
    }
    return_value = _tracemalloc__traceback_totals_impl(module, &indexes, &sizes, ntracebacks);

exit:
    /* Cleanup for indexes */
    if (indexes.obj) {
       PyBuffer_Release(&indexes);
    }
    /* Cleanup for sizes */
    if (sizes.obj) {
       PyBuffer_Release(&sizes);
    }

    return return_value;
}

PyDoc_STRVAR(_tracemalloc__traces_from_columns__doc__,
"_traces_from_columns($module, frames, total_nframe, threads, domains,\n"
"                     sizes, indexes, /)\n"
"--\n"
"\n"
"Build the list of trace tuples that _get_traces_ex() would return.\n"
"\n"
"The arguments are what _get_columns() returns; threads is a list, or None\n"
"for 4-tuples.  Private.");

#define _TRACEMALLOC__TRACES_FROM_COLUMNS_METHODDEF    \
    {"_traces_from_columns", _PyCFunction_CAST(_tracemalloc__traces_from_columns), METH_FASTCALL, _tracemalloc__traces_from_columns__doc__},

static PyObject *
_tracemalloc__traces_from_columns_impl(PyObject *module, PyObject *frames,
                                       PyObject *total_nframe,
                                       PyObject *threads, Py_buffer *domains,
                                       Py_buffer *sizes, Py_buffer *indexes);

static PyObject *
_tracemalloc__traces_from_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *return_value = NULL;
    PyObject *frames;
    PyObject *total_nframe;
    PyObject *threads;
    Py_buffer domains = {NULL, NULL};
    Py_buffer sizes = {NULL, NULL};
    Py_buffer indexes = {NULL, NULL};

    if (!_PyArg_CheckPositional("_traces_from_columns", nargs, 6, 6)) {
        goto exit;
    }
    if (!PyList_Check(args[0])) {
        _PyArg_BadArgument("_traces_from_columns", "argument 1", "list", args[0]);
        goto exit;
    }
    frames = args[0];
    if (!PyList_Check(args[1])) {
        _PyArg_BadArgument("_traces_from_columns", "argument 2", "list", args[1]);
        goto exit;
    }
    total_nframe = args[1];
    threads = args[2];
    if (PyObject_GetBuffer(args[3], &domains, PyBUF_SIMPLE) != 0) {
        goto exit;
    }
    if (!PyBuffer_IsContiguous(&domains, 'C')) {
        _PyArg_BadArgument("_traces_from_columns", "argument 4", "contiguous buffer", args[3]);
        goto exit;
    }
    if (PyObject_GetBuffer(args[4], &sizes, PyBUF_SIMPLE) != 0) {
        goto exit;
    }
    if (!PyBuffer_IsContiguous(&sizes, 'C')) {
        _PyArg_BadArgument("_traces_from_columns", "argument 5", "contiguous buffer", args[4]);
        goto exit;
    }
    if (PyObject_GetBuffer(args[5], &indexes, PyBUF_SIMPLE) != 0) {
        goto exit;
    }
    if (!PyBuffer_IsContiguous(&indexes, 'C')) {
        _PyArg_BadArgument("_traces_from_columns", "argument 6", "contiguous buffer", args[5]);
        goto exit;
    }
    return_value = _tracemalloc__traces_from_columns_impl(module, frames, total_nframe, threads, &domains, &sizes, &indexes);

exit:
    /* Cleanup for domains */
    if (domains.obj) {
       PyBuffer_Release(&domains);
    }
    /* Cleanup for sizes */
    if (sizes.obj) {
       PyBuffer_Release(&sizes);
    }
    /* Cleanup for indexes */
    if (indexes.obj) {
       PyBuffer_Release(&indexes);
    }

    return return_value;
}

PyDoc_STRVAR(_tracemalloc__frame_table__doc__,
"_frame_table($module, tracebacks, /)\n"
"--\n"
"\n"
"Number the distinct frames of call contexts, for Snapshot.dump().\n"
"\n"
"tracebacks is a list of call contexts, each a tuple or list of\n"
"(filename, lineno) frames.  Return (frames, text): frames lists each\n"
"distinct frame once, in order of first appearance, and text (bytes) is\n"
"the JSON array of the call contexts, each an array of indexes into\n"
"frames.  Raise TypeError if a frame is not a (str, int) tuple.  Private.");

#define _TRACEMALLOC__FRAME_TABLE_METHODDEF    \
    {"_frame_table", (PyCFunction)_tracemalloc__frame_table, METH_O, _tracemalloc__frame_table__doc__},

static PyObject *
_tracemalloc__frame_table_impl(PyObject *module, PyObject *tracebacks);

static PyObject *
_tracemalloc__frame_table(PyObject *module, PyObject *arg)
{
    PyObject *return_value = NULL;
    PyObject *tracebacks;

    if (!PyList_Check(arg)) {
        _PyArg_BadArgument("_frame_table", "argument", "list", arg);
        goto exit;
    }
    tracebacks = arg;
    return_value = _tracemalloc__frame_table_impl(module, tracebacks);

exit:
    return return_value;
}

PyDoc_STRVAR(_tracemalloc__narrow_columns__doc__,
"_narrow_columns($module, domains, sizes, /)\n"
"--\n"
"\n"
"Check whether dump() can write narrower columns.\n"
"\n"
"domains and sizes are the uint32 and uint64 columns (native order) of\n"
"_get_columns().  Return (zero, narrow): zero is True when every domain is\n"
"0; narrow is bytes holding the sizes as little-endian uint32 when every\n"
"size fits, else None.  Private.");

#define _TRACEMALLOC__NARROW_COLUMNS_METHODDEF    \
    {"_narrow_columns", _PyCFunction_CAST(_tracemalloc__narrow_columns), METH_FASTCALL, _tracemalloc__narrow_columns__doc__},

static PyObject *
_tracemalloc__narrow_columns_impl(PyObject *module, Py_buffer *domains,
                                  Py_buffer *sizes);

static PyObject *
_tracemalloc__narrow_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *return_value = NULL;
    Py_buffer domains = {NULL, NULL};
    Py_buffer sizes = {NULL, NULL};

    if (!_PyArg_CheckPositional("_narrow_columns", nargs, 2, 2)) {
        goto exit;
    }
    if (PyObject_GetBuffer(args[0], &domains, PyBUF_SIMPLE) != 0) {
        goto exit;
    }
    if (!PyBuffer_IsContiguous(&domains, 'C')) {
        _PyArg_BadArgument("_narrow_columns", "argument 1", "contiguous buffer", args[0]);
        goto exit;
    }
    if (PyObject_GetBuffer(args[1], &sizes, PyBUF_SIMPLE) != 0) {
        goto exit;
    }
    if (!PyBuffer_IsContiguous(&sizes, 'C')) {
        _PyArg_BadArgument("_narrow_columns", "argument 2", "contiguous buffer", args[1]);
        goto exit;
    }
    return_value = _tracemalloc__narrow_columns_impl(module, &domains, &sizes);

exit:
    /* Cleanup for domains */
    if (domains.obj) {
       PyBuffer_Release(&domains);
    }
    /* Cleanup for sizes */
    if (sizes.obj) {
       PyBuffer_Release(&sizes);
    }

    return return_value;
}

PyDoc_STRVAR(_tracemalloc__get_object_traceback__doc__,
"_get_object_traceback($module, obj, /)\n"
"--\n"
"\n"
"The frames tuple of where obj was allocated, or None.\n"
"\n"
"Private: use tracemalloc.get_object_traceback().");

#define _TRACEMALLOC__GET_OBJECT_TRACEBACK_METHODDEF    \
    {"_get_object_traceback", (PyCFunction)_tracemalloc__get_object_traceback, METH_O, _tracemalloc__get_object_traceback__doc__},

PyDoc_STRVAR(_tracemalloc_stop__doc__,
"stop($module, /)\n"
"--\n"
"\n"
"Stop tracing memory allocations and forget every trace.");

#define _TRACEMALLOC_STOP_METHODDEF    \
    {"stop", (PyCFunction)_tracemalloc_stop, METH_NOARGS, _tracemalloc_stop__doc__},

static PyObject *
_tracemalloc_stop_impl(PyObject *module);

static PyObject *
_tracemalloc_stop(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc_stop_impl(module);
}

PyDoc_STRVAR(_tracemalloc_get_traceback_limit__doc__,
"get_traceback_limit($module, /)\n"
"--\n"
"\n"
"The most frames a trace\'s traceback reports.");

#define _TRACEMALLOC_GET_TRACEBACK_LIMIT_METHODDEF    \
    {"get_traceback_limit", (PyCFunction)_tracemalloc_get_traceback_limit, METH_NOARGS, _tracemalloc_get_traceback_limit__doc__},

static PyObject *
_tracemalloc_get_traceback_limit_impl(PyObject *module);

static PyObject *
_tracemalloc_get_traceback_limit(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc_get_traceback_limit_impl(module);
}

PyDoc_STRVAR(_tracemalloc_get_tracemalloc_memory__doc__,
"get_tracemalloc_memory($module, /)\n"
"--\n"
"\n"
"Bytes of memory the tracing engine uses for its own bookkeeping.");

#define _TRACEMALLOC_GET_TRACEMALLOC_MEMORY_METHODDEF    \
    {"get_tracemalloc_memory", (PyCFunction)_tracemalloc_get_tracemalloc_memory, METH_NOARGS, _tracemalloc_get_tracemalloc_memory__doc__},

static PyObject *
_tracemalloc_get_tracemalloc_memory_impl(PyObject *module);

static PyObject *
_tracemalloc_get_tracemalloc_memory(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc_get_tracemalloc_memory_impl(module);
}

PyDoc_STRVAR(_tracemalloc_get_traced_memory__doc__,
"get_traced_memory($module, /)\n"
"--\n"
"\n"
"The traced size now and its peak, as a (current, peak) tuple.\n"
"\n"
"The peak is the most traced memory since tracing started or since\n"
"reset_peak() was called.");

#define _TRACEMALLOC_GET_TRACED_MEMORY_METHODDEF    \
    {"get_traced_memory", (PyCFunction)_tracemalloc_get_traced_memory, METH_NOARGS, _tracemalloc_get_traced_memory__doc__},

static PyObject *
_tracemalloc_get_traced_memory_impl(PyObject *module);

static PyObject *
_tracemalloc_get_traced_memory(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc_get_traced_memory_impl(module);
}

PyDoc_STRVAR(_tracemalloc_reset_peak__doc__,
"reset_peak($module, /)\n"
"--\n"
"\n"
"Make the peak of get_traced_memory() the current traced size.");

#define _TRACEMALLOC_RESET_PEAK_METHODDEF    \
    {"reset_peak", (PyCFunction)_tracemalloc_reset_peak, METH_NOARGS, _tracemalloc_reset_peak__doc__},

static PyObject *
_tracemalloc_reset_peak_impl(PyObject *module);

static PyObject *
_tracemalloc_reset_peak(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return _tracemalloc_reset_peak_impl(module);
}
/*[clinic end generated code: output=5942f3a222697399 input=a9049054013a1b77]*/
