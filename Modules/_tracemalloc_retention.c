/* Retention paths: who holds a set of objects alive.
 *
 * Included by Modules/_tracemalloc.c; exposed as
 * _tracemalloc._retention_paths(), _tracemalloc._thread_dicts() and
 * _tracemalloc._site_objects() (a site's live objects).
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

typedef struct {
    PyObject *obj;        /* borrowed: nothing runs while the search lives */
    uint32_t parent;      /* entry it was first reached from, or NONE */
    uint32_t root;        /* root index (phase 1) or holding entry (2) */
    uint32_t referrers;   /* phase 2: references from Python objects */
    uint32_t own;         /* phase 2: references from the search's own */
    uint32_t group;       /* the chain group it heads, or NONE */
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
    if (!PyObject_IS_GC(obj) || s->phase == 2) {
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
    if (PyObject_IS_GC(obj) && retention_push(s, index) < 0) {
        s->failed = 1;
    }
    return 0;
}

static void
retention_traverse(retention_search *s, uint32_t index, visitproc visit)
{
    PyObject *obj = s->entries[index].obj;
    traverseproc traverse = Py_TYPE(obj)->tp_traverse;
    if (traverse == NULL || !PyObject_IS_GC(obj)) {
        return;
    }
    s->current = index;
    (void)traverse(obj, visit, s);
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
    /* Count the references to unreached objects (and targets). */
    size_t count = s->count;
    for (size_t i = 0; i < count; i++) {
        uint32_t flags = s->entries[i].flags;
        if (flags & RETENTION_UNREACHED
            || (flags & RETENTION_TARGET && !(flags & RETENTION_REACHED))) {
            retention_traverse(s, (uint32_t)i, retention_visit_count);
        }
    }
    /* The search's own containers: their references are not holders. */
    Py_ssize_t nignore = PySequence_Fast_GET_SIZE(ignore_fast);
    PyObject **ignored = PySequence_Fast_ITEMS(ignore_fast);
    for (Py_ssize_t i = 0; i < nignore; i++) {
        uint32_t index = retention_find(s, ignored[i]);
        if (index != RETENTION_NONE) {
            retention_traverse(s, index, retention_visit_count);
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
    size_t depth;         /* its chain's length less one */
    int kind;             /* 0 root, 1 no Python referrer, 2 cycle,
                             3 only the search's own containers */
    size_t count;
    size_t bytes;
    PyObject *types;      /* dict: type -> count */
} retention_group;

static const char *const retention_kinds[] = {
    "root", "no-referrer", "cycle", "unheld",
};

/* The entry a target's group is keyed by: for a root chain, the first
   object below the root (the root itself for a chain of one or two); for a
   C-held one, the object with unseen references; for a cycle, the first
   object met twice walking back the referrers. */
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
    *kind = 2;
    /* Walk the referrers back until one repeats. */
    uint32_t cur = index;
    uint32_t walked[256];
    int nwalked = 0;
    while (cur != RETENTION_NONE && nwalked < 256
           && !(s->entries[cur].flags & RETENTION_WALKED)) {
        s->entries[cur].flags |= RETENTION_WALKED;
        walked[nwalked++] = cur;
        cur = s->entries[cur].parent;
    }
    for (int i = 0; i < nwalked; i++) {
        s->entries[walked[i]].flags &= ~RETENTION_WALKED;
    }
    if (cur == RETENTION_NONE) {
        /* No referrer at the end of the walk: only the search's own
           containers (and the caller's IGNORE) refer to it. */
        cur = walked[nwalked - 1];
        *kind = 3;
    }
    *head = cur;
    return cur;
}

/* The chain from HEAD down to TARGET, as a tuple; for a cycle, from the
   object where it closes. */
static PyObject *
retention_chain(retention_search *s, uint32_t head, uint32_t target)
{
    Py_ssize_t length = 1;
    uint32_t cur = target;
    while (cur != head && length < 256) {
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
retention_group_record(retention_search *s, retention_group *g)
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
                         g->types, refcount, referrers);
}

static PyObject *
retention_results(retention_search *s, PyObject **targets, Py_ssize_t n,
                  Py_ssize_t max_chains)
{
    PyObject *result = NULL, *groups_list = NULL;
    PyObject *all_types = PyDict_New();
    retention_group *groups = NULL;
    size_t ngroups = 0, groups_capacity = 0;
    size_t reached = 0;
    PyObject *sizeof_name = PyUnicode_InternFromString("__sizeof__");
    if (all_types == NULL || sizeof_name == NULL) {
        Py_XDECREF(all_types);
        Py_XDECREF(sizeof_name);
        return NULL;
    }
    for (Py_ssize_t t = 0; t < n; t++) {
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
            PyObject *types = PyDict_New();
            if (types == NULL) {
                goto done;
            }
            groups[ngroups] = (retention_group){
                .head = head, .holder = holder, .sample = index,
                .depth = depth, .kind = kind, .types = types,
            };
            h->group = (uint32_t)ngroups++;
        }
        retention_group *g = &groups[h->group];
        /* The shortest chain; of those, the first target given (the
           traversal order is the types': a list's is backwards). */
        if (depth < g->depth) {
            g->sample = index;
            g->depth = depth;
        }
        g->count++;
        g->bytes += retention_sizeof(targets[t], sizeof_name);
        if (retention_count_type(g->types, targets[t]) < 0) {
            goto done;
        }
    }
    if (ngroups > 1) {      /* GROUPS is NULL when no target was reached */
        qsort(groups, ngroups, sizeof(*groups), retention_group_compare);
    }
    groups_list = PyList_New(0);
    if (groups_list == NULL) {
        goto done;
    }
    for (size_t i = 0; i < ngroups && (Py_ssize_t)i < max_chains; i++) {
        PyObject *record = retention_group_record(s, &groups[i]);
        if (record == NULL || PyList_Append(groups_list, record) < 0) {
            Py_XDECREF(record);
            goto done;
        }
        Py_DECREF(record);
    }
    result = Py_BuildValue("(OOnn)", groups_list, all_types,
                           (Py_ssize_t)ngroups, (Py_ssize_t)reached);
done:
    for (size_t i = 0; i < ngroups; i++) {
        Py_DECREF(groups[i].types);
    }
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

static PyObject *
tracemalloc_thread_dicts(PyObject *module, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        return NULL;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
         ts != NULL; ts = PyThreadState_Next(ts)) {
        if (ts->dict == NULL) {
            continue;
        }
        PyObject *item = Py_BuildValue("(kO)", (unsigned long)ts->thread_id,
                                       ts->dict);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
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
    retention_search seen;    /* the matches not tracked by the collector */
    PyObject *found;
    int failed;
} site_search;

/* 1 if OBJ was allocated at the site, 0 if not, -1 out of memory. */
static int
site_matches(site_search *ss, PyObject *obj)
{
    _PyTraceMalloc_Node node;
    _PyTraceMalloc_CCTView view;
    if (!_PyTraceMalloc_GetTraceNode(_PyTraceMalloc_DEFAULT_DOMAIN,
                                     _PyTraceMalloc_ObjectBlock(obj),
                                     &node, &view)) {
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

static int
site_visit(PyObject *obj, void *arg)
{
    site_search *ss = (site_search *)arg;
    if (obj == NULL || ss->failed
        || (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj))) {
        return 0;
    }
    int match = site_matches(ss, obj);
    if (match < 0) {
        ss->failed = 1;
        return 0;
    }
    if (match) {
        int added;
        if (retention_add(&ss->seen, obj, &added) == RETENTION_NONE) {
            ss->failed = 1;
            return 0;
        }
        if (added && PyList_Append(ss->found, obj) < 0) {
            ss->failed = 2;
        }
    }
    return 0;
}

PyDoc_STRVAR(tracemalloc_site_objects__doc__,
"_site_objects($module, filename, lineno, /)\n"
"--\n"
"\n"
"The live objects whose allocation was traced at FILENAME:LINENO (their\n"
"most recent frame; any line when LINENO is None), as a list: those the\n"
"collector lists, then those they refer to that it does not.");

static PyObject *
tracemalloc_site_objects(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError,
                        "_site_objects() takes 2 arguments");
        return NULL;
    }
    PyObject *filename = args[0];
    if (!PyUnicode_Check(filename)) {
        PyErr_Format(PyExc_TypeError, "filename must be a str, not %.200s",
                     Py_TYPE(filename)->tp_name);
        return NULL;
    }
    int lineno = -1;
    if (args[1] != Py_None) {
        lineno = _PyLong_AsInt(args[1]);
        if (lineno == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (lineno < 0) {
            PyErr_SetString(PyExc_ValueError, "lineno must be >= 0");
            return NULL;
        }
    }
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
    Py_ssize_t n = PyList_GET_SIZE(everything);
    for (Py_ssize_t i = 0; i < n && !ss.failed; i++) {
        PyObject *obj = PyList_GET_ITEM(everything, i);
        int match = site_matches(&ss, obj);
        if (match < 0) {
            ss.failed = 1;
        }
        else if (match && PyList_Append(ss.found, obj) < 0) {
            ss.failed = 2;
        }
    }
    for (Py_ssize_t i = 0; i < n && !ss.failed; i++) {
        PyObject *obj = PyList_GET_ITEM(everything, i);
        traverseproc traverse = Py_TYPE(obj)->tp_traverse;
        if (traverse != NULL) {
            (void)traverse(obj, site_visit, &ss);
        }
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
    {"_site_objects", _PyCFunction_CAST(tracemalloc_site_objects), \
     METH_FASTCALL, tracemalloc_site_objects__doc__},
