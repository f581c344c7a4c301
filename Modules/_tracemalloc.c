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
#include "pycore_tracemalloc_native.h"
#include "pycore_sysmodule.h"     // _PySys_GetSizeOf()

#if PY_VERSION_HEX >= 0x030D0000
/* The clinic output is 3.11's (one file for both bases): the helpers it
   calls are internal since 3.13, and _PyLong_AsInt() is public there. */
#  include "pycore_abstract.h"    // _PyNumber_Index()
#  include "pycore_modsupport.h"  // _PyArg_UnpackKeywords()
#  define _PyLong_AsInt PyLong_AsInt
#endif
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
    PyObject *tracebacks;           /* dict: frames tuple -> itself */
    PyObject *unknown_frames;       /* (('<unknown>', 0),) */
    PyObject *native_frames;        /* dict: return address -> C frame */
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
        ex->tracebacks = PyDict_New();
        if (ex->tracebacks == NULL) {
            return -1;
        }
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
    Py_XDECREF(ex->tracebacks);
    Py_XDECREF(ex->unknown_frames);
    Py_XDECREF(ex->native_frames);
    _PyTraceMalloc_CCTUnpin();
}

/* An export makes a tuple for each frame and call context: a str and an
   int, or such tuples.  They can never be part of a cycle, and the
   collector would untrack them in its next pass anyway, after walking
   them all (tens of thousands for a big snapshot).  Untracking them here
   spares the program that pass. */
static void
untrack_atomic(PyObject *tuple)
{
    if (tuple != NULL) {
        PyObject_GC_UnTrack(tuple);     /* a no-op if already untracked */
    }
}

/* A new reference to the str of an engine string (a filename or a label
   set), made once per export. */
static PyObject *
view_string(exporter *ex, const void *data, int kind, Py_ssize_t length)
{
    PyObject *key = PyLong_FromVoidPtr((void *)data);
    if (key == NULL) {
        return NULL;
    }
    PyObject *str = PyDict_GetItemWithError(ex->filenames, key);
    if (str != NULL) {
        Py_INCREF(str);
    }
    else if (!PyErr_Occurred()) {
        str = PyUnicode_FromKindAndData(kind, data, length);
        if (str != NULL && PyDict_SetItem(ex->filenames, key, str) < 0) {
            Py_CLEAR(str);
        }
    }
    Py_DECREF(key);
    return str;
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
        filename = view_string(ex, data, kind, length);
    }
    if (filename == NULL) {
        return NULL;
    }
    PyObject *frame = Py_BuildValue("(Ni)", filename, lineno);
    untrack_atomic(frame);
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

/* A str of a symbol's C string (a path or a name: the file system's
   encoding, undecodable bytes escaped), or of FALLBACK when it is NULL. */
static PyObject *
native_str(const char *text, const char *fallback)
{
    return PyUnicode_DecodeFSDefault(text != NULL ? text : fallback);
}

/* A new reference to the frame of the C return address PC: (filename,
   lineno, function, library), symbolised now and cached per export (and
   per process by the engine).  filename and lineno are the source file and
   line when the debug information has them, else the library and 0;
   function is '??' when no symbol covers the address. */
static PyObject *
native_frame(exporter *ex, uintptr_t pc)
{
    if (ex->native_frames == NULL) {
        ex->native_frames = PyDict_New();
        if (ex->native_frames == NULL) {
            return NULL;
        }
    }
    PyObject *key = PyLong_FromVoidPtr((void *)pc);
    if (key == NULL) {
        return NULL;
    }
    PyObject *frame = PyDict_GetItemWithError(ex->native_frames, key);
    if (frame != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(frame);
    }
    const _PyTraceMalloc_NativeSymbol *sym = _PyTraceMalloc_NativeSymbolize(pc);
    const char *library = sym->library != NULL ? sym->library : "<unknown>";
    PyObject *filename = native_str(sym->file, library);
    PyObject *function = native_str(sym->function, "??");
    PyObject *lib = native_str(library, library);
    if (filename != NULL && function != NULL && lib != NULL) {
        frame = Py_BuildValue("(OiOO)", filename,
                              sym->file != NULL ? sym->line : 0,
                              function, lib);
    }
    Py_XDECREF(filename);
    Py_XDECREF(function);
    Py_XDECREF(lib);
    if (frame != NULL) {
        untrack_atomic(frame);
        if (PyDict_SetItem(ex->native_frames, key, frame) < 0) {
            Py_CLEAR(frame);
        }
    }
    Py_DECREF(key);
    return frame;
}

/* The total_nframe of a native NODE: its Python position's. */
static int
native_total(exporter *ex, _PyTraceMalloc_Node node, uint32_t *total)
{
    _PyTraceMalloc_NativeEntry entry;
    _PyTraceMalloc_Node py, parent;
    int lineno, kind;
    uint32_t depth = 0;
    const void *data;
    Py_ssize_t length;
    (void)_PyTraceMalloc_NodeNativeChain(&ex->view, node, &entry, 1, &py);
    if (!_PyTraceMalloc_NodeInfo(&ex->view, py, &parent, &lineno, &depth,
                                 &data, &kind, &length)) {
        depth = 0;
    }
    *total = depth == 0 ? 1 : depth < UINT16_MAX ? depth : UINT16_MAX;
    return 0;
}

/* Is PC in one of the engine's hooks (tracemalloc_hooks.c)?  They are
   static functions, inlined differently by each build: known by the
   prefixes of their names. */
