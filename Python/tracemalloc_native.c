/* Native memory: the interposers of the C allocator family and
 * of anonymous mmap(), and the native domain they trace into.
 *
 * The interpreter's executable defines malloc(), free() and the rest of
 * the family (and mmap(), munmap(), mremap()): linked with
 * -export-dynamic, as CPython links it, these definitions come first in
 * the process's symbol lookup, so every shared object's calls (the C
 * library's own strdup() or fopen(), libsqlite3, a C or C++ extension, a
 * Rust runtime) reach them.  Each forwards to the next definition,
 * _PyTraceMalloc_native_next (an LD_PRELOAD allocator's, else the C
 * library's).  Each interposer is one indirect jump through its entry in
 * native_entry: with native tracing off the entry is the next definition
 * (the jump replaces the one of the caller's PLT); on, it is the traced
 * function, and the block is traced in
 * _PyTraceMalloc_NATIVE_DOMAIN at the calling thread's Python position,
 * through the engine's current_node(), entering as any caller that may
 * not hold the GIL (I1).
 *
 * Python's own memory is never native (N2): the raw domain's allocator,
 * pymalloc's arenas and mimalloc's segments call the untraced table's
 * functions (_PyTraceMalloc_native_untraced: the next functions, or the
 * process's own when another object's come first; patch 0001), the
 * engine's own memory too, and whatever the
 * engine or a traced Python allocation does meanwhile is left alone by
 * native_untraced().  The rules are N1..N5 of
 * Doc/internals/tracemalloc-engine.rst, "Native memory".
 *
 * Part of the engine's translation unit (see tracemalloc_engine.h),
 * included last: it uses the hooks' untraced depth and the lock's
 * foreign-side flag.
 */

#include "pycore_tracemalloc_native.h"

#include <dlfcn.h>                // dlsym(RTLD_NEXT)
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>

/* The interposers are exported whatever -fvisibility says: the point is
   that other objects' calls resolve to them. */
#define NATIVE_EXPORT __attribute__((visibility("default"), used))

/* The interposers and the resolvers run before a sanitizer's runtime has
   set itself up (AddressSanitizer's interceptors call dlsym(), whose
   error path calls malloc(), before its shadow memory exists): they must
   not be instrumented.  The traced paths run only once tracing started,
   and are. */
#if defined(__GNUC__) || defined(__clang__)
#  define NATIVE_EARLY \
       __attribute__((no_sanitize("address", "thread", "undefined")))
#else
#  define NATIVE_EARLY
#endif

/* ThreadSanitizer instruments a function's entry with a write to the
   thread's state, which does not exist yet while its runtime starts a
   thread (and calls pthread_getattr_np(), which calls realloc(), below):
   in a TSan build the traced functions' entries and their untraced check
   are not instrumented; what they call once they trace is. */
#if defined(__SANITIZE_THREAD__)
#  define NATIVE_TSAN_BUILD 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define NATIVE_TSAN_BUILD 1
#  endif
#endif
#ifdef NATIVE_TSAN_BUILD
#  define NATIVE_TRACED __attribute__((no_sanitize("thread")))
#else
#  define NATIVE_TRACED
#endif

/* The traced paths and the interposers are in a section of their own, so
   that a capture of native frames (tracemalloc_nativeframes.c) drops the
   engine's frames at the top of the C stack. */
#define NATIVE_TEXT __attribute__((section("tm_native_text")))

/* ---- the functions forwarded to ----------------------------------------- */

/* Before the first call resolves the table, each entry is a resolver.
   dlsym() may allocate while it resolves (glibc's does not when the
   symbol exists, which it does for all of these): such a call, on the
   resolving thread, gets a block of a small static arena, never freed
   (N5). */
static void *resolve_malloc(size_t size);
static void *resolve_calloc(size_t nelem, size_t elsize);
static void *resolve_realloc(void *ptr, size_t size);
static void resolve_free(void *ptr);
static int resolve_posix_memalign(void **out, size_t align, size_t size);
static void *resolve_aligned_alloc(size_t align, size_t size);
static void *resolve_memalign(size_t align, size_t size);
static void *resolve_valloc(size_t size);
static void *resolve_pvalloc(size_t size);
static void *resolve_mmap(void *addr, size_t len, int prot, int flags,
                          int fd, off_t off);
static int resolve_munmap(void *addr, size_t len);
static void *resolve_mremap(void *old, size_t old_size, size_t new_size,
                            int flags, ...);

/* Every entry a resolver: the first call fills the table. */
#define NATIVE_RESOLVERS { \
    .malloc = resolve_malloc, \
    .calloc = resolve_calloc, \
    .realloc = resolve_realloc, \
    .free = resolve_free, \
    .posix_memalign = resolve_posix_memalign, \
    .aligned_alloc = resolve_aligned_alloc, \
    .memalign = resolve_memalign, \
    .valloc = resolve_valloc, \
    .pvalloc = resolve_pvalloc, \
    .mmap = resolve_mmap, \
    .munmap = resolve_munmap, \
    .mremap = resolve_mremap, \
}

_PyTraceMalloc_NativeFunctions _PyTraceMalloc_native_next = NATIVE_RESOLVERS;
#define native_next _PyTraceMalloc_native_next

/* What Python's own memory and the engine's call (N2): the functions the
   rest of the process calls when they are not the engine's interposers
   (a shared libpython after an LD_PRELOAD allocator), else native_next.
   Its own resolvers (untraced_resolve_*(), below) until the first call
   fills both tables. */
static void *untraced_resolve_malloc(size_t);
static void *untraced_resolve_calloc(size_t, size_t);
static void *untraced_resolve_realloc(void *, size_t);
static void untraced_resolve_free(void *);
static int untraced_resolve_posix_memalign(void **, size_t, size_t);
static void *untraced_resolve_mmap(void *, size_t, int, int, int, off_t);
static int untraced_resolve_munmap(void *, size_t);
_PyTraceMalloc_NativeFunctions _PyTraceMalloc_native_untraced = {
    .malloc = untraced_resolve_malloc,
    .calloc = untraced_resolve_calloc,
    .realloc = untraced_resolve_realloc,
    .free = untraced_resolve_free,
    .posix_memalign = untraced_resolve_posix_memalign,
    .mmap = untraced_resolve_mmap,
    .munmap = untraced_resolve_munmap,
};
#define native_untraced_fn _PyTraceMalloc_native_untraced

/* The interposers (defined below).  In position-independent code (a
   shared libpython), their address is the one this object's own calls
   are bound to: the process's first definition, ours or another's. */
