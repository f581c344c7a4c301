/* Retention paths: who holds a set of objects alive.
 *
 * Included by Modules/_tracemalloc.c; exposed as
 * _tracemalloc._retention_paths(), _tracemalloc._thread_dicts(),
 * _tracemalloc._thread_contexts(), _tracemalloc._site_objects() (a site's
 * live objects) and _tracemalloc._site_blocks() (its live blocks).
 * Lib/tracemalloc/retention.py chooses the roots, names the steps and
 * documents the result.
 *
 * Phase 1, a breadth-first search over tp_traverse from the roots the
 * caller gives (module and class namespaces, frame locals, gc.garbage,
 * thread state dicts), records for every object reached the object it was
 * reached from: the first time a target is reached, its chain of parents
 * back to a root is a shortest one.  Non-GC objects (bytes, str, int) have
 * no tp_traverse: they are looked up only, so that the search remembers
 * those that are targets and no others.
 *
 * Phase 2 runs only when some targets were not reached.  Every GC object
 * that phase 1 did not reach (gc.get_objects()) is traversed once, counting
 * for each unreached object the references found from Python objects;
 * where the refcount is higher than that count (less the search's own
 * references), something invisible to the collector holds the object: C
 * code (a static, a C structure), or a reference leaked by an extension.
 * A second search from those objects over the unreached ones gives their
 * chains.  What is still unreached after it is only referred to by other
 * unreached objects: an uncollected cycle, garbage that gc.collect() would
 * free.
 *
 * The search's memory is malloc()'s, not PyMem's, so it is never traced;
 * the result objects are made with this thread's tracing suspended and the
 * collector paused, and the search itself calls no Python code (no
 * object can change under it).
 */

#include "pycore_interp.h"        // PyInterpreterState.gc: the permanent generation
#include "pycore_code.h"          // _PyLocals_GetKind()
#include "pycore_frame.h"         // _PyInterpreterFrame: locals, evaluation stack
#include "pycore_dict.h"          // DK_IS_UNICODE(): the keys dict_traverse() skips

#define RETENTION_NONE UINT32_MAX

/* Entry flags. */
#define RETENTION_TARGET    0x01  /* one of the targets */
#define RETENTION_REACHED   0x02  /* reached by phase 1 (from a root) */
#define RETENTION_IGNORED   0x04  /* the search's own containers */
#define RETENTION_UNREACHED 0x08  /* GC object phase 1 did not reach */
#define RETENTION_HELD      0x10  /* reached by phase 2 from a C-held one */
#define RETENTION_WALKED    0x20  /* seen while walking a cycle */
#define RETENTION_COUNTED   0x40  /* a target already put in its group */
#define RETENTION_LISTED    0x80  /* in phase 2's gc.get_objects() list */
#define RETENTION_RESOLVED  0x100 /* unheld: its holder found (root, depth) */
#define RETENTION_UNHELD    0x200 /* resolved: nothing but the search's own */

typedef struct {
    PyObject *obj;        /* borrowed: nothing runs while the search lives */
    uint32_t parent;      /* entry it was first reached from, or NONE */
    uint32_t root;        /* root index (phase 1) or holding entry (2) */
    uint32_t referrers;   /* phase 2: references from Python objects */
    uint32_t own;         /* phase 2: references from the search's own */
    uint32_t group;       /* the chain group it heads, or NONE */
    uint32_t depth;       /* RESOLVED: the chain's length less one */
    uint32_t flags;
} retention_entry;

typedef struct {
    retention_entry *entries;
    size_t count;
    size_t capacity;
    uint32_t *slots;      /* open addressing: entry index + 1, 0 = empty */
    size_t mask;
    uint32_t *queue;      /* breadth-first queue of entry indexes */
    size_t head;
    size_t tail;
    size_t queue_capacity;
    uint32_t *path;       /* retention_cycle_holder()'s walk */
    size_t path_capacity;
    uint32_t current;     /* the entry being traversed */
    int phase;
    int failed;           /* out of memory */
} retention_search;

static inline size_t
retention_hash(PyObject *obj)
{
    uintptr_t key = (uintptr_t)obj >> 4;
    return (size_t)(key * UINT64_C(0x9E3779B97F4A7C15) >> 17);
}

static int
retention_grow_slots(retention_search *s)
{
    size_t capacity = (s->mask + 1) * 2;
    uint32_t *slots = calloc(capacity, sizeof(uint32_t));
    if (slots == NULL) {
        return -1;
    }
    size_t mask = capacity - 1;
    for (size_t i = 0; i < s->count; i++) {
        size_t h = retention_hash(s->entries[i].obj) & mask;
        while (slots[h] != 0) {
            h = (h + 1) & mask;
        }
        slots[h] = (uint32_t)(i + 1);
    }
    free(s->slots);
    s->slots = slots;
    s->mask = mask;
    return 0;
}

/* The entry of OBJ, or NONE. */
static inline uint32_t
retention_find(retention_search *s, PyObject *obj)
{
    size_t h = retention_hash(obj) & s->mask;
    for (;;) {
        uint32_t slot = s->slots[h];
        if (slot == 0) {
            return RETENTION_NONE;
        }
        if (s->entries[slot - 1].obj == obj) {
            return slot - 1;
        }
        h = (h + 1) & s->mask;
    }
}

/* The entry of OBJ, added if new (*ADDED set then); NONE when out of
   memory. */
static uint32_t
retention_add(retention_search *s, PyObject *obj, int *added)
{
    size_t h = retention_hash(obj) & s->mask;
    for (;;) {
        uint32_t slot = s->slots[h];
        if (slot == 0) {
            break;
        }
        if (s->entries[slot - 1].obj == obj) {
            *added = 0;
            return slot - 1;
        }
        h = (h + 1) & s->mask;
    }
    if (s->count + 1 >= UINT32_MAX) {
        return RETENTION_NONE;
    }
    if (s->count == s->capacity) {
        size_t capacity = s->capacity * 2;
        retention_entry *entries = realloc(s->entries,
                                           capacity * sizeof(*entries));
        if (entries == NULL) {
            return RETENTION_NONE;
        }
        s->entries = entries;
        s->capacity = capacity;
    }
    uint32_t index = (uint32_t)s->count++;
    s->entries[index] = (retention_entry){
        .obj = obj, .parent = RETENTION_NONE, .root = RETENTION_NONE,
        .group = RETENTION_NONE,
    };
    s->slots[h] = index + 1;
    /* Load factor at most 1/2. */
    if (s->count * 2 > s->mask + 1 && retention_grow_slots(s) < 0) {
        return RETENTION_NONE;
    }
    *added = 1;
    return index;
}

static int
retention_push(retention_search *s, uint32_t index)
{
    if (s->tail == s->queue_capacity) {
        if (s->head > 0) {
            memmove(s->queue, s->queue + s->head,
                    (s->tail - s->head) * sizeof(uint32_t));
            s->tail -= s->head;
            s->head = 0;
        }
        if (s->tail == s->queue_capacity) {
            size_t capacity = s->queue_capacity * 2;
            uint32_t *queue = realloc(s->queue, capacity * sizeof(uint32_t));
            if (queue == NULL) {
                return -1;
            }
            s->queue = queue;
            s->queue_capacity = capacity;
        }
    }
    s->queue[s->tail++] = index;
    return 0;
}

static int
retention_init(retention_search *s, size_t expected)
{
    memset(s, 0, sizeof(*s));
    size_t slots = 1024;
    while (slots < expected * 2) {
        slots *= 2;
    }
    s->capacity = expected > 1024 ? expected : 1024;
    s->entries = malloc(s->capacity * sizeof(retention_entry));
    s->slots = calloc(slots, sizeof(uint32_t));
    s->mask = slots - 1;
    s->queue_capacity = 1024;
    s->queue = malloc(s->queue_capacity * sizeof(uint32_t));
    if (s->entries == NULL || s->slots == NULL || s->queue == NULL) {
        return -1;
    }
    return 0;
}