static int
native_engine_frame(uintptr_t pc)
{
    static const char *const prefixes[] = {
        "_PyTraceMalloc_", "exact_", "sampled_", "trace_add", NULL,
    };
    const _PyTraceMalloc_NativeSymbol *sym =
        _PyTraceMalloc_NativeSymbolize(pc);
    /* The engine's own object: where its malloc hook is. */
    const char *own = _PyTraceMalloc_NativeSymbolize(
        (uintptr_t)_PyTraceMalloc_MallocHook + 1)->library;
    const char *name = sym->function;
    if (name == NULL || own == NULL || sym->library == NULL
        || strcmp(own, sym->library) != 0) {
        return 0;
    }
    for (int k = 0; prefixes[k] != NULL; k++) {
        if (strncmp(name, prefixes[k], strlen(prefixes[k])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* At most this many C frames of a trace are read (the capture keeps 64). */
#define EXPORT_NATIVE_MAX 128

/* The frames of a trace that carries its C stack (NODE, a native node):
   one stack, most recent call first, where each call of the evaluation
   loop gives way to the Python frames it runs.  It keeps at most
   ex->limit Python frames (and the C frames between them); when the
   whole Python traceback fits, the C frames under its oldest frame too.
   *TOTAL is the Python traceback's total_nframe. */
static PyObject *
native_frames(exporter *ex, _PyTraceMalloc_Node node, uint32_t *total)
{
    _PyTraceMalloc_NativeEntry entries[EXPORT_NATIVE_MAX];
    _PyTraceMalloc_Node py;
    int n = _PyTraceMalloc_NodeNativeChain(&ex->view, node, entries,
                                           EXPORT_NATIVE_MAX, &py);
    _PyTraceMalloc_Node parent;
    int lineno, kind;
    uint32_t depth = 0;
    const void *data;
    Py_ssize_t length;
    if (!_PyTraceMalloc_NodeInfo(&ex->view, py, &parent, &lineno, &depth,
                                 &data, &kind, &length)) {
        depth = 0;
    }
    /* Like upstream, a traceback without Python frames counts one. */
    *total = depth == 0 ? 1 : depth < UINT16_MAX ? depth : UINT16_MAX;
    uint32_t budget = Py_MIN((uint32_t)ex->limit, depth);
    int cut = depth > budget;
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        return NULL;
    }
    uint32_t emitted = 0;
    _PyTraceMalloc_Node cur = py;
    int i = 0;
    /* A Python domain's trace (native frames of every trace) starts in
       the engine's hooks, under the allocator API's function: not shown. */
    while (i < n && entries[i].nframes < 0
           && native_engine_frame(entries[i].pc)) {
        i++;
    }
    for (; i < n; i++) {
        PyObject *frame;
        if (entries[i].nframes >= 0) {
            /* The evaluation loop: its segment's Python frames. */
            for (int64_t k = 0; k < entries[i].nframes && emitted < budget;
                 k++) {
                frame = node_frame(ex, cur, &cur);
                if (frame == NULL || PyList_Append(list, frame) < 0) {
                    goto error;
                }
                Py_DECREF(frame);
                emitted++;
            }
            continue;
        }
        if (cut && emitted == budget) {
            break;
        }
        frame = native_frame(ex, entries[i].pc);
        if (frame == NULL) {
            goto error;
        }
        if (PyList_Append(list, frame) < 0) {
            Py_DECREF(frame);
            goto error;
        }
        Py_DECREF(frame);
    }
    while (emitted < budget) {
        /* Python frames the C stack did not reach (a capture cut at its
           limit, or no splice). */
        PyObject *frame = node_frame(ex, cur, &cur);
        if (frame == NULL || PyList_Append(list, frame) < 0) {
            Py_XDECREF(frame);
            goto error;
        }
        Py_DECREF(frame);
        emitted++;
    }
    PyObject *frames = PyList_AsTuple(list);
    Py_DECREF(list);
    untrack_atomic(frames);
    return frames;
error:
    Py_DECREF(list);
    return NULL;
}

/* A new reference to the frames tuple of NODE, most recent first, at most
   ex->limit frames, and its total frame count. */
static PyObject *
node_frames(exporter *ex, _PyTraceMalloc_Node node, uint32_t *total)
{
    if (_PyTraceMalloc_NodeIsNative(&ex->view, node)) {
        /* Native frames: the C stack spliced with the Python frames. */
        if (ex->traceback_by_node != NULL
            && ex->traceback_by_node[node] != NULL) {
            (void)native_total(ex, node, total);
            return Py_NewRef(ex->traceback_by_node[node]);
        }
        PyObject *frames = native_frames(ex, node, total);
        if (frames != NULL && ex->traceback_by_node != NULL) {
            PyObject *same = PyDict_SetDefault(ex->tracebacks, frames,
                                               frames);
            if (same == NULL) {
                Py_DECREF(frames);
                return NULL;
            }
            Py_SETREF(frames, Py_NewRef(same));
            ex->traceback_by_node[node] = Py_NewRef(frames);
        }
        return frames;
    }
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
    untrack_atomic(frames);
    if (ex->traceback_by_node != NULL) {
        /* Two nodes can show the same frames: paths that differ only
           beyond the limit, or the same path in two threads (each thread
           has its own root).  Like upstream, they get one tuple. */
        PyObject *same = PyDict_SetDefault(ex->tracebacks, frames, frames);
        if (same == NULL) {
            Py_DECREF(frames);
            return NULL;
        }
        Py_SETREF(frames, Py_NewRef(same));
        ex->traceback_by_node[node] = Py_NewRef(frames);
    }
    return frames;
}

/* The frames tuple of NODE, read through VIEW, which the caller pinned;
   the pin is released. */
static PyObject *
node_to_frames(_PyTraceMalloc_CCTView *view, _PyTraceMalloc_Node node)
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

/* Upstream's C API (Include/tracemalloc.h): the frames tuple of where
   PTR was allocated in DOMAIN, or None. */
PyObject *
_PyTraceMalloc_GetTraceback(unsigned int domain, uintptr_t ptr)
{
    _PyTraceMalloc_Node node;
    _PyTraceMalloc_CCTView view;
    if (!_PyTraceMalloc_GetTraceNode(domain, ptr, &node, &view)) {
        Py_RETURN_NONE;
    }
    return node_to_frames(&view, node);
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

/* Sampling mode: the average size of the blocks a peak group's estimate
   stands for (at least 1 byte). */
static uint64_t
peak_sampled_size(const _PyTraceMalloc_PeakGroup *g)
{
    double blocks = (double)g->count / _PyTraceMalloc_SAMPLE_COUNT_UNIT;
    double size = blocks > 0 ? (double)g->size / blocks : 0;
    return size < 1 ? 1 : (uint64_t)llround(size);
}

/* A group's BLOCKS (its count in units of UNIT blocks: 1, or
   _PyTraceMalloc_SAMPLE_COUNT_UNIT for sampling mode's estimates), the
   whole part A of their average size (0 for 0-byte blocks), and the
   weight W2 of the blocks of A + 1 bytes that make the bytes add up. */
static void
group_split(const _PyTraceMalloc_PeakGroup *g, double unit, double *blocks,
            double *a, double *w2)
{
    *blocks = (double)g->count / unit;
    double bytes = (double)g->size;
    /* 0 for blocks of less than a byte on average (0-byte blocks are
       traced too): the bytes then come from the W2 blocks of 1 byte. */
    *a = *blocks > 0 ? floor(bytes / *blocks) : 0;
    *w2 = bytes - *a * *blocks;
    if (*w2 < 0) {
        *w2 = 0;        /* rounding of a huge group */
    }
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
        uint64_t nblocks = g->count;
        if (view->sample) {
            /* Sampling mode: one trace per group, of the average size of
               the blocks it stands for (the list form has no weights:
               _get_columns() gives them). */
            g->size = peak_sampled_size(g);
            g->count = nblocks = 1;
        }
        uint64_t base = g->size / nblocks, extra = g->size % nblocks;
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
        for (uint64_t j = 0; result != NULL && j < g->count; j++) {
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

/* ---- columns ------------------------------------------------------------- */

/* A snapshot as columns: one entry per distinct call context (its frames
   tuple, total frame count and, with THREADS, the allocating thread), and
   three packed arrays with one item per trace (domain as uint32, size as
   uint64, index of its call context as uint32; native byte order).  About
   16 bytes per trace instead of a tuple of Python objects, built without
   creating one object per trace. */
/* The THREADS argument of the builders below is a set of flags: with
   EXPORT_THREADS, each call context's thread; with EXPORT_LABELS (which
   implies it), also its label set. */
#define EXPORT_THREADS 1
#define EXPORT_LABELS 2

typedef struct {
    exporter ex;
    uint32_t *index_by_node;    /* 1 + index into the lists; 0: none yet */
    PyObject *frames;           /* list of frames tuples */
    PyObject *totals;           /* list of total_nframe ints */
    PyObject *threads;          /* list of native thread ids, or None */
    PyObject *labels;           /* list of label sets (str or None), or
                                   None */
    PyObject *domains, *sizes, *indexes;    /* bytes */
    PyObject *weights;          /* bytes (doubles), or None */
} columns;

static int
columns_init(columns *c, const _PyTraceMalloc_CCTView *view, int threads,
             size_t count)
{
    memset(c, 0, sizeof(*c));
    if (exporter_init(&c->ex, view, _Py_tracemalloc_config.max_nframe,
                      1) < 0) {
        return -1;
    }
    size_t n = view->nnodes ? view->nnodes : 1;
    c->index_by_node = PyMem_Calloc(n, sizeof(uint32_t));
    if (c->index_by_node == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if ((Py_ssize_t)count < 0 || count > (size_t)PY_SSIZE_T_MAX / 8) {
        PyErr_NoMemory();
        return -1;
    }
    c->frames = PyList_New(0);
    c->totals = PyList_New(0);
    c->threads = threads ? PyList_New(0) : Py_NewRef(Py_None);
    c->labels = threads & EXPORT_LABELS ? PyList_New(0) : Py_NewRef(Py_None);
    c->domains = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count * 4);
    c->sizes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count * 8);
    c->indexes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count * 4);
    c->weights = Py_NewRef(Py_None);
    if (c->frames == NULL || c->totals == NULL || c->threads == NULL
        || c->labels == NULL || c->domains == NULL || c->sizes == NULL || c->indexes == NULL) {
        return -1;
    }
    _PyTraceMalloc_AdviseBulk(PyBytes_AS_STRING(c->domains), count * 4);
    _PyTraceMalloc_AdviseBulk(PyBytes_AS_STRING(c->sizes), count * 8);
    _PyTraceMalloc_AdviseBulk(PyBytes_AS_STRING(c->indexes), count * 4);
    return 0;
}

/* What _get_columns() returns: a named tuple of its own type, which
   tracemalloc.Snapshot() tells from a list of traces.  Made by the engine
   (untraced) and not taken from the tuple free lists, so that
   take_snapshot() reuses no more of the program's free-list objects than
   upstream's does. */
static PyStructSequence_Field columns_fields[] = {
    {"frames", "list: the frames tuple of each call context"},
    {"total_nframe", "list: the total frame count of each call context"},
    {"threads", "list: the native thread id of each call context, or None"},
    {"domains", "bytes: each trace's domain, uint32"},
    {"sizes", "bytes: each trace's size, uint64"},
    {"indexes", "bytes: each trace's call context index, uint32"},
    {"weights", "bytes: each trace's weight in a sampled peak snapshot "
                "(the blocks it stands for), double; else None"},
    {"labels", "list: the label set of each call context (its canonical "
               "str, or None), or None; not part of the tuple"},
    {NULL, NULL}
};

static PyStructSequence_Desc columns_desc = {
    "_tracemalloc.SnapshotColumns",
    "A snapshot's traces as columns (see _get_columns()).",
    columns_fields,
    7,
};

static PyTypeObject ColumnsType;

static PyObject *
columns_record(PyObject *frames, PyObject *totals, PyObject *threads,
               PyObject *domains, PyObject *sizes, PyObject *indexes,
               PyObject *weights, PyObject *labels)
{
    PyObject *record = PyStructSequence_New(&ColumnsType);
    if (record == NULL) {
        return NULL;
    }
    PyObject *items[8] = {frames, totals, threads, domains, sizes, indexes,
                          weights, labels};
    for (Py_ssize_t i = 0; i < 8; i++) {
        PyStructSequence_SetItem(record, i, Py_NewRef(items[i]));
    }
    return record;
}

/* Release everything; return the SnapshotColumns record if OK, else
   NULL. */
static PyObject *
columns_fini(columns *c, int ok)
{
    PyObject *result = NULL;
    if (ok) {
        result = columns_record(c->frames, c->totals, c->threads,
                                c->domains, c->sizes, c->indexes,
                                c->weights, c->labels);
    }
    Py_XDECREF(c->weights);
    Py_XDECREF(c->labels);
    Py_XDECREF(c->frames);
    Py_XDECREF(c->totals);
    Py_XDECREF(c->threads);
    Py_XDECREF(c->domains);
    Py_XDECREF(c->sizes);
    Py_XDECREF(c->indexes);
    PyMem_Free(c->index_by_node);
    exporter_fini(&c->ex);
    return result;
}

static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL) {
        return -1;
    }
    int res = PyList_Append(list, item);
    Py_DECREF(item);
    return res;
}

/* The index of NODE's call context, added to the lists on first use. */
static int
columns_index(columns *c, _PyTraceMalloc_Node node, uint32_t *index)
{
    uint32_t *slot = &c->index_by_node[node];
    if (*slot != 0) {
        *index = *slot - 1;
        return 0;
    }
    Py_ssize_t next = PyList_GET_SIZE(c->frames);
    if (next >= (Py_ssize_t)UINT32_MAX - 1) {
        PyErr_NoMemory();
        return -1;
    }
    uint32_t total;
    if (append_new(c->frames, node_frames(&c->ex, node, &total)) < 0
        || append_new(c->totals, PyLong_FromUnsignedLong(total)) < 0) {
        return -1;
    }
    if (c->threads != Py_None) {
        unsigned long thread = _PyTraceMalloc_NodeThread(&c->ex.view, node);
        if (append_new(c->threads, PyLong_FromUnsignedLong(thread)) < 0) {
            return -1;
        }
    }
    if (c->labels != Py_None) {
        const void *data;
        int kind;
        Py_ssize_t length;
        PyObject *label = _PyTraceMalloc_NodeLabel(&c->ex.view, node, &data,
                                                   &kind, &length)
                          ? view_string(&c->ex, data, kind, length)
                          : Py_NewRef(Py_None);
        if (append_new(c->labels, label) < 0) {
            return -1;
        }
    }
    *index = (uint32_t)next;
    *slot = (uint32_t)next + 1;
    return 0;
}

static void
columns_set(columns *c, size_t i, unsigned int domain, uint64_t size,
            uint32_t index)
{
    uint32_t d = domain;
    memcpy(PyBytes_AS_STRING(c->domains) + 4 * i, &d, 4);
    memcpy(PyBytes_AS_STRING(c->sizes) + 8 * i, &size, 8);
    memcpy(PyBytes_AS_STRING(c->indexes) + 4 * i, &index, 4);
}

static PyObject *
build_columns(_PyTraceMalloc_TraceCopy *traces, size_t count,
              const _PyTraceMalloc_CCTView *view, int threads)
{
    columns c;
    int ok = 0;
    if (columns_init(&c, view, threads, count) < 0) {
        goto done;
    }
    /* columns_set() inlined, with the column pointers in locals: the
       loop runs once per trace. */
    char *domains = PyBytes_AS_STRING(c.domains);
    char *sizes = PyBytes_AS_STRING(c.sizes);
    char *indexes = PyBytes_AS_STRING(c.indexes);
    for (size_t i = 0; i < count; i++) {
        uint32_t index = c.index_by_node[traces[i].node];
        if (index != 0) {
            index--;
        }
        else if (columns_index(&c, traces[i].node, &index) < 0) {
            goto done;
        }
        uint32_t domain = traces[i].domain;
        uint64_t size = traces[i].size;
        memcpy(domains + 4 * i, &domain, 4);
        memcpy(sizes + 8 * i, &size, 8);
        memcpy(indexes + 4 * i, &index, 4);
    }
    ok = 1;
done:
    return columns_fini(&c, ok);
}

/* Each group as two traces of the sizes around its blocks' average, A and
   A + 1 bytes, weighing W1 and W2 blocks, so that W1 + W2 and A * W1 +
   (A + 1) * W2 are its blocks and bytes (one trace when the average is
   whole): C's columns, weights included, are replaced.  UNIT: see
   group_split().  0, or -1 with an exception set. */
static int
weighted_columns_fill(columns *c, _PyTraceMalloc_PeakGroup *groups,
                      size_t ngroups, double unit)
{
    size_t count = 0;
    for (size_t i = 0; i < ngroups; i++) {
        double blocks, a, w2;
        group_split(&groups[i], unit, &blocks, &a, &w2);
        count += (w2 > 0 && w2 < blocks) ? 2 : 1;
    }
    Py_SETREF(c->weights, PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)count * 8));
    Py_SETREF(c->domains, PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)count * 4));
    Py_SETREF(c->sizes, PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)count * 8));
    Py_SETREF(c->indexes, PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)count * 4));
    if (c->weights == NULL || c->domains == NULL || c->sizes == NULL
        || c->indexes == NULL) {
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < ngroups; i++) {
        _PyTraceMalloc_PeakGroup *g = &groups[i];
        uint32_t index;
        if (columns_index(c, g->node, &index) < 0) {
            return -1;
        }
        double blocks, a, w2;
        group_split(g, unit, &blocks, &a, &w2);
        double weights[2] = {blocks, 0};
        int n = 1;
        if (w2 > 0 && w2 < blocks) {
            weights[0] = blocks - w2;
            weights[1] = w2;
            n = 2;
        }
        for (int j = 0; j < n; j++, k++) {
            columns_set(c, k, g->domain, (uint64_t)a + (uint64_t)j, index);
            memcpy(PyBytes_AS_STRING(c->weights) + 8 * k, &weights[j], 8);
        }
    }
    return 0;
}