void *native_entry_malloc(size_t) __asm__("malloc");
void *native_entry_calloc(size_t, size_t) __asm__("calloc");
void *native_entry_realloc(void *, size_t) __asm__("realloc");
void native_entry_free(void *) __asm__("free");
int native_entry_posix_memalign(void **, size_t, size_t)
    __asm__("posix_memalign");
void *native_entry_mmap(void *, size_t, int, int, int, off_t)
    __asm__("mmap");
int native_entry_munmap(void *, size_t) __asm__("munmap");

#define BOOT_ARENA_SIZE ((size_t)64 << 10)
static _Alignas(64) char boot_arena[BOOT_ARENA_SIZE];
static size_t boot_used;        /* atomic */
static uint64_t boot_blocks;    /* atomic: for the tests */

NATIVE_EARLY static void *
boot_alloc(size_t size)
{
    size_t need = (size + 15) & ~(size_t)15;
    size_t at = __atomic_fetch_add(&boot_used, need, __ATOMIC_RELAXED);
    if (at + need > BOOT_ARENA_SIZE) {
        return NULL;
    }
    __atomic_fetch_add(&boot_blocks, 1, __ATOMIC_RELAXED);
    return boot_arena + at;     /* zeroed: the arena is static */
}

NATIVE_EARLY static inline int
boot_owns(const void *ptr)
{
    return (uintptr_t)ptr - (uintptr_t)boot_arena < BOOT_ARENA_SIZE;
}

static void native_switch(int on);

/* Whether the process's own definition of one of the functions of the
   untraced table comes before the interposers' (a wrapper of mmap()
   alone): native tracing is then refused (N1), since Python's memory
   would go through the wrapper to the interposers. */
static int native_foreign_first;

/* 0: not resolved, 1: a thread is resolving, 2: resolved. */
static int resolve_state;
static pthread_t resolve_thread;

/* Whether FUNCTION is defined in the object that holds this file: the
   executable, or a shared libpython (--enable-shared).  A comparison with
   the interposers' own addresses would not do: in position-independent
   code, the address of an exported function is its first definition in
   the process, whoever defines it. */
NATIVE_EARLY static int
native_defined_here(void *function)
{
    Dl_info there, here;
    return (function != NULL
            && dladdr(function, &there) != 0
            && dladdr((void *)native_defined_here, &here) != 0
            && there.dli_fbase == here.dli_fbase);
}

/* Fill the table; 1 when it is filled, 0 when the calling thread is the
   one resolving it (a call from inside dlsym()).  Two tables: the
   interposers forward to the next definition after ours (native_next;
   a wrapper before a shared libpython that forwards with RTLD_NEXT
   reaches them, and they must go on past it).  Python's own memory (N2)
   must come from what the rest of the process calls: the next
   definition when ours is the first (the default build), else the
   process's own (native_untraced_fn; a shared libpython after an
   LD_PRELOAD allocator, where the C library's would be another heap), and
   native tracing is then not available (N1). */
