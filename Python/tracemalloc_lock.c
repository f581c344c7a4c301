/* The engine lock, asymmetric: the GIL holder enters with plain stores,
 * a caller without the GIL pays for both sides (I1).  Also the fork
 * handlers, which leave the child with the lock free.  Part of the engine's
 * translation unit (see tracemalloc_engine.h).
 */

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

/* ---- the engine lock --------------------------------------------------- */

/* The GIL holder (one thread at a time) is the engine's usual caller and
   enters with plain stores: it raises `gil_busy`, then checks `foreign`.
   A caller without the GIL serialises with other such callers through
   `foreign_lock`, raises `foreign`, runs membarrier(2) so that every thread
   has a full barrier (the GIL holder's store of `gil_busy` is visible, or it
   will see `foreign`), then waits for `gil_busy` to drop.  If the GIL
   holder sees `foreign` it backs off until it drops.  This is Dekker's
   mutual exclusion with the fence moved to the rare side.  Without
   membarrier(2) both sides use real fences. */
atomic_int _PyTraceMalloc_gil_busy;
atomic_int _PyTraceMalloc_foreign;
/* 1 while the GIL side may fence with a compiler barrier only.  Written
   by a caller without the GIL (LockOwnGIL(), the heavy barrier's
   fallback) and by the fork and start handlers, read by every GIL holder
   as it enters: a relaxed atomic. */
atomic_int _PyTraceMalloc_asymmetric;
/* This thread holds the lock's side without the GIL (foreign_lock): the
   native interposers leave whatever it allocates meanwhile alone (N3),
   instead of waiting for the lock it holds. */
static _Thread_local int tm_foreign_inside;
/* Fairness: a GIL holder that found `foreign` up raises
   tm.lock.gil_waiting, and the next caller without the GIL waits until it
   has been in, so that a steady stream of such callers (thread pools
   compressing, PyTraceMalloc_Track() from worker threads) cannot starve
   the interpreter.  The GIL side waits for at most one critical section
   of the other side. */

/* PY_TRACEMALLOC_NO_MEMBARRIER builds both sides with real fences: for
   ThreadSanitizer, which cannot see the barrier that membarrier(2) puts on
   other threads, and would report the asymmetric protocol as a race. */
#if defined(__linux__) && !defined(PY_TRACEMALLOC_NO_MEMBARRIER)
#  include <sys/mman.h>
#  include <sys/syscall.h>
#  ifdef __NR_membarrier
#    define TM_HAVE_MEMBARRIER 1
     /* From <linux/membarrier.h>, which older systems lack. */
#    define TM_MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3)
#    define TM_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)
#  endif
#endif

static void
tm_setup_barrier(void)
{
#ifdef TM_HAVE_MEMBARRIER
    if (syscall(__NR_membarrier, TM_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0, 0) == 0) {
        atomic_store_explicit(&_PyTraceMalloc_asymmetric, 1,
                              memory_order_relaxed);
    }
#endif
}

#ifdef TM_HAVE_MEMBARRIER
/* The fallback when membarrier(2) fails (the kernel documents ENOMEM):
   changing the protection of a page that this thread has written forces
   the kernel to shoot down that page's TLB entries on every CPU that runs
   a thread of the process, with an interrupt that serialises each of
   them: the same process-wide barrier, dearer.  (.NET's
   FlushProcessWriteBuffers() uses this on systems without membarrier.)
   Returns -1 if even that is not possible. */
static int
tm_page_barrier(void)
{
    static char *page;
    long size = sysconf(_SC_PAGESIZE);
    if (page == NULL) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return -1;
        }
        page = p;
    }
    if (mprotect(page, size, PROT_READ | PROT_WRITE) != 0) {
        return -1;
    }
    /* Dirty the page so that it is mapped, and its TLB entry present. */
    *(volatile char *)page += 1;
    if (mprotect(page, size, PROT_NONE) != 0) {
        return -1;
    }
    return 0;
}
#endif

