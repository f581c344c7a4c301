/* Native frames: the C call stack of a native trace,
 * captured at allocation time, interned in the call-context tree, spliced
 * into the Python traceback and symbolised at snapshot time.
 *
 * Capture.  libunwind's unw_backtrace() (local-only: the library's
 * UNW_LOCAL_ONLY unwinder, which needs no ptrace and no other process),
 * loaded with dlopen() the first time native frames are asked for, so that
 * the interpreter neither links nor needs libunwind otherwise.  It fills
 * an array on the stack with at most NF_MAX return addresses, outside the
 * engine lock (it may take the dynamic loader's lock on a cache miss, and
 * a thread holding that lock may be allocating: NF1) and with native_depth
 * raised (its own allocations are nobody's, N3).  The leading addresses
 * inside the engine's own functions (section tm_native_text) are dropped,
 * so that the innermost address is the call of malloc() in the program.
 *
 * Splice.  Each call of the evaluation loop, _PyEval_EvalFrameDefault(),
 * runs one segment of Python frames: from the frame it is running up to
 * the first frame entered from C (base_frame_entered_from_c()).  Inside
 * the lock, the capture walks the thread's own frames and records each
 * segment's length beside the address of the evaluation loop's call that
 * runs it (an address in the loop's symbol range, found with dladdr1()
 * once).  The reader puts the segment's Python frames where that C frame
 * was, and hides the loop's own frame: one stack, most recent call first.
 *
 * Interning.  A native trace's node is a chain of native nodes hanging
 * under the node of its Python position (current_node()): (parent,
 * frame marker, index of the address in the PC table), outermost C frame
 * first, and after an evaluation loop's frame (parent, segment marker,
 * Python frames of its segment).  Native nodes count no frame (their
 * depth is their parent's) and every reader of Python tracebacks skips
 * them (_PyTraceMalloc_NodeInfo()), so tracebacks and total_nframe are
 * the same as without native frames (NF2).  They are nodes like any
 * other for compaction.  The PC table interns return addresses; it never
 * shrinks and never moves (chunks of doubling size, like the nodes), so a
 * pinned reader reads it without the lock; it is bounded by the code the
 * process runs, not by its allocations.
 *
 * Symbolisation, at snapshot time only: dladdr() gives the shared object
 * and the nearest exported symbol; libdw (elfutils, loaded with dlopen()
 * too) gives the function of the symbol table and the source file and line
 * of the debug information when the object has them.  Cached per address,
 * for the process's life.
 *
 * Part of the engine's translation unit, included after
 * tracemalloc_native.c (see tracemalloc_engine.h).
 */

#include <dlfcn.h>
#include <link.h>                 // ElfW(Sym), dladdr1()

#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()

/* At most NF_MAX C frames per trace (tracemalloc_native.c). */
/* The engine's own frames at the top of a capture: at most this many. */
#define NF_SKIP 8

/* 0: off; _PyTraceMalloc_NATIVE_FRAMES_NATIVE: native traces get their C
   stack; _PyTraceMalloc_NATIVE_FRAMES_ALL: the Python domains' traces too.
   Written under the engine lock with native tracing; read without it
   (relaxed) by the traced paths, which only decide whether to capture. */
static int nf_mode;

/* A native node's "filename": one of these markers (is_native set). */
static cct_string nf_frame_marker = {.is_native = 1};
static cct_string nf_segment_marker = {.is_native = 2};

/* libunwind's unw_backtrace(), NULL until loaded. */
static int (*nf_backtrace)(void **buffer, int size);

/* The evaluation loop's code: [nf_eval_start, nf_eval_end). */
static uintptr_t nf_eval_start, nf_eval_end;

/* The engine's frames to drop from a capture: the traced paths of
   tracemalloc_native.c and the capture itself are in this section. */
extern const char __start_tm_native_text[] __attribute__((weak));
extern const char __stop_tm_native_text[] __attribute__((weak));

