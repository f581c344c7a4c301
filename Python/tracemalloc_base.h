#ifndef Py_TRACEMALLOC_BASE_H
#define Py_TRACEMALLOC_BASE_H

/* The adapter of the base being built: the one header that knows the
 * interpreter's frame, code object and thread-state fields (see
 * Doc/internals/tracemalloc-bases.rst).  The engine's other files include
 * this one, never a version's own, and carry no version conditionals.
 */

#if PY_VERSION_HEX >= 0x030E0000 || (PY_VERSION_HEX >= 0x030C0000 \
                                    && PY_VERSION_HEX < 0x030D0000)
#  error "the tracing engine has no adapter for this base (3.11 and 3.13 only)"
#elif PY_VERSION_HEX >= 0x030D0000
#  include "tracemalloc_base313.h"
#else
#  include "tracemalloc_base311.h"
#endif

#endif /* !Py_TRACEMALLOC_BASE_H */