/* What was allocated since start(), as weighted columns in both modes:
   one or two traces per (domain, call path), whatever the number of blocks
   allocated there. */
static PyObject *
build_alloc_columns(_PyTraceMalloc_PeakGroup *groups, size_t ngroups,
                    const _PyTraceMalloc_CCTView *view, int threads)
{
    columns c;
    int ok = 0;
    if (columns_init(&c, view, threads, 0) == 0) {
        ok = weighted_columns_fill(
            &c, groups, ngroups,
            view->sample ? _PyTraceMalloc_SAMPLE_COUNT_UNIT : 1) == 0;
    }
    return columns_fini(&c, ok);
}

/* As build_peak_traces(): each group's blocks get its average size. */
static PyObject *
build_peak_columns(_PyTraceMalloc_PeakGroup *groups, size_t ngroups,
                   const _PyTraceMalloc_CCTView *view, int threads)
{
    size_t count = 0;
    int sampled = view->sample != 0;
    for (size_t i = 0; i < ngroups; i++) {
        count += sampled ? 1 : groups[i].count;
    }
    columns c;
    int ok = 0;
    if (columns_init(&c, view, threads, count) < 0) {
        goto done;
    }
    if (sampled) {
        ok = weighted_columns_fill(&c, groups, ngroups,
                                   _PyTraceMalloc_SAMPLE_COUNT_UNIT) == 0;
        goto done;
    }
    size_t k = 0;
    for (size_t i = 0; i < ngroups; i++) {
        _PyTraceMalloc_PeakGroup *g = &groups[i];
        uint32_t index;
        if (columns_index(&c, g->node, &index) < 0) {
            goto done;
        }
        uint64_t base = g->size / g->count, extra = g->size % g->count;
        for (uint64_t j = 0; j < g->count; j++) {
            columns_set(&c, k++, g->domain, base + (j < extra), index);
        }
    }
    ok = 1;
done:
    return columns_fini(&c, ok);
}

/* What export_ex() copies: the live traces, those at the peak, or the
   totals allocated since start(). */
enum { EXPORT_LIVE, EXPORT_PEAK, EXPORT_ALLOCATED };

static PyObject *export_ex(int which, int threads, int as_columns);

/* Run BUILD (build_traces or build_columns, or their peak variants) on a
   copy of the engine's traces, untraced and with the garbage collector
   paused: an export creates up to millions of tuples, and the collector
   would otherwise walk them again and again while they are made. */
static PyObject *
export(int peak, int threads, int as_columns)
{
    return export_ex(peak ? EXPORT_PEAK : EXPORT_LIVE, threads, as_columns);
}

static PyObject *
export_ex(int which, int threads, int as_columns)
{
    _PyTraceMalloc_CCTView view;
    PyObject *result = NULL;
    /* The export's own objects are not the user's memory. */
    _PyTraceMalloc_SuspendThread();
    int gc_was_enabled = PyGC_Disable();
    if (which != EXPORT_LIVE) {
        /* Totals per (domain, call path): at the peak, or allocated. */
        _PyTraceMalloc_PeakGroup *groups;
        size_t ngroups;
        int res = which == EXPORT_ALLOCATED
                  ? _PyTraceMalloc_AllocCopy(&groups, &ngroups, &view)
                  : _PyTraceMalloc_PeakCopy(&groups, &ngroups, &view);
        if (res == -2) {
            PyErr_SetString(PyExc_RuntimeError,
                            "tracemalloc keeps allocation totals only when "
                            "tracing started with allocations=True");
        }
        else if (res < 0) {
            PyErr_NoMemory();
        }
        else {
            result = which == EXPORT_ALLOCATED
                ? build_alloc_columns(groups, ngroups, &view, threads)
                : as_columns
                ? build_peak_columns(groups, ngroups, &view, threads)
                : build_peak_traces(groups, ngroups, &view, threads);
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
            result = as_columns
                ? build_columns(traces, count, &view, threads)
                : build_traces(traces, count, &view, threads);
            free(traces);
        }
    }
    if (gc_was_enabled) {
        PyGC_Enable();
    }
    _PyTraceMalloc_ResumeThread();
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
    return export(peak, threads, 0);
}

/*[clinic input]
_tracemalloc._get_columns

    *
    peak: bool = False
    threads: bool = False

The traces of _get_traces_ex() as columns.

Return a SnapshotColumns named tuple (frames, total_nframe, threads,
domains, sizes, indexes): one item of the three lists per distinct call
context (its frames tuple, its total frame count, and with threads=True
the native id of its thread; else threads is None), and three bytes
objects holding one item per trace in native byte order: the domain
(uint32), the size (uint64) and the index of the trace's call context in
the lists (uint32).
Private: use take_snapshot().
[clinic start generated code]*/

static PyObject *
_tracemalloc__get_columns_impl(PyObject *module, int peak, int threads)
/*[clinic end generated code: output=0b1ab470740a1154 input=b1aa0e42fff17e85]*/
{
    if (!_Py_tracemalloc_config.tracing) {
        PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
        PyObject *frames = PyList_New(0), *totals = PyList_New(0);
        PyObject *thread_ids = threads ? PyList_New(0) : Py_NewRef(Py_None);
        PyObject *result = NULL;
        if (empty != NULL && frames != NULL && totals != NULL
            && thread_ids != NULL) {
            result = columns_record(frames, totals, thread_ids, empty,
                                    empty, empty, Py_None, Py_None);
        }
        Py_XDECREF(empty);
        Py_XDECREF(frames);
        Py_XDECREF(totals);
        Py_XDECREF(thread_ids);
        return result;
    }
    return export(peak, threads, 1);
}