static inline int
nf_engine_pc(uintptr_t pc)
{
    return pc - (uintptr_t)__start_tm_native_text
           < (uintptr_t)(__stop_tm_native_text - __start_tm_native_text);
}

static inline int
nf_eval_pc(uintptr_t pc)
{
    return pc - nf_eval_start < nf_eval_end - nf_eval_start;
}

/* ---- the PC table -------------------------------------------------------- */

/* Chunk k holds 1024 << k addresses.  Written under the engine lock;
   entries below nf_npcs are read by pinned readers without it (a node
   that names an entry was made after the entry, in the same locked
   section). */
#define NF_CHUNK0_BITS 10
static uintptr_t *nf_pc_chunks[NCHUNKS];
static uint32_t nf_npcs;
static uint32_t *nf_pc_index;       /* open addressing: index + 1 */
static size_t nf_pc_index_mask;

static inline uintptr_t *
nf_pc_slot(uint32_t index)
{
    uint32_t v = index + (1u << NF_CHUNK0_BITS);
    int k = 31 - __builtin_clz(v) - NF_CHUNK0_BITS;
    return &nf_pc_chunks[k][v - ((1u << NF_CHUNK0_BITS) << k)];
}

static inline size_t
nf_pc_hash(uintptr_t pc)
{
    uint64_t x = (uint64_t)pc * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(x >> 29);
}

static int
nf_pc_index_grow(void)
{
    size_t cap = nf_pc_index ? (nf_pc_index_mask + 1) * 2 : 1024;
    uint32_t *index = _PyTraceMalloc_RawAlloc(cap * sizeof(*index), 1);
    if (index == NULL) {
        return -1;
    }
    for (uint32_t i = 0; i < nf_npcs; i++) {
        size_t h = nf_pc_hash(*nf_pc_slot(i)) & (cap - 1);
        while (index[h] != 0) {
            h = (h + 1) & (cap - 1);
        }
        index[h] = i + 1;
    }
    if (nf_pc_index != NULL) {
        tm.memory -= (nf_pc_index_mask + 1) * sizeof(*index);
        free(nf_pc_index);
    }
    tm.memory += cap * sizeof(*index);
    nf_pc_index = index;
    nf_pc_index_mask = cap - 1;
    return 0;
}

/* The index of PC in the table, added if needed; -1 without memory.
   Under the engine lock. */
static int64_t
nf_pc_intern(uintptr_t pc)
{
    if (nf_pc_index != NULL) {
        for (size_t h = nf_pc_hash(pc) & nf_pc_index_mask;
             nf_pc_index[h] != 0; h = (h + 1) & nf_pc_index_mask) {
            if (*nf_pc_slot(nf_pc_index[h] - 1) == pc) {
                return nf_pc_index[h] - 1;
            }
        }
    }
    if (nf_npcs >= NODE_LIMIT) {
        return -1;
    }
    if (nf_pc_index == NULL
        || ((size_t)nf_npcs + 1) * 2 > nf_pc_index_mask + 1) {
        if (nf_pc_index_grow() < 0) {
            return -1;
        }
    }
    uint32_t id = nf_npcs;
    uint32_t v = id + (1u << NF_CHUNK0_BITS);
    int k = 31 - __builtin_clz(v) - NF_CHUNK0_BITS;
    if (nf_pc_chunks[k] == NULL) {
        size_t n = (size_t)1 << (NF_CHUNK0_BITS + k);
        nf_pc_chunks[k] = _PyTraceMalloc_RawAlloc(n * sizeof(uintptr_t), 0);
        if (nf_pc_chunks[k] == NULL) {
            return -1;
        }
        tm.memory += n * sizeof(uintptr_t);
    }
    *nf_pc_slot(id) = pc;
    size_t h = nf_pc_hash(pc) & nf_pc_index_mask;
    while (nf_pc_index[h] != 0) {
        h = (h + 1) & nf_pc_index_mask;
    }
    nf_pc_index[h] = id + 1;
    __atomic_store_n(&nf_npcs, id + 1, __ATOMIC_RELEASE);
    return id;
}

