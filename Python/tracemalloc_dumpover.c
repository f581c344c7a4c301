/* The dump threshold: a profile before the OOM killer.
 *
 * tracemalloc.dump_over(SIZE) (or -X tracemalloc_dump_over=SIZE) sets
 * tm.dumpover.next.  totals_add() compares traced memory with it after
 * every increase, under the engine lock: one load and one compare, and no
 * thread polls.  When traced memory reaches it, dumpover_crossed() records
 * the crossing, doubles the threshold past the current total (so the next
 * dump comes at the next doubling) and queues a pending call for the main
 * thread of the main interpreter, unless one is queued already.  The
 * pending call runs at the main thread's next safe point, with the GIL,
 * like a signal handler: it calls tracemalloc._dumpover._dump_over(), which
 * takes the snapshot there and writes the profile from a thread.
 *
 * The crossing can happen in any thread, with or without the GIL, inside
 * an allocator call: nothing here allocates, and the pending-call queue's
 * lock is never held by code that allocates.  Part of the engine's
 * translation unit (see tracemalloc_engine.h).
 */

static int dumpover_pending_call(void *arg);

/* Call tracemalloc._dumpover.NAME(*ARGS) (a new reference, NULL when it
   could not be made), in the main thread with the GIL: a failure is
   printed as unraisable, WHERE saying whose, never raised into the code
   that the pending call interrupted. */
static void
dumpover_call(const char *name, PyObject *args, const char *where)
{
    PyObject *result = NULL;
    if (args != NULL) {
        PyObject *module = PyImport_ImportModule("tracemalloc._dumpover");
        if (module != NULL) {
            PyObject *function = PyObject_GetAttrString(module, name);
            if (function != NULL) {
                result = PyObject_Call(function, args, NULL);
                Py_DECREF(function);
            }
            Py_DECREF(module);
        }
        Py_DECREF(args);
    }
    if (result == NULL) {
        PyObject *text = PyUnicode_FromString(where);
        PyErr_WriteUnraisable(text);
        Py_XDECREF(text);
    }
    Py_XDECREF(result);
}

/* Traced memory reached tm.dumpover.next: under the engine lock. */
Py_NO_INLINE static void
dumpover_crossed(void)
{
    uint64_t current = tm.store.current;
    uint64_t next = tm.dumpover.next;
    tm.dumpover.crossed = current;
    tm.dumpover.threshold = next;
    while (next <= current) {
        if (next > UINT64_MAX / 2) {
            next = UINT64_MAX;      /* no further crossing */
            break;
        }
        next *= 2;
    }
    tm.dumpover.next = next;
    if (!tm.dumpover.pending) {
        tm.dumpover.pending = 1;
        if (base_add_main_pending_call(dumpover_pending_call) < 0) {
            /* The queue is full: the next crossing asks again. */
            tm.dumpover.pending = 0;
        }
    }
}

/* In the main thread, with the GIL, between two bytecodes.  Never raises
   into the code that it interrupts: a failure is printed. */
static int
dumpover_pending_call(void *Py_UNUSED(arg))
{
    int side = engine_lock();
    uint64_t crossed = tm.dumpover.crossed;
    uint64_t threshold = tm.dumpover.threshold;
    uint64_t next = tm.dumpover.next;
    tm.dumpover.pending = 0;
    engine_leave(side);
    if (threshold == 0) {
        return 0;       /* the threshold was changed meanwhile */
    }
    PyObject *args = Py_BuildValue(
        "KKK", (unsigned long long)crossed, (unsigned long long)threshold,
        (unsigned long long)(next == UINT64_MAX ? 0 : next));
    dumpover_call("_dump_over", args,
                  "tracemalloc's dump over its threshold");
    return 0;
}

/* ---- the dump on the first MemoryError --------------------------------- */

static int
memory_error_pending_call(void *Py_UNUSED(arg))
{
    dumpover_call("_dump_memory_error", PyTuple_New(0),
                  "tracemalloc's dump on a MemoryError");
    return 0;
}

/* _PyErr_NoMemory() just set MemoryError (patch "memory-error-hook"): the
   first one after dump_on_memory_error() asks the main thread for a
   profile, as a crossing of the threshold does.  With the GIL of the
   caller's interpreter. */
void
_PyTraceMalloc_MemoryError(void)
{
    if (!tm.dumpover.on_memory_error) {
        return;     /* the common case: one load */
    }
    int side = engine_lock();
    int armed = tm.dumpover.on_memory_error;
    tm.dumpover.on_memory_error = 0;
    if (armed && base_add_main_pending_call(memory_error_pending_call) < 0) {
        tm.dumpover.on_memory_error = 1;    /* queue full: the next one */
    }
    engine_leave(side);
}

/* Arm (1) or disarm (0) the dump on the next MemoryError. */
void
_PyTraceMalloc_SetDumpOnMemoryError(int armed)
{
    int side = engine_lock();
    tm.dumpover.on_memory_error = armed;
    engine_leave(side);
}

/* Set the threshold: SIZE bytes (0: off).  A total already over it is a
   crossing now. */
void
_PyTraceMalloc_SetDumpOver(uint64_t size)
{
    int side = engine_lock();
    tm.dumpover.next = size ? size : UINT64_MAX;
    tm.dumpover.crossed = 0;
    tm.dumpover.threshold = 0;
    if (size && _PyTraceMalloc_TRACING() && tm.store.current >= size) {
        dumpover_crossed();
    }
    engine_leave(side);
}