NATIVE_EARLY static int
native_resolve(void)
{
    int state = __atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE);
    if (state == 2) {
        return 1;
    }
    int expected = 0;
    if (__atomic_compare_exchange_n(&resolve_state, &expected, 1, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        resolve_thread = pthread_self();
        _PyTraceMalloc_NativeFunctions t;
#define NEXT(name, fallback) \
        do { \
            void *f = dlsym(RTLD_NEXT, #name); \
            memcpy(&t.name, f != NULL ? &f : &(void *){(void *)(fallback)}, \
                   sizeof(void *)); \
        } while (0)
        /* Without a next definition of one of these (an old C library),
           its entry fails cleanly: NULL, ENOMEM. */
        NEXT(malloc, NULL);
        NEXT(calloc, NULL);
        NEXT(realloc, NULL);
        NEXT(free, NULL);
        NEXT(posix_memalign, NULL);
        NEXT(aligned_alloc, NULL);
        NEXT(memalign, NULL);
        NEXT(valloc, NULL);
        NEXT(pvalloc, NULL);
        NEXT(mmap, NULL);
        NEXT(munmap, NULL);
        NEXT(mremap, NULL);
#undef NEXT
        if (t.malloc == NULL || t.calloc == NULL || t.realloc == NULL
            || t.free == NULL || t.mmap == NULL || t.munmap == NULL) {
            /* No C library behind us: nothing can work. */
            static const char msg[] =
                "Fatal Python error: tracemalloc: no next malloc(), "
                "free() or mmap() after the interpreter's\n";
            (void)!write(2, msg, sizeof(msg) - 1);
            abort();
        }
        if (t.posix_memalign == NULL) {
            t.posix_memalign = resolve_posix_memalign;
        }
        /* Python's own memory: the process's function when another
           object's comes first.  The one this object is bound to (it
           sees hidden-versioned definitions, which dlsym() skips), else
           what dlsym() finds first. */
        _PyTraceMalloc_NativeFunctions u = t;
#define FIRST(name) \
        do { \
            void *bound = (void *)native_entry_##name; \
            void *found = dlsym(RTLD_DEFAULT, #name); \
            void *f = bound != NULL && !native_defined_here(bound) ? bound \
                : found != NULL && !native_defined_here(found) ? found \
                : NULL; \
            if (f != NULL) { \
                memcpy(&u.name, &f, sizeof(void *)); \
                native_foreign_first = 1; \
            } \
        } while (0)
        FIRST(malloc);
        FIRST(calloc);
        FIRST(realloc);
        FIRST(free);
        FIRST(posix_memalign);
        FIRST(mmap);
        FIRST(munmap);
#undef FIRST
        /* An optional function without a next definition keeps its
           resolver as its entry, which fails cleanly. */
        native_next = t;
        native_untraced_fn = u;
        native_switch(0);
        __atomic_store_n(&resolve_state, 2, __ATOMIC_RELEASE);
        return 1;
    }
    if (expected == 1 && pthread_equal(resolve_thread, pthread_self())) {
        return 0;
    }
    while (__atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) != 2) {
        sched_yield();
    }
    return 1;
}

NATIVE_EARLY static void *
resolve_malloc(size_t size)
{
    return native_resolve() ? native_next.malloc(size) : boot_alloc(size);
}

NATIVE_EARLY static void *
resolve_calloc(size_t nelem, size_t elsize)
{
    if (!native_resolve()) {
        if (elsize && nelem > SIZE_MAX / elsize) {
            return NULL;
        }
        return boot_alloc(nelem * elsize);
    }
    return native_next.calloc(nelem, elsize);
}

NATIVE_EARLY static void *
resolve_realloc(void *ptr, size_t size)
{
    if (!native_resolve()) {
        /* The old size is unknown: copy what the arena holds after it. */
        void *p = boot_alloc(size);
        if (p != NULL && ptr != NULL) {
            size_t room = boot_owns(ptr)
                ? BOOT_ARENA_SIZE - ((char *)ptr - boot_arena) : size;
            memcpy(p, ptr, size < room ? size : room);
        }
        return p;
    }
    return native_next.realloc(ptr, size);
}

NATIVE_EARLY static void
resolve_free(void *ptr)
{
    if (boot_owns(ptr)) {
        return;
    }
    if (native_resolve()) {
        native_next.free(ptr);
    }
}

NATIVE_EARLY static int
resolve_posix_memalign(void **out, size_t align, size_t size)
{
    if (native_resolve() && native_next.posix_memalign
                            != resolve_posix_memalign) {
        return native_next.posix_memalign(out, align, size);
    }
    if (align < sizeof(void *) || (align & (align - 1)) != 0) {
        return EINVAL;
    }
    void *p = native_next.memalign ? native_next.memalign(align, size) : NULL;
    if (p == NULL) {
        return ENOMEM;
    }
    *out = p;
    return 0;
}

#define RESOLVE_OR_FAIL(name, ...) \
    do { \
        if (!native_resolve() || native_next.name == NULL) { \
            errno = ENOMEM; \
            return NULL; \
        } \
        return native_next.name(__VA_ARGS__); \
    } while (0)

NATIVE_EARLY static void *
resolve_aligned_alloc(size_t align, size_t size)
{
    RESOLVE_OR_FAIL(aligned_alloc, align, size);
}

NATIVE_EARLY static void *
resolve_memalign(size_t align, size_t size)
{
    RESOLVE_OR_FAIL(memalign, align, size);
}

NATIVE_EARLY static void *
resolve_valloc(size_t size)
{
    RESOLVE_OR_FAIL(valloc, size);
}

NATIVE_EARLY static void *
resolve_pvalloc(size_t size)
{
    RESOLVE_OR_FAIL(pvalloc, size);
}

NATIVE_EARLY static void *
resolve_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (!native_resolve()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return native_next.mmap(addr, len, prot, flags, fd, off);
}

NATIVE_EARLY static int
resolve_munmap(void *addr, size_t len)
{
    if (!native_resolve()) {
        errno = EINVAL;
        return -1;
    }
    return native_next.munmap(addr, len);
}

/* The untraced table's resolvers: before the first call filled it, the
   same early answers as the interposers' resolvers. */
NATIVE_EARLY static void *
untraced_resolve_malloc(size_t size)
{
    return native_resolve() ? native_untraced_fn.malloc(size)
                            : boot_alloc(size);
}

NATIVE_EARLY static void *
untraced_resolve_calloc(size_t nelem, size_t elsize)
{
    return native_resolve() ? native_untraced_fn.calloc(nelem, elsize)
                            : resolve_calloc(nelem, elsize);
}

NATIVE_EARLY static void *
untraced_resolve_realloc(void *ptr, size_t size)
{
    return native_resolve() ? native_untraced_fn.realloc(ptr, size)
                            : resolve_realloc(ptr, size);
}

NATIVE_EARLY static void
untraced_resolve_free(void *ptr)
{
    if (!boot_owns(ptr) && native_resolve()) {
        native_untraced_fn.free(ptr);
    }
}

NATIVE_EARLY static int
untraced_resolve_posix_memalign(void **out, size_t align, size_t size)
{
    return native_resolve() ? native_untraced_fn.posix_memalign(out, align,
                                                                size)
                            : resolve_posix_memalign(out, align, size);
}

NATIVE_EARLY static void *
untraced_resolve_mmap(void *addr, size_t len, int prot, int flags, int fd,
                      off_t off)
{
    return native_resolve() ? native_untraced_fn.mmap(addr, len, prot, flags,
                                                      fd, off)
                            : resolve_mmap(addr, len, prot, flags, fd, off);
}

NATIVE_EARLY static int
untraced_resolve_munmap(void *addr, size_t len)
{
    return native_resolve() ? native_untraced_fn.munmap(addr, len)
                            : resolve_munmap(addr, len);
}

NATIVE_EARLY static void *
resolve_mremap(void *old, size_t old_size, size_t new_size, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    void *new_address = va_arg(ap, void *);
    va_end(ap);
    if (!native_resolve() || native_next.mremap == NULL) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return native_next.mremap(old, old_size, new_size, flags, new_address);
}

/* ---- state -------------------------------------------------------------- */

/* 1 while native tracing is on (and the interposers' entries point at
   the traced functions).  Written under the engine lock and read inside
   it by the traced paths, which a thread may have entered just before a
   stop. */
static int native_on;

/* This thread is inside an interposer's traced path (N3): whatever the
   engine, the C library or an LD_PRELOAD allocator allocates meanwhile
   is not the caller's block. */
static _Thread_local int native_depth _PyTraceMalloc_TLS_IE;

/* Native tracing was asked for at startup (-X tracemalloc_native,
   PYTHONTRACEMALLOCNATIVE). */
static int startup_native;
/* ... with native frames (=frames: of native traces; =frames-all: of
   every trace): the mode for _PyTraceMalloc_SetNativeFrames(). */
static int startup_native_frames;

/* Is an interposed call now none of the program's own (N3)?  This
   thread is inside an interposer already, or inside a traced Python
   allocation (the hooks raise tm_untraced_depth around the allocator, and
   the exports around their work), or inside the engine: without the GIL
   the lock's foreign side says so; the GIL holder is inside exactly while
   the GIL side's flag is up, which only it raises. */
NATIVE_TRACED static inline int
native_untraced(void)
{
    if (native_depth || tm_untraced_depth || tm_foreign_inside) {
        return 1;
    }
    return atomic_load_explicit(&_PyTraceMalloc_gil_busy,
                                memory_order_relaxed)
           && _PyTraceMalloc_HoldsGIL();
}

/* ---- the traced paths ---------------------------------------------------- */

/* The node of the calling thread's position, inside the engine: its
   Python frames, or its thread's root when it runs none (a thread that
   never had a thread state included). */
static inline _PyTraceMalloc_Node
native_node(PyThreadState *tstate)
{
    compact_if_due();
    if (tstate != NULL) {
        return current_node(tstate);
    }
    int nomem = 0;
    _PyTraceMalloc_Node root = thread_root(NULL, &nomem);
    return nomem ? UINT32_MAX : root;
}



/* The node of the calling thread's position, with the C stack captured
   in STACK (none: STACK->n is 0) below its Python frames; UINT32_MAX
   when the engine has no memory for it.  Inside the engine. */
static _PyTraceMalloc_Node
native_position(PyThreadState *tstate, nf_stack *stack)
{
    _PyTraceMalloc_Node node = native_node(tstate);
    if (node != UINT32_MAX && stack->n) {
        node = nf_intern_stack(tstate, node, stack);
    }
    return node;
}

/* Trace PTR (SIZE bytes) at NODE, or at the current position when NODE is
   UINT32_MAX.  A block that cannot be traced for want of engine memory
   stays untraced: a C library is not told of the tracer's failures
   (N4). */
Py_NO_INLINE NATIVE_TEXT static void
native_add(void *ptr, size_t size, _PyTraceMalloc_Node node)
{
    native_depth++;
    /* Native frames: the C stack is captured before the engine lock is
       taken (NF1). */
    nf_stack stack;
    stack.n = 0;
    if (node == UINT32_MAX
        && __atomic_load_n(&nf_mode, __ATOMIC_RELAXED)) {
        nf_capture(&stack);
    }
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    if (native_on && _PyTraceMalloc_TRACING()) {
        if (node == UINT32_MAX) {
            node = native_position(tstate, &stack);
        }
        if (node != UINT32_MAX) {
            (void)store_add_table(_PyTraceMalloc_NATIVE_DOMAIN,
                                  (uintptr_t)ptr, size, node);
        }
    }
    engine_leave(side);
    native_depth--;
}

/* A new block of SIZE bytes at PTR: traced if sampled (sampling mode's
   countdown is the thread's, shared with the Python domains). */
static inline void
native_new_block(void *ptr, size_t size)
{
    if (sample_interval() && !sample_take(size)) {
        return;
    }
    native_add(ptr, size, UINT32_MAX);
}

/* Take PTR's trace out before the block goes back: 1 with its node, size
   and the generation it belongs to, 0 when it has none. */
Py_NO_INLINE static int
native_remove(void *ptr, _PyTraceMalloc_Node *node, size_t *size,
              uint32_t *generation)
{
    if (!sample_filter_hit(ptr)) {
        return 0;       /* sampling mode: certainly not a sample */
    }
    native_depth++;
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    int found = 0;
    if (_PyTraceMalloc_TRACING()) {
        *generation = tm.generation;
        found = store_remove_table(_PyTraceMalloc_NATIVE_DOMAIN,
                                   (uintptr_t)ptr, node, size);
    }
    engine_leave(side);
    native_depth--;
    return found;
}

/* Put back a trace that native_remove() took out, when the block turns
   out to live on (a failed realloc() or munmap()): not if the traces were
   cleared or the tree compacted meanwhile (its node would mean another
   path). */
static void
native_put_back(void *ptr, size_t size, _PyTraceMalloc_Node node,
                uint32_t generation)
{
    native_depth++;
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    if (native_on && _PyTraceMalloc_TRACING()
        && tm.generation == generation
        && store_add_table(_PyTraceMalloc_NATIVE_DOMAIN, (uintptr_t)ptr,
                           size, node) == 0) {
        /* The same block: not an allocation again. */
        peak_account_unalloc(_PyTraceMalloc_NATIVE_DOMAIN, node, size);
    }
    engine_leave(side);
    native_depth--;
}

/* The forwarded call of a traced path: whatever it allocates for itself
   (an LD_PRELOAD allocator's own mmap()) is not the caller's.  Only as a
   variable's initializer (T x = NATIVE_FORWARD(...);): it expands to two
   statements. */
#define NATIVE_FORWARD(call) \
    (native_depth++, (call)); native_depth--

/* start(native=True) checks that a malloc() of the process reaches
   native_malloc() (native_probe()). */
static int native_probing;              /* atomic */
static unsigned long native_probe_hits; /* atomic */

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_malloc(size_t size)
{
    if (__atomic_load_n(&native_probing, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&native_probe_hits, 1, __ATOMIC_RELAXED);
    }
    if (native_untraced()) {
        return native_next.malloc(size);
    }
    void *ptr = NATIVE_FORWARD(native_next.malloc(size));
    if (ptr != NULL) {
        native_new_block(ptr, size);
    }
    return ptr;
}

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_calloc(size_t nelem, size_t elsize)
{
    if (native_untraced()) {
        return native_next.calloc(nelem, elsize);
    }
    void *ptr = NATIVE_FORWARD(native_next.calloc(nelem, elsize));
    if (ptr != NULL) {
        native_new_block(ptr, nelem * elsize);  /* no overflow: it succeeded */
    }
    return ptr;
}

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void
native_free(void *ptr)
{
    if (ptr != NULL && !native_untraced()) {
        _PyTraceMalloc_Node node;
        size_t size;
        uint32_t generation;
        (void)native_remove(ptr, &node, &size, &generation);
    }
    native_next.free(ptr);
}

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_realloc(void *ptr, size_t size)
{
    if (native_untraced()) {
        return native_next.realloc(ptr, size);
    }
    /* The old trace goes first: once the block has moved, another thread
       may get its address. */
    _PyTraceMalloc_Node node = 0;
    size_t old_size = 0;
    uint32_t generation = 0;
    int had = ptr != NULL && native_remove(ptr, &node, &old_size,
                                           &generation);
    void *ptr2 = NATIVE_FORWARD(native_next.realloc(ptr, size));
    if (ptr2 != NULL) {
        /* The resized block is a new allocation at the current position,
           as the Python domains' realloc. */
        native_new_block(ptr2, size);
    }
    else if (had && !(size == 0 && ptr != NULL)) {
        /* Failed: the old block lives on.  (realloc(ptr, 0) freed it.) */
        native_put_back(ptr, old_size, node, generation);
    }
    return ptr2;
}

/* An aligned allocation's result PTR (NULL: failed) of SIZE bytes. */
static inline void *
native_aligned_result(void *ptr, size_t size)
{
    if (ptr != NULL) {
        native_new_block(ptr, size);
    }
    return ptr;
}

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static int
native_posix_memalign(void **out, size_t align, size_t size)
{
    if (native_untraced()) {
        return native_next.posix_memalign(out, align, size);
    }
    int res = NATIVE_FORWARD(native_next.posix_memalign(out, align, size));
    if (res == 0) {
        native_new_block(*out, size);
    }
    return res;
}

/* The rest of the family, rare: the same shape.  Installed only when the
   next definition exists (see native_switch()). */
#define NATIVE_ALIGNED(call, size) \
    do { \
        if (native_untraced()) { \
            return call; \
        } \
        void *ptr_ = NATIVE_FORWARD(call); \
        return native_aligned_result(ptr_, (size)); \
    } while (0)

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_aligned_alloc(size_t align, size_t size)
{
    NATIVE_ALIGNED(native_next.aligned_alloc(align, size), size);
}

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_memalign(size_t align, size_t size)
{
    NATIVE_ALIGNED(native_next.memalign(align, size), size);
}

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_valloc(size_t size)
{
    NATIVE_ALIGNED(native_next.valloc(size), size);
}

Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_pvalloc(size_t size)
{
    NATIVE_ALIGNED(native_next.pvalloc(size), size);
}

/* ---- the mappings ---------------------------------------------------------- */

/* Every anonymous mapping made while native tracing is on, traced or not
   (sampling mode traces a sample of them), ordered by start (N6):
   munmap(), mremap() and mmap(MAP_FIXED) of a range find every mapping it
   cuts, whatever their starts, and each piece left keeps a trace of its
   own size.  A mapping's trace is keyed by its start; the index knows
   which mappings have one.  Under the engine lock; the count is also read
   without it, so that a munmap() when there is none costs no lock.  At
   most one entry per live mapping of the process (the kernel's
   vm.max_map_count, 65530 by default, bounds it). */
typedef struct {
    uintptr_t start;
    size_t size;
    int traced;         /* its trace is in the native domain at start */
} native_mapping;

static struct {
    native_mapping *items;
    size_t len;         /* atomic: read without the lock */
    size_t cap;
} maps;

/* A trace taken out of a mapping before a call that may fail (mremap):
   put back if it does. */
typedef struct {
    uintptr_t start;
    size_t size;
    _PyTraceMalloc_Node node;
} native_taken;

#define NATIVE_TAKEN_MAX 4

/* Forget every mapping: the traces were cleared with the store (stop(),
   clear_traces()), or native tracing stopped (munmap() goes unseen from
   now on).  Under the engine lock. */
static void
native_maps_clear(void)
{
    _PyTraceMalloc_UntracedFree(maps.items);
    maps.items = NULL;
    maps.cap = 0;
    __atomic_store_n(&maps.len, 0, __ATOMIC_RELAXED);
}

static size_t
native_maps_memory(void)
{
    return maps.cap * sizeof(native_mapping);
}

/* The index of the first mapping that ends past ADDR. */
static size_t
maps_first_past(uintptr_t addr)
{
    size_t lo = 0, hi = maps.len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (maps.items[mid].start + maps.items[mid].size <= addr) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo;
}

/* Insert a mapping (which overlaps none: maps_cut() ran first) whose
   trace, if TRACED, is in the native domain at START.  When the engine has
   no memory for the entry, the mapping stays untraced (N4): its trace
   goes. */
static void
maps_insert(uintptr_t start, size_t size, int traced)
{
    if (maps.len == maps.cap) {
        size_t cap = maps.cap ? maps.cap * 2 : 64;
        native_mapping *items = _PyTraceMalloc_RawAlloc(
            cap * sizeof(native_mapping), 0);
        if (items == NULL) {
            if (traced) {
                _PyTraceMalloc_Node node;
                size_t sz;
                (void)store_remove_table(_PyTraceMalloc_NATIVE_DOMAIN, start,
                                         &node, &sz);
            }
            return;
        }
        if (maps.len) {
            memcpy(items, maps.items, maps.len * sizeof(native_mapping));
        }
        _PyTraceMalloc_UntracedFree(maps.items);
        maps.items = items;
        maps.cap = cap;
    }
    size_t i = maps_first_past(start);
    memmove(&maps.items[i + 1], &maps.items[i],
            (maps.len - i) * sizeof(native_mapping));
    maps.items[i] = (native_mapping){start, size, traced};
    __atomic_store_n(&maps.len, maps.len + 1, __ATOMIC_RELAXED);
}

/* Sampling mode: does a piece of PIECE bytes, left of a sampled mapping
   of SIZE bytes, keep its trace?  With probability p(PIECE) / p(SIZE), so
   that each piece is in the sample with probability p(PIECE), as a new
   mapping of its size would be, and its estimate (weighted by its own
   size) stays unbiased.  Exact mode: always. */
static int
maps_keep(size_t piece, size_t size)
{
    uint64_t interval = tm.sample.interval;
    if (interval == 0 || piece >= size) {
        return 1;
    }
    double keep = expm1(-(double)piece / (double)interval)
                  / expm1(-(double)size / (double)interval);
    double u = (double)(splitmix64(&sample_rng) >> 11) / 9007199254740992.0;
    return u < keep;
}

/* A piece of PAGES bytes at START left of a mapping whose trace (if
   TRACED) was of WHOLE bytes at NODE, REQ of them in the piece (traced
   sizes are the sizes asked for, not rounded to pages): traced if kept,
   as the same memory (not an allocation); indexed either way. */
static void
maps_piece(uintptr_t start, size_t pages, int traced, size_t req,
           size_t whole, _PyTraceMalloc_Node node)
{
    traced = traced && req != 0 && maps_keep(req, whole)
             && store_add_table(_PyTraceMalloc_NATIVE_DOMAIN, start, req,
                                node) == 0;
    if (traced) {
        peak_account_unalloc(_PyTraceMalloc_NATIVE_DOMAIN, node, req);
    }
    maps_insert(start, pages, traced);
}

/* The pages [ADDR, ADDR + LEN) go (munmap(), mremap(), mmap(MAP_FIXED)),
   LEN already rounded up to pages: each mapping they cut loses its trace
   and its entry, and the pieces left before and after them get their own.
   A trace that TAKEN (N entries) holds was taken out before the call.
   Under the engine lock. */
static void
maps_cut(uintptr_t addr, size_t len, const native_taken *taken, int n)
{
    uintptr_t end = addr + len;
    size_t i = maps_first_past(addr);
    while (i < maps.len && maps.items[i].start < end) {
        native_mapping m = maps.items[i];
        memmove(&maps.items[i], &maps.items[i + 1],
                (maps.len - i - 1) * sizeof(native_mapping));
        __atomic_store_n(&maps.len, maps.len - 1, __ATOMIC_RELAXED);
        _PyTraceMalloc_Node node = 0;
        size_t size = 0;
        int traced = 0;
        if (m.traced) {
            traced = store_remove_table(_PyTraceMalloc_NATIVE_DOMAIN,
                                        m.start, &node, &size);
            for (int k = 0; !traced && k < n; k++) {
                if (taken[k].start == m.start) {
                    node = taken[k].node;
                    size = taken[k].size;
                    traced = 1;
                }
            }
        }
        uintptr_t m_end = m.start + m.size;
        uintptr_t req_end = m.start + size;     /* end of what was asked */
        if (m.start < addr) {
            size_t req = (req_end < addr ? req_end : addr) - m.start;
            maps_piece(m.start, addr - m.start, traced, req, size, node);
        }
        if (end < m_end) {
            size_t req = req_end > end ? req_end - end : 0;
            maps_piece(end, m_end - end, traced, req, size, node);
        }
        /* The next mapping cut: a piece before ADDR ends at it, one after
           starts at END. */
        i = maps_first_past(addr);
    }
}

static inline size_t
native_pages(size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (len + page - 1) & ~(page - 1);
}

/* A new mapping [START, START + LEN), under the engine lock: indexed, and
   traced at the thread's position (with STACK's C frames) if TAKE (exact
   mode, or sampled).  What it overlaps in the index is gone: pages it
   replaced (MAP_FIXED, MREMAP_FIXED), or unmapped unseen (a raw system
   call). */
static void
maps_new(uintptr_t start, size_t len, int take, PyThreadState *tstate,
         nf_stack *stack)
{
    maps_cut(start, native_pages(len), NULL, 0);
    int traced = 0;
    if (take) {
        _PyTraceMalloc_Node node = native_position(tstate, stack);
        traced = node != UINT32_MAX
                 && store_add_table(_PyTraceMalloc_NATIVE_DOMAIN, start, len,
                                    node) == 0;
    }
    maps_insert(start, native_pages(len), traced);
}

/* A new mapping [PTR, PTR + LEN) made by mmap(): maps_new(). */
Py_NO_INLINE NATIVE_TEXT static void
native_map_add(void *ptr, size_t len, int take)
{
    native_depth++;
    nf_stack stack;
    stack.n = 0;
    if (take && __atomic_load_n(&nf_mode, __ATOMIC_RELAXED)) {
        nf_capture(&stack);     /* before the lock (NF1) */
    }
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    if (native_on && _PyTraceMalloc_TRACING()) {
        maps_new((uintptr_t)ptr, len, take, tstate, &stack);
    }
    engine_leave(side);
    native_depth--;
}

/* The pages [ADDR, ADDR + LEN) went (mmap(MAP_FIXED) over them, or
   mremap() onto them): the mappings they cut lose them.  After the call:
   the range is the caller's now, no other thread can map it meanwhile. */
NATIVE_TEXT static void
native_pages_replaced(void *addr, size_t len)
{
    if (len == 0 || __atomic_load_n(&maps.len, __ATOMIC_RELAXED) == 0) {
        return;
    }
    native_depth++;
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    if (_PyTraceMalloc_TRACING()) {
        maps_cut((uintptr_t)addr, native_pages(len), NULL, 0);
    }
    engine_leave(side);
    native_depth--;
}

/* Only anonymous mappings are traced: a file's mapping is the file's
   memory (the page cache), not an allocation; nor is a reservation of
   address space (PROT_NONE: no page of it can be touched).  MAP_FIXED
   replaces what was mapped there: cut once the call succeeded (a refused
   call changes nothing). */
Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (native_untraced()) {
        return native_next.mmap(addr, len, prot, flags, fd, off);
    }
    void *ptr = NATIVE_FORWARD(native_next.mmap(addr, len, prot, flags, fd,
                                                off));
    if (ptr == MAP_FAILED) {
        return ptr;
    }
    if ((flags & MAP_ANONYMOUS) && prot != PROT_NONE) {
        /* It cuts what it overlaps. */
        native_map_add(ptr, len, !sample_interval() || sample_take(len));
    }
    else if (flags & MAP_FIXED) {
        native_pages_replaced(ptr, len);
    }
    return ptr;
}

