/* Sampling: Poisson byte sampling of allocations, for production.
 *
 * In sampling mode (start(nframe, sample=R)) every allocated byte is a
 * sampling point with probability 1/R, independently.  Each thread keeps
 * the distance to its next sampling point, drawn from the exponential
 * distribution of mean R: an allocation of S bytes subtracts S, and is
 * sampled when the distance runs out inside it; the next distance is then
 * drawn afresh (the exponential forgets, so this is exact).  A block of S
 * bytes is thus sampled with probability p(S) = 1 - exp(-S/R), whatever
 * the allocation pattern around it, and a sampled block stands for 1/p(S)
 * blocks of S bytes (Horvitz-Thompson: an unbiased estimate of the live
 * blocks and bytes of every call path).
 *
 * Only sampled blocks are traced, all in the store's table (a pool slot
 * array per sampled block would cost memory per pool, not per sample).  A
 * free must find out cheaply whether its block was sampled: a filter of
 * byte counters indexed by a hash of the address, incremented as a sample
 * enters the table and decremented as it leaves, says "certainly not" with
 * one load for almost every block (see sample_filter_hit()).
 *
 * The engine's totals (get_traced_memory(), the peak totals of each call
 * path) add up estimates in this mode: estimated bytes, and estimated
 * blocks in units of 1/SAMPLE_COUNT_UNIT.  Exports hand out the samples
 * themselves, with their real sizes; Modules/ and Lib/ weigh them.
 *
 * Part of the engine's translation unit (see tracemalloc_engine.h).
 */

#include <math.h>

/* Estimated blocks are counted in 1/1024ths of a block: exact for the
   weights near 1 of large blocks, and room for 2^44 blocks of weight R. */
#define SAMPLE_COUNT_UNIT 1024

/* The filter: one byte counter per hash of an address; a counter stuck at
   255 stays until the next clear (a lookup then costs a table probe, no
   wrong answer).  Static, so that it costs no memory until a sampling run
   touches its pages, and never goes away while a hook may read it. */
#define SAMPLE_FILTER_BITS _PyTraceMalloc_SAMPLE_FILTER_BITS
uint8_t _PyTraceMalloc_sample_filter[(size_t)1 << SAMPLE_FILTER_BITS];
#define sample_filter _PyTraceMalloc_sample_filter

/* Written under the engine lock by start(); read by the hooks without it
   (relaxed atomics: plain loads). */
uint64_t _PyTraceMalloc_sample_interval;

static inline uint64_t
sample_interval(void)
{
    /* A hook runs because its entry point saw the mode word set; start()
       stores that word with release after the interval, so that a thread
       without the GIL on a weakly ordered CPU cannot see sampling mode
       with an interval of 0.  No instruction on
       x86-64. */
#ifdef _PyTraceMalloc_ATOMIC_READS
    /* ThreadSanitizer does not model fences: the same as a load. */
    (void)__atomic_load_n(&_Py_tracemalloc_config.tracing, __ATOMIC_ACQUIRE);
#else
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
    return __atomic_load_n(&_PyTraceMalloc_sample_interval, __ATOMIC_RELAXED);
}

/* Each thread's own: the distance to its next sampling point (read and
   written inline by the allocator entry points, pycore_tracemalloc.h), its
   random state, and the epoch these were drawn in (tm.sample.epoch: a
   start() or a new seed makes every thread draw again). */
_Thread_local int64_t _PyTraceMalloc_sample_left _PyTraceMalloc_TLS_IE;
#define sample_left _PyTraceMalloc_sample_left
static _Thread_local uint64_t sample_rng;
static _Thread_local uint32_t sample_epoch;

/* A countdown never holds more than SAMPLE_CHECK_BYTES: the rest of a
   longer distance waits in sample_rest, and the thread comes back to
   sample_crossed() at least every SAMPLE_CHECK_BYTES bytes it allocates.
   That is when it sees a new epoch: a thread that drew a distance of 2^40
   bytes under one start() draws afresh within 64 KiB of the next start()
   or seed, instead of being estimated at 0.  The
   inline countdown is unchanged; a thread pays one slow-path call per
   64 KiB only while its interval is larger than that. */
