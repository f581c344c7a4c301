/* The engine's own memory: malloc(), never a traced API (I1), with the
 * fault injection the tests use to make any bookkeeping allocation fail.
 * Part of the engine's translation unit (see tracemalloc_engine.h).
 */

#if defined(__linux__)
#  include <sys/mman.h>           // madvise()
#endif

int
_PyTraceMalloc_FailBookkeeping(int n, size_t min_size)
{
    int side = engine_lock();
    int left = tm.faults.bookkeeping;
    tm.faults.bookkeeping = n;
    tm.faults.min_size = min_size;
    engine_leave(side);
    return left;
}

void *
_PyTraceMalloc_RawAlloc(size_t size, int zero)
{
    if (tm.faults.bookkeeping > 0 && size >= tm.faults.min_size) {
        tm.faults.bookkeeping--;
        return NULL;
    }
    /* Never native memory (N2). */
    return zero ? _PyTraceMalloc_UntracedCalloc(1, size)
                : _PyTraceMalloc_UntracedMalloc(size);
}

/* Transparent huge pages are 2 MiB on x86-64 and on arm64 with 4 KiB
   pages; on another size the advice covers fewer pages, nothing worse. */
#define BULK_HUGE_PAGE ((size_t)2 << 20)
/* Below this, a buffer's page faults cost less than the system call
   that would avoid them. */
#define BULK_POPULATE_MIN ((size_t)64 << 10)

void
_PyTraceMalloc_AdviseBulk(void *p, size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = BULK_HUGE_PAGE, small = 4096;
    if (size < BULK_POPULATE_MIN) {
        return;
    }
    /* Huge pages only on the whole ones inside the buffer: advice applies
       to pages, and the ends may share theirs with other memory. */
    uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)p + size) & ~(huge - 1);
    if (end > start) {
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
    /* Then fault the whole buffer in with one call (Linux 5.14 and later;
       older kernels refuse the advice): a fault per page costs more than
       the zeroing of the page in a virtual machine.  Every buffer of the
       export gets this, not only those with a huge page inside: the 4 MB
       columns of 10^6 traces took 1,000 faults each without it. */
    start = ((uintptr_t)p + small - 1) & ~(small - 1);
    end = ((uintptr_t)p + size) & ~(small - 1);
#  ifndef MADV_POPULATE_WRITE
#    define MADV_POPULATE_WRITE 23
#  endif
    if (end > start) {
        (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
    }
#else
    (void)p;
    (void)size;
#endif
}

/* malloc() for an export's big buffers, aligned on a huge page when big
   enough that whole huge pages fit (see _PyTraceMalloc_AdviseBulk()); the
   result is freed with free(). */
void *
_PyTraceMalloc_BulkAlloc(size_t size)
{
    void *p = NULL;
    if (size < 2 * BULK_HUGE_PAGE) {
        p = _PyTraceMalloc_UntracedMalloc(size);
    }
    else if (_PyTraceMalloc_native_untraced.posix_memalign(&p, BULK_HUGE_PAGE,
                                                           size) != 0) {
        p = NULL;
    }
    if (p != NULL) {
        _PyTraceMalloc_AdviseBulk(p, size);
    }
    return p;
}