/* munmap() runs inside the engine lock when mappings are indexed: the
   pages are cut only if it succeeded (a refused call unmaps nothing), and
   no other thread can trace a mapping of the freed pages before the cut
   (its trace waits for the lock).  munmap() allocates nothing. */
Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static int
native_munmap(void *addr, size_t len)
{
    if (native_untraced()
        || __atomic_load_n(&maps.len, __ATOMIC_RELAXED) == 0) {
        return native_next.munmap(addr, len);
    }
    native_depth++;
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    int res = native_next.munmap(addr, len);
    int saved = errno;
    if (res == 0 && len != 0 && _PyTraceMalloc_TRACING()) {
        maps_cut((uintptr_t)addr, native_pages(len), NULL, 0);
    }
    engine_leave(side);
    native_depth--;
    errno = saved;
    return res;
}

#ifndef MREMAP_DONTUNMAP
#  define MREMAP_DONTUNMAP 4
#endif

/* mremap() of an indexed mapping (or of part of one): a new mapping at
   the current position (as realloc()), sampled afresh; what is left of
   the old one keeps its trace.  A mapping made before native tracing
   started, or a file's, stays unseen.  The old traces go before the call
   (once the pages moved, another thread may map the old addresses) and
   come back if it fails. */
Py_NO_INLINE NATIVE_TEXT NATIVE_TRACED static void *
native_mremap(void *old, size_t old_size, size_t new_size, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    void *new_address = va_arg(ap, void *);
    va_end(ap);
    if (native_untraced()
        || __atomic_load_n(&maps.len, __ATOMIC_RELAXED) == 0) {
        return native_next.mremap(old, old_size, new_size, flags,
                                  new_address);
    }
    uintptr_t start = (uintptr_t)old;
    size_t len = native_pages(old_size);
    native_taken taken[NATIVE_TAKEN_MAX];
    int n = 0;
    native_depth++;
    PyThreadState *tstate;
    int side = engine_enter(0, &tstate);
    int indexed = 0;
    if (_PyTraceMalloc_TRACING() && len != 0) {
        for (size_t i = maps_first_past(start);
             i < maps.len && maps.items[i].start < start + len; i++) {
            indexed = 1;
            if (maps.items[i].traced && n < NATIVE_TAKEN_MAX
                && store_remove_table(_PyTraceMalloc_NATIVE_DOMAIN,
                                      maps.items[i].start, &taken[n].node,
                                      &taken[n].size)) {
                taken[n].start = maps.items[i].start;
                n++;
            }
        }
    }
    engine_leave(side);
    native_depth--;
    void *ptr = NATIVE_FORWARD(native_next.mremap(old, old_size, new_size,
                                                  flags, new_address));
    int saved = errno;
    if (!indexed) {
        if (ptr != MAP_FAILED) {
            /* MREMAP_FIXED onto traced pages replaces them. */
            native_pages_replaced(ptr, new_size);
        }
        errno = saved;
        return ptr;
    }
    int take = ptr != MAP_FAILED
               && (!sample_interval() || sample_take(new_size));
    native_depth++;
    nf_stack stack;
    stack.n = 0;
    if (take && __atomic_load_n(&nf_mode, __ATOMIC_RELAXED)) {
        nf_capture(&stack);     /* before the lock (NF1) */
    }
    side = engine_enter(0, &tstate);
    if (ptr == MAP_FAILED || (flags & MREMAP_DONTUNMAP)) {
        /* Nothing moved, or the old pages stay mapped (MREMAP_DONTUNMAP):
           the traces go back, as the same memory. */
        for (int k = 0; k < n; k++) {
            if (_PyTraceMalloc_TRACING()
                && store_add_table(_PyTraceMalloc_NATIVE_DOMAIN,
                                   taken[k].start, taken[k].size,
                                   taken[k].node) == 0) {
                peak_account_unalloc(_PyTraceMalloc_NATIVE_DOMAIN,
                                     taken[k].node, taken[k].size);
            }
        }
    }
    if (ptr != MAP_FAILED && native_on && _PyTraceMalloc_TRACING()) {
        if (!(flags & MREMAP_DONTUNMAP)) {
            maps_cut(start, len, taken, n);
        }
        /* It cuts what it lands on (MREMAP_FIXED onto traced pages). */
        maps_new((uintptr_t)ptr, new_size, take, tstate, &stack);
    }
    engine_leave(side);
    native_depth--;
    errno = saved;
    return ptr;
}