/* ---- capture ------------------------------------------------------------- */

/* Capture the calling thread's C stack into STACK.  Outside the engine
   lock, with native_depth raised (NF1, N3). */
__attribute__((section("tm_native_text"), noinline)) static void
nf_capture(nf_stack *stack)
{
    void *buffer[NF_MAX + NF_SKIP];
    stack->n = 0;
    int (*backtrace)(void **, int) =
        __atomic_load_n(&nf_backtrace, __ATOMIC_ACQUIRE);
    if (backtrace == NULL) {
        return;
    }
    int n = backtrace(buffer, NF_MAX + NF_SKIP);
    int first = 0;
    for (int i = 0; i < n && i < NF_SKIP; i++) {
        if (nf_engine_pc((uintptr_t)buffer[i])) {
            first = i + 1;
        }
    }
    for (int i = first; i < n && stack->n < NF_MAX; i++) {
        stack->pcs[stack->n++] = (uintptr_t)buffer[i];
    }
}

/* The Python frames of each of TSTATE's segments, innermost first, at
   most MAX of them; returns how many segments were filled.  Only the
   calling thread's own frames (I1). */
static int
nf_segments(PyThreadState *tstate, uint32_t *lengths, int max)
{
    if (tstate == NULL || max == 0) {
        return 0;
    }
    int nseg = 0;
    uint32_t count = 0;
    for (_PyInterpreterFrame *f = base_current_frame(tstate); f != NULL;
         f = base_frame_caller(f)) {
        if (!base_frame_is_incomplete(f)) {
            count++;
        }
        if (base_frame_entered_from_c(f)) {
            lengths[nseg++] = count;
            count = 0;
            if (nseg == max) {
                return nseg;
            }
        }
    }
    if (count > 0) {
        /* A bottom segment not entered from C (cannot happen: every
           evaluation starts from C); kept with the others. */
        lengths[nseg++] = count;
    }
    return nseg;
}

/* The node of STACK's C frames under NODE, the node of the thread's
   Python position; NODE itself when out of memory (the trace keeps its
   Python frames).  Inside the engine lock. */
static _PyTraceMalloc_Node
nf_intern_stack(PyThreadState *tstate, _PyTraceMalloc_Node node,
                const nf_stack *stack)
{
    if (stack->n == 0 || node == UINT32_MAX) {
        return node;
    }
    int neval = 0;
    for (int i = 0; i < stack->n; i++) {
        neval += nf_eval_pc(stack->pcs[i]);
    }
    uint32_t lengths[NF_MAX];
    int nseg = nf_segments(tstate, lengths, neval);
    int nomem = 0;
    _PyTraceMalloc_Node leaf = node;
    int eval_index = neval;     /* segments of the frames below this one */
    for (int i = stack->n - 1; i >= 0 && !nomem; i--) {
        uintptr_t pc = stack->pcs[i];
        int64_t index = nf_pc_intern(pc);
        if (index < 0) {
            nomem = 1;
            break;
        }
        leaf = node_intern(leaf, &nf_frame_marker, (int)index, &nomem);
        if (!nomem && nf_eval_pc(pc)) {
            eval_index--;
            uint32_t length = eval_index < nseg ? lengths[eval_index] : 0;
            leaf = node_intern(leaf, &nf_segment_marker, (int)length,
                               &nomem);
        }
    }
    return nomem ? node : leaf;
}

/* ---- start ----------------------------------------------------------------- */

/* Load libunwind and find the evaluation loop: 0, or -1 with an
   exception.  With the GIL, outside the engine lock. */
