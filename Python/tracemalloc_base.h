#ifndef Py_TRACEMALLOC_BASE_H
#define Py_TRACEMALLOC_BASE_H

/* The adapter of the base being built: the one header that knows the
 * interpreter's frame, code object and thread-state fields (see
 * Doc/internals/tracemalloc-bases.rst).  The engine's other files include
 * this one, never a version's own, and carry no version conditionals.
 */

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

#include "pycore_code.h"
#include "pycore_object.h"        // _PyType_PreHeaderSize()
#include "pycore_pystate.h"
#include "pycore_runtime.h"       // _PyRuntimeState_GetFinalizing()

/* ---- what every base answers alike ------------------------------------- */

static inline PyObject *
base_code_filename(const PyCodeObject *code)
{
    return code->co_filename;
}

static inline int
base_code_firstlineno(const PyCodeObject *code)
{
    return code->co_firstlineno;
}

/* The first instruction of CODE's bytecode. */
static inline const _Py_CODEUNIT *
base_code_first_instr(PyCodeObject *code)
{
    return _PyCode_CODE(code);
}

/* The native id of the calling thread, whose thread state is TSTATE: from
   the OS where it can tell, since a forked child's thread state has the
   parent's until PyOS_AfterFork_Child() updates it. */
static inline unsigned long
base_this_thread_native_id(PyThreadState *tstate)
{
#ifdef PY_HAVE_THREAD_NATIVE_ID
    (void)tstate;
    return PyThread_get_thread_native_id();
#else
    return tstate->native_thread_id;
#endif
}

/* Is the runtime finalizing (daemon threads' thread states may be freed)? */
static inline int
base_runtime_finalizing(void)
{
    return _PyRuntimeState_GetFinalizing(&_PyRuntime) != NULL;
}

/* The address of OP's memory block: before the object when its type has a
   GC header or a pre-header (3.11: the managed dict; 3.13: the managed
   dict and weakrefs). */
static inline uintptr_t
base_object_block(PyObject *op)
{
    return (uintptr_t)((char *)op - _PyType_PreHeaderSize(Py_TYPE(op)));
}

/* ---- what each base answers its own way -------------------------------- */

#if PY_VERSION_HEX >= 0x030E0000 || (PY_VERSION_HEX >= 0x030C0000 \
                                    && PY_VERSION_HEX < 0x030D0000)
#  error "the tracing engine has no adapter for this base (3.11 and 3.13 only)"
#elif PY_VERSION_HEX >= 0x030D0000
#  include "tracemalloc_base313.h"
#else
#  include "tracemalloc_base311.h"
#endif

#endif /* !Py_TRACEMALLOC_BASE_H */