/* ---- the interposers ------------------------------------------------------ */

/* Where each interposer goes: the next definitions while native tracing
   is off (after the resolvers, until the first call resolves them), the
   traced functions above while it is on.  An interposer is one indirect
   jump through its entry: tracing off costs that jump, no test
   (native_switch() changes the entries).  Written under the engine lock;
   read by every interposer without it, with a plain load (relaxed under
   ThreadSanitizer): a thread that took the old entry a moment before a
   switch is harmless either way, as the traced functions check native_on
   inside the lock. */
static _PyTraceMalloc_NativeFunctions native_entry = NATIVE_RESOLVERS;

#ifdef _PyTraceMalloc_ATOMIC_READS
#  define NATIVE_GO(name) __atomic_load_n(&native_entry.name, __ATOMIC_RELAXED)
#else
#  define NATIVE_GO(name) (native_entry.name)
#endif

/* Point the entries at the traced functions (ON) or at the next
   definitions; an optional function without a next definition keeps its
   resolver, which fails cleanly.  Under the engine lock, or while the
   first call resolves the table (before any thread can trace). */
NATIVE_EARLY static void
native_switch(int on)
{
#define SET(name, traced) \
    __atomic_store_n(&native_entry.name, \
                     native_next.name == NULL ? native_entry.name \
                     : on ? (traced) : native_next.name, __ATOMIC_RELAXED)
    SET(malloc, native_malloc);
    SET(calloc, native_calloc);
    SET(realloc, native_realloc);
    SET(free, native_free);
    SET(posix_memalign, native_posix_memalign);
    SET(aligned_alloc, native_aligned_alloc);
    SET(memalign, native_memalign);
    SET(valloc, native_valloc);
    SET(pvalloc, native_pvalloc);
    SET(mmap, native_mmap);
    SET(munmap, native_munmap);
    SET(mremap, native_mremap);
#undef SET
}

