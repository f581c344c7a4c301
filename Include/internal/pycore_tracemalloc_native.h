#ifndef Py_INTERNAL_TRACEMALLOC_NATIVE_H
#define Py_INTERNAL_TRACEMALLOC_NATIVE_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* Native memory: what code outside Python's allocator API
 * allocates, traced in a domain of its own.
 *
 *  file                              concern
 *  --------------------------------  -----------------------------------------
 *  Python/tracemalloc_native.c       the interposers of the C allocator
 *                                    family and of anonymous mmap (part of
 *                                    the engine's translation unit), the
 *                                    table of the functions they forward to
 *  Objects/obmalloc.c (patch 0001)   Python's own allocators (the raw
 *                                    domain's malloc, pymalloc's arenas,
 *                                    mimalloc's segments) call the
 *                                    forwarded-to functions directly: their
 *                                    memory is Python's, counted once
 *
 * Design and invariants: Doc/internals/tracemalloc-engine.rst, "Native
 * memory" (N1...).
 */

#include <stddef.h>
#include <sys/types.h>            // off_t

/* The native domain's number (tracemalloc.NATIVE_DOMAIN): "Nat" in
   ASCII, far from the small numbers and numpy's 389047. */
#define _PyTraceMalloc_NATIVE_DOMAIN 0x4e6174u

/* The functions the interposers forward to: the next definitions after
   the interpreter's (an LD_PRELOAD allocator's, else the C library's),
   found with dlsym(RTLD_NEXT).  Each starts as a resolver that fills the
   whole table on the first call, so that a call never tests for NULL. */
typedef struct {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    void *(*mremap)(void *, size_t, size_t, int, ...);
} _PyTraceMalloc_NativeFunctions;

PyAPI_DATA(_PyTraceMalloc_NativeFunctions) _PyTraceMalloc_native_next;
/* What the functions below call: native_next, or the process's own
   functions when they come before the interposers (malloc, calloc,
   realloc, free, posix_memalign, mmap and munmap only). */
PyAPI_DATA(_PyTraceMalloc_NativeFunctions) _PyTraceMalloc_native_untraced;

/* Python's own memory: never seen by the interposers (N2).  The raw
   domain's default allocator, pymalloc's arenas and mimalloc's segments
   call these instead of malloc()...  Functions, not macros: obmalloc.c
   renames mimalloc's mmap() calls to them. */
static inline void *
_PyTraceMalloc_UntracedMalloc(size_t size)
{
    return _PyTraceMalloc_native_untraced.malloc(size);
}

static inline void *
_PyTraceMalloc_UntracedCalloc(size_t nelem, size_t elsize)
{
    return _PyTraceMalloc_native_untraced.calloc(nelem, elsize);
}

static inline void *
_PyTraceMalloc_UntracedRealloc(void *ptr, size_t size)
{
    return _PyTraceMalloc_native_untraced.realloc(ptr, size);
}

static inline void
_PyTraceMalloc_UntracedFree(void *ptr)
{
    _PyTraceMalloc_native_untraced.free(ptr);
}

static inline void *
_PyTraceMalloc_UntracedMmap(void *addr, size_t len, int prot, int flags,
                            int fd, off_t off)
{
    return _PyTraceMalloc_native_untraced.mmap(addr, len, prot, flags, fd, off);
}

static inline int
_PyTraceMalloc_UntracedMunmap(void *addr, size_t len)
{
    return _PyTraceMalloc_native_untraced.munmap(addr, len);
}

/* Native tracing (Python/tracemalloc_native.c).  Start: tracing must be
   on; 0, or -1 with an exception set (the interposers are not this
   process's allocator: a shared libpython after an LD_PRELOAD allocator,
   or an embedding program that does not export them).  Stop: the
   native traces stay until stop() or clear_traces() of the whole
   engine.  */
extern int _PyTraceMalloc_StartNative(void);
extern void _PyTraceMalloc_StopNative(void);
extern int _PyTraceMalloc_IsTracingNative(void);
/* The native domain's traced bytes now and their peak. */
extern void _PyTraceMalloc_GetNativeTracedMemory(size_t *current,
                                                 size_t *peak);

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_TRACEMALLOC_NATIVE_H */
