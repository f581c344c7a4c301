#ifndef Py_TRACEMALLOC_BASE311_H
#define Py_TRACEMALLOC_BASE311_H

/* The tracing engine's view of the interpreter it is built into, CPython
 * 3.11: every field of a frame, a code object or a thread state that the
 * engine reads, read here and nowhere else.  A new base (3.13: the frame's
 * f_executable and instr_ptr, tstate->current_frame) is a new copy of this
 * header; the engine's other files never ask which version they run on.
 * See Doc/internals/tracemalloc-bases.rst.
 *
 * Included through Python/tracemalloc_base.h, which picks the base's.
 * Everything is inline: reading a field through here costs what reading it
 * directly does.
 */

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

#include "pycore_ceval.h"         // _PyEval_AddPendingCall()
#include "pycore_code.h"
#include "pycore_frame.h"
#include "pycore_object.h"        // _PyType_PreHeaderSize()
#include "pycore_pylifecycle.h"
#include "pycore_pystate.h"

/* ---- frames ------------------------------------------------------------ */

/* The frame TSTATE is running, or NULL (no Python frame). */
static inline _PyInterpreterFrame *
base_current_frame(PyThreadState *tstate)
{
    return tstate->cframe->current_frame;
}

/* The frame that called FRAME, or NULL. */
static inline _PyInterpreterFrame *
base_frame_caller(const _PyInterpreterFrame *frame)
{
    return frame->previous;
}

/* Has FRAME not started its first traceable instruction yet (copying free
   variables, making cells)?  Such frames are not shown, like upstream. */
static inline int
base_frame_is_incomplete(_PyInterpreterFrame *frame)
{
    return _PyFrame_IsIncomplete(frame);
}

/* Was FRAME entered from C (an evaluation loop started for it: a call
   from C, a generator resumed by C, Context.run())?  The context may
   change there (labels, tracemalloc_labels.c).  3.11 marks such a frame
   itself (is_entry). */
static inline int
base_frame_entered_from_c(const _PyInterpreterFrame *frame)
{
    return frame->is_entry;
}

static inline PyCodeObject *
base_frame_code(const _PyInterpreterFrame *frame)
{
    return frame->f_code;
}

/* The instruction FRAME is at: the one it last started. */
static inline const _Py_CODEUNIT *
base_frame_instr(const _PyInterpreterFrame *frame)
{
    return frame->prev_instr;
}

/* The offset of base_frame_instr() in code units (-1 before the first). */
static inline int
base_frame_lasti(const _PyInterpreterFrame *frame)
{
    return _PyInterpreterFrame_LASTI(frame);
}

/* ---- thread states ----------------------------------------------------- */

/* Is every GIL the main one?  3.11 has one GIL. */
static inline int
base_one_gil(void)
{
    return 1;
}

/* Does TSTATE, a thread state some thread holds, run under the GIL whose
   holder takes the engine's fast side?  3.11 has one GIL. */
static inline int
base_on_engine_gil(PyThreadState *tstate)
{
    (void)tstate;
    return 1;
}

/* The thread state this thread last made current (Python/pystate.c calls
   _PyTraceMalloc_ThreadStateSwapped() wherever the current thread state
   changes, patch 0007): whatever its interpreter, a subinterpreter's
   included, this thread holds the GIL exactly while it is the current
   one. */
static _Thread_local PyThreadState *base_this_thread_tstate;

void
_PyTraceMalloc_ThreadStateSwapped(PyThreadState *tstate)
{
    base_this_thread_tstate = tstate;
}

/* Does the calling thread hold the GIL now?  Compares pointers only: the
   GIL holder's thread state is never dereferenced here. */
static inline int
base_thread_on_engine_gil(void)
{
    PyThreadState *mine = base_this_thread_tstate;
    return mine != NULL && mine == _PyThreadState_GET();
}

/* Does the calling thread hold any GIL (3.11: the one)? */
static inline int
base_thread_holds_a_gil(void)
{
    return base_thread_on_engine_gil();
}

/* The calling thread's own thread state, for a caller that may not hold
   the GIL (its frames are the ones it is not running). */
static inline PyThreadState *
base_this_thread_state(void)
{
    return PyGILState_GetThisThreadState();
}

/* ---- lifecycle: the names Python/pylifecycle.c calls ------------------- */

/* At startup, after the configuration is read: start tracing when
   -X tracemalloc, PYTHONTRACEMALLOC or a sampling option asks (sampling
   alone traces 1 frame, as -X tracemalloc does). */
int
_PyTraceMalloc_Init(int nframe)
{
    const char *error;
    if (_PyTraceMalloc_ReadSampleOption(_Py_GetConfig(), &error) < 0) {
        fprintf(stderr, "%s\n", error);
        return -1;
    }
    /* -X tracemalloc_signal: read now, so that a bad value stops the
       interpreter before anything runs; the handler is installed later
       (_PyTraceMalloc_InstallStartupSignal(), Python/tracemalloc_startup.c). */
    if (_PyTraceMalloc_ReadSignalOption(_Py_GetConfig(), &error) < 0) {
        fprintf(stderr, "%s\n", error);
        return -1;
    }
    /* -X tracemalloc_dump_over, -X tracemalloc_dump_on_memory_error: a
       dump needs tracing, sampled when no option says how. */
    if (_PyTraceMalloc_ReadDumpOverOption(_Py_GetConfig(), &error) < 0) {
        fprintf(stderr, "%s\n", error);
        return -1;
    }
    if (nframe == 0 && !_PyTraceMalloc_StartupSample()
        && _PyTraceMalloc_StartupDumpOver()) {
        _PyTraceMalloc_StartupDefaultSample();
        nframe = _PyTraceMalloc_STARTUP_NFRAME;
    }
    if (nframe == 0 && (_PyTraceMalloc_StartupSample()
                     || _PyTraceMalloc_StartupNative())) {
        nframe = 1;
    }
    if (nframe == 0) {
        return 0;
    }
    return _PyTraceMalloc_Start(nframe);
}

/* Empty the interpreter's free lists, as a full collection does. */
static inline void
base_clear_free_lists(void)
{
    PyInterpreterState *interp = _PyInterpreterState_GET();
    _PyTuple_ClearFreeList(interp);
    _PyFloat_ClearFreeList(interp);
    _PyList_ClearFreeList(interp);
    _PyDict_ClearFreeList(interp);
    _PyAsyncGen_ClearFreeLists(interp);
    _PyContext_ClearFreeList(interp);
}


/* Ask the main thread of the main interpreter to run FUNC at its next
   safe point (3.11's Py_AddPendingCall() targets the caller's own
   interpreter): 0, or -1 when the queue is full. */
static inline int
base_add_main_pending_call(int (*func)(void *))
{
    return _PyEval_AddPendingCall(_PyRuntime.interpreters.main, func, NULL);
}

#endif /* !Py_TRACEMALLOC_BASE311_H */