static int
nf_load(void)
{
    if (__atomic_load_n(&nf_backtrace, __ATOMIC_ACQUIRE) != NULL) {
        return 0;
    }
    /* The loader's allocations are nobody's (N3). */
    native_depth++;
    void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        lib = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
    }
    void *fn = lib != NULL ? dlsym(lib, "unw_backtrace") : NULL;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    int found = dladdr1((void *)_PyEval_EvalFrameDefault, &info,
                        (void **)&sym, RTLD_DL_SYMENT);
    native_depth--;
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "native frames need libunwind (libunwind.so.8), "
                        "which could not be loaded");
        return -1;
    }
    if (found && sym != NULL && sym->st_size > 0) {
        nf_eval_start = (uintptr_t)_PyEval_EvalFrameDefault;
        nf_eval_end = nf_eval_start + sym->st_size;
    }
    else {
        /* Without the loop's size the C frames are not spliced: the
           Python frames come after them. */
        nf_eval_start = nf_eval_end = 0;
    }
    int (*backtrace)(void **, int);
    memcpy(&backtrace, &fn, sizeof(fn));
    /* The first call sets libunwind's caches up: not in an allocation. */
    void *warm[4];
    native_depth++;
    (void)backtrace(warm, 4);
    native_depth--;
    __atomic_store_n(&nf_backtrace, backtrace, __ATOMIC_RELEASE);
    return 0;
}

/* trace_add() of a Python domain's block with native frames of every
   trace: the C stack is captured before the engine lock is taken (NF1),
   with native_depth raised (the unwinder's allocations are nobody's). */
Py_NO_INLINE __attribute__((section("tm_native_text"))) static int
trace_add_frames(unsigned int domain, void *ptr, size_t size, int gil_held,
                 int pooled, int block, int resized)
{
    nf_stack stack;
    native_depth++;
    nf_capture(&stack);
    native_depth--;
    return trace_add_ex(domain, ptr, size, gil_held, pooled, block, resized,
                        &stack);
}

int
_PyTraceMalloc_SetNativeFrames(int mode)
{
    if (mode != 0) {
        if (!native_on) {
            PyErr_SetString(PyExc_ValueError,
                            "native frames need native tracing "
                            "(start(native=True))");
            return -1;
        }
        if (nf_load() < 0) {
            return -1;
        }
    }
    int side = engine_lock();
    __atomic_store_n(&nf_mode, native_on ? mode : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&nf_all, native_on
                              && mode == _PyTraceMalloc_NATIVE_FRAMES_ALL,
                     __ATOMIC_RELAXED);
    lean_update();
    engine_leave(side);
    return 0;
}

int
_PyTraceMalloc_GetNativeFrames(void)
{
    return __atomic_load_n(&nf_mode, __ATOMIC_RELAXED);
}

/* ---- readers ----------------------------------------------------------------- */

int
_PyTraceMalloc_NodeIsNative(const _PyTraceMalloc_CCTView *view,
                            _PyTraceMalloc_Node node)
{
    if (node == 0) {
        return 0;
    }
    const cct_node *n = node_in((cct_node *const *)view->chunks, node);
    return n->filename != NULL && n->filename->is_native;
}

int
_PyTraceMalloc_NodeNativeChain(const _PyTraceMalloc_CCTView *view,
                               _PyTraceMalloc_Node node,
                               _PyTraceMalloc_NativeEntry *entries, int max,
                               _PyTraceMalloc_Node *python)
{
    int n = 0;
    int64_t pending = -1;       /* a segment's length, for its loop frame */
    while (node != 0) {
        const cct_node *p = node_in((cct_node *const *)view->chunks, node);
        if (p->filename == NULL || !p->filename->is_native) {
            break;
        }
        if (p->filename->is_native == 2) {
            pending = (uint32_t)p->lineno;
        }
        else {
            if (n < max) {
                entries[n].pc = *nf_pc_slot((uint32_t)p->lineno);
                entries[n].nframes = pending;
                n++;
            }
            pending = -1;
        }
        node = p->parent;
    }
    *python = node;
    return n;
}

/* ---- symbolisation ------------------------------------------------------------ */

/* libdw's interface, declared here (its header is not needed to build):
   the calls are made through pointers found with dlsym(). */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef struct {
    void *find_elf;
    void *find_debuginfo;
    void *section_address;
    char **debuginfo_path;
} nf_dwfl_callbacks;