#define SAMPLE_CHECK_BYTES ((int64_t)1 << 16)
static _Thread_local int64_t sample_rest;

/* 0: PTR is certainly not a sampled block.  Any thread, without the lock:
   a block being freed was added before its address reached the freeing
   thread, and its counter cannot drop until it is removed. */
static inline int
sample_filter_hit(const void *ptr)
{
    return _PyTraceMalloc_SampleFilterHit(ptr);
}

/* Under the engine lock: a sample enters or leaves the table.  A sampled
   block is entered at its address and at the two addresses its object
   would have behind a pre-header (the GC header, the managed dict and
   weakref words: 16 or 32 bytes), so that the re-trace of a new object
   tests the object's address without reading its type
   (_PyTraceMalloc_MayBeSampled()). */
#define SAMPLE_FILTER_ALIASES 3

static inline void
sample_filter_add(uintptr_t ptr)
{
    for (int k = 0; k < SAMPLE_FILTER_ALIASES; k++) {
        uint8_t *c = &sample_filter[
            _PyTraceMalloc_SampleFilterIndex(ptr + 16 * k)];
        uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);
        if (v != UINT8_MAX) {
            __atomic_store_n(c, (uint8_t)(v + 1), __ATOMIC_RELAXED);
        }
    }
}

static inline void
sample_filter_remove(uintptr_t ptr)
{
    for (int k = 0; k < SAMPLE_FILTER_ALIASES; k++) {
        uint8_t *c = &sample_filter[
            _PyTraceMalloc_SampleFilterIndex(ptr + 16 * k)];
        uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);
        if (v != UINT8_MAX && v != 0) {
            __atomic_store_n(c, (uint8_t)(v - 1), __ATOMIC_RELAXED);
        }
    }
}

/* Empty the filter (sampling mode), or fill it (exact mode: every
   address may hold a trace).  Under the engine lock, before the tracing
   flag is set: a hook that traced a block took the lock after this, and
   the block's free or re-trace comes later still, so it sees the new
   counters. */
static void
sample_filter_fill(uint8_t value)
{
    for (size_t i = 0; i < sizeof(sample_filter); i++) {
        if (sample_filter[i] != value) {
            __atomic_store_n(&sample_filter[i], value, __ATOMIC_RELAXED);
        }
    }
}

static void
sample_filter_clear(void)
{
    sample_filter_fill(0);
}

/* ---- the estimator ------------------------------------------------------ */

/* 1 / p(SIZE): how many blocks of SIZE bytes a sample of SIZE stands for. */
static inline double
sample_weight(size_t size, uint64_t interval)
{
    if (size == 0) {
        return 1.0;     /* never sampled (no byte to land on) */
    }
    return 1.0 / -expm1(-(double)size / (double)interval);
}

/* What a trace of SIZE adds to the totals: bytes, and blocks in units of
   1/SAMPLE_COUNT_UNIT (exact mode: SIZE and 1).  The same function of SIZE
   on the way in and out, so totals return to 0 exactly. */
static inline size_t
acct_size(size_t size)
{
    uint64_t interval = tm.sample.interval;
    if (interval == 0) {
        return size;
    }
    return (size_t)llround((double)size * sample_weight(size, interval));
}

static inline uint64_t
acct_count(size_t size)
{
    uint64_t interval = tm.sample.interval;
    if (interval == 0) {
        return 1;
    }
    return (uint64_t)llround(SAMPLE_COUNT_UNIT
                             * sample_weight(size, interval));
}

/* ---- the countdown ------------------------------------------------------ */

static inline uint64_t
splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The distance to the next sampling point: exponential, mean R, at least
   1 byte. */
static int64_t
sample_draw(uint64_t interval)
{
    /* 53 random bits: U in (0, 1]. */
    double u = (double)((splitmix64(&sample_rng) >> 11) + 1)
               * (1.0 / 9007199254740992.0);
    double d = -log(u) * (double)interval;
    if (d < 1.0) {
        return 1;
    }
    if (d > (double)INT64_MAX / 2) {
        return INT64_MAX / 2;
    }
    return (int64_t)d;
}