/* The interposers proper.  Their symbol names are given explicitly: the
   C library's headers may rename mmap() (to mmap64, with
   _FILE_OFFSET_BITS=64), and the C names must not be the builtins' the
   compiler knows. */
#define NATIVE_ENTRY(ret, cname, symbol, params) \
    NATIVE_EXPORT NATIVE_EARLY NATIVE_TEXT ret cname params __asm__(symbol); \
    NATIVE_EXPORT NATIVE_EARLY NATIVE_TEXT ret cname params

NATIVE_ENTRY(void *, native_entry_malloc, "malloc", (size_t size))
{
    return NATIVE_GO(malloc)(size);
}

NATIVE_ENTRY(void *, native_entry_calloc, "calloc",
             (size_t nelem, size_t elsize))
{
    return NATIVE_GO(calloc)(nelem, elsize);
}

NATIVE_ENTRY(void *, native_entry_realloc, "realloc",
             (void *ptr, size_t size))
{
    return NATIVE_GO(realloc)(ptr, size);
}

NATIVE_ENTRY(void, native_entry_free, "free", (void *ptr))
{
    NATIVE_GO(free)(ptr);
}

NATIVE_ENTRY(void *, native_entry_reallocarray, "reallocarray",
             (void *ptr, size_t nelem, size_t elsize))
{
    if (elsize != 0 && nelem > SIZE_MAX / elsize) {
        errno = ENOMEM;
        return NULL;
    }
    return NATIVE_GO(realloc)(ptr, nelem * elsize);
}

