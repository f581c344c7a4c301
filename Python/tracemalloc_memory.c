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
    return zero ? calloc(1, size) : malloc(size);
}

void
_PyTraceMalloc_AdviseBulk(void *p, size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Only the whole pages inside the buffer: advice applies to pages,
       and the ends may share theirs with other memory. */
    const uintptr_t huge = (uintptr_t)2 << 20, small = 4096;
    uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)p + size) & ~(huge - 1);
    if (size < 2 * huge) {
        return;
    }
    if (end > start) {
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
    /* Then fault the whole buffer in with one call (Linux 5.14 and later;
       older kernels refuse the advice): a fault per page costs more than
       the zeroing of the page in a virtual machine. */
    start = ((uintptr_t)p + small - 1) & ~(small - 1);
    end = ((uintptr_t)p + size) & ~(small - 1);
#  ifndef MADV_POPULATE_WRITE
#    define MADV_POPULATE_WRITE 23
#  endif
    (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
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
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (size < 2 * huge) {
        return malloc(size);
    }
    if (posix_memalign(&p, huge, size) != 0) {
        return NULL;
    }
    _PyTraceMalloc_AdviseBulk(p, size);
    return p;
}