/* This thread's countdown to a sampling point DISTANCE bytes away. */
static inline void
sample_arm(int64_t distance)
{
    if (distance > SAMPLE_CHECK_BYTES) {
        sample_left = SAMPLE_CHECK_BYTES;
        sample_rest = distance - SAMPLE_CHECK_BYTES;
    }
    else {
        sample_left = distance;
        sample_rest = 0;
    }
}

/* This thread's countdown ran out (sample_left <= 0) within an allocation
   of SIZE bytes: 1 if that allocation is sampled.  Draws the next
   distance.  A thread that has not drawn in this epoch (a new thread, or
   tracing restarted or reseeded) draws its first distance now, instead of
   taking the countdown it started with. */
Py_NO_INLINE static int
sample_crossed(size_t size)
{
    uint64_t interval = sample_interval();
    if (interval == 0) {
        return 0;       /* stop() ran meanwhile */
    }
    uint32_t epoch = __atomic_load_n(&tm.sample.epoch, __ATOMIC_ACQUIRE);
    if (sample_epoch != epoch) {
        uint64_t seq = __atomic_fetch_add(&tm.sample.threads, 1,
                                          __ATOMIC_RELAXED);
        sample_rng = __atomic_load_n(&tm.sample.seed, __ATOMIC_RELAXED)
                     ^ (seq * UINT64_C(0xD1B54A32D192ED03));
        sample_epoch = epoch;
        int64_t first = sample_draw(interval) - (int64_t)size;
        if (first > 0) {
            sample_arm(first);
            return 0;
        }
    }
    else if (sample_rest > 0) {
        /* A checkpoint, not a sampling point: what is left of the
           distance after this allocation. */
        int64_t left = sample_rest + sample_left;
        if (left > 0) {
            sample_arm(left);
            return 0;
        }
    }
    sample_arm(sample_draw(interval));
    return 1;
}

/* Does an allocation of SIZE bytes get sampled?  Inline: the decrement and
   the branch are the whole cost of a block that is not. */
static inline int
sample_take(size_t size)
{
    if ((sample_left -= (int64_t)size) > 0) {
        return 0;
    }
    return sample_crossed(size);
}

/* ---- configuration ------------------------------------------------------ */

/* Under the engine lock: every thread draws again from the seed.  The
   calling thread (the one that starts tracing, or a test that reseeds) is
   the seed's first, now: what it samples next depends on the seed and on
   its own allocations only. */
static void
sample_new_epoch(void)
{
    uint32_t epoch = __atomic_add_fetch(&tm.sample.epoch, 1,
                                        __ATOMIC_RELEASE);
    __atomic_store_n(&tm.sample.threads, 1, __ATOMIC_RELAXED);
    sample_rng = __atomic_load_n(&tm.sample.seed, __ATOMIC_RELAXED);
    sample_epoch = epoch;
    uint64_t interval = tm.sample.interval;
    if (interval) {
        sample_arm(sample_draw(interval));
    }
    else {
        sample_left = 0;
        sample_rest = 0;
    }
}

/* 1 while sampling goes through the hooks (see sample_mode_word()). */
static int sample_routed;

/* A seed of this process and time. */
static uint64_t
sample_fresh_seed(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20)
                 ^ ((uint64_t)getpid() << 40);
    return splitmix64(&s);
}

/* The fork handler, in the child (one thread, the engine free): a child
   would otherwise go on with its parent's random state and countdown, and
   pre-fork workers would all sample the same allocations.  A seed that
   the tests set (_set_sample_seed()) is kept, for reproducible runs; the
   epoch changes either way, so that the child's threads draw again. */
static void
sample_after_fork(void)
{
    if (!tm.sample.seeded) {
        __atomic_store_n(&tm.sample.seed, sample_fresh_seed(),
                         __ATOMIC_RELAXED);
    }
    sample_new_epoch();
}