/* Check that the three column buffers hold COUNT traces each. */
static int
check_columns(Py_buffer *domains, Py_buffer *sizes, Py_buffer *indexes,
              Py_ssize_t *count)
{
    if (indexes->len % 4 != 0) {
        PyErr_SetString(PyExc_ValueError, "indexes: length not a multiple "
                        "of 4");
        return -1;
    }
    *count = indexes->len / 4;
    if ((domains != NULL && domains->len != *count * 4)
        || sizes->len != *count * 8) {
        PyErr_SetString(PyExc_ValueError, "columns differ in length");
        return -1;
    }
    return 0;
}

/* HIGH * 2**64 + LOW as a Python int. */
static PyObject *
sum_to_long(uint64_t high, uint64_t low)
{
    if (high == 0) {
        return PyLong_FromUnsignedLongLong(low);
    }
    unsigned char bytes[16];
    for (int i = 0; i < 8; i++) {
        bytes[i] = (unsigned char)(low >> (8 * i));
        bytes[8 + i] = (unsigned char)(high >> (8 * i));
    }
    return _PyLong_FromByteArray(bytes, 16, 1, 0);
}

/*[clinic input]
_tracemalloc._traceback_totals

    indexes: Py_buffer
    sizes: Py_buffer
    ntracebacks: Py_ssize_t
    /

Sum the sizes and count the traces per call context index.

Return (sizes, counts), two lists of ntracebacks ints.  The buffers are
columns as _get_columns() returns them.  Private.
[clinic start generated code]*/

static PyObject *
_tracemalloc__traceback_totals_impl(PyObject *module, Py_buffer *indexes,
                                    Py_buffer *sizes, Py_ssize_t ntracebacks)
/*[clinic end generated code: output=de24ab17171952e7 input=6abbf47ad865b0f0]*/
{
    Py_ssize_t count;
    if (check_columns(NULL, sizes, indexes, &count) < 0) {
        return NULL;
    }
    if (ntracebacks < 0 || (size_t)ntracebacks > PY_SSIZE_T_MAX / 16) {
        PyErr_SetString(PyExc_ValueError, "ntracebacks out of range");
        return NULL;
    }
    /* Per index: the sum of the sizes as CARRIES * 2**64 + SIZE_SUMS (a
       loaded file may hold any uint64 sizes), and the count. */
    uint64_t *size_sums = PyMem_Calloc(ntracebacks ? ntracebacks : 1, 24);
    if (size_sums == NULL) {
        return PyErr_NoMemory();
    }
    uint64_t *counts = size_sums + ntracebacks;
    uint64_t *carries = counts + ntracebacks;
    const char *ip = indexes->buf, *sp = sizes->buf;
    PyObject *result = NULL, *sums_list = NULL, *counts_list = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t index;
        uint64_t size;
        memcpy(&index, ip + 4 * i, 4);
        memcpy(&size, sp + 8 * i, 8);
        if (index >= (uint64_t)ntracebacks) {
            PyErr_SetString(PyExc_ValueError, "index out of range");
            goto done;
        }
        carries[index] += __builtin_add_overflow(size_sums[index], size,
                                                 &size_sums[index]);
        counts[index]++;
    }
    sums_list = PyList_New(ntracebacks);
    counts_list = PyList_New(ntracebacks);
    if (sums_list == NULL || counts_list == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < ntracebacks; i++) {
        PyObject *a = sum_to_long(carries[i], size_sums[i]);
        PyObject *b = PyLong_FromUnsignedLongLong(counts[i]);
        PyList_SET_ITEM(sums_list, i, a);
        PyList_SET_ITEM(counts_list, i, b);
        if (a == NULL || b == NULL) {
            goto done;
        }
    }
    result = PyTuple_Pack(2, sums_list, counts_list);
done:
    Py_XDECREF(sums_list);
    Py_XDECREF(counts_list);
    PyMem_Free(size_sums);
    return result;
}

/*[clinic input]
_tracemalloc._traces_from_columns

    frames: object(subclass_of='&PyList_Type')
    total_nframe: object(subclass_of='&PyList_Type')
    threads: object
    domains: Py_buffer
    sizes: Py_buffer
    indexes: Py_buffer
    /

Build the list of trace tuples that _get_traces_ex() would return.

The arguments are what _get_columns() returns; threads is a list, or None
for 4-tuples.  Private.
[clinic start generated code]*/

static PyObject *
_tracemalloc__traces_from_columns_impl(PyObject *module, PyObject *frames,
                                       PyObject *total_nframe,
                                       PyObject *threads, Py_buffer *domains,
                                       Py_buffer *sizes, Py_buffer *indexes)
/*[clinic end generated code: output=0b33a47e3e4e282f input=c0283430bacff555]*/
{
    Py_ssize_t count;
    if (check_columns(domains, sizes, indexes, &count) < 0) {
        return NULL;
    }
    Py_ssize_t ntracebacks = PyList_GET_SIZE(frames);
    if (PyList_GET_SIZE(total_nframe) != ntracebacks
        || (threads != Py_None && (!PyList_Check(threads)
            || PyList_GET_SIZE(threads) != ntracebacks))) {
        PyErr_SetString(PyExc_ValueError, "the per-traceback lists differ "
                        "in length");
        return NULL;
    }
    PyObject *result = PyList_New(count);
    if (result == NULL) {
        return NULL;
    }
    /* As in an export: millions of tuples, the collector paused. */
    int gc_was_enabled = PyGC_Disable();
    const char *dp = domains->buf, *sp = sizes->buf, *ip = indexes->buf;
    Py_ssize_t width = threads == Py_None ? 4 : 5;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t domain, index;
        uint64_t size;
        memcpy(&domain, dp + 4 * i, 4);
        memcpy(&size, sp + 8 * i, 8);
        memcpy(&index, ip + 4 * i, 4);
        /* The lists keep the lengths checked above: no Python code runs
           in this loop (the collector is paused, the GIL held). */
        PyObject *item = NULL;
        if (index >= (uint64_t)ntracebacks) {
            PyErr_SetString(PyExc_ValueError, "index out of range");
        }
        else {
            item = PyTuple_New(width);
        }
        if (item == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, item);
        PyObject *d = PyLong_FromUnsignedLong(domain);
        PyObject *s = PyLong_FromUnsignedLongLong(size);
        if (d == NULL || s == NULL) {
            Py_XDECREF(d);
            Py_XDECREF(s);
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(item, 0, d);
        PyTuple_SET_ITEM(item, 1, s);
        PyTuple_SET_ITEM(item, 2,
                         Py_NewRef(PyList_GET_ITEM(frames, index)));
        PyTuple_SET_ITEM(item, 3,
                         Py_NewRef(PyList_GET_ITEM(total_nframe, index)));
        if (width == 5) {
            PyTuple_SET_ITEM(item, 4,
                             Py_NewRef(PyList_GET_ITEM(threads, index)));
        }
    }
    if (gc_was_enabled) {
        PyGC_Enable();
    }
    return result;
}

/* ---- dump helpers ------------------------------------------------------ */

/* A growing ASCII buffer for the tracebacks' JSON text. */
typedef struct {
    char *buf;
    size_t len, cap;
} ascii_buffer;