/* The process-wide barrier without membarrier(2), which has just failed
   or is not there: a page's TLB shoot-down, else yields.  A GIL holder
   that might be inside without us seeing it takes a handful of
   instructions to leave or to see `foreign`, and never blocks inside the
   engine, so a few yields let it leave; from its next entry on it fences
   for real (the callers have turned the GIL side symmetric). */
static void
tm_barrier_fallback(void)
{
#ifdef TM_HAVE_MEMBARRIER
    if (tm_page_barrier() == 0) {
        return;
    }
#endif
    for (int i = 0; i < 64; i++) {
        sched_yield();
    }
}

/* A process-wide barrier whatever the mode (see
   _PyTraceMalloc_LockOwnGIL()). */
static void
tm_heavy_barrier_forced(void)
{
#ifdef TM_HAVE_MEMBARRIER
    if (syscall(__NR_membarrier, TM_MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                0, 0) != 0) {
        tm_barrier_fallback();
    }
#endif
    atomic_thread_fence(memory_order_seq_cst);
}

/* Put a full barrier on every thread of the process (the GIL side fences
   with a compiler barrier only).  Called with tm.lock.foreign_lock held. */
static void
tm_heavy_barrier(void)
{
#ifdef TM_HAVE_MEMBARRIER
    if (atomic_load_explicit(&_PyTraceMalloc_asymmetric,
                             memory_order_relaxed)) {
        int failed = 1;
        if (tm.faults.barriers > 0) {
            tm.faults.barriers--;
        }
        else if (syscall(__NR_membarrier, TM_MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                         0, 0) == 0) {
            failed = 0;
        }
        if (!failed) {
            return;
        }
        /* From now on the GIL side uses real fences.  A GIL holder that
           entered with a compiler barrier before it sees this needs the
           process-wide barrier once more. */
        atomic_store_explicit(&_PyTraceMalloc_asymmetric, 0,
                              memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        tm_barrier_fallback();
    }
#endif
    atomic_thread_fence(memory_order_seq_cst);
}

int
_PyTraceMalloc_FailBarrier(int n)
{
    while (atomic_flag_test_and_set_explicit(&tm.lock.foreign_lock,
                                             memory_order_acquire)) {
        sched_yield();
    }
    tm.faults.barriers = n;
    atomic_flag_clear_explicit(&tm.lock.foreign_lock, memory_order_release);
#ifdef TM_HAVE_MEMBARRIER
    return 1;
#else
    return 0;
#endif
}

/* Slow path of _PyTraceMalloc_Lock(): `foreign` was up.  Wait for it to
   drop, with tm.lock.gil_waiting raised so that no new caller without the GIL
   gets in first, then enter with a real fence. */
void
_PyTraceMalloc_WaitForeign(void)
{
    atomic_store_explicit(&_PyTraceMalloc_gil_busy, 0, memory_order_release);
    atomic_store(&tm.lock.gil_waiting, 1);
    for (;;) {
        while (atomic_load_explicit(&_PyTraceMalloc_foreign,
                                    memory_order_acquire)) {
            sched_yield();
        }
        atomic_store_explicit(&_PyTraceMalloc_gil_busy, 1,
                              memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        if (!atomic_load_explicit(&_PyTraceMalloc_foreign,
                                  memory_order_acquire)) {
            break;
        }
        atomic_store_explicit(&_PyTraceMalloc_gil_busy, 0,
                              memory_order_release);
    }
    atomic_store(&tm.lock.gil_waiting, 0);
}

void
_PyTraceMalloc_LockNoGIL(void)
{
    while (atomic_flag_test_and_set_explicit(&tm.lock.foreign_lock,
                                             memory_order_acquire)) {
        sched_yield();
    }
    /* Let a waiting GIL holder in first (bounded: it leaves at once). */
    while (atomic_load(&tm.lock.gil_waiting)) {
        sched_yield();
    }
    tm_foreign_inside = 1;
    tm.lock.foreign_entries++;
    atomic_store_explicit(&_PyTraceMalloc_foreign, 1, memory_order_relaxed);
    tm_heavy_barrier();
    while (atomic_load_explicit(&_PyTraceMalloc_gil_busy,
                                memory_order_acquire)) {
        sched_yield();
    }
}

/* Enter as a caller that holds the GIL of an interpreter of its own (an
   isolated 3.13 interpreter, PEP 684), not the engine's: such a thread
   enters for each of its allocations, not rarely, and a process-wide
   barrier per entry would cost a system call per allocation.  Its first
   entry turns the lock symmetric for the rest of the process: the GIL
   side fences for real from then on (I1).  One more process-wide barrier,
   taken while the GIL side is held off, makes every thread see the switch
   before its next entry: a GIL holder interrupted before it raised
   `gil_busy` reads the new mode after; one interrupted after has its store
   made visible by the barrier itself. */
void
_PyTraceMalloc_LockOwnGIL(void)
{
    _PyTraceMalloc_LockNoGIL();
    if (atomic_load_explicit(&_PyTraceMalloc_asymmetric,
                             memory_order_relaxed)) {
        atomic_store_explicit(&_PyTraceMalloc_asymmetric, 0,
                              memory_order_relaxed);
        tm_heavy_barrier_forced();
    }
}

void
_PyTraceMalloc_UnlockNoGIL(void)
{
    atomic_store_explicit(&_PyTraceMalloc_foreign, 0, memory_order_release);
    atomic_flag_clear_explicit(&tm.lock.foreign_lock, memory_order_release);
    tm_foreign_inside = 0;
}

uint64_t
_PyTraceMalloc_ForeignEntries(void)
{
    _PyTraceMalloc_LockNoGIL();
    uint64_t n = --tm.lock.foreign_entries;     /* not this call's own */
    _PyTraceMalloc_UnlockNoGIL();
    return n;
}

/* Does the calling thread hold the GIL whose holder takes the fast side?
   The adapter knows (one GIL in 3.11, the main interpreter's in 3.13). */
int
_PyTraceMalloc_HoldsGIL(void)
{
    return base_thread_on_engine_gil();
}

/* fork(): no caller without the GIL may be inside while the process is
   copied; the child starts with the engine free.  The forking thread holds
   the GIL and is not inside the engine itself. */
static void
tm_atfork_prepare(void)
{
    while (atomic_flag_test_and_set_explicit(&tm.lock.foreign_lock,
                                             memory_order_acquire)) {
        sched_yield();
    }
    tm_foreign_inside = 1;      /* fork() may allocate: not native (N3) */
}

static void
tm_atfork_parent(void)
{
    atomic_flag_clear_explicit(&tm.lock.foreign_lock, memory_order_release);
    tm_foreign_inside = 0;
}

static void
tm_atfork_child(void)
{
    atomic_store(&_PyTraceMalloc_foreign, 0);
    atomic_store(&_PyTraceMalloc_gil_busy, 0);
    atomic_store(&tm.lock.gil_waiting, 0);
    atomic_flag_clear(&tm.lock.foreign_lock);
    tm_foreign_inside = 0;
    /* The child's thread is another thread: its frames' links name the
       parent thread's root node (I12).  A new generation makes them link
       again, under the child's own root (I4). */
    generation_bump();
    /* Pre-fork workers must not sample alike. */
    sample_after_fork();
    nf_after_fork();
    /* membarrier registration is per process: register the child too. */
    atomic_store_explicit(&_PyTraceMalloc_asymmetric, 0,
                              memory_order_relaxed);
    if (!native_on) {
        /* Native tracing keeps the lock symmetric (see
           _PyTraceMalloc_StartNative()). */
        tm_setup_barrier();
    }
}

/* start(): the fork handlers and the membarrier(2) registration, once.
   -1 if the handlers cannot be registered. */
static int
engine_lock_init(void)
{
    if (!tm.lock.atfork_registered) {
        if (pthread_atfork(tm_atfork_prepare, tm_atfork_parent,
                           tm_atfork_child) != 0) {
            return -1;
        }
        tm.lock.atfork_registered = 1;
        tm_setup_barrier();
    }
    return 0;
}