NATIVE_ENTRY(int, native_entry_posix_memalign, "posix_memalign",
             (void **out, size_t align, size_t size))
{
    return NATIVE_GO(posix_memalign)(out, align, size);
}

NATIVE_ENTRY(void *, native_entry_aligned_alloc, "aligned_alloc",
             (size_t align, size_t size))
{
    return NATIVE_GO(aligned_alloc)(align, size);
}

NATIVE_ENTRY(void *, native_entry_memalign, "memalign",
             (size_t align, size_t size))
{
    return NATIVE_GO(memalign)(align, size);
}

NATIVE_ENTRY(void *, native_entry_valloc, "valloc", (size_t size))
{
    return NATIVE_GO(valloc)(size);
}

NATIVE_ENTRY(void *, native_entry_pvalloc, "pvalloc", (size_t size))
{
    return NATIVE_GO(pvalloc)(size);
}

NATIVE_ENTRY(void *, native_entry_mmap, "mmap",
             (void *addr, size_t len, int prot, int flags, int fd,
              off_t off))
{
    return NATIVE_GO(mmap)(addr, len, prot, flags, fd, off);
}

NATIVE_ENTRY(void *, native_entry_mmap64, "mmap64",
             (void *addr, size_t len, int prot, int flags, int fd,
              off_t off))
{
    return NATIVE_GO(mmap)(addr, len, prot, flags, fd, off);
}

NATIVE_ENTRY(int, native_entry_munmap, "munmap", (void *addr, size_t len))
{
    return NATIVE_GO(munmap)(addr, len);
}

NATIVE_ENTRY(void *, native_entry_mremap, "mremap",
             (void *old, size_t old_size, size_t new_size, int flags, ...))
{
    va_list ap;
    va_start(ap, flags);
    void *new_address = va_arg(ap, void *);
    va_end(ap);
    return NATIVE_GO(mremap)(old, old_size, new_size, flags, new_address);
}

/* ---- start / stop ---------------------------------------------------------- */

#ifdef NATIVE_TSAN_BUILD
/* ThreadSanitizer's runtime calls pthread_getattr_np() when it starts a
   thread, before the thread's state exists; glibc's calls realloc()
   inside.  What it allocates there, and frees with
   pthread_attr_destroy(), is not traced (native_depth), so that the
   traced path, whose callees are instrumented, does not run. */
NATIVE_EXPORT NATIVE_EARLY int
native_entry_pthread_getattr_np(pthread_t thread, pthread_attr_t *attr)
    __asm__("pthread_getattr_np");
