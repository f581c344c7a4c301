"""Context labels: which request, tenant or asyncio task allocated.

``with tracemalloc.label(endpoint="/users"):`` attaches its labels to the
allocations made inside, in that thread or asyncio task, nested calls
included.  The labels live in a ContextVar, so they follow contextvars'
rules: each thread starts without labels, and an asyncio task starts with
the labels of the code that created it.  ``label_tasks()`` adds two more to
every asyncio task created afterwards: ``task`` (its name) and
``coroutine`` (the qualified name of the coroutine it runs).

The engine reads the ContextVar only when a frame is linked to its caller,
never per allocation (Python/tracemalloc_labels.c): a label costs one node
of the call-context tree per call path that allocates under it.  A
snapshot taken with ``take_snapshot(labels=True)`` gives each trace its
labels (``Trace.labels``); ``statistics('label')`` groups by label set,
and ``dump_pprof()`` writes them as pprof labels.

The ContextVar's value is the label set's canonical form, a str: the JSON
array of its ``[key, value]`` pairs sorted by key (None: no labels).  The
engine stores that str, so equal sets are one node.
"""

import contextvars
import functools
import weakref

import _tracemalloc

__all__ = ['label', 'get_labels', 'get_object_labels', 'label_tasks',
           'is_labelling_tasks']

# The current label set: its canonical str (or None), which the engine
# reads, and the same as a dict (or None, never changed in place), which
# label() and get_labels() read; the two are always set together.  And,
# for nesting, the stack of what each open label() replaced:
# (outer stack, str, dict, the label() object).
_current = contextvars.ContextVar('tracemalloc.label', default=None)
_current_dict = contextvars.ContextVar('tracemalloc.label_dict',
                                       default=None)
_replaced = contextvars.ContextVar('tracemalloc.label_stack', default=None)
# The task whose context this is, as a weak reference, where the task hook
# labelled it: a rename relabels only that task's own context.
_task_ref = contextvars.ContextVar('tracemalloc.label_task', default=None)
_tracemalloc._set_label_var(_current)


def _set_current(labels):
    """Make the dict *labels* (owned from now on) the current labels."""
    _current.set(_canonical(tuple(sorted(labels.items()))) if labels
                 else None)
    _current_dict.set(labels or None)


@functools.lru_cache(maxsize=4096)
def _canonical(items):
    """The canonical str of the label set *items* (sorted (name, value)
    pairs), checked: label() and nested labels ask again and again for the
    same few sets, and json.dumps() was most of a label's cost."""
    labels = dict(items)
    _check(labels)
    return _encode(labels)


def _clear_caches():
    """Empty the caches of label sets (tracemalloc.leaks.clear_caches()):
    a workload that labels each call with a new value (a request id, a
    task's name) fills them until they are full, and a leak check would
    take that filling for a leak."""
    _canonical.cache_clear()
    _decode_pairs.cache_clear()


def _encode(labels):
    """The canonical str of the dict *labels* (None when empty)."""
    if not labels:
        return None
    import json

    return json.dumps(sorted(labels.items()), ensure_ascii=False,
                      separators=(',', ':'))


@functools.lru_cache(maxsize=1024)
def _decode_pairs(text):
    import json

    return tuple(tuple(pair) for pair in json.loads(text))


def is_canonical(text):
    """Whether *text* is a label set's canonical str (a loaded file's):
    label() could have made it."""
    import json

    try:
        pairs = json.loads(text)
    except ValueError:
        return False
    if not (type(pairs) is list and pairs
            and all(type(pair) is list and len(pair) == 2
                    and type(pair[0]) is str and type(pair[1]) is str
                    for pair in pairs)):
        return False
    try:
        _check(dict(pairs))
    except (TypeError, ValueError):
        return False
    return _encode(dict(pairs)) == text


def decode(text):
    """The dict of a canonical label str (as Trace.labels gives it); {} for
    None."""
    if text is None:
        return {}
    return dict(_decode_pairs(text))


def format_labels(text):
    """'key=value, key=value' of a canonical label str; '' for None."""
    if text is None:
        return ''
    return ', '.join(f'{key}={value}' for key, value in _decode_pairs(text))


def get_labels():
    """The labels of the current context, as a new dict."""
    return dict(_current_dict.get() or {})


# The pprof labels that snapshots with threads already carry.
_RESERVED = ('thread', 'thread_id')


def get_object_labels(obj):
    """The labels under which *obj* was allocated, as a new dict; None if
    its memory is not traced (as get_object_traceback())."""
    text = _tracemalloc._get_object_labels(obj)
    if text is None:
        return None
    return decode(text or None)


def _check(labels):
    for key, value in labels.items():
        if type(key) is not str:
            raise TypeError(f"label names must be str, not "
                            f"{type(key).__name__}")
        if not key:
            raise ValueError("a label name cannot be empty")
        if key in _RESERVED or key.startswith('pprof::'):
            raise ValueError(f"label name {key!r} is reserved: pprof "
                             f"profiles give it the allocating thread")
        if not isinstance(value, str):
            raise TypeError(f"label {key!r}: values must be str, not "
                            f"{type(value).__name__} (pass str(value) if "
                            f"the value is meant to be one)")