/* Under the engine lock, before tracing starts: the interval (0: exact). */
static void
sample_configure(uint64_t interval)
{
    tm.sample.interval = interval;
    __atomic_store_n(&_PyTraceMalloc_sample_interval, interval,
                     __ATOMIC_RELAXED);
    if (!tm.sample.seeded) {
        /* Not reseeded by the tests: a seed of this process and time. */
        __atomic_store_n(&tm.sample.seed, sample_fresh_seed(),
                         __ATOMIC_RELAXED);
    }
    sample_new_epoch();
    sample_filter_fill(interval ? 0 : UINT8_MAX);
    sample_routed = 0;
}

/* Sampling mode with a user allocator installed on the mem or obj domain
   (_PyTraceMalloc_blocks_exact 0: PyMem_SetAllocator() ran): that
   allocator may get its own blocks through the public API, and the inline
   entry points, which call it directly, cannot mark them untraced without
   a cost on every call.  So the mode word says "exact" (every allocation
   goes to the hooks, which take the countdown themselves and raise the
   untraced depth around the allocator, see routed_skip()) and every
   counter of the filter is set (every free and resize goes to the hooks
   too).  Kept until the next start() or clear_traces() that finds the
   allocators known again.  Under the engine lock; returns the mode word
   for the configured interval. */

static int
sample_mode_word(void)
{
    if (tm.sample.interval == 0) {
        sample_routed = 0;
        return _PyTraceMalloc_EXACT;
    }
    if (_PyTraceMalloc_blocks_exact) {
        sample_routed = 0;
        return _PyTraceMalloc_SAMPLED;
    }
    if (!sample_routed) {
        sample_filter_fill(UINT8_MAX);
        sample_routed = 1;
    }
    return _PyTraceMalloc_EXACT;
}

int
_PyTraceMalloc_SetSampleSeed(uint64_t seed)
{
    int side = engine_lock();
    __atomic_store_n(&tm.sample.seed, seed, __ATOMIC_RELAXED);
    tm.sample.seeded = 1;
    sample_new_epoch();
    engine_leave(side);
    return 0;
}

uint64_t
_PyTraceMalloc_GetSample(void)
{
    return _PyTraceMalloc_TRACING() ? sample_interval() : 0;
}

double
_PyTraceMalloc_SampleWeight(size_t size, uint64_t interval)
{
    return interval ? sample_weight(size, interval) : 1.0;
}

/* A size as the options write it: digits, then nothing or B (bytes), K or
   KiB, M or MiB, G or GiB (powers of 1024; KB, MB and GB are refused as
   ambiguous).  0 and -1 (with *ERROR set) on a bad string. */
uint64_t
_PyTraceMalloc_ParseSize(const char *text, const char **error)
{
    const char *p = text;
    uint64_t value = 0;
    *error = NULL;
    while (*p == ' ') {
        p++;
    }
    if (*p < '0' || *p > '9') {
        *error = "expected a positive number of bytes, such as 524288 or "
                 "512KiB";
        return 0;
    }
    while (*p >= '0' && *p <= '9') {
        if (value > (_PyTraceMalloc_SAMPLE_MAX / 10)) {
            *error = "the interval is too large";
            return 0;
        }
        value = value * 10 + (uint64_t)(*p - '0');
        p++;
    }
    while (*p == ' ') {
        p++;
    }
    static const struct { const char *suffix; int shift; } units[] = {
        {"", 0}, {"B", 0}, {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20},
        {"G", 30}, {"GiB", 30},
    };
    int shift = -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(p, units[i].suffix) == 0) {
            shift = units[i].shift;
            break;
        }
    }
    if (shift < 0) {
        *error = "unknown unit: use B, KiB, MiB or GiB (powers of 1024)";
        return 0;
    }
    if (value == 0) {
        *error = "the interval must be at least 1 byte";
        return 0;
    }
    if (value > (_PyTraceMalloc_SAMPLE_MAX >> shift)) {
        *error = "the interval is too large";
        return 0;
    }
    return value << shift;
}
