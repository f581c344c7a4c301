/* Context labels: which request, tenant or asyncio task
 * an allocation was made for.
 *
 * The package keeps the current label set in a ContextVar, as a str (its
 * canonical form, Lib/tracemalloc/_labels.py), so that labels follow
 * contextvars' rules: a with block, a thread, an asyncio task.  The engine
 * never looks at it per allocation.  It looks when a frame is linked
 * (tracemalloc_framecache.c): a new call, a resumed generator or
 * coroutine, a frame entered from C (Context.run(), a task's step).  If
 * the context's label set is not the one of the path the frame is linked
 * under, a label node goes in between: (parent, label set, 0).  A context
 * entered or left under a running frame (Context.run() of a C function)
 * unlinks that frame.  Every node
 * records its path's nearest label node (cct_node.label), so that the
 * comparison is one load.
 *
 * Which frames may run under a label set they were not linked with (I13)?
 * Those of the context whose set changes, and the frames that a new
 * context runs.  Entering and leaving a label unlinks every frame of the
 * thread (_PyTraceMalloc_LabelSwitch()); another context runs only from a
 * frame entered from C (Context.run(), a task's step), whose link is reset
 * on entry.  And a link made while walking up the stack
 * (current_node_slow()) links only the running segment, the frames above
 * the last one entered from C: the older ones may have run under another
 * context, and are linked when they run again.  A walk by a thread that
 * cannot read its context (it released the GIL) links no frame at all.
 *
 * Cost: nothing per allocation; a label node per label set per call path
 * (the first allocation after a switch); when no label was ever entered,
 * one untaken branch per frame link.  Part of the engine's translation
 * unit (see tracemalloc_engine.h).
 */

#include "pycore_context.h"       // PyContext, PyContextVar
#include "pycore_hamt.h"          // _PyHamt_Find()

/* The label node of "no label" under a labelled path (a thread started
   from a labelled one, a task whose context has none). */
static cct_string label_none = {.is_label = 1};

static atomic_int labels_used;

/* Did anyone ever enter a label or ask for task labels?  Read by every
   frame link, with the GIL or without it (relaxed: a link that misses the
   first switch is a link made before it). */
static inline int
labels_in_use(void)
{
    return atomic_load_explicit(&labels_used, memory_order_relaxed);
}

/* The label set (a non-empty str, borrowed) of TSTATE's context, NULL
   when it has none.  Allocates nothing and takes no reference: the engine
   lock is held.  TSTATE holds the GIL.  Labels are the main
   interpreter's: another interpreter's thread has none.  It must not get
   as far as the ContextVar's cache, keyed by a thread state's id and
   context version, which count per interpreter: a subinterpreter's thread
   state may have the pair of the main interpreter's thread that cached
   the value. */
static PyObject *
context_label(PyThreadState *tstate)
{
    PyContextVar *var = (PyContextVar *)tm.labels.var;
    PyContext *ctx = (PyContext *)tstate->context;
    if (var == NULL || ctx == NULL
        || !_Py_IsMainInterpreter(tstate->interp)) {
        return NULL;
    }
    PyObject *value;
    if (var->var_cached != NULL && var->var_cached_tsid == tstate->id
        && var->var_cached_tsver == tstate->context_ver) {
        value = var->var_cached;
    }
    else if (_PyHamt_Find(ctx->ctx_vars, (PyObject *)var, &value) != 1) {
        /* 0: not set; -1 cannot happen (a ContextVar's hash is stored),
           but would leave an exception: clear it. */
        if (PyErr_Occurred()) {
            PyErr_Clear();
        }
        return NULL;
    }
    if (!PyUnicode_CheckExact(value) || PyUnicode_GET_LENGTH(value) == 0) {
        return NULL;
    }
    return value;
}

/* Are the labels of TSTATE (not NULL), a thread of the main interpreter,
   unknown to the calling thread: is TSTATE not its attached thread state
   with the engine's GIL held?  So a thread that released the GIL (the raw
   domain, a native call), which cannot read its context.  A thread of
   another interpreter has none (context_label()). */
static inline int
labels_unknown(PyThreadState *tstate)
{
    return _Py_IsMainInterpreter(tstate->interp)
           && (tstate != _PyThreadState_GET() || !_PyTraceMalloc_HoldsGIL());
}

/* PARENT, or a label node under it if TSTATE's context has another label
   set than PARENT's path (I13); UINT32_MAX when out of memory.  For the
   frame being linked under PARENT, which runs in that context now.  A
   thread without the GIL cannot read its context: PARENT is kept, and
   current_node_slow() does not link such frames. */
static _PyTraceMalloc_Node
label_parent(PyThreadState *tstate, _PyTraceMalloc_Node parent)
{
    if (tstate == NULL || labels_unknown(tstate)) {
        return parent;
    }
    int nomem = 0;
    const cct_string *want = NULL;
    PyObject *value = context_label(tstate);
    if (value != NULL) {
        want = string_intern_ex(value, 1, &nomem);
        if (nomem) {
            return UINT32_MAX;
        }
    }
    _PyTraceMalloc_Node chain = parent ? node_at(parent)->label : 0;
    const cct_string *have = chain ? node_at(chain)->filename : NULL;
    if (have == &label_none) {
        have = NULL;
    }
    if (want == have) {
        return parent;
    }
    _PyTraceMalloc_Node node = node_intern(parent, want ? want : &label_none,
                                           0, &nomem);
    return nomem ? UINT32_MAX : node;
}

