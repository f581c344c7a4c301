#ifndef Py_TRACEMALLOC_BASE313_H
#define Py_TRACEMALLOC_BASE313_H

/* The tracing engine's view of the interpreter it is built into, CPython
 * 3.13: the same questions as tracemalloc_base311.h, answered from 3.13's
 * fields (the frame's f_executable and instr_ptr, tstate->current_frame,
 * the thread-local current thread state, the per-interpreter GIL).  See
 * Doc/internals/tracemalloc-bases.rst.
 *
 * Included through Python/tracemalloc_base.h.  Everything that is read on
 * a hot path is inline.
 */

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif
#ifdef Py_GIL_DISABLED
#  error "the tracing engine does not support the free-threaded build (--disable-gil)"
#endif

#include "pycore_code.h"
#include "pycore_frame.h"
#include "pycore_initconfig.h"    // _PyStatus_OK()
#include "pycore_interp.h"        // interp->ceval.gil
#include "pycore_object.h"        // _PyType_PreHeaderSize()
#include "pycore_pylifecycle.h"
#include "pycore_pystate.h"       // _PyThreadState_GET()
#include "pycore_runtime.h"       // _PyRuntime

/* ---- frames ------------------------------------------------------------ */

/* The frame TSTATE is running, or NULL (no Python frame).  It may be the
   C stack's entry frame (FRAME_OWNED_BY_CSTACK) while an evaluation loop
   unwinds: patch 0002 gives that frame an unlinked cache, so the engine
   reaches it only through base_frame_is_incomplete(), which skips it. */
static inline _PyInterpreterFrame *
base_current_frame(PyThreadState *tstate)
{
    return tstate->current_frame;
}

static inline _PyInterpreterFrame *
base_frame_caller(const _PyInterpreterFrame *frame)
{
    return frame->previous;
}

/* Frames not shown, like upstream: the C stack's entry frames (whose
   f_executable is None) and frames that have not started their first
   traceable instruction. */
static inline int
base_frame_is_incomplete(_PyInterpreterFrame *frame)
{
    return _PyFrame_IsIncomplete(frame);
}

/* Was FRAME entered from C (an evaluation loop started for it: a call
   from C, a generator resumed by C, Context.run())?  The context may
   change there (labels, tracemalloc_labels.c).  3.13 puts an entry
   frame of the C stack (FRAME_OWNED_BY_CSTACK) under it. */
static inline int
base_frame_entered_from_c(const _PyInterpreterFrame *frame)
{
    const _PyInterpreterFrame *caller = frame->previous;
    return caller != NULL && caller->owner == FRAME_OWNED_BY_CSTACK;
}

/* Only asked of complete frames, whose f_executable is a code object. */
static inline PyCodeObject *
base_frame_code(const _PyInterpreterFrame *frame)
{
    return (PyCodeObject *)frame->f_executable;
}

/* The instruction FRAME is at: the one executing, or about to begin.
   (3.11's prev_instr named the last one begun: at a call, both name the
   call instruction.) */
static inline const _Py_CODEUNIT *
base_frame_instr(const _PyInterpreterFrame *frame)
{
    return frame->instr_ptr;
}

/* The offset of base_frame_instr() in code units: upstream 3.13 gives the
   line of this offset (PyUnstable_InterpreterFrame_GetLine()). */
static inline int
base_frame_lasti(const _PyInterpreterFrame *frame)
{
    return (int)(frame->instr_ptr - base_code_first_instr(
                                        base_frame_code(frame)));
}

/* ---- thread states and the GIL ----------------------------------------- */

/* Does TSTATE, a thread state some thread holds (attached), run under the
   GIL whose holder takes the engine's fast side?  Since PEP 684 (3.12)
   an interpreter may have a GIL of its own, and two threads may each hold
   one at once; the fast side is the main GIL's, which the main interpreter
   and the subinterpreters that share it hold.  The others enter as callers
   without the GIL do (I1).  Two loads for the main interpreter. */
static inline int
base_on_engine_gil(PyThreadState *tstate)
{
    PyInterpreterState *interp = tstate->interp;
    return interp == _PyRuntime.interpreters.main || !interp->ceval.own_gil;
}