static void
retention_fini(retention_search *s)
{
    free(s->entries);
    free(s->slots);
    free(s->queue);
    free(s->path);
}

/* What the search walks into: the objects the collector can traverse
   (tracked or not: a dict or tuple of atoms that it stopped tracking still
   refers to them), and code objects, which it does not manage: their
   constants (a cache of compiled code holds its bytes and strings). */
static inline int
retention_is_container(PyObject *obj)
{
    return PyObject_IS_GC(obj) || PyCode_Check(obj);
}

static int
retention_traverse_code(PyCodeObject *code, visitproc visit, void *arg)
{
    Py_VISIT(code->co_consts);
    Py_VISIT(code->co_names);
    return 0;
}

/* OBJ's tp_traverse, and the keys of a dict whose table has only str
   keys: dict_traverse() leaves those out (a str makes no cycle), but the
   dict holds them, and a str held only as a key (a cache keyed by paths,
   zipimport's directory cache) must be found and counted as referred to.
   A split table's keys are its type's, not the dict's. */
static int
retention_tp_traverse(PyObject *obj, visitproc visit, void *arg)
{
    traverseproc traverse = Py_TYPE(obj)->tp_traverse;
    if (traverse == NULL) {
        return 0;
    }
    int res = traverse(obj, visit, arg);
    if (res != 0 || !PyDict_Check(obj)) {
        return res;
    }
    PyDictObject *mp = (PyDictObject *)obj;
    PyDictKeysObject *keys = mp->ma_keys;
    if (mp->ma_values != NULL || !DK_IS_UNICODE(keys)) {
        return 0;
    }
    PyDictUnicodeEntry *entries = DK_UNICODE_ENTRIES(keys);
    for (Py_ssize_t i = 0; i < keys->dk_nentries; i++) {
        if (entries[i].me_value != NULL) {
            Py_VISIT(entries[i].me_key);
        }
    }
    return 0;
}

/* Phase 1 (and phase 2's second search): OBJ is referred to by the entry
   being traversed. */
static int
retention_visit_reach(PyObject *obj, void *arg)
{
    retention_search *s = (retention_search *)arg;
    if (obj == NULL || s->failed) {
        return 0;
    }
    uint32_t flag = s->phase == 1 ? RETENTION_REACHED : RETENTION_HELD;
    uint32_t index;
    if (!retention_is_container(obj) || s->phase == 2) {
        /* A leaf: only a target is worth remembering.  Phase 2 goes only
           through the objects it has already listed. */
        index = retention_find(s, obj);
        if (index == RETENTION_NONE) {
            return 0;
        }
    }
    else {
        int added;
        index = retention_add(s, obj, &added);
        if (index == RETENTION_NONE) {
            s->failed = 1;
            return 0;
        }
    }
    retention_entry *e = &s->entries[index];
    if (e->flags & (RETENTION_REACHED | RETENTION_HELD | RETENTION_IGNORED)) {
        return 0;
    }
    if (s->phase == 2 && !(e->flags & RETENTION_UNREACHED)
        && !(e->flags & RETENTION_TARGET)) {
        return 0;
    }
    e->flags |= flag;
    e->parent = s->current;
    e->root = s->entries[s->current].root;
    if (retention_is_container(obj) && retention_push(s, index) < 0) {
        s->failed = 1;
    }
    return 0;
}

static void
retention_traverse(retention_search *s, uint32_t index, visitproc visit)
{
    PyObject *obj = s->entries[index].obj;
    s->current = index;
    if (PyCode_Check(obj)) {
        (void)retention_traverse_code((PyCodeObject *)obj, visit, s);
        return;
    }
    if (!PyObject_IS_GC(obj)) {
        return;
    }
    (void)retention_tp_traverse(obj, visit, s);
}

/* Phase 2, listing: OBJ is referred to by an unreached object.  The
   collector's list leaves out the containers it does not track (a dict or
   tuple of atoms, a code object): add those, so that their references are
   counted and the second search goes through them. */
static int
retention_visit_discover(PyObject *obj, void *arg)
{
    retention_search *s = (retention_search *)arg;
    if (obj == NULL || s->failed || !retention_is_container(obj)) {
        return 0;
    }
    int added;
    uint32_t index = retention_add(s, obj, &added);
    if (index == RETENTION_NONE) {
        s->failed = 1;
        return 0;
    }
    retention_entry *e = &s->entries[index];
    if (e->flags & (RETENTION_REACHED | RETENTION_IGNORED
                    | RETENTION_UNREACHED)) {
        return 0;
    }
    e->flags |= RETENTION_UNREACHED;
    if (retention_push(s, index) < 0) {
        s->failed = 1;
    }
    return 0;
}

static void
retention_run(retention_search *s)
{
    while (s->head < s->tail && !s->failed) {
        retention_traverse(s, s->queue[s->head++], retention_visit_reach);
    }
}

/* Phase 2, counting: OBJ is referred to by an unreached object or by one
   of the search's own containers (s->current's flags say which). */
static int
retention_visit_count(PyObject *obj, void *arg)
{
    retention_search *s = (retention_search *)arg;
    if (obj == NULL) {
        return 0;
    }
    uint32_t index = retention_find(s, obj);
    if (index == RETENTION_NONE) {
        return 0;
    }
    retention_entry *e = &s->entries[index];
    if (e->flags & (RETENTION_REACHED | RETENTION_IGNORED)) {
        return 0;
    }
    if (s->entries[s->current].flags & RETENTION_IGNORED) {
        e->own++;
    }
    else {
        e->referrers++;
        if (e->parent == RETENTION_NONE) {
            e->parent = s->current;
        }
    }
    return 0;
}

/* References to OBJ that nobody here can see: the refcount less the
   references found.  Immortal objects (3.12+) have none. */
static Py_ssize_t
retention_unseen(retention_entry *e)
{
#ifdef _Py_IMMORTAL_REFCNT
    if (_Py_IsImmortal(e->obj)) {
        return 0;
    }
#endif
    /* The list of phase 2 holds one more, not counted in OWN: it is gone
       when the results are made. */
    Py_ssize_t listed = e->flags & RETENTION_LISTED ? 1 : 0;
    return Py_REFCNT(e->obj) - (Py_ssize_t)e->referrers - (Py_ssize_t)e->own
           - listed;
}

static int
retention_mark_ignored(retention_search *s, PyObject *obj)
{
    int added;
    uint32_t index = retention_add(s, obj, &added);
    if (index == RETENTION_NONE) {
        return -1;
    }
    s->entries[index].flags |= RETENTION_IGNORED;
    return 0;
}

/* gc.get_objects() leaves out the permanent generation, where gc.freeze()
   moves every tracked object (a program's own freeze, before it forks its
   workers, say): append the frozen objects to EVERYTHING, so that a frozen
   holder is found (an uncollected cycle frozen with its objects, which
   phase 2 would otherwise call "no Python referrer"), and a frozen object
   that a site allocated too.  Appending runs no Python code and no
   collection, so the list does not change while it is walked. */