/* ---- the package's entry points (with the GIL) -------------------------- */

/* Labels are the main interpreter's: a subinterpreter's package has
   ContextVars of its own, which the engine does not read. */
static int
labels_interp_ok(void)
{
    return PyInterpreterState_Get() == PyInterpreterState_Main();
}

int
_PyTraceMalloc_SetLabelVar(PyObject *var)
{
    if (!PyContextVar_CheckExact(var)) {
        PyErr_SetString(PyExc_TypeError, "expected a ContextVar");
        return -1;
    }
    if (labels_interp_ok()) {
        Py_XSETREF(tm.labels.var, Py_NewRef(var));
    }
    return 0;
}

/* Finalization: the objects die with the interpreter; a new one (an
   embedding application's Py_Initialize()) gives its own. */
static void
labels_fini(void)
{
    tm.labels.var = NULL;
    tm.labels.task_hook = NULL;
}

/* The current label set changed: unlink every frame of the thread (I13),
   so that each looks at the context at its next allocation.  Not only the
   running segment: a with statement calls label.__enter__() from C, and a
   label entered in a generator (a contextmanager) holds for its consumer;
   the frames of the same context may be below any number of frames
   entered from C.  The frames of other contexts relink to the same
   nodes.  Cost: a walk of the stack now, and one when each segment next
   allocates. */
int
_PyTraceMalloc_LabelSwitch(void)
{
    atomic_store_explicit(&labels_used, 1, memory_order_relaxed);
    PyThreadState *tstate = _PyThreadState_GET();
    for (_PyInterpreterFrame *frame = base_current_frame(tstate);
         frame != NULL; frame = base_frame_caller(frame)) {
        frame->tracemalloc_parent = 0;
    }
    return 0;
}

/* Context.run(), PyContext_Enter() and their exits (patch
   context-switch-hook): TS's context changed under its running frame,
   which C code called, and which the C code may allocate for before any
   Python frame is entered from it (Context.run(zlib.compress, ...)).
   Unlink that frame: its next allocation links it again, with the labels
   of the context then.  Frames that C code enters are linked on entry;
   older frames run again only after the exit, in their own context. */
void
_PyTraceMalloc_ContextSwitched(PyThreadState *ts)
{
    if (!labels_in_use()) {
        return;
    }
    for (_PyInterpreterFrame *frame = base_current_frame(ts); frame != NULL;
         frame = base_frame_caller(frame)) {
        frame->tracemalloc_parent = 0;
        if (!base_frame_is_incomplete(frame)) {
            break;
        }
    }
}

int
_PyTraceMalloc_SetTaskHook(PyObject *hook)
{
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "the task hook must be callable");
        return -1;
    }
    if (!labels_interp_ok()) {
        return 0;
    }
    if (hook == Py_None) {
        Py_CLEAR(tm.labels.task_hook);
    }
    else {
        atomic_store_explicit(&labels_used, 1, memory_order_relaxed);
        Py_XSETREF(tm.labels.task_hook, Py_NewRef(hook));
    }
    return 0;
}

/* Call the task hook with (TASK, CORO); a failure is reported, not
   raised: a label is not worth a task. */
static void
task_hook_call(PyObject *task, PyObject *coro)
{
    PyObject *hook = Py_NewRef(tm.labels.task_hook);
    PyObject *res = PyObject_CallFunctionObjArgs(hook, task, coro, NULL);
    if (res == NULL) {
        PyErr_WriteUnraisable(hook);
    }
    Py_XDECREF(res);
    Py_DECREF(hook);
}

/* Call the task hook with (TASK, CORO) in CONTEXT, the task's: entered
   for the call, or already the current one (a task renaming itself),
   whose running frames then look at the labels again.  A context that
   another thread has entered is left alone. */
static int
task_hook_in(PyObject *task, PyObject *coro, PyObject *context)
{
    if (tm.labels.task_hook == NULL || !labels_interp_ok()
        || !PyContext_CheckExact(context)) {
        return 0;
    }
    PyThreadState *tstate = _PyThreadState_GET();
    if (tstate->context == context) {
        task_hook_call(task, coro);
        return _PyTraceMalloc_LabelSwitch();
    }
    if (((PyContext *)context)->ctx_entered) {
        return 0;
    }
    if (PyContext_Enter(context) < 0) {
        return -1;
    }
    task_hook_call(task, coro);
    return PyContext_Exit(context);
}

/* _asyncio's Task.__init__ (patch asyncio-task-labels), after the task
   copied the current context into CONTEXT and got its name: the hook
   labels the task's own context. */
int
_PyTraceMalloc_TaskCreated(PyObject *task, PyObject *coro, PyObject *context)
{
    return task_hook_in(task, coro, context);
}

/* _asyncio's Task.set_name() (same patch): the hook is called with None
   as the coroutine, and renames the task's label if it gave one. */
int
_PyTraceMalloc_TaskRenamed(PyObject *task, PyObject *context)
{
    return task_hook_in(task, Py_None, context);
}