static struct {
    int loaded;                 /* 0: not tried, 1: usable, -1: missing */
    Dwfl *(*begin)(const nf_dwfl_callbacks *);
    int (*proc_report)(Dwfl *, pid_t);
    int (*report_end)(Dwfl *, void *, void *);
    void (*report_begin)(Dwfl *);
    Dwfl_Module *(*addrmodule)(Dwfl *, uint64_t);
    const char *(*addrname)(Dwfl_Module *, uint64_t);
    Dwfl_Line *(*getsrc)(Dwfl_Module *, uint64_t);
    const char *(*lineinfo)(Dwfl_Line *, uint64_t *, int *, int *,
                            uint64_t *, uint64_t *);
    nf_dwfl_callbacks callbacks;
    Dwfl *dwfl;
    pid_t pid;
} nf_dw;

/* A symbolised address, cached for the process's life. */
typedef struct nf_symbol {
    struct nf_symbol *next;
    uintptr_t pc;
    uintptr_t base;     /* the shared object's load address (dladdr()) */
    _PyTraceMalloc_NativeSymbol sym;
} nf_symbol;

#define NF_SYMBOL_BUCKETS 4096
static nf_symbol *nf_symbols[NF_SYMBOL_BUCKETS];
static pthread_mutex_t nf_symbols_lock = PTHREAD_MUTEX_INITIALIZER;

static void
nf_dw_load(void)
{
    nf_dw.loaded = -1;
    void *lib = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        return;
    }
#define DW(field, name) \
    do { \
        void *f_ = dlsym(lib, name); \
        if (f_ == NULL) { \
            return; \
        } \
        memcpy(&nf_dw.field, &f_, sizeof(f_)); \
    } while (0)
    DW(begin, "dwfl_begin");
    DW(proc_report, "dwfl_linux_proc_report");
    DW(report_end, "dwfl_report_end");
    DW(report_begin, "dwfl_report_begin");
    DW(addrmodule, "dwfl_addrmodule");
    DW(addrname, "dwfl_module_addrname");
    DW(getsrc, "dwfl_module_getsrc");
    DW(lineinfo, "dwfl_lineinfo");
    nf_dw.callbacks.find_elf = dlsym(lib, "dwfl_linux_proc_find_elf");
    nf_dw.callbacks.find_debuginfo = dlsym(lib,
                                           "dwfl_standard_find_debuginfo");
#undef DW
    if (nf_dw.callbacks.find_elf == NULL
        || nf_dw.callbacks.find_debuginfo == NULL) {
        return;
    }
    nf_dw.loaded = 1;
}

/* (Re)read the process's mappings: at first use, after a fork, and when
   an address falls in no module known (a library loaded since). */
static int
nf_dw_report(void)
{
    pid_t pid = getpid();
    if (nf_dw.dwfl == NULL) {
        nf_dw.dwfl = nf_dw.begin(&nf_dw.callbacks);
        if (nf_dw.dwfl == NULL) {
            return -1;
        }
    }
    else {
        nf_dw.report_begin(nf_dw.dwfl);
    }
    int rc = nf_dw.proc_report(nf_dw.dwfl, pid);
    nf_dw.report_end(nf_dw.dwfl, NULL, NULL);
    nf_dw.pid = pid;
    return rc == 0 ? 0 : -1;
}

/* A function's name without its symbol version ("@@GLIBC_2.34"). */
static char *
nf_strdup_name(const char *s)
{
    if (s == NULL) {
        return NULL;
    }
    size_t n = strcspn(s, "@");
    char *copy = _PyTraceMalloc_UntracedMalloc(n + 1);
    if (copy != NULL) {
        memcpy(copy, s, n);
        copy[n] = 0;
    }
    return copy;
}

static char *
nf_strdup(const char *s)
{
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *copy = _PyTraceMalloc_UntracedMalloc(n);
    if (copy != NULL) {
        memcpy(copy, s, n);
    }
    return copy;
}

