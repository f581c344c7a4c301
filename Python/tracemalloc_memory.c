/* The engine's own memory: malloc(), never a traced API (I1), with the
 * fault injection the tests use to make any bookkeeping allocation fail.
 * Part of the engine's translation unit (see tracemalloc_engine.h).
 */

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