static int
ascii_reserve(ascii_buffer *b, size_t more)
{
    if (b->cap - b->len >= more) {
        return 0;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *buf = PyMem_Realloc(b->buf, cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->buf = buf;
    b->cap = cap;
    return 0;
}

/* Frame objects already numbered, by address: an open-addressing table
   of borrowed pointers (the caller's lists keep them alive, and no Python
   code runs while it is used).  Exports share one frame object per
   call-context node, so most frames are found here without hashing. */
typedef struct {
    PyObject **keys;
    Py_ssize_t *values;
    size_t mask, used;
} frame_ids;

static int
frame_ids_grow(frame_ids *t)
{
    size_t size = t->keys ? 2 * (t->mask + 1) : 1024;
    PyObject **keys = PyMem_Calloc(size, sizeof(PyObject *));
    Py_ssize_t *values = PyMem_Calloc(size, sizeof(Py_ssize_t));
    if (keys == NULL || values == NULL) {
        PyMem_Free(keys);
        PyMem_Free(values);
        PyErr_NoMemory();
        return -1;
    }
    if (t->keys != NULL) {
        for (size_t i = 0; i <= t->mask; i++) {
            if (t->keys[i] != NULL) {
                size_t j = ((uintptr_t)t->keys[i] >> 4) & (size - 1);
                while (keys[j] != NULL) {
                    j = (j + 1) & (size - 1);
                }
                keys[j] = t->keys[i];
                values[j] = t->values[i];
            }
        }
    }
    PyMem_Free(t->keys);
    PyMem_Free(t->values);
    t->keys = keys;
    t->values = values;
    t->mask = size - 1;
    return 0;
}

/* The slot of KEY: where it is, or the empty slot where it would go. */
static size_t
frame_ids_slot(const frame_ids *t, PyObject *key)
{
    size_t i = ((uintptr_t)key >> 4) & t->mask;
    while (t->keys[i] != NULL && t->keys[i] != key) {
        i = (i + 1) & t->mask;
    }
    return i;
}

/* (str, int), or (str, int, str, str) for a C frame (native frames). */
static int
frame_is_valid(PyObject *frame)
{
    if (!PyTuple_CheckExact(frame)) {
        return 0;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(frame);
    return (n == 2 || (n == 4
                       && PyUnicode_CheckExact(PyTuple_GET_ITEM(frame, 2))
                       && PyUnicode_CheckExact(PyTuple_GET_ITEM(frame, 3))))
           && PyUnicode_CheckExact(PyTuple_GET_ITEM(frame, 0))
           && PyLong_CheckExact(PyTuple_GET_ITEM(frame, 1));
}

/* The index of FRAME in FRAMES (appended if new); -1 with an exception. */
static Py_ssize_t
number_frame(frame_ids *ids, PyObject *by_value, PyObject *frames,
             PyObject *frame)
{
    size_t slot = frame_ids_slot(ids, frame);
    if (ids->keys[slot] == frame) {
        return ids->values[slot];
    }
    if (!frame_is_valid(frame)) {
        PyErr_SetString(PyExc_TypeError, "cannot dump snapshot: frames "
                        "must be (str, int) tuples (or (str, int, str, "
                        "str) for C frames)");
        return -1;
    }
    /* Exact str and int: hashing and comparing run no Python code. */
    Py_ssize_t index;
    PyObject *known = PyDict_GetItemWithError(by_value, frame);
    if (known != NULL) {
        index = PyLong_AsSsize_t(known);
    }
    else if (PyErr_Occurred()) {
        return -1;
    }
    else {
        index = PyList_GET_SIZE(frames);
        PyObject *value = PyLong_FromSsize_t(index);
        if (value == NULL || PyDict_SetItem(by_value, frame, value) < 0
            || PyList_Append(frames, frame) < 0) {
            Py_XDECREF(value);
            return -1;
        }
        Py_DECREF(value);
    }
    if (2 * (ids->used + 1) > ids->mask + 1) {
        if (frame_ids_grow(ids) < 0) {
            return -1;
        }
        slot = frame_ids_slot(ids, frame);
    }
    ids->keys[slot] = frame;
    ids->values[slot] = index;
    ids->used++;
    return index;
}

/*[clinic input]
_tracemalloc._frame_table

    tracebacks: object(subclass_of='&PyList_Type')
    /

Number the distinct frames of call contexts, for Snapshot.dump().

tracebacks is a list of call contexts, each a tuple or list of
(filename, lineno) frames.  Return (frames, text): frames lists each
distinct frame once, in order of first appearance, and text (bytes) is
the JSON array of the call contexts, each an array of indexes into
frames.  Raise TypeError if a frame is not a (str, int) tuple.  Private.
[clinic start generated code]*/

static PyObject *
_tracemalloc__frame_table_impl(PyObject *module, PyObject *tracebacks)
/*[clinic end generated code: output=9239fbcbe51d0d4f input=1bd90440051d9ab0]*/
{
    PyObject *frames = PyList_New(0);
    PyObject *by_value = PyDict_New();
    PyObject *result = NULL;
    frame_ids ids = {NULL, NULL, 0, 0};
    ascii_buffer text = {NULL, 0, 0};
    if (frames == NULL || by_value == NULL || frame_ids_grow(&ids) < 0
        || ascii_reserve(&text, 2) < 0) {
        goto done;
    }
    text.buf[text.len++] = '[';
    /* No Python code runs in the loop (see number_frame()), so the lists
       keep their lengths and items. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tracebacks); i++) {
        PyObject *context = PyList_GET_ITEM(tracebacks, i);
        PyObject **items;
        Py_ssize_t n;
        if (PyTuple_Check(context)) {
            items = &PyTuple_GET_ITEM(context, 0);
            n = PyTuple_GET_SIZE(context);
        }
        else if (PyList_Check(context)) {
            items = ((PyListObject *)context)->ob_item;
            n = PyList_GET_SIZE(context);
        }
        else {
            PyErr_SetString(PyExc_TypeError, "cannot dump snapshot: a "
                            "traceback must be a tuple of frames");
            goto done;
        }
        /* "[", then per frame up to 20 digits and a comma, "]," */
        if ((size_t)n > (PY_SSIZE_T_MAX - 4) / 21
            || ascii_reserve(&text, 21 * (size_t)n + 4) < 0) {
            if (!PyErr_Occurred()) {
                PyErr_NoMemory();
            }
            goto done;
        }
        if (i > 0) {
            text.buf[text.len++] = ',';
        }
        text.buf[text.len++] = '[';
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_ssize_t index = number_frame(&ids, by_value, frames, items[j]);
            if (index < 0) {
                goto done;
            }
            if (j > 0) {
                text.buf[text.len++] = ',';
            }
            char digits[24];
            int k = 0;
            do {
                digits[k++] = (char)('0' + index % 10);
                index /= 10;
            } while (index > 0);
            while (k > 0) {
                text.buf[text.len++] = digits[--k];
            }
        }
        text.buf[text.len++] = ']';
    }
    text.buf[text.len++] = ']';
    PyObject *bytes = PyBytes_FromStringAndSize(text.buf,
                                                (Py_ssize_t)text.len);
    if (bytes != NULL) {
        result = PyTuple_Pack(2, frames, bytes);
        Py_DECREF(bytes);
    }
done:
    PyMem_Free(text.buf);
    PyMem_Free(ids.keys);
    PyMem_Free(ids.values);
    Py_XDECREF(frames);
    Py_XDECREF(by_value);
    return result;
}

/*[clinic input]
_tracemalloc._narrow_columns

    domains: Py_buffer
    sizes: Py_buffer
    /

Check whether dump() can write narrower columns.

domains and sizes are the uint32 and uint64 columns (native order) of
_get_columns().  Return (zero, narrow): zero is True when every domain is
0; narrow is bytes holding the sizes as little-endian uint32 when every
size fits, else None.  Private.
[clinic start generated code]*/

static PyObject *
_tracemalloc__narrow_columns_impl(PyObject *module, Py_buffer *domains,
                                  Py_buffer *sizes)
/*[clinic end generated code: output=f73a76278646ad1f input=692c5f94baf0ed88]*/
{
    if (domains->len % 4 != 0 || sizes->len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "columns of whole items expected");
        return NULL;
    }
    /* OR-reductions without early exits: the compiler vectorises them. */
    const unsigned char *dp = domains->buf;
    unsigned char any_domain = 0;
    for (Py_ssize_t i = 0; i < domains->len; i++) {
        any_domain |= dp[i];
    }
    int zero = any_domain == 0;
    Py_ssize_t count = sizes->len / 8;
    const unsigned char *sp = sizes->buf;
    uint64_t high = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t size;
        memcpy(&size, sp + 8 * i, 8);
        high |= size >> 32;
    }
    if (high != 0) {
        return Py_BuildValue("(OO)", zero ? Py_True : Py_False, Py_None);
    }
    PyObject *narrow = PyBytes_FromStringAndSize(NULL, 4 * count);
    if (narrow == NULL) {
        return NULL;
    }
    unsigned char *np = (unsigned char *)PyBytes_AS_STRING(narrow);
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t size;
        memcpy(&size, sp + 8 * i, 8);
        uint32_t low = (uint32_t)size;
#if !PY_LITTLE_ENDIAN
        low = __builtin_bswap32(low);
#endif
        memcpy(np + 4 * i, &low, 4);
    }
    return Py_BuildValue("(ON)", zero ? Py_True : Py_False, narrow);
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
    return _PyTraceMalloc_GetTraceback(_PyTraceMalloc_DEFAULT_DOMAIN,
                                       _PyTraceMalloc_ObjectBlock(obj));
}

/* start() is written by hand: Argument Clinic's int converter has no
   "int or None or str" keyword of our own. */
PyDoc_STRVAR(tracemalloc_start__doc__,
"start($module, nframe=1, /, *, sample=None, allocations=None,\n"
"      native=None, native_frames=None)\n"
"--\n"
"\n"
"Start tracing memory allocations.\n"
"\n"
"Each traceback keeps up to nframe frames (1 to 65535).  With sample, a\n"
"mean sampling interval in bytes (an int, or a str such as '512KiB'),\n"
"only sampled blocks are traced and statistics are estimates.  With\n"
"allocations=True, the engine also keeps what each call path allocated\n"
"since tracing started, freed or not (take_snapshot(allocated=True)).\n"
"With native=True, the memory that code outside Python's allocator API\n"
"allocates (malloc(), anonymous mmap()) is traced too, in domain\n"
"NATIVE_DOMAIN.  With native_frames=True, native traces also carry their\n"
"C call stack, spliced into the Python traceback; native_frames='all'\n"
"adds it to the traces of Python's own domains too.  Called while\n"
"tracing, it leaves tracing as it is\n"
"(sample and allocations must then be the running mode's, or None;\n"
"native=True turns native tracing on).");

/* A sampling interval: an int of bytes, or a str with a unit ("512KiB"). */
static int
sample_converter(PyObject *obj, uint64_t *sample)
{
    if (obj == Py_None) {
        *sample = 0;
        return 1;
    }
    if (PyUnicode_Check(obj)) {
        const char *text = PyUnicode_AsUTF8(obj);
        if (text == NULL) {
            return 0;
        }
        const char *error;
        *sample = _PyTraceMalloc_ParseSize(text, &error);
        if (error != NULL) {
            PyErr_Format(PyExc_ValueError, "sample=%R: %s", obj, error);
            return 0;
        }
        return 1;
    }
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "sample must be an int, a str such as '512KiB' or None, "
                     "not %.100s", Py_TYPE(obj)->tp_name);
        return 0;
    }
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        return 0;
    }
    if (overflow < 0 || (overflow == 0 && value < 1)
        || overflow > 0 || (uint64_t)value > _PyTraceMalloc_SAMPLE_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "the sampling interval must be in range [1; %llu] bytes",
                     (unsigned long long)_PyTraceMalloc_SAMPLE_MAX);
        return 0;
    }
    *sample = (uint64_t)value;
    return 1;
}