/* Fill SYM for the return address PC (the call is the byte before). */
static void
nf_symbolise(uintptr_t pc, _PyTraceMalloc_NativeSymbol *sym)
{
    uintptr_t at = pc - 1;
    Dl_info info;
    memset(sym, 0, sizeof(*sym));
    if (dladdr((void *)at, &info)) {
        sym->library = nf_strdup(info.dli_fname);
        sym->function = nf_strdup_name(info.dli_sname);
        sym->offset = (uintptr_t)at - (uintptr_t)info.dli_fbase;
    }
    if (nf_dw.loaded == 0) {
        nf_dw_load();
    }
    if (nf_dw.loaded != 1) {
        return;
    }
    if (nf_dw.dwfl == NULL || nf_dw.pid != getpid()) {
        if (nf_dw_report() < 0) {
            return;
        }
    }
    Dwfl_Module *mod = nf_dw.addrmodule(nf_dw.dwfl, at);
    if (mod == NULL) {
        if (nf_dw_report() < 0) {
            return;
        }
        mod = nf_dw.addrmodule(nf_dw.dwfl, at);
        if (mod == NULL) {
            return;
        }
    }
    const char *name = nf_dw.addrname(mod, at);
    if (name != NULL && (sym->function == NULL
                         || strcmp(name, sym->function) != 0)) {
        char *copy = nf_strdup_name(name);
        if (copy != NULL) {
            _PyTraceMalloc_UntracedFree((void *)sym->function);
            sym->function = copy;
        }
    }
    Dwfl_Line *line = nf_dw.getsrc(mod, at);
    if (line != NULL) {
        uint64_t addr;
        int lineno = 0, column = 0;
        const char *file = nf_dw.lineinfo(line, &addr, &lineno, &column,
                                          NULL, NULL);
        if (file != NULL && lineno > 0) {
            sym->file = nf_strdup(file);
            sym->line = sym->file != NULL ? lineno : 0;
        }
    }
}

/* The symbol of the return address PC: cached, never freed.  Called by
   exports with the thread's tracing suspended (their allocations and
   libdw's are nobody's); any thread, outside the engine lock (dladdr()
   and libdw take the loader's lock). */
const _PyTraceMalloc_NativeSymbol *
_PyTraceMalloc_NativeSymbolize(uintptr_t pc)
{
    static const _PyTraceMalloc_NativeSymbol unknown = {0};
    size_t bucket = nf_pc_hash(pc) & (NF_SYMBOL_BUCKETS - 1);
    native_depth++;
    pthread_mutex_lock(&nf_symbols_lock);
    nf_symbol *s = nf_symbols[bucket];
    while (s != NULL && s->pc != pc) {
        s = s->next;
    }
    /* The object now at PC: another one than the cached symbol's when a
       library was unloaded (dlclose()) and another loaded at its
       addresses.  The newest symbol of PC comes first in its bucket; an
       old one stays allocated (a caller may hold it) but is not found. */
    Dl_info info;
    int found = dladdr((void *)(pc - 1), &info);
    uintptr_t base = found ? (uintptr_t)info.dli_fbase : 0;
    if (s != NULL
        && (s->base != base
            || (found && info.dli_fname != NULL
                && (s->sym.library == NULL
                    || strcmp(s->sym.library, info.dli_fname) != 0)))) {
        if (nf_dw.loaded == 1 && nf_dw.dwfl != NULL) {
            (void)nf_dw_report();   /* libdw's modules are stale too */
        }
        s = NULL;
    }
    if (s == NULL) {
        s = _PyTraceMalloc_UntracedCalloc(1, sizeof(*s));
        if (s != NULL) {
            s->pc = pc;
            s->base = base;
            nf_symbolise(pc, &s->sym);
            s->next = nf_symbols[bucket];
            nf_symbols[bucket] = s;
        }
    }
    pthread_mutex_unlock(&nf_symbols_lock);
    native_depth--;
    return s != NULL ? &s->sym : &unknown;
}

/* A forked child: the lock may have been held by another thread. */
static void
nf_after_fork(void)
{
    pthread_mutex_init(&nf_symbols_lock, NULL);
}