class label:
    """Attach labels to the allocations made inside a ``with`` block.

    ``label(endpoint="/users", tenant="acme")``, or a mapping first for
    names that are not identifiers: ``label({"http.route": "/users"})``.
    Names and values are str.  Nested labels add to the outer ones (an
    inner value replaces an outer one of the same name).  The labels are
    those of the current context: they follow the code into the functions
    it calls and into the asyncio tasks it creates, not into other threads.

    Also a decorator, of functions and coroutine functions.  One object may
    be entered by many threads and tasks at once.
    """

    __slots__ = ('_labels', '_text')

    def __init__(self, mapping=None, /, **labels):
        if mapping is not None:
            if not hasattr(mapping, 'items'):
                raise TypeError(f"label() takes a mapping, not "
                                f"{type(mapping).__name__}")
            merged = dict(mapping.items())
            merged.update(labels)
        else:
            merged = labels
        if not merged:
            self._labels = None     # as the current labels say "none"
            self._text = None
            return
        try:
            self._text = _canonical(tuple(sorted(merged.items())))
        except TypeError:
            # Unsortable or unhashable names or values: say what is wrong.
            _check(merged)
            raise
        self._labels = merged

    @property
    def labels(self):
        """The labels this object adds, as a new dict."""
        return dict(self._labels or {})

    def __enter__(self):
        outer = _current_dict.get()
        text = _current.get()
        if self._labels is None:
            inner = outer
        elif outer is None:
            inner = self._labels
        else:
            inner = {**outer, **self._labels}
        # Nothing can fail from here on.
        _replaced.set((_replaced.get(), text, outer, self))
        if inner is outer:
            pass
        elif outer is None:
            _current.set(self._text)
            _current_dict.set(self._labels)
        else:
            _set_current(inner)
        _tracemalloc._label_switch()
        return self

    def __exit__(self, *exc_info):
        stack = _replaced.get()
        if stack is None:
            raise RuntimeError("tracemalloc.label: exit without an enter in "
                               "this context")
        if stack[3] is not self:
            raise RuntimeError("tracemalloc.label: exit of a label that is "
                               "not the innermost one entered in this "
                               "context")
        _replaced.set(stack[0])
        _current.set(stack[1])
        _current_dict.set(stack[2])
        _tracemalloc._label_switch()
        return False

    def __call__(self, func):
        import inspect

        if (inspect.isgeneratorfunction(func)
                or inspect.isasyncgenfunction(func)):
            # The label would end when the generator is made, before its
            # body runs.
            raise TypeError("label() cannot decorate a generator function: "
                            "use 'with label(...)' in its body")
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def labelled(*args, **kwargs):
                with self:
                    return await func(*args, **kwargs)
        else:
            @functools.wraps(func)
            def labelled(*args, **kwargs):
                with self:
                    return func(*args, **kwargs)
        return labelled

    def __repr__(self):
        pairs = ', '.join(f'{key}={value!r}'
                          for key, value in sorted((self._labels
                                                    or {}).items()))
        return f'tracemalloc.label({pairs})'


# ---- asyncio tasks --------------------------------------------------------

_labelling_tasks = False


def _task_created(task, coro):
    """Called by the engine in the task's context (see label_tasks()) when
    the task is created, and with *coro* None when it is renamed."""
    name = str(task.get_name())
    if coro is None:
        # set_name(): only the context that this hook labelled for this
        # very task (not a context given to create_task(), not a copy) is
        # renamed, at every level of its open label()s, so that leaving
        # one does not bring the old name back.
        ref = _task_ref.get()
        if ref is None or ref() is not task:
            return
        labels = dict(_current_dict.get() or {})
        labels['task'] = name
        _set_current(labels)
        _replaced.set(_renamed(_replaced.get(), name))
        return
    labels = dict(_current_dict.get() or {})
    labels['coroutine'] = str(getattr(coro, '__qualname__', None)
                              or type(coro).__qualname__)
    labels['task'] = name
    _set_current(labels)
    _task_ref.set(weakref.ref(task))


def _renamed(stack, name):
    """The stack of open label()s with the task label set to *name* in
    every level that has one."""
    if stack is None:
        return None
    outer, text, labels, owner = stack
    if labels is not None and 'task' in labels:
        labels = {**labels, 'task': name}
        text = _encode(labels)
    return (_renamed(outer, name), text, labels, owner)


def label_tasks(enable=True):
    """Label every asyncio task created from now on with ``task`` (its name
    when it was created) and ``coroutine`` (the qualified name of its
    coroutine), on top of the labels it inherits.

    A task renamed later (Task.set_name(), which create_task(name=...)
    calls when the loop has a task factory) has its new name from its next
    step on.  Tasks given a context of their own (``create_task(...,
    context=ctx)``) are not labelled: their context may be shared.  Each
    task name is a label set of its own: with allocation profiles
    (start(allocations=True)) the call paths of every task ever created are
    kept, so prefer named, long-lived tasks there.  ``label_tasks(False)``
    stops labelling new tasks."""
    global _labelling_tasks
    _tracemalloc._set_task_hook(_task_created if enable else None)
    _labelling_tasks = bool(enable)


def is_labelling_tasks():
    """True if new asyncio tasks are labelled (label_tasks())."""
    return _labelling_tasks