static PyObject *
tracemalloc_start(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    if (!_PyArg_CheckPositional("start", nargs, 0, 1)) {
        return NULL;
    }
    PyObject *sample_obj = Py_None, *allocations_obj = Py_None;
    PyObject *native_obj = Py_None, *frames_obj = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_Check(name)
            && PyUnicode_CompareWithASCIIString(name, "sample") == 0) {
            sample_obj = args[nargs + i];
        }
        else if (PyUnicode_Check(name)
                 && PyUnicode_CompareWithASCIIString(name,
                                                     "allocations") == 0) {
            allocations_obj = args[nargs + i];
        }
        else if (PyUnicode_Check(name)
                 && PyUnicode_CompareWithASCIIString(name, "native") == 0) {
            native_obj = args[nargs + i];
        }
        else if (PyUnicode_Check(name)
                 && PyUnicode_CompareWithASCIIString(name,
                                                     "native_frames") == 0) {
            frames_obj = args[nargs + i];
        }
        else {
            PyErr_Format(PyExc_TypeError,
                         "start() got an unexpected keyword argument '%S'",
                         name);
            return NULL;
        }
    }
    int allocations = -1;
    if (allocations_obj != Py_None) {
        allocations = PyObject_IsTrue(allocations_obj);
        if (allocations < 0) {
            return NULL;
        }
    }
    int nframe = 1;
    if (nargs >= 1) {
        nframe = _PyLong_AsInt(args[0]);
        if (nframe == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    int native = -1;
    if (native_obj != Py_None) {
        native = PyObject_IsTrue(native_obj);
        if (native < 0) {
            return NULL;
        }
    }
    int frames = -1;
    if (frames_obj == Py_True) {
        frames = _PyTraceMalloc_NATIVE_FRAMES_NATIVE;
    }
    else if (frames_obj == Py_False) {
        frames = 0;
    }
    else if (PyUnicode_Check(frames_obj)) {
        /* 'native' too: what is_tracing_native_frames() says of True. */
        if (PyUnicode_CompareWithASCIIString(frames_obj, "all") == 0) {
            frames = _PyTraceMalloc_NATIVE_FRAMES_ALL;
        }
        else if (PyUnicode_CompareWithASCIIString(frames_obj,
                                                  "native") == 0) {
            frames = _PyTraceMalloc_NATIVE_FRAMES_NATIVE;
        }
        else {
            PyErr_Format(PyExc_ValueError,
                         "native_frames must be True, False, 'native', "
                         "'all' or None, not %R", frames_obj);
            return NULL;
        }
    }
    else if (frames_obj != Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "native_frames must be a bool, 'all' or None, "
                     "not %.100s", Py_TYPE(frames_obj)->tp_name);
        return NULL;
    }
    if (frames > 0 && native == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "native_frames needs native tracing: "
                        "start(native=True, native_frames=...)");
        return NULL;
    }
    if (frames > 0 && native != 1 && !_PyTraceMalloc_IsTracingNative()) {
        PyErr_SetString(PyExc_ValueError,
                        "native_frames needs native tracing: "
                        "start(native=True, native_frames=...)");
        return NULL;
    }
    uint64_t sample;
    if (!sample_converter(sample_obj, &sample)) {
        return NULL;
    }
    if (native == 0 && _PyTraceMalloc_IsTracingNative()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "tracemalloc is already tracing native memory: "
                        "call stop() first");
        return NULL;
    }
    int was_tracing = _Py_tracemalloc_config.tracing != 0;
    if (_PyTraceMalloc_StartSampled(nframe, sample, sample_obj != Py_None,
                                    allocations) < 0) {
        return NULL;
    }
    if ((native == 1 && _PyTraceMalloc_StartNative() < 0)
        || (frames >= 0 && _PyTraceMalloc_SetNativeFrames(frames) < 0)) {
        if (!was_tracing) {
            /* All or nothing: a start() that raises leaves tracing off. */
            _PyTraceMalloc_Stop();
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(tracemalloc_get_sample__doc__,
"get_sample($module, /)\n"
"--\n"
"\n"
"The mean sampling interval in bytes while tracing in sampling mode;\n"
"None in exact mode or when not tracing.");

static PyObject *
tracemalloc_get_sample(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    uint64_t sample = _PyTraceMalloc_GetSample();
    if (sample == 0) {
        Py_RETURN_NONE;
    }
    return PyLong_FromUnsignedLongLong(sample);
}

PyDoc_STRVAR(tracemalloc_set_sample_seed__doc__,
"_set_sample_seed($module, seed, /)\n"
"--\n"
"\n"
"Seed the sampling countdowns (tests: deterministic samples).  The\n"
"calling thread draws from the seed at once, every other thread at its\n"
"next sample.");

static PyObject *
tracemalloc_set_sample_seed(PyObject *module, PyObject *seed)
{
    unsigned long long value = PyLong_AsUnsignedLongLongMask(seed);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    (void)_PyTraceMalloc_SetSampleSeed(value);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(tracemalloc_parse_size__doc__,
"_parse_size($module, text, /)\n"
"--\n"
"\n"
"The number of bytes a sampling option such as '512KiB' means; ValueError\n"
"if it is not one.");

static PyObject *
tracemalloc_parse_size(PyObject *module, PyObject *text)
{
    uint64_t sample;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "expected a str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!sample_converter(text, &sample)) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(sample);
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
    return PyLong_FromSize_t(_PyTraceMalloc_EngineMemory());
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
    size_t current, peak;
    _PyTraceMalloc_GetTracedMemory(&current, &peak);
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
    _PyTraceMalloc_ResetPeak();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(tracemalloc_clear_free_lists__doc__,
"_clear_free_lists($module, /)\n"
"--\n"
"\n"
"Empty the interpreter's free lists (as gc.collect() does, without the\n"
"collection).  What they hold from before tracing started (or before\n"
"clear_traces()) is untraced: a free list would hand it to the program\n"
"untraced.  (The objects of the module's exports are traced when the\n"
"program reuses them.)");

static PyObject *
tracemalloc_clear_free_lists(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    _PyTraceMalloc_ClearFreeLists();
    Py_RETURN_NONE;
}

/* Retention paths (who holds objects alive): a file of its own. */
#include "_tracemalloc_retention.c"

/* ---- the live totals per call context, for the leak checker ------------- */

/* A state: the totals of every (domain, node) with blocks, sorted by
   (domain, node), and a pin of the tree, which keeps node ids stable
   (no compaction) until the state is freed. */
typedef struct {
    uint32_t generation;
    size_t ngroups;
    _PyTraceMalloc_PeakGroup *groups;
} live_state;

#define LIVE_STATE_NAME "_tracemalloc.live_totals"

static void
live_state_free(PyObject *capsule)
{
    live_state *st = PyCapsule_GetPointer(capsule, LIVE_STATE_NAME);
    if (st == NULL) {
        PyErr_Clear();
        return;
    }
    free(st->groups);
    PyMem_RawFree(st);
    _PyTraceMalloc_CCTUnpin();
}

static int
live_key_compare(const _PyTraceMalloc_PeakGroup *x,
                 const _PyTraceMalloc_PeakGroup *y)
{
    if (x->domain != y->domain) {
        return x->domain < y->domain ? -1 : 1;
    }
    return x->node < y->node ? -1 : x->node > y->node;
}

/* Append (domain, frames, size change, count change) to CHANGES. */
static int
live_append_change(PyObject *changes, exporter *ex,
                   const _PyTraceMalloc_PeakGroup *g, long long dsize,
                   long long dcount)
{
    uint32_t total;
    PyObject *frames = node_frames(ex, g->node, &total);
    if (frames == NULL) {
        return -1;
    }
    PyObject *item = Py_BuildValue("(INLL)", g->domain, frames, dsize,
                                   dcount);
    if (item == NULL) {
        return -1;
    }
    int res = PyList_Append(changes, item);
    Py_DECREF(item);
    return res;
}

/* The changes from OLD (NULL: none) to the totals of NEW, read through
   EX: a list, or None when node ids changed meaning between them. */
static PyObject *
live_changes(const live_state *old, const live_state *new, exporter *ex)
{
    if (old == NULL || old->generation != new->generation) {
        Py_RETURN_NONE;
    }
    PyObject *changes = PyList_New(0);
    if (changes == NULL) {
        return NULL;
    }
    size_t i = 0, j = 0, nold = old->ngroups, nnew = new->ngroups;
    const _PyTraceMalloc_PeakGroup *a = old->groups, *b = new->groups;
    while (i < nold || j < nnew) {
        int order = i >= nold ? 1 : j >= nnew ? -1
                    : live_key_compare(&a[i], &b[j]);
        int res = 0;
        if (order < 0) {            /* no block left */
            res = live_append_change(changes, ex, &a[i],
                                     -(long long)a[i].size,
                                     -(long long)a[i].count);
            i++;
        }
        else if (order > 0) {       /* blocks where there were none */
            res = live_append_change(changes, ex, &b[j],
                                     (long long)b[j].size,
                                     (long long)b[j].count);
            j++;
        }
        else {
            if (a[i].size != b[j].size || a[i].count != b[j].count) {
                res = live_append_change(
                    changes, ex, &b[j],
                    (long long)b[j].size - (long long)a[i].size,
                    (long long)b[j].count - (long long)a[i].count);
            }
            i++;
            j++;
        }
        if (res < 0) {
            Py_DECREF(changes);
            return NULL;
        }
    }
    return changes;
}

PyDoc_STRVAR(tracemalloc_live_totals_diff__doc__,
"_live_totals_diff($module, state, /)\n--\n\n"
"Compare the live totals per call context with STATE; private.\n\n"
"Return (new_state, changes).  new_state holds the size and block count\n"
"of every (domain, call context) with blocks now, and keeps the ids of\n"
"the call contexts stable (no compaction of the tree) as long as it is\n"
"alive.  changes lists (domain, frames, size change, count change) for\n"
"each context whose totals differ from those of STATE, a previous\n"
"new_state; it is None when STATE is None, or when the contexts were\n"
"renumbered since (clear_traces(), tracing restarted).  The cost is one\n"
"pass over the call contexts, whatever the number of traces; frames\n"
"tuples are made for the changed contexts only.");

static PyObject *
tracemalloc_live_totals_diff(PyObject *module, PyObject *state)
{
    const live_state *old = NULL;
    if (state != Py_None) {
        old = PyCapsule_GetPointer(state, LIVE_STATE_NAME);
        if (old == NULL) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError,
                            "state must be None or a state returned by "
                            "_live_totals_diff()");
            return NULL;
        }
    }
    if (!_Py_tracemalloc_config.tracing) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the tracemalloc module must be tracing memory "
                        "allocations to read the live totals");
        return NULL;
    }
    live_state *st = PyMem_RawCalloc(1, sizeof(*st));
    if (st == NULL) {
        return PyErr_NoMemory();
    }
    _PyTraceMalloc_CCTView view;
    PyObject *result = NULL;
    /* The function's own objects are not the user's memory. */
    _PyTraceMalloc_SuspendThread();
    int gc_was_enabled = PyGC_Disable();
    /* Two pins: the exporter's, released below, and the new state's. */
    if (_PyTraceMalloc_LiveCopy(&st->groups, &st->ngroups, &st->generation,
                                &view, 2) < 0) {
        PyMem_RawFree(st);
        PyErr_NoMemory();
        goto done;
    }
    PyObject *capsule = PyCapsule_New(st, LIVE_STATE_NAME, live_state_free);
    if (capsule == NULL) {
        free(st->groups);
        PyMem_RawFree(st);
        _PyTraceMalloc_CCTUnpin();
        _PyTraceMalloc_CCTUnpin();
        goto done;
    }
    exporter ex;
    /* The exporter takes one pin over, and releases it in exporter_fini(). */
    if (exporter_init(&ex, &view, _Py_tracemalloc_config.max_nframe, 0) == 0) {
        PyObject *changes = live_changes(old, st, &ex);
        if (changes != NULL) {
            result = PyTuple_Pack(2, capsule, changes);
            Py_DECREF(changes);
        }
    }
    exporter_fini(&ex);
    Py_DECREF(capsule);
done:
    if (gc_was_enabled) {
        PyGC_Enable();
    }
    _PyTraceMalloc_ResumeThread();
    return result;
}