static int
retention_add_frozen(PyObject *everything)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    PyGC_Head *head = &interp->gc.permanent_generation.head;
    for (PyGC_Head *g = (PyGC_Head *)head->_gc_next; g != head;
         g = (PyGC_Head *)g->_gc_next)
    {
        /* The object follows its GC header. */
        if (PyList_Append(everything, (PyObject *)(g + 1)) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Phase 2.  GET_OBJECTS: gc.get_objects(), a C function, which runs no
   Python code. */
static int
retention_phase2(retention_search *s, PyObject *ignore_fast,
                 PyObject *get_objects)
{
    PyObject *everything = PyObject_CallNoArgs(get_objects);
    if (everything == NULL) {
        return -1;
    }
    if (!PyList_Check(everything)) {
        Py_DECREF(everything);
        PyErr_SetString(PyExc_TypeError, "gc.get_objects() is not a list");
        return -1;
    }
    if (retention_add_frozen(everything) < 0) {
        Py_DECREF(everything);
        return -1;
    }
    if (retention_mark_ignored(s, everything) < 0) {
        goto nomemory;
    }
    uint32_t everything_index = retention_find(s, everything);
    Py_ssize_t n = PyList_GET_SIZE(everything);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = PyList_GET_ITEM(everything, i);
        int added;
        uint32_t index = retention_add(s, obj, &added);
        if (index == RETENTION_NONE) {
            goto nomemory;
        }
        retention_entry *e = &s->entries[index];
        e->flags |= RETENTION_LISTED;
        if (!(e->flags & (RETENTION_REACHED | RETENTION_IGNORED))) {
            e->flags |= RETENTION_UNREACHED;
        }
    }
    /* The untracked containers below the unreached objects. */
    s->head = s->tail = 0;
    size_t listed = s->count;
    for (size_t i = 0; i < listed; i++) {
        if (s->entries[i].flags & RETENTION_UNREACHED
            && retention_push(s, (uint32_t)i) < 0) {
            goto nomemory;
        }
    }
    while (s->head < s->tail && !s->failed) {
        retention_traverse(s, s->queue[s->head++], retention_visit_discover);
    }
    if (s->failed) {
        goto nomemory;
    }
    /* Count the references to unreached objects (and targets). */
    size_t count = s->count;
    for (size_t i = 0; i < count; i++) {
        uint32_t flags = s->entries[i].flags;
        if (flags & RETENTION_UNREACHED
            || (flags & RETENTION_TARGET && !(flags & RETENTION_REACHED))) {
            retention_traverse(s, (uint32_t)i, retention_visit_count);
        }
    }
    /* The search's own containers, each once (the caller's IGNORE, and the
       targets, roots and ignore sequences, one of which may be another's
       object): their references are not holders.  Not the list of phase 2,
       which retention_unseen() counts apart. */
    (void)ignore_fast;
    for (size_t i = 0; i < count; i++) {
        if (s->entries[i].flags & RETENTION_IGNORED
            && i != everything_index) {
            retention_traverse(s, (uint32_t)i, retention_visit_count);
        }
    }
    /* Seed the second search with what something unseen holds. */
    s->phase = 2;
    s->head = s->tail = 0;
    for (size_t i = 0; i < count; i++) {
        retention_entry *e = &s->entries[i];
        if (!(e->flags & (RETENTION_UNREACHED | RETENTION_TARGET))
            || e->flags & RETENTION_REACHED) {
            continue;
        }
        if (retention_unseen(e) > 0) {
            e->flags |= RETENTION_HELD;
            e->root = (uint32_t)i;
            e->parent = RETENTION_NONE;
            if (retention_push(s, (uint32_t)i) < 0) {
                goto nomemory;
            }
        }
    }
    retention_run(s);
    if (s->failed) {
        goto nomemory;
    }
    Py_DECREF(everything);
    return 0;

nomemory:
    Py_DECREF(everything);
    PyErr_NoMemory();
    return -1;
}

/* A chain group: the targets held through one holder. */
typedef struct {
    uint32_t head;        /* entry the chain is reported from */
    uint32_t holder;      /* entry the group is keyed by */
    uint32_t sample;      /* the target with the shortest chain */
    uint32_t id;          /* its index before sorting */
    size_t depth;         /* its chain's length less one */
    int kind;             /* 0 root, 1 no Python referrer, 2 cycle,
                             3 only the search's own containers */
    size_t count;
    size_t bytes;
} retention_group;

static const char *const retention_kinds[] = {
    "root", "no-referrer", "cycle", "unheld",
};

static int
retention_path_push(retention_search *s, uint32_t index, size_t n)
{
    if (n == s->path_capacity) {
        size_t capacity = s->path_capacity ? s->path_capacity * 2 : 256;
        uint32_t *path = realloc(s->path, capacity * sizeof(uint32_t));
        if (path == NULL) {
            return -1;
        }
        s->path = path;
        s->path_capacity = capacity;
    }
    s->path[n] = index;
    return 0;
}

/* The holder of an unheld entry INDEX (neither reached nor held): walk its
   referrers back (each entry's first referrer found) until an entry whose
   holder is known, an entry of this walk -- the walk closed a cycle, whose
   lowest entry is its holder whichever of its objects a walk starts from,
   so that one cycle is one holder -- or an entry that nothing but the
   search's own containers refers to.  Every entry walked gets its holder
   (ROOT) and its distance from it (DEPTH): each walk is done once.
   Returns -1 out of memory. */
static int
retention_cycle_holder(retention_search *s, uint32_t index)
{
    size_t n = 0;
    uint32_t cur = index;
    uint32_t holder;
    uint32_t base;          /* depth of the entry the walk ended at */
    int unheld = 0;
    size_t tail_end;        /* path[0:tail_end] hangs below path[tail_end] */
    for (;;) {
        if (cur == RETENTION_NONE) {
            /* path[n-1] has no referrer. */
            holder = s->path[n - 1];
            unheld = 1;
            s->entries[holder].depth = 0;
            base = 0;
            tail_end = n - 1;
            break;
        }
        retention_entry *e = &s->entries[cur];
        if (e->flags & RETENTION_RESOLVED) {
            holder = e->root;
            unheld = (e->flags & RETENTION_UNHELD) != 0;
            base = e->depth;
            tail_end = n;
            /* path[n] stands for CUR below. */
            if (retention_path_push(s, cur, n) < 0) {
                goto nomemory;
            }
            break;
        }
        if (e->flags & RETENTION_WALKED) {
            /* A cycle: path[j:n], where path[j] is CUR; the parent of
               path[k] is path[k+1], that of path[n-1] is path[j]. */
            size_t j = 0;
            while (s->path[j] != cur) {
                j++;
            }
            size_t length = n - j;
            size_t h = j;
            for (size_t k = j; k < n; k++) {
                if (s->path[k] < s->path[h]) {
                    h = k;
                }
            }
            holder = s->path[h];
            for (size_t k = j; k < n; k++) {
                retention_entry *c = &s->entries[s->path[k]];
                c->root = holder;
                c->depth = (uint32_t)((h - j + length - (k - j)) % length);
                c->flags = (c->flags & ~RETENTION_WALKED) | RETENTION_RESOLVED;
            }
            base = s->entries[cur].depth;
            tail_end = j;
            break;
        }
        e->flags |= RETENTION_WALKED;
        if (retention_path_push(s, cur, n) < 0) {
            goto nomemory;
        }
        n++;
        cur = e->parent;
    }
    /* The walk's entries before TAIL_END, each one below the next. */
    for (size_t k = 0; k <= tail_end && k < n; k++) {
        retention_entry *c = &s->entries[s->path[k]];
        if (k == tail_end && !(c->flags & RETENTION_WALKED)) {
            break;
        }
        c->root = holder;
        c->depth = (uint32_t)(base + (tail_end - k));
        c->flags = (c->flags & ~RETENTION_WALKED) | RETENTION_RESOLVED
                   | (unheld ? RETENTION_UNHELD : 0);
    }
    return 0;

nomemory:
    for (size_t k = 0; k < n; k++) {
        s->entries[s->path[k]].flags &= ~RETENTION_WALKED;
    }
    return -1;
}

/* The entry a target's group is keyed by: for a root chain, the first
   object below the root (the root itself for a chain of one or two); for a
   C-held one, the object with unseen references; for a cycle, its lowest
   entry (see retention_cycle_holder()).  NONE when out of memory. */
static uint32_t
retention_holder(retention_search *s, uint32_t index, int *kind,
                 uint32_t *head, size_t *depth)
{
    retention_entry *e = &s->entries[index];
    *depth = 0;
    if (e->flags & (RETENTION_REACHED | RETENTION_HELD)) {
        *kind = e->flags & RETENTION_REACHED ? 0 : 1;
        uint32_t below = index;
        uint32_t cur = index;
        while (s->entries[cur].parent != RETENTION_NONE) {
            below = cur;
            cur = s->entries[cur].parent;
            (*depth)++;
        }
        *head = cur;
        return *kind == 0 ? below : cur;
    }
    if (!(e->flags & RETENTION_RESOLVED)
        && retention_cycle_holder(s, index) < 0) {
        return RETENTION_NONE;
    }
    e = &s->entries[index];
    *kind = e->flags & RETENTION_UNHELD ? 3 : 2;
    *depth = e->depth;
    *head = e->root;
    return e->root;
}

/* The chain from HEAD down to TARGET, as a tuple: HEAD is on the way up
   TARGET's parents. */
static PyObject *
retention_chain(retention_search *s, uint32_t head, uint32_t target)
{
    Py_ssize_t length = 1;
    uint32_t cur = target;
    while (cur != head) {
        cur = s->entries[cur].parent;
        if (cur == RETENTION_NONE) {
            break;
        }
        length++;
    }
    PyObject *chain = PyTuple_New(length);
    if (chain == NULL) {
        return NULL;
    }
    cur = target;
    for (Py_ssize_t i = length - 1; i >= 0; i--) {
        PyTuple_SET_ITEM(chain, i, Py_NewRef(s->entries[cur].obj));
        cur = s->entries[cur].parent;
    }
    return chain;
}

static int
retention_count_type(PyObject *types, PyObject *obj)
{
    PyObject *type = (PyObject *)Py_TYPE(obj);
    PyObject *old = PyDict_GetItemWithError(types, type);
    if (old == NULL && PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t n = old == NULL ? 0 : PyLong_AsSsize_t(old);
    PyObject *count = PyLong_FromSsize_t(n + 1);
    if (count == NULL) {
        return -1;
    }
    int res = PyDict_SetItem(types, type, count);
    Py_DECREF(count);
    return res;
}

/* sys.getsizeof(OBJ), when its type's __sizeof__ is written in C; else
   (a __sizeof__ in Python) the size its type declares: Python code could
   free objects that the search refers to without owning them, or give
   the GIL to a thread that does. */
static size_t
retention_sizeof(PyObject *obj, PyObject *sizeof_name)
{
    PyTypeObject *type = Py_TYPE(obj);
    PyObject *method = _PyType_Lookup(type, sizeof_name);
    if (method != NULL && Py_IS_TYPE(method, &PyMethodDescr_Type)) {
        size_t size = _PySys_GetSizeOf(obj);
        if (size != (size_t)-1) {
            return size;
        }
        PyErr_Clear();
    }
    size_t size = (size_t)type->tp_basicsize;
    if (type->tp_itemsize != 0) {
        Py_ssize_t n = Py_SIZE(obj);
        size += (size_t)(n < 0 ? -n : n) * (size_t)type->tp_itemsize;
    }
    return size;
}

static int
retention_group_compare(const void *a, const void *b)
{
    const retention_group *x = a, *y = b;
    if (x->count != y->count) {
        return x->count > y->count ? -1 : 1;
    }
    if (x->bytes != y->bytes) {
        return x->bytes > y->bytes ? -1 : 1;
    }
    return x->sample < y->sample ? -1 : x->sample > y->sample;
}

static PyObject *
retention_group_record(retention_search *s, retention_group *g,
                       PyObject *types)
{
    retention_entry *head = &s->entries[g->head];
    Py_ssize_t refcount = -1, referrers = -1;
    long root = -1;
    if (g->kind == 0) {
        root = (long)head->root;
    }
    else {
        referrers = (Py_ssize_t)head->referrers;
        refcount = Py_REFCNT(head->obj) - (Py_ssize_t)head->own;
#ifdef _Py_IMMORTAL_REFCNT
        if (_Py_IsImmortal(head->obj)) {
            refcount = -1;
        }
#endif
    }
    /* After the refcount: the chain holds its objects. */
    PyObject *chain = retention_chain(s, g->head, g->sample);
    if (chain == NULL) {
        return NULL;
    }
    return Py_BuildValue("(slNnnOnn)", retention_kinds[g->kind], root,
                         chain, (Py_ssize_t)g->count, (Py_ssize_t)g->bytes,
                         types, refcount, referrers);
}

/* The groups are C structures until the MAX_CHAINS largest are chosen:
   only those get a dict of their types (a million holders, a refcount
   leak each, cost no million dicts). */
static PyObject *
retention_results(retention_search *s, PyObject **targets, Py_ssize_t n,
                  Py_ssize_t max_chains)
{
    PyObject *result = NULL, *groups_list = NULL;
    PyObject *all_types = PyDict_New();
    retention_group *groups = NULL;
    uint32_t *target_group = NULL, *rank = NULL;
    PyObject **kept_types = NULL;
    size_t nkept = 0;
    size_t ngroups = 0, groups_capacity = 0;
    size_t reached = 0;
    PyObject *sizeof_name = PyUnicode_InternFromString("__sizeof__");
    if (all_types == NULL || sizeof_name == NULL) {
        Py_XDECREF(all_types);
        Py_XDECREF(sizeof_name);
        return NULL;
    }
    target_group = malloc(((size_t)n + 1) * sizeof(uint32_t));
    if (target_group == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < n; t++) {
        target_group[t] = RETENTION_NONE;
        uint32_t index = retention_find(s, targets[t]);
        assert(index != RETENTION_NONE);
        if (s->entries[index].flags & RETENTION_COUNTED) {
            continue;   /* a duplicate in TARGETS */
        }
        s->entries[index].flags |= RETENTION_COUNTED;
        if (retention_count_type(all_types, targets[t]) < 0) {
            goto done;
        }
        int kind;
        uint32_t head;
        size_t depth;
        uint32_t holder = retention_holder(s, index, &kind, &head, &depth);
        if (holder == RETENTION_NONE) {
            PyErr_NoMemory();
            goto done;
        }
        if (kind == 0) {
            reached++;
        }
        retention_entry *h = &s->entries[holder];
        if (h->group == RETENTION_NONE) {
            if (ngroups == groups_capacity) {
                size_t capacity = groups_capacity ? groups_capacity * 2 : 16;
                retention_group *g = realloc(groups, capacity * sizeof(*g));
                if (g == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                groups = g;
                groups_capacity = capacity;
            }
            groups[ngroups] = (retention_group){
                .head = head, .holder = holder, .sample = index,
                .id = (uint32_t)ngroups, .depth = depth, .kind = kind,
            };
            h->group = (uint32_t)ngroups++;
        }
        retention_group *g = &groups[h->group];
        target_group[t] = h->group;
        /* The shortest chain; of those, the first target given (the
           traversal order is the types': a list's is backwards). */
        if (depth < g->depth) {
            g->sample = index;
            g->depth = depth;
        }
        g->count++;
        g->bytes += retention_sizeof(targets[t], sizeof_name);
    }
    if (ngroups > 1) {      /* GROUPS is NULL when no target was reached */
        qsort(groups, ngroups, sizeof(*groups), retention_group_compare);
    }
    nkept = ngroups < (size_t)max_chains ? ngroups : (size_t)max_chains;
    rank = malloc((ngroups + 1) * sizeof(uint32_t));
    kept_types = calloc(nkept + 1, sizeof(PyObject *));
    if (rank == NULL || kept_types == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < ngroups; i++) {
        rank[groups[i].id] = (uint32_t)i;
    }
    for (size_t i = 0; i < nkept; i++) {
        kept_types[i] = PyDict_New();
        if (kept_types[i] == NULL) {
            goto done;
        }
    }
    for (Py_ssize_t t = 0; t < n && nkept > 0; t++) {
        if (target_group[t] == RETENTION_NONE) {
            continue;
        }
        uint32_t r = rank[target_group[t]];
        if (r < nkept && retention_count_type(kept_types[r], targets[t]) < 0) {
            goto done;
        }
    }
    groups_list = PyList_New(0);
    if (groups_list == NULL) {
        goto done;
    }
    for (size_t i = 0; i < nkept; i++) {
        PyObject *record = retention_group_record(s, &groups[i],
                                                  kept_types[i]);
        if (record == NULL || PyList_Append(groups_list, record) < 0) {
            Py_XDECREF(record);
            goto done;
        }
        Py_DECREF(record);
    }
    result = Py_BuildValue("(OOnn)", groups_list, all_types,
                           (Py_ssize_t)ngroups, (Py_ssize_t)reached);
done:
    if (kept_types != NULL) {
        for (size_t i = 0; i < nkept; i++) {
            Py_XDECREF(kept_types[i]);
        }
    }
    free(kept_types);
    free(rank);
    free(target_group);
    free(groups);
    Py_XDECREF(groups_list);
    Py_DECREF(all_types);
    Py_DECREF(sizeof_name);
    return result;
}

static PyObject *
retention_search_run(PyObject *targets_fast, PyObject *roots_fast,
                     PyObject *ignore_fast, Py_ssize_t max_chains)
{
    Py_ssize_t ntargets = PySequence_Fast_GET_SIZE(targets_fast);
    PyObject **targets = PySequence_Fast_ITEMS(targets_fast);
    Py_ssize_t nroots = PySequence_Fast_GET_SIZE(roots_fast);
    PyObject **roots = PySequence_Fast_ITEMS(roots_fast);
    Py_ssize_t nignore = PySequence_Fast_GET_SIZE(ignore_fast);
    PyObject **ignored = PySequence_Fast_ITEMS(ignore_fast);
    retention_search s;
    PyObject *result = NULL;
    /* Looked up before the search: an import could run Python code. */
    PyObject *get_objects = NULL;
    PyObject *gc = PyImport_ImportModule("gc");
    if (gc != NULL) {
        get_objects = PyObject_GetAttrString(gc, "get_objects");
        Py_DECREF(gc);
    }
    if (get_objects == NULL) {
        return NULL;
    }
    if (!PyCFunction_Check(get_objects)) {
        PyErr_SetString(PyExc_TypeError,
                        "gc.get_objects is not the collector's function");
        Py_DECREF(get_objects);
        return NULL;
    }
    if (retention_init(&s, (size_t)ntargets + 65536) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    int added;
    for (Py_ssize_t i = 0; i < ntargets; i++) {
        uint32_t index = retention_add(&s, targets[i], &added);
        if (index == RETENTION_NONE) {
            PyErr_NoMemory();
            goto done;
        }
        s.entries[index].flags |= RETENTION_TARGET;
    }
    PyObject *own[3] = {targets_fast, roots_fast, ignore_fast};
    for (int i = 0; i < 3; i++) {
        if (retention_mark_ignored(&s, own[i]) < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < nignore; i++) {
        if (retention_mark_ignored(&s, ignored[i]) < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    /* Phase 1: the roots, in the caller's order, then breadth first. */
    s.phase = 1;
    for (Py_ssize_t i = 0; i < nroots; i++) {
        uint32_t index = retention_add(&s, roots[i], &added);
        if (index == RETENTION_NONE) {
            PyErr_NoMemory();
            goto done;
        }
        retention_entry *e = &s.entries[index];
        if (e->flags & (RETENTION_REACHED | RETENTION_IGNORED)) {
            continue;
        }
        e->flags |= RETENTION_REACHED;
        e->root = (uint32_t)i;
        if (retention_push(&s, index) < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    retention_run(&s);
    if (s.failed) {
        PyErr_NoMemory();
        goto done;
    }
    int missing = 0;
    for (Py_ssize_t i = 0; i < ntargets && !missing; i++) {
        uint32_t index = retention_find(&s, targets[i]);
        missing = !(s.entries[index].flags & RETENTION_REACHED);
    }
    if (missing && retention_phase2(&s, ignore_fast, get_objects) < 0) {
        goto done;
    }
    result = retention_results(&s, targets, ntargets, max_chains);
done:
    retention_fini(&s);
    Py_DECREF(get_objects);
    return result;
}

PyDoc_STRVAR(tracemalloc_retention_paths__doc__,
"_retention_paths($module, /, targets, roots, ignore=(), max_chains=3)\n"
"--\n"
"\n"
"Who holds TARGETS alive: a breadth-first search from ROOTS.\n"
"\n"
"Returns (groups, types, ngroups, reached): at most MAX_CHAINS groups,\n"
"largest first, each (kind, root_index, chain, count, bytes, types,\n"
"refcount, referrers): kind 'root' (chain from ROOTS[root_index]),\n"
"'no-referrer' (chain from an object whose refcount exceeds the\n"
"references found: refcount and referrers say by how much) or 'cycle'\n"
"(only uncollected cycles refer to it); chain a tuple of objects down to\n"
"one target; count and bytes the targets held through the group's first\n"
"object below its root; types {type: count} of those.  TYPES counts all\n"
"targets, NGROUPS is the number of groups, REACHED the targets reached\n"
"from ROOTS.  Objects in IGNORE are not followed (the caller's own\n"
"containers).  tracemalloc.retention is the documented API.");

static PyObject *
tracemalloc_retention_paths(PyObject *module, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {
        "targets", "roots", "ignore", "max_chains", NULL,
    };
    PyObject *values[4] = {NULL, NULL, NULL, NULL};
    if (nargs > 4) {
        PyErr_SetString(PyExc_TypeError,
                        "_retention_paths() takes at most 4 arguments");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        values[i] = args[i];
    }
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (names[i] != NULL
               && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) {
            i++;
        }
        if (names[i] == NULL || values[i] != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "_retention_paths() got an unexpected or repeated "
                         "keyword argument %R", key);
            return NULL;
        }
        values[i] = args[nargs + k];
    }
    if (values[0] == NULL || values[1] == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "_retention_paths() needs targets and roots");
        return NULL;
    }
    Py_ssize_t max_chains = 3;
    if (values[3] != NULL) {
        max_chains = PyLong_AsSsize_t(values[3]);
        if (max_chains == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (max_chains < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "max_chains must be >= 0");
            return NULL;
        }
    }
    PyObject *targets = PySequence_Fast(values[0],
                                        "targets must be iterable");
    if (targets == NULL) {
        return NULL;
    }
    PyObject *roots = PySequence_Fast(values[1], "roots must be iterable");
    if (roots == NULL) {
        Py_DECREF(targets);
        return NULL;
    }
    PyObject *ignore = values[2] == NULL ? PyTuple_New(0)
        : PySequence_Fast(values[2], "ignore must be iterable");
    if (ignore == NULL) {
        Py_DECREF(targets);
        Py_DECREF(roots);
        return NULL;
    }
    _PyTraceMalloc_SuspendThread();
    int gc_was_enabled = PyGC_Disable();
    PyObject *result = retention_search_run(targets, roots, ignore,
                                            max_chains);
    if (gc_was_enabled) {
        PyGC_Enable();
    }
    _PyTraceMalloc_ResumeThread();
    Py_DECREF(targets);
    Py_DECREF(roots);
    Py_DECREF(ignore);
    return result;
}

PyDoc_STRVAR(tracemalloc_thread_dicts__doc__,
"_thread_dicts($module, /)\n"
"--\n"
"\n"
"[(thread_id, dict)]: the thread state dict of every thread of this\n"
"interpreter that has one (threading.local keeps its data there), a root\n"
"that no Python object refers to.");

/* [(thread_id, object)] for every thread of this interpreter whose
   thread state has the object FIELD reads (NULL: none). */
static PyObject *
thread_objects(PyObject *(*field)(PyThreadState *))
{
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        return NULL;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
         ts != NULL; ts = PyThreadState_Next(ts)) {
        PyObject *obj = field(ts);
        if (obj == NULL) {
            continue;
        }
        PyObject *item = Py_BuildValue("(kO)", (unsigned long)ts->thread_id,
                                       obj);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
}

static PyObject *
thread_dict(PyThreadState *ts)
{
    return ts->dict;
}

static PyObject *
thread_context(PyThreadState *ts)
{
    return ts->context;
}

static PyObject *
tracemalloc_thread_dicts(PyObject *module, PyObject *unused)
{
    return thread_objects(thread_dict);
}

PyDoc_STRVAR(tracemalloc_thread_contexts__doc__,
"_thread_contexts($module, /)\n"
"--\n"
"\n"
"[(thread_id, context)]: the current contextvars.Context of every thread\n"
"of this interpreter that has one (where ContextVar.set() keeps its\n"
"values), a root that only the thread state refers to.");

static PyObject *
tracemalloc_thread_contexts(PyObject *module, PyObject *unused)
{
    return thread_objects(thread_context);
}

/* ---- the frames of every thread ------------------------------------ */

#if PY_VERSION_HEX >= 0x030C0000
#  define RETENTION_FRAME_CODE(f) _PyFrame_GetCode(f)
#  define RETENTION_TOP_FRAME(ts) ((ts)->current_frame)
#else
#  define RETENTION_FRAME_CODE(f) ((f)->f_code)
#  define RETENTION_TOP_FRAME(ts) ((ts)->cframe->current_frame)
#endif

/* The number of values on the evaluation stack of F, whose callee (the
   frame above it in its thread, NULL for the top one) is CALLEE, or -1 when
   they cannot be read: F's stack pointer is saved only when it calls a
   Python function from its own loop (a value saved before it called C code
   could be stale).  3.12+ marks an unsaved one with -1; 3.11 tells it by
   the callee, which is then no entry frame. */
static int
retention_stack_depth(_PyInterpreterFrame *f, _PyInterpreterFrame *callee)
{
    PyCodeObject *code = RETENTION_FRAME_CODE(f);
#if PY_VERSION_HEX >= 0x030C0000
    (void)callee;
#else
    if (callee == NULL || callee->is_entry) {
        return -1;
    }
#endif
    int top = f->stacktop;
    if (top < code->co_nlocalsplus
        || top > code->co_nlocalsplus + code->co_stacksize) {
        return -1;
    }
    return top - code->co_nlocalsplus;
}

/* Visit the locals (the contents of their cells) and the readable
   evaluation stack of every complete frame of every thread. */
typedef int (*retention_frame_func)(PyThreadState *ts,
                                    _PyInterpreterFrame *f,
                                    int stack_depth, void *arg);

static int
retention_each_frame(retention_frame_func func, void *arg)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
         ts != NULL; ts = PyThreadState_Next(ts)) {
        _PyInterpreterFrame *callee = NULL;
        for (_PyInterpreterFrame *f = RETENTION_TOP_FRAME(ts); f != NULL;
             callee = f, f = f->previous) {
            if (_PyFrame_IsIncomplete(f)) {
                continue;
            }
            if (func(ts, f, retention_stack_depth(f, callee), arg) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

static PyObject *
retention_local_value(PyCodeObject *code, _PyInterpreterFrame *f, int i)
{
    PyObject *value = f->localsplus[i];
    if (value == NULL) {
        return NULL;
    }
    _PyLocals_Kind kind = _PyLocals_GetKind(code->co_localspluskinds, i);
    if (kind & (CO_FAST_CELL | CO_FAST_FREE) && PyCell_Check(value)) {
        value = PyCell_GET(value);
    }
    return value;
}

static int
retention_frame_record(PyThreadState *ts, _PyInterpreterFrame *f,
                       int stack_depth, void *arg)
{
    PyObject *list = (PyObject *)arg;
    PyCodeObject *code = RETENTION_FRAME_CODE(f);
    PyObject *locals = NULL, *stack = NULL, *item = NULL;
    if (code->co_flags & CO_OPTIMIZED) {
        locals = PyDict_New();
        if (locals == NULL) {
            return -1;
        }
        for (int i = 0; i < code->co_nlocalsplus; i++) {
            PyObject *value = retention_local_value(code, f, i);
            if (value != NULL
                && PyDict_SetItem(locals,
                                  PyTuple_GET_ITEM(code->co_localsplusnames,
                                                   i), value) < 0) {
                goto error;
            }
        }
    }
    else {
        locals = Py_XNewRef(f->f_locals != NULL ? f->f_locals : Py_None);
    }
    if (stack_depth > 0) {
        Py_ssize_t n = 0;
        for (int i = 0; i < stack_depth; i++) {
            n += f->localsplus[code->co_nlocalsplus + i] != NULL;
        }
        stack = PyTuple_New(n);
        if (stack == NULL) {
            goto error;
        }
        n = 0;
        for (int i = 0; i < stack_depth; i++) {
            PyObject *value = f->localsplus[code->co_nlocalsplus + i];
            if (value != NULL) {
                PyTuple_SET_ITEM(stack, n++, Py_NewRef(value));
            }
        }
    }
    else {
        stack = Py_NewRef(Py_None);
    }
    int lineno = PyCode_Addr2Line(
        code, _PyInterpreterFrame_LASTI(f) * (int)sizeof(_Py_CODEUNIT));
    item = Py_BuildValue("(kOiOO)", (unsigned long)ts->thread_id,
                         (PyObject *)code, lineno, locals, stack);
    if (item == NULL || PyList_Append(list, item) < 0) {
        goto error;
    }
    Py_DECREF(item);
    Py_DECREF(locals);
    Py_DECREF(stack);
    return 0;
error:
    Py_XDECREF(item);
    Py_XDECREF(locals);
    Py_XDECREF(stack);
    return -1;
}

PyDoc_STRVAR(tracemalloc_frame_roots__doc__,
"_frame_roots($module, /)\n"
"--\n"
"\n"
"[(thread_id, code, lineno, locals, stack)]: every frame of every thread\n"
"of this interpreter, most recent first: LOCALS a new dict of its local\n"
"variables (a cell's contents for a cell variable) read from the frame\n"
"(no PyFrame_FastToLocals(): a deleted local does not come back), or the\n"
"frame's own locals mapping when its code is not optimized (a module, a\n"
"class body, exec()); STACK a tuple of the values on its evaluation stack\n"
"(a for loop's iterator, a comprehension's list), or None when it cannot\n"
"be read (the frame is running C code: the top of each thread).");

static PyObject *
tracemalloc_frame_roots(PyObject *module, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        return NULL;
    }
    if (retention_each_frame(retention_frame_record, list) < 0) {
        Py_DECREF(list);
        return NULL;
    }
    return list;
}

PyDoc_STRVAR(tracemalloc_untraced_call__doc__,
"_untraced_call($module, func, /, *args, **kwargs)\n"
"--\n"
"\n"
"func(*args, **kwargs) with the calling thread's tracing suspended: the\n"
"objects it makes are not traced.");

static PyObject *
tracemalloc_untraced_call(PyObject *module, PyObject *const *args,
                          size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError,
                        "_untraced_call() needs a callable");
        return NULL;
    }
    _PyTraceMalloc_SuspendThread();
    PyObject *result = PyObject_Vectorcall(args[0], args + 1, nargs - 1,
                                           kwnames);
    _PyTraceMalloc_ResumeThread();
    return result;
}

/* ---- a site's objects ---------------------------------------------- */

/* The live objects traced at one line: every object the collector lists,
   and the objects they refer to that it does not (bytes, str, untracked
   tuples).  One pin of the call-context tree is held throughout, so that
   node ids stay the same (compaction waits for the last unpin) and each
   node's verdict is computed once. */
typedef struct {
    int kind;                 /* the filename's characters */
    const void *data;
    Py_ssize_t length;
    int lineno;               /* -1: any line */
    int pinned;               /* the pin held throughout */
    uint8_t *verdicts;        /* by node id: 0 unknown, 1 match, 2 not */
    size_t nverdicts;
    int buffers;              /* match the buffers objects own too */
    retention_search seen;    /* the matches not tracked by the collector */
    PyObject *found;
    int failed;
} site_search;

/* 1 if the block at BLOCK was allocated at the site, 0 if not, -1 out of
   memory. */
static int
site_block_matches(site_search *ss, uintptr_t block)
{
    _PyTraceMalloc_Node node;
    _PyTraceMalloc_CCTView view;
    if (block == 0
        || !_PyTraceMalloc_GetTraceNode(_PyTraceMalloc_DEFAULT_DOMAIN,
                                        block, &node, &view)) {
        return 0;
    }
    if (node < ss->nverdicts && ss->verdicts[node] != 0) {
        _PyTraceMalloc_CCTUnpin();
        return ss->verdicts[node] == 1;
    }
    _PyTraceMalloc_Node parent;
    int lineno, kind;
    uint32_t depth;
    const void *data;
    Py_ssize_t length;
    int match = 0;
    if (_PyTraceMalloc_NodeInfo(&view, node, &parent, &lineno, &depth,
                                &data, &kind, &length)
        && data != NULL && kind == ss->kind && length == ss->length
        && (ss->lineno < 0 || lineno == ss->lineno)) {
        match = memcmp(data, ss->data, (size_t)length * (size_t)kind) == 0;
    }
    if (ss->pinned) {
        _PyTraceMalloc_CCTUnpin();
    }
    else {
        ss->pinned = 1;
    }
    if (node >= ss->nverdicts) {
        size_t n = ss->nverdicts ? ss->nverdicts : 1024;
        while (n <= node) {
            n *= 2;
        }
        uint8_t *verdicts = realloc(ss->verdicts, n);
        if (verdicts == NULL) {
            return -1;
        }
        memset(verdicts + ss->nverdicts, 0, n - ss->nverdicts);
        ss->verdicts = verdicts;
        ss->nverdicts = n;
    }
    ss->verdicts[node] = match ? 1 : 2;
    return match;
}

/* The blocks OBJ owns besides its own: a list's items, a bytearray's
   bytes, a combined dict's table (a split table's keys are its type's),
   a set's table.  A line that grows a container made elsewhere
   (_BUF.extend(...)) allocates only these: the container is its object.
   At most 1, in BLOCKS[0]. */
static int
site_buffers(PyObject *obj, uintptr_t *blocks)
{
    void *buffer = NULL;
    if (PyList_Check(obj)) {
        buffer = ((PyListObject *)obj)->ob_item;
    }
    else if (PyByteArray_Check(obj)) {
        buffer = ((PyByteArrayObject *)obj)->ob_bytes;
    }
    else if (PyDict_Check(obj)) {
        PyDictObject *mp = (PyDictObject *)obj;
        /* The shared empty table is static: it has no trace. */
        if (mp->ma_values == NULL) {
            buffer = mp->ma_keys;
        }
    }
    else if (PyAnySet_Check(obj)) {
        PySetObject *so = (PySetObject *)obj;
        if (so->table != so->smalltable) {
            buffer = so->table;
        }
    }
    blocks[0] = (uintptr_t)buffer;
    return buffer != NULL;
}

/* 1 if OBJ (or, in the buffers pass, a buffer it owns) was allocated at
   the site, 0 if not, -1 out of memory. */
static int
site_matches(site_search *ss, PyObject *obj)
{
    int match = site_block_matches(ss, _PyTraceMalloc_ObjectBlock(obj));
    uintptr_t buffer;
    if (match == 0 && ss->buffers && site_buffers(obj, &buffer)) {
        match = site_block_matches(ss, buffer);
    }
    return match;
}

static int
site_visit(PyObject *obj, void *arg)
{
    site_search *ss = (site_search *)arg;
    if (obj == NULL || ss->failed
        || (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj))) {
        return 0;
    }
    int added;
    uint32_t index = RETENTION_NONE;
    if (retention_is_container(obj)) {
        /* An untracked container (a dict or tuple of atoms, a code
           object): once, and then what it refers to, at any depth. */
        index = retention_add(&ss->seen, obj, &added);
        if (index == RETENTION_NONE) {
            ss->failed = 1;
            return 0;
        }
        if (!added) {
            return 0;
        }
        if (retention_push(&ss->seen, index) < 0) {
            ss->failed = 1;
            return 0;
        }
    }
    int match = site_matches(ss, obj);
    if (match < 0) {
        ss->failed = 1;
        return 0;
    }
    if (match) {
        if (index == RETENTION_NONE) {
            index = retention_add(&ss->seen, obj, &added);
            if (index == RETENTION_NONE) {
                ss->failed = 1;
                return 0;
            }
        }
        if (added && PyList_Append(ss->found, obj) < 0) {
            ss->failed = 2;
        }
    }
    return 0;
}

/* A frame's locals and evaluation stack: what only a running frame refers
   to (a thread's local variable) is listed by no container. */
static int
site_visit_frame(PyThreadState *ts, _PyInterpreterFrame *f,
                 int stack_depth, void *arg)
{
    site_search *ss = (site_search *)arg;
    PyCodeObject *code = RETENTION_FRAME_CODE(f);
    int n = code->co_nlocalsplus + (stack_depth > 0 ? stack_depth : 0);
    for (int i = 0; i < n && !ss->failed; i++) {
        (void)site_visit(f->localsplus[i], ss);
    }
    return 0;
}

/* Traverse the untracked containers site_visit() queued. */
static void
site_drain(site_search *ss)
{
    retention_search *s = &ss->seen;
    while (s->head < s->tail && !ss->failed) {
        PyObject *obj = s->entries[s->queue[s->head++]].obj;
        if (PyCode_Check(obj)) {
            (void)retention_traverse_code((PyCodeObject *)obj, site_visit,
                                          ss);
            continue;
        }
        (void)retention_tp_traverse(obj, site_visit, ss);
    }
}

/* One pass over EVERYTHING (the collector's objects), what they refer to
   that it does not track, and the frames' locals. */
static void
site_scan(site_search *ss, PyObject *everything)
{
    Py_ssize_t n = PyList_GET_SIZE(everything);
    for (Py_ssize_t i = 0; i < n && !ss->failed; i++) {
        PyObject *obj = PyList_GET_ITEM(everything, i);
        int match = site_matches(ss, obj);
        if (match < 0) {
            ss->failed = 1;
        }
        else if (match && PyList_Append(ss->found, obj) < 0) {
            ss->failed = 2;
        }
    }
    for (Py_ssize_t i = 0; i < n && !ss->failed; i++) {
        PyObject *obj = PyList_GET_ITEM(everything, i);
        (void)retention_tp_traverse(obj, site_visit, ss);
        site_drain(ss);
    }
    if (!ss->failed) {
        (void)retention_each_frame(site_visit_frame, ss);
        site_drain(ss);
    }
}

PyDoc_STRVAR(tracemalloc_site_objects__doc__,
"_site_objects($module, filename, lineno, /)\n"
"--\n"
"\n"
"The live objects whose allocation was traced at FILENAME:LINENO (their\n"
"most recent frame; any line when LINENO is None), as a list: those the\n"
"collector lists, then those they refer to that it does not.  When none\n"
"of the site's blocks is an object: the lists, dicts, sets and bytearrays\n"
"whose buffer is one of them.");

/* The (filename, lineno) arguments of _site_objects() and _site_blocks():
   0 with *LINENO -1 for None, or -1 with an exception. */
static int
site_parse_args(const char *name, PyObject *const *args, Py_ssize_t nargs,
                int *lineno)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 arguments", name);
        return -1;
    }
    PyObject *filename = args[0];
    if (!PyUnicode_Check(filename)) {
        PyErr_Format(PyExc_TypeError, "filename must be a str, not %.200s",
                     Py_TYPE(filename)->tp_name);
        return -1;
    }
    *lineno = -1;
    if (args[1] != Py_None) {
        *lineno = _PyLong_AsInt(args[1]);
        if (*lineno == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (*lineno < 0) {
            PyErr_SetString(PyExc_ValueError, "lineno must be >= 0");
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(tracemalloc_site_blocks__doc__,
"_site_blocks($module, filename, lineno, /)\n"
"--\n"
"\n"
"(count, size) of the live blocks of domain 0 traced at FILENAME:LINENO\n"
"(their most recent frame; any line when LINENO is None), from the\n"
"engine's totals per call context, whatever they hold: objects or not.\n"
"In sampling mode, the estimated counts.");

static PyObject *
tracemalloc_site_blocks(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargs)
{
    int lineno;
    if (site_parse_args("_site_blocks", args, nargs, &lineno) < 0) {
        return NULL;
    }
    if (!_Py_tracemalloc_config.tracing) {
        return Py_BuildValue("(ii)", 0, 0);
    }
    PyObject *filename = args[0];
    int want_kind = PyUnicode_KIND(filename);
    const void *want_data = PyUnicode_DATA(filename);
    Py_ssize_t want_length = PyUnicode_GET_LENGTH(filename);
    _PyTraceMalloc_PeakGroup *groups;
    size_t ngroups;
    uint32_t generation;
    _PyTraceMalloc_CCTView view;
    if (_PyTraceMalloc_LiveCopy(&groups, &ngroups, &generation, &view,
                                1) < 0) {
        return PyErr_NoMemory();
    }
    uint64_t count = 0, size = 0;
    for (size_t i = 0; i < ngroups; i++) {
        if (groups[i].domain != _PyTraceMalloc_DEFAULT_DOMAIN) {
            continue;
        }
        _PyTraceMalloc_Node parent;
        int line, kind;
        uint32_t depth;
        const void *data;
        Py_ssize_t length;
        if (_PyTraceMalloc_NodeInfo(&view, groups[i].node, &parent, &line,
                                    &depth, &data, &kind, &length)
            && data != NULL && kind == want_kind && length == want_length
            && (lineno < 0 || line == lineno)
            && memcmp(data, want_data,
                      (size_t)length * (size_t)kind) == 0) {
            count += groups[i].count;
            size += groups[i].size;
        }
    }
    if (view.sample != 0) {
        count /= _PyTraceMalloc_SAMPLE_COUNT_UNIT;
    }
    _PyTraceMalloc_CCTUnpin();
    free(groups);
    return Py_BuildValue("(KK)", (unsigned long long)count,
                         (unsigned long long)size);
}

static PyObject *
tracemalloc_site_objects(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargs)
{
    int lineno;
    if (site_parse_args("_site_objects", args, nargs, &lineno) < 0) {
        return NULL;
    }
    PyObject *filename = args[0];
    PyObject *gc = PyImport_ImportModule("gc");
    if (gc == NULL) {
        return NULL;
    }
    PyObject *get_objects = PyObject_GetAttrString(gc, "get_objects");
    Py_DECREF(gc);
    if (get_objects == NULL) {
        return NULL;
    }
    site_search ss = {
        .kind = PyUnicode_KIND(filename),
        .data = PyUnicode_DATA(filename),
        .length = PyUnicode_GET_LENGTH(filename),
        .lineno = lineno,
    };
    PyObject *result = NULL, *everything = NULL;
    _PyTraceMalloc_SuspendThread();
    int gc_was_enabled = PyGC_Disable();
    if (retention_init(&ss.seen, 0) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    ss.found = PyList_New(0);
    if (ss.found == NULL) {
        goto done;
    }
    everything = PyObject_CallNoArgs(get_objects);
    if (everything == NULL) {
        goto done;
    }
    if (!PyList_Check(everything)) {
        PyErr_SetString(PyExc_TypeError, "gc.get_objects() is not a list");
        goto done;
    }
    if (retention_add_frozen(everything) < 0) {
        goto done;
    }
    site_scan(&ss, everything);
    if (!ss.failed && PyList_GET_SIZE(ss.found) == 0) {
        /* None of the site's blocks is an object: the line grew a
           container made elsewhere (_BUF.extend(...)).  Its objects are
           then the owners of the buffers it allocated. */
        retention_fini(&ss.seen);
        if (retention_init(&ss.seen, 0) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        ss.buffers = 1;
        site_scan(&ss, everything);
    }
    if (ss.failed == 1) {
        PyErr_NoMemory();
    }
    else if (!ss.failed) {
        result = Py_NewRef(ss.found);
    }
done:
    if (ss.pinned) {
        _PyTraceMalloc_CCTUnpin();
    }
    free(ss.verdicts);
    retention_fini(&ss.seen);
    Py_XDECREF(ss.found);
    Py_XDECREF(everything);
    Py_DECREF(get_objects);
    if (gc_was_enabled) {
        PyGC_Enable();
    }
    _PyTraceMalloc_ResumeThread();
    return result;
}

#define TRACEMALLOC_RETENTION_METHODDEFS \
    {"_retention_paths", _PyCFunction_CAST(tracemalloc_retention_paths), \
     METH_FASTCALL | METH_KEYWORDS, tracemalloc_retention_paths__doc__}, \
    {"_thread_dicts", tracemalloc_thread_dicts, METH_NOARGS, \
     tracemalloc_thread_dicts__doc__}, \
    {"_thread_contexts", tracemalloc_thread_contexts, METH_NOARGS, \
     tracemalloc_thread_contexts__doc__}, \
    {"_site_objects", _PyCFunction_CAST(tracemalloc_site_objects), \
     METH_FASTCALL, tracemalloc_site_objects__doc__}, \
    {"_site_blocks", _PyCFunction_CAST(tracemalloc_site_blocks), \
     METH_FASTCALL, tracemalloc_site_blocks__doc__}, \
    {"_frame_roots", tracemalloc_frame_roots, METH_NOARGS, \
     tracemalloc_frame_roots__doc__}, \
    {"_untraced_call", _PyCFunction_CAST(tracemalloc_untraced_call), \
     METH_FASTCALL | METH_KEYWORDS, tracemalloc_untraced_call__doc__},