NATIVE_EXPORT NATIVE_EARLY int
native_entry_pthread_getattr_np(pthread_t thread, pthread_attr_t *attr)
{
    static int (*next)(pthread_t, pthread_attr_t *);
    native_depth++;
    int (*f)(pthread_t, pthread_attr_t *) =
        __atomic_load_n(&next, __ATOMIC_RELAXED);
    if (f == NULL) {
        void *found = dlsym(RTLD_NEXT, "pthread_getattr_np");
        memcpy(&f, &found, sizeof(f));
        __atomic_store_n(&next, f, __ATOMIC_RELAXED);
    }
    int res = f != NULL ? f(thread, attr) : ENOSYS;
    native_depth--;
    return res;
}

/* ... and frees it with pthread_attr_destroy(), as early. */
NATIVE_EXPORT NATIVE_EARLY int
native_entry_pthread_attr_destroy(pthread_attr_t *attr)
    __asm__("pthread_attr_destroy");
NATIVE_EXPORT NATIVE_EARLY int
native_entry_pthread_attr_destroy(pthread_attr_t *attr)
{
    static int (*next)(pthread_attr_t *);
    native_depth++;
    int (*f)(pthread_attr_t *) = __atomic_load_n(&next, __ATOMIC_RELAXED);
    if (f == NULL) {
        void *found = dlsym(RTLD_NEXT, "pthread_attr_destroy");
        memcpy(&f, &found, sizeof(f));
        __atomic_store_n(&next, f, __ATOMIC_RELAXED);
    }
    int res = f != NULL ? f(attr) : ENOSYS;
    native_depth--;
    return res;
}
#endif

/* Whether a malloc() of the process, called as any library calls it,
   reaches native_malloc(): not so when a tool replaces the interposers
   where they are defined (Valgrind's Memcheck), which dlsym() and
   dladdr() cannot see. */
static int
native_probe(void)
{
    void *(*volatile process_malloc)(size_t) = native_entry_malloc;
    void (*volatile process_free)(void *) = native_entry_free;
    __atomic_store_n(&native_probe_hits, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&native_probing, 1, __ATOMIC_RELAXED);
    /* The engine's call, not the program's: counted, never traced. */
    native_depth++;
    process_free(process_malloc(1));
    native_depth--;
    __atomic_store_n(&native_probing, 0, __ATOMIC_RELAXED);
    return __atomic_load_n(&native_probe_hits, __ATOMIC_RELAXED) != 0;
}

int
_PyTraceMalloc_StartNative(void)
{
    if (!_PyTraceMalloc_TRACING()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "native tracing needs tracemalloc to be tracing");
        return -1;
    }
    if (native_on) {
        return 0;
    }
    (void)native_resolve();
    /* The interposers must be what this process calls (N1): not so in a
       shared libpython loaded after another allocator (LD_PRELOAD), nor
       in a program that embeds the interpreter without exporting them. */
    if (native_foreign_first
        || !native_defined_here((void *)native_entry_malloc)
        || !native_defined_here(dlsym(RTLD_DEFAULT, "malloc"))) {
        PyErr_SetString(PyExc_RuntimeError,
                        "native tracing is not available: malloc() of "
                        "this process is not the interpreter's (a shared "
                        "libpython after an LD_PRELOAD allocator or "
                        "wrapper, or an embedding program that does not "
                        "export the interpreter's symbols)");
        return -1;
    }
    /* Callers without the GIL enter the engine for every native
       allocation: the lock goes symmetric, so that they fence instead of
       paying a process-wide barrier each (I1, LockOwnGIL()). */
    _PyTraceMalloc_LockOwnGIL();
    _PyTraceMalloc_UnlockNoGIL();
    int side = engine_lock();
    if (_PyTraceMalloc_TRACING()) {
        native_on = 1;
        native_switch(1);
    }
    engine_leave(side);
    if (!native_on) {
        return -1;
    }
    if (!native_probe()) {
        _PyTraceMalloc_StopNative();
        PyErr_SetString(PyExc_RuntimeError,
                        "native tracing is not available: malloc() of "
                        "this process does not reach the interpreter's "
                        "(a tool replaces it: under Valgrind, give it "
                        "--soname-synonyms=somalloc=nouserintercepts)");
        return -1;
    }
    return 0;
}

void
_PyTraceMalloc_StopNative(void)
{
    if (!native_on) {
        return;
    }
    int side = engine_lock();
    native_switch(0);
    native_on = 0;
    /* munmap() goes unseen from now on: the index would go stale. */
    native_maps_clear();
    __atomic_store_n(&nf_mode, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&nf_all, 0, __ATOMIC_RELAXED);
    lean_update();
    engine_leave(side);
}

int
_PyTraceMalloc_IsTracingNative(void)
{
    return native_on;
}

void
_PyTraceMalloc_GetNativeTracedMemory(size_t *current, size_t *peak)
{
    *current = 0;
    *peak = 0;
    if (_PyTraceMalloc_TRACING()) {
        int side = engine_lock();
        *current = tm.store.native_current;
        *peak = tm.store.native_peak;
        engine_leave(side);
    }
}

/* Blocks the resolvers served from their static arena (for the tests:
   0 when dlsym() allocated nothing). */
uint64_t
_PyTraceMalloc_NativeBootBlocks(void)
{
    return __atomic_load_n(&boot_blocks, __ATOMIC_RELAXED);
}

/* -X tracemalloc_native, PYTHONTRACEMALLOCNATIVE: read with the sampling
   option (_PyTraceMalloc_ReadSampleOption()).  The option alone, or the
   variable set to 1, asks for it; 0 and an empty variable do not;
   "frames" asks for native frames too, "frames-all" for native frames of
   every trace. */
static int
native_read_option(const PyConfig *config, const char **error)
{
    static char message[160];
    char buffer[16];
    const char *option;
    startup_native = 0;
    startup_native_frames = 0;
    const char *text = startup_option(
        config, L"tracemalloc_native", "-X tracemalloc_native",
        "PYTHONTRACEMALLOCNATIVE", buffer, sizeof(buffer), &option);
    if (text == NULL) {
        return 0;
    }
    if (text[0] == 0 || strcmp(text, "1") == 0) {
        startup_native = 1;
        return 0;
    }
    if (strcmp(text, "0") == 0) {
        return 0;
    }
    if (strcmp(text, "frames") == 0 || strcmp(text, "frames-all") == 0) {
        startup_native = 1;
        startup_native_frames = text[6] == 0
            ? _PyTraceMalloc_NATIVE_FRAMES_NATIVE
            : _PyTraceMalloc_NATIVE_FRAMES_ALL;
        return 0;
    }
    PyOS_snprintf(message, sizeof(message),
                  "%s=%.20s: expected 1, 0, frames or frames-all",
                  option, text);
    *error = message;
    return -1;
}