/* Has the process never made an interpreter with a GIL of its own?  Then
   every GIL is the main one, and a caller with its interpreter's GIL is
   on the engine's GIL without reading its thread state: one load on each
   traced allocation and free, where base_on_engine_gil() costs the thread
   state's load, a NULL test and the interpreter's compare.  pylifecycle.c
   clears it (patch 0008) before such an interpreter takes its GIL, so
   before any thread can allocate under that GIL; it is never set again. */
static int base_all_gils_main = 1;

void
_PyTraceMalloc_OwnGILCreated(void)
{
    __atomic_store_n(&base_all_gils_main, 0, __ATOMIC_SEQ_CST);
    lean_own_gil();
}

static inline int
base_one_gil(void)
{
    return _PyTraceMalloc_FILTER_LOAD(&base_all_gils_main);
}

/* Does the calling thread hold the engine's GIL now?  3.13 keeps the
   attached thread state in a thread-local (_Py_tss_tstate), cleared when
   the thread detaches, that is, releases its GIL. */
static inline int
base_thread_on_engine_gil(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    return tstate != NULL && base_on_engine_gil(tstate);
}

/* Does the calling thread hold any GIL: its interpreter's? */
static inline int
base_thread_holds_a_gil(void)
{
    return _PyThreadState_GET() != NULL;
}

/* The calling thread's own thread state, for a caller that may not hold
   the engine's GIL: the attached one (a thread of an interpreter with its
   own GIL), else the one PyGILState_Ensure() would use (a thread that
   released the GIL), whose frames it is not running. */
static inline PyThreadState *
base_this_thread_state(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    return tstate != NULL ? tstate : PyGILState_GetThisThreadState();
}

/* ---- lifecycle: the names Python/pylifecycle.c calls ------------------- */

/* When the main interpreter has its configuration, before anything runs:
   the state is static, so only the sampling options are read.
   pylifecycle.c starts tracing with _PyTraceMalloc_Start() when the
   configuration's tracemalloc says so: sampling alone turns it on, with 1
   frame, as -X tracemalloc does. */
PyStatus
_PyTraceMalloc_Init(void)
{
    PyInterpreterState *main = _PyInterpreterState_Main();
    if (main == NULL) {
        return _PyStatus_OK();
    }
    const char *error;
    if (_PyTraceMalloc_ReadSampleOption(&main->config, &error) < 0) {
        return _PyStatus_ERR(error);
    }
    /* -X tracemalloc_signal: read now, so that a bad value stops the
       interpreter before anything runs; the handler is installed later
       (_PyTraceMalloc_InstallStartupSignal(), Python/tracemalloc_startup.c). */
    if (_PyTraceMalloc_ReadSignalOption(&main->config, &error) < 0) {
        return _PyStatus_ERR(error);
    }
    /* -X tracemalloc_dump_over, -X tracemalloc_dump_on_memory_error: a
       dump needs tracing, sampled when no option says how. */
    if (_PyTraceMalloc_ReadDumpOverOption(&main->config, &error) < 0) {
        return _PyStatus_ERR(error);
    }
    if (main->config.tracemalloc == 0 && !_PyTraceMalloc_StartupSample()
        && _PyTraceMalloc_StartupDumpOver()) {
        _PyTraceMalloc_StartupDefaultSample();
        main->config.tracemalloc = _PyTraceMalloc_STARTUP_NFRAME;
    }
    if (main->config.tracemalloc == 0 && (_PyTraceMalloc_StartupSample()
                     || _PyTraceMalloc_StartupNative())) {
        main->config.tracemalloc = 1;
    }
    return _PyStatus_OK();
}

/* Empty the interpreter's free lists, as a full collection does. */
static inline void
base_clear_free_lists(void)
{
    _PyGC_ClearAllFreeLists(_PyInterpreterState_GET());
}


/* Ask the main thread of the main interpreter to run FUNC at its next
   safe point (what 3.13's Py_AddPendingCall() does): 0, or -1 when the
   queue is full. */
static inline int
base_add_main_pending_call(int (*func)(void *))
{
    return Py_AddPendingCall(func, NULL);
}

#endif /* !Py_TRACEMALLOC_BASE313_H */