/* Written by hand, as start(): the allocation profiles' totals. */
PyDoc_STRVAR(tracemalloc_get_allocated__doc__,
"_get_allocated($module, /, *, threads=False)\n"
"--\n"
"\n"
"What each call path allocated since tracing started (or clear_traces()),\n"
"freed or not, as the columns of _get_columns(), weighted: one or two\n"
"traces per (domain, call path).  RuntimeError unless tracing started\n"
"with allocations=True.  Private: use take_snapshot(allocated=True).");

static PyObject *
tracemalloc_get_allocated(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"threads", NULL};
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$p:_get_allocated",
                                     keywords, &threads)) {
        return NULL;
    }
    if (!_Py_tracemalloc_config.tracing) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the tracemalloc module must be tracing memory "
                        "allocations to count them");
        return NULL;
    }
    return export_ex(EXPORT_ALLOCATED, threads, 1);
}

/* Written by hand, as start(): the columns with context labels. */
PyDoc_STRVAR(tracemalloc_get_labelled__doc__,
"_get_labelled($module, /, *, peak=False, allocated=False)\n"
"--\n"
"\n"
"The columns of _get_columns(threads=True) (or of _get_allocated()), with\n"
"one more list, the record's labels attribute: the label set of each call\n"
"context, the canonical str that tracemalloc.label() made, or None.\n"
"Private: use take_snapshot(labels=True).");

static PyObject *
tracemalloc_get_labelled(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"peak", "allocated", NULL};
    int peak = 0, allocated = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$pp:_get_labelled",
                                     keywords, &peak, &allocated)) {
        return NULL;
    }
    if (!_Py_tracemalloc_config.tracing) {
        if (allocated) {
            PyErr_SetString(PyExc_RuntimeError,
                            "the tracemalloc module must be tracing memory "
                            "allocations to count them");
            return NULL;
        }
        PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
        PyObject *frames = PyList_New(0), *totals = PyList_New(0);
        PyObject *threads = PyList_New(0), *labels = PyList_New(0);
        PyObject *result = NULL;
        if (empty != NULL && frames != NULL && totals != NULL
            && threads != NULL && labels != NULL) {
            result = columns_record(frames, totals, threads, empty, empty,
                                    empty, Py_None, labels);
        }
        Py_XDECREF(empty);
        Py_XDECREF(frames);
        Py_XDECREF(totals);
        Py_XDECREF(threads);
        Py_XDECREF(labels);
        return result;
    }
    int which = allocated ? EXPORT_ALLOCATED : peak ? EXPORT_PEAK
                                                    : EXPORT_LIVE;
    return export_ex(which, EXPORT_THREADS | EXPORT_LABELS, 1);
}

PyDoc_STRVAR(tracemalloc_get_object_labels__doc__,
"_get_object_labels($module, obj, /)\n"
"--\n"
"\n"
"The label set (canonical str) under which obj was allocated, '' if none,\n"
"or None if it is not traced.  Private: use get_object_labels().");

static PyObject *
tracemalloc_get_object_labels(PyObject *module, PyObject *obj)
{
    _PyTraceMalloc_Node node;
    _PyTraceMalloc_CCTView view;
    if (!_PyTraceMalloc_GetTraceNode(_PyTraceMalloc_DEFAULT_DOMAIN,
                                     _PyTraceMalloc_ObjectBlock(obj), &node,
                                     &view)) {
        Py_RETURN_NONE;
    }
    /* The view is pinned: read, then unpin. */
    const void *data;
    int kind;
    Py_ssize_t length;
    PyObject *result;
    if (_PyTraceMalloc_NodeLabel(&view, node, &data, &kind, &length)) {
        result = PyUnicode_FromKindAndData(kind, data, length);
    }
    else {
        result = PyUnicode_FromStringAndSize(NULL, 0);
    }
    _PyTraceMalloc_CCTUnpin();
    return result;
}

/* None, or NULL when RC (an engine entry point's result) is -1. */
static PyObject *
none_unless_failed(int rc)
{
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(tracemalloc_set_label_var__doc__,
"_set_label_var($module, var, /)\n"
"--\n"
"\n"
"The ContextVar whose value (a str, or None) is the current label set.\n"
"Private: tracemalloc._labels gives it at import.");

static PyObject *
tracemalloc_set_label_var(PyObject *module, PyObject *var)
{
    return none_unless_failed(_PyTraceMalloc_SetLabelVar(var));
}

PyDoc_STRVAR(tracemalloc_label_switch__doc__,
"_label_switch($module, /)\n"
"--\n"
"\n"
"The current label set just changed: the running frames look at it again\n"
"at their next allocation.  Private: tracemalloc.label() calls it.");

static PyObject *
tracemalloc_label_switch(PyObject *module, PyObject *unused)
{
    return none_unless_failed(_PyTraceMalloc_LabelSwitch());
}

PyDoc_STRVAR(tracemalloc_set_task_hook__doc__,
"_set_task_hook($module, hook, /)\n"
"--\n"
"\n"
"Call hook(task, coro) in each new asyncio task's context (None: stop).\n"
"Private: use tracemalloc.label_tasks().");

static PyObject *
tracemalloc_set_task_hook(PyObject *module, PyObject *hook)
{
    return none_unless_failed(_PyTraceMalloc_SetTaskHook(hook));
}

PyDoc_STRVAR(tracemalloc_is_tracing_allocations__doc__,
"is_tracing_allocations($module, /)\n"
"--\n"
"\n"
"True if tracing keeps allocation totals (start(allocations=True)).");

static PyObject *
tracemalloc_is_tracing_allocations(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(_PyTraceMalloc_GetAllocations());
}

PyDoc_STRVAR(tracemalloc_set_dump_over__doc__,
"_set_dump_over($module, size, /)\n"
"--\n"
"\n"
"Call tracemalloc._dumpover._dump_over() in the main thread when traced\n"
"memory reaches size bytes, then at each doubling; 0 turns it off.\n"
"Private: use tracemalloc.dump_over().");

static PyObject *
tracemalloc_set_dump_over(PyObject *module, PyObject *arg)
{
    if (PyBool_Check(arg) || !PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "size must be an int, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    unsigned long long size = PyLong_AsUnsignedLongLong(arg);
    if (size == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_SetString(PyExc_ValueError,
                            "size must be between 0 and 2**64 - 1");
        }
        return NULL;
    }
    _PyTraceMalloc_SetDumpOver((uint64_t)size);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(tracemalloc_set_dump_on_memory_error__doc__,
"_set_dump_on_memory_error($module, armed, /)\n"
"--\n"
"\n"
"Call tracemalloc._dumpover._dump_memory_error() in the main thread after\n"
"the next MemoryError set by C code (once).  Private: use\n"
"tracemalloc.dump_on_memory_error().");

static PyObject *
tracemalloc_set_dump_on_memory_error(PyObject *module, PyObject *arg)
{
    int armed = PyObject_IsTrue(arg);
    if (armed < 0) {
        return NULL;
    }
    _PyTraceMalloc_SetDumpOnMemoryError(armed);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(tracemalloc_tracing_session__doc__,
"_tracing_session($module, /)\n"
"--\n"
"\n"
"A number that changes each time tracing starts (0 before the first\n"
"start): the on-demand handler tells its own tracing from a restart by\n"
"the program.  Private.");

static PyObject *
tracemalloc_tracing_session(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(_PyTraceMalloc_GetSession());
}

PyDoc_STRVAR(tracemalloc_startup_dump_pattern__doc__,
"_startup_dump_pattern($module, /)\n"
"--\n"
"\n"
"(pattern, option) of -X tracemalloc_dump or PYTHONTRACEMALLOCDUMP as the\n"
"interpreter read them at startup, a relative pattern joined to the\n"
"directory it started in; None when neither was given.  Private.");

static PyObject *
tracemalloc_startup_dump_pattern(PyObject *module, PyObject *unused)
{
    return _PyTraceMalloc_StartupDumpPattern();
}

PyDoc_STRVAR(tracemalloc_is_tracing_native__doc__,
"is_tracing_native($module, /)\n"
"--\n"
"\n"
"True if native memory (malloc(), anonymous mmap() of code outside\n"
"Python's allocator API) is traced, in domain NATIVE_DOMAIN.");

static PyObject *
tracemalloc_is_tracing_native(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(_PyTraceMalloc_IsTracingNative());
}

PyDoc_STRVAR(tracemalloc_get_native_traced_memory__doc__,
"get_native_traced_memory($module, /)\n"
"--\n"
"\n"
"The native domain's traced size now and its own peak, as a (current,\n"
"peak) tuple; get_traced_memory() includes it.");

static PyObject *
tracemalloc_get_native_traced_memory(PyObject *module, PyObject *unused)
{
    size_t current, peak;
    _PyTraceMalloc_GetNativeTracedMemory(&current, &peak);
    return Py_BuildValue("nn", (Py_ssize_t)current, (Py_ssize_t)peak);
}

PyDoc_STRVAR(tracemalloc_is_tracing_native_frames__doc__,
"is_tracing_native_frames($module, /)\n"
"--\n"
"\n"
"False when traces carry no C stack; 'native' when native traces carry\n"
"theirs (start(native=True, native_frames=True)); 'all' when every\n"
"trace does (native_frames='all').");

static PyObject *
tracemalloc_is_tracing_native_frames(PyObject *module, PyObject *unused)
{
    switch (_PyTraceMalloc_GetNativeFrames()) {
    case _PyTraceMalloc_NATIVE_FRAMES_NATIVE:
        return PyUnicode_FromString("native");
    case _PyTraceMalloc_NATIVE_FRAMES_ALL:
        return PyUnicode_FromString("all");
    default:
        Py_RETURN_FALSE;
    }
}

PyDoc_STRVAR(tracemalloc_native_stack__doc__,
"_native_stack($module, domain, address, /)\n"
"--\n"
"\n"
"The raw C stack of the trace of ADDRESS in DOMAIN: a list of (return\n"
"address, nframes) pairs, innermost first, where nframes is the number\n"
"of Python frames a call of the evaluation loop runs (-1 for the other\n"
"C frames); None when there is no such trace.");

static PyObject *
tracemalloc_native_stack(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("_native_stack", nargs, 2, 2)) {
        return NULL;
    }
    unsigned long domain = PyLong_AsUnsignedLong(args[0]);
    if (domain == (unsigned long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    void *ptr = PyLong_AsVoidPtr(args[1]);
    if (ptr == NULL && PyErr_Occurred()) {
        return NULL;
    }
    _PyTraceMalloc_Node node;
    _PyTraceMalloc_CCTView view;
    if (!_PyTraceMalloc_GetTraceNode((unsigned int)domain, (uintptr_t)ptr,
                                     &node, &view)) {
        Py_RETURN_NONE;
    }
    _PyTraceMalloc_NativeEntry entries[EXPORT_NATIVE_MAX];
    _PyTraceMalloc_Node py;
    int n = _PyTraceMalloc_NodeNativeChain(&view, node, entries,
                                           EXPORT_NATIVE_MAX, &py);
    _PyTraceMalloc_CCTUnpin();
    PyObject *list = PyList_New(n);
    for (int i = 0; list != NULL && i < n; i++) {
        PyObject *item = Py_BuildValue("(NL)",
                                       PyLong_FromVoidPtr((void *)entries[i].pc),
                                       (long long)entries[i].nframes);
        if (item == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

PyDoc_STRVAR(tracemalloc_native_symbol__doc__,
"_native_symbol($module, address, /)\n"
"--\n"
"\n"
"The C return address ADDRESS symbolised: (function, library, file,\n"
"line, offset in the library); None for what is unknown.");

static PyObject *
tracemalloc_native_symbol(PyObject *module, PyObject *arg)
{
    void *pc = PyLong_AsVoidPtr(arg);
    if (pc == NULL && PyErr_Occurred()) {
        return NULL;
    }
    const _PyTraceMalloc_NativeSymbol *sym =
        _PyTraceMalloc_NativeSymbolize((uintptr_t)pc);
    PyObject *items[3];
    const char *texts[3] = {sym->function, sym->library, sym->file};
    for (int i = 0; i < 3; i++) {
        items[i] = texts[i] != NULL ? PyUnicode_DecodeFSDefault(texts[i])
                                    : Py_NewRef(Py_None);
        if (items[i] == NULL) {
            while (--i >= 0) {
                Py_DECREF(items[i]);
            }
            return NULL;
        }
    }
    return Py_BuildValue("(NNNik)", items[0], items[1], items[2], sym->line,
                         (unsigned long)sym->offset);
}

static PyMethodDef module_methods[] = {
    {"is_tracing_native_frames", tracemalloc_is_tracing_native_frames,
     METH_NOARGS, tracemalloc_is_tracing_native_frames__doc__},
    {"_native_stack", _PyCFunction_CAST(tracemalloc_native_stack),
     METH_FASTCALL, tracemalloc_native_stack__doc__},
    {"_native_symbol", tracemalloc_native_symbol, METH_O,
     tracemalloc_native_symbol__doc__},
    {"is_tracing_native", tracemalloc_is_tracing_native, METH_NOARGS,
     tracemalloc_is_tracing_native__doc__},
    {"get_native_traced_memory", tracemalloc_get_native_traced_memory,
     METH_NOARGS, tracemalloc_get_native_traced_memory__doc__},
    _TRACEMALLOC_IS_TRACING_METHODDEF
    _TRACEMALLOC_CLEAR_TRACES_METHODDEF
    _TRACEMALLOC__GET_TRACES_METHODDEF
    _TRACEMALLOC__GET_TRACES_EX_METHODDEF
    _TRACEMALLOC__GET_COLUMNS_METHODDEF
    _TRACEMALLOC__TRACEBACK_TOTALS_METHODDEF
    _TRACEMALLOC__TRACES_FROM_COLUMNS_METHODDEF
    _TRACEMALLOC__FRAME_TABLE_METHODDEF
    _TRACEMALLOC__NARROW_COLUMNS_METHODDEF
    _TRACEMALLOC__GET_OBJECT_TRACEBACK_METHODDEF
    {"_get_allocated", _PyCFunction_CAST(tracemalloc_get_allocated),
     METH_VARARGS | METH_KEYWORDS, tracemalloc_get_allocated__doc__},
    {"_get_labelled", _PyCFunction_CAST(tracemalloc_get_labelled),
     METH_VARARGS | METH_KEYWORDS, tracemalloc_get_labelled__doc__},
    {"_get_object_labels", tracemalloc_get_object_labels, METH_O,
     tracemalloc_get_object_labels__doc__},
    {"_set_label_var", tracemalloc_set_label_var, METH_O,
     tracemalloc_set_label_var__doc__},
    {"_label_switch", tracemalloc_label_switch, METH_NOARGS,
     tracemalloc_label_switch__doc__},
    {"_set_task_hook", tracemalloc_set_task_hook, METH_O,
     tracemalloc_set_task_hook__doc__},
    {"_tracing_session", tracemalloc_tracing_session, METH_NOARGS,
     tracemalloc_tracing_session__doc__},
    {"_startup_dump_pattern", tracemalloc_startup_dump_pattern, METH_NOARGS,
     tracemalloc_startup_dump_pattern__doc__},
    {"_set_dump_over", tracemalloc_set_dump_over, METH_O,
     tracemalloc_set_dump_over__doc__},
    {"_set_dump_on_memory_error", tracemalloc_set_dump_on_memory_error,
     METH_O, tracemalloc_set_dump_on_memory_error__doc__},
    {"is_tracing_allocations", tracemalloc_is_tracing_allocations,
     METH_NOARGS, tracemalloc_is_tracing_allocations__doc__},
    {"start", _PyCFunction_CAST(tracemalloc_start),
     METH_FASTCALL | METH_KEYWORDS, tracemalloc_start__doc__},
    {"get_sample", tracemalloc_get_sample, METH_NOARGS,
     tracemalloc_get_sample__doc__},
    {"_set_sample_seed", tracemalloc_set_sample_seed, METH_O,
     tracemalloc_set_sample_seed__doc__},
    {"_parse_size", tracemalloc_parse_size, METH_O,
     tracemalloc_parse_size__doc__},
    {"_clear_free_lists", tracemalloc_clear_free_lists, METH_NOARGS,
     tracemalloc_clear_free_lists__doc__},
    _TRACEMALLOC_STOP_METHODDEF
    _TRACEMALLOC_GET_TRACEBACK_LIMIT_METHODDEF
    _TRACEMALLOC_GET_TRACEMALLOC_MEMORY_METHODDEF
    _TRACEMALLOC_GET_TRACED_MEMORY_METHODDEF
    _TRACEMALLOC_RESET_PEAK_METHODDEF
    TRACEMALLOC_RETENTION_METHODDEFS
    {"_live_totals_diff", tracemalloc_live_totals_diff, METH_O,
     tracemalloc_live_totals_diff__doc__},
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
    if (ColumnsType.tp_name == NULL
        && PyStructSequence_InitType2(&ColumnsType, &columns_desc) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "SnapshotColumns",
                              (PyObject *)&ColumnsType) < 0
        || PyModule_AddIntConstant(module, "NATIVE_DOMAIN",
                                   _PyTraceMalloc_NATIVE_DOMAIN) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
