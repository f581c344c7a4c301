"""Who holds objects alive: retention paths from the program's roots.

``retention_paths(objects)`` finds, for each independent holder of
*objects*, the shortest chain of references from a root -- a module's
globals, a class's attributes, a local variable of a frame of any thread,
``gc.garbage``, a thread's state dict (where ``threading.local`` keeps its
data), a thread's or an asyncio task's ``contextvars.Context`` -- down to
one of them, and says how many of the objects (and how
many bytes) hang under that holder.  ``site_objects(filename, lineno)``
lists the live objects that tracemalloc traced at one line, so that
``site_retention()`` answers the same question for a snapshot's site.

The search runs in C (``_tracemalloc._retention_paths``), over
``tp_traverse`` as the garbage collector does, and allocates nothing that
tracemalloc traces.  What it reports holds no reference to the objects.
"""

import gc
import re
import sys
import threading
import types

import _tracemalloc

__all__ = ["Step", "Chain", "Retention", "retention_paths", "roots",
           "site_objects", "site_retention"]

MAX_CHAINS = 3
MAX_STEPS = 12      # Chain.format(): longer chains are shortened
_REPR_LIMIT = 40

# Root kinds, in the order the search starts from them: at equal length,
# a chain from an earlier kind wins.
ROOT_KINDS = ("gc.garbage", "module", "class", "thread", "context",
              "frame")


def _short_repr(obj, limit=_REPR_LIMIT):
    try:
        text = repr(obj)
    except Exception:
        text = f"<{type(obj).__name__} object>"
    # A chain is one line: a repr written over several lines is joined.
    text = re.sub(r"\s*[\r\n]+\s*", " ", text)
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return text


def _type_name(obj_or_type):
    cls = obj_or_type if isinstance(obj_or_type, type) else type(obj_or_type)
    module = cls.__module__
    if module in ("builtins", None):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


class Step:
    """One link of a chain: how the previous object holds this one.

    *how* is ``global NAME``, ``attribute NAME``, ``local NAME``,
    ``.NAME`` (an instance attribute), ``['key']`` (a dict key's repr,
    shortened), ``[3]`` (a list or tuple index), ``closure NAME`` (a
    closure cell's variable), ``default NAME`` (a default argument),
    ``key`` (the object is a dict key or a set member) or ``''`` when
    nothing names it (a C object's own reference); *type* is the held
    object's type name.
    """

    __slots__ = ("how", "type")

    def __init__(self, how, type):
        self.how = how
        self.type = type

    def __repr__(self):
        return f"Step({self.how!r}, {self.type!r})"

    def __eq__(self, other):
        if not isinstance(other, Step):
            return NotImplemented
        return (self.how, self.type) == (other.how, other.type)


class Chain:
    """How one independent holder keeps some of the objects alive.

    Attributes:

    *kind*
        ``'root'``: reached from a root (*root_kind* and *root* say which);
        ``'no-referrer'``: held by an object that no Python object refers
        to as often as its refcount says (*refcount* and *referrers*):
        a reference kept by C code (an extension's static, a C
        structure) or a refcount leak in an extension;
        ``'cycle'``: referred to only from objects that nothing reachable
        refers to, an uncollected cycle (``gc.collect()`` would free it);
        ``'unheld'``: nothing refers to it but the caller's own
        containers.
    *root_kind*, *root*
        For ``'root'`` chains: one of ``ROOT_KINDS`` and the root's
        description (``module app.sessions``, ``class app.Registry``,
        ``thread MainThread, frame work() at app.py:12``, ``gc.garbage``,
        ``thread worker, state dict``, ``thread MainThread, context``,
        ``asyncio task Task-3, context``).  Else None.
    *steps*
        List of ``Step``, from the root down to one of the objects.
    *length*
        The number of objects on the chain, the root's namespace (the
        module's ``__dict__``, the class's, a frame's locals) included:
        what ``gc.get_referents()`` walks, unlike *steps*, which fold an
        instance's ``__dict__`` or a function's ``__closure__`` into one
        step.
    *count*, *size*
        How many of the objects, and how many bytes (``sys.getsizeof()``),
        hang under the chain's first object below its root.
    *types*
        ``{type name: count}`` of those objects.
    *refcount*, *referrers*
        For ``'no-referrer'`` chains, the refcount of the chain's first
        object and the references to it found in Python objects (the
        search's own excluded).  Else None.
    """

    def __init__(self, kind, root_kind, root, steps, length, count, size,
                 types, refcount=None, referrers=None):
        self.kind = kind
        self.root_kind = root_kind
        self.root = root
        self.steps = steps
        self.length = length
        self.count = count
        self.size = size
        self.types = types
        self.refcount = refcount
        self.referrers = referrers

    def __repr__(self):
        return (f"<Chain {self.kind} count={self.count} size={self.size}: "
                f"{self}>")

    def _head(self):
        if self.kind == "root":
            return self.root
        if self.kind == "no-referrer":
            return (f"no Python referrer (refcount {self.refcount}, "
                    f"{self.referrers} referrer(s) found: kept by C code "
                    f"or a refcount leak)")
        if self.kind == "cycle":
            return "uncollected cycle"
        return "nothing but the caller's containers"

    def format(self, max_steps=MAX_STEPS):
        """The chain on one line; of a chain of more than *max_steps*
        steps (None: no limit), the first and last halves, with how many
        were left out between them."""
        def render(i, step):
            if i == 0 and step.how:
                return [f"{step.how} ({step.type})"]
            if step.how:
                return [step.how, step.type]
            return [step.type]

        parts = [self._head()]
        steps = list(enumerate(self.steps))
        if max_steps is not None and len(steps) > max_steps:
            half = max(1, max_steps // 2)
            left_out = len(steps) - 2 * half
            for i, step in steps[:half]:
                parts.extend(render(i, step))
            parts.append(f"... {left_out} more steps ...")
            steps = steps[-half:]
        for i, step in steps:
            parts.extend(render(i, step))
        return " \u2192 ".join(parts)

    def __str__(self):
        return self.format()

    def as_dict(self):
        """The chain as JSON-ready data (see "JSON reports" in the docs):
        *steps* as ``[how, type]`` pairs, root first; *text* is the chain
        as format() writes it, whole."""
        return {
            "kind": self.kind,
            "root_kind": self.root_kind,
            "root": self.root,
            "steps": [[step.how, step.type] for step in self.steps],
            "length": self.length,
            "count": self.count,
            "size": self.size,
            "types": dict(self.types),
            "refcount": self.refcount,
            "referrers": self.referrers,
            "text": self.format(max_steps=None),
        }

    def summary(self):
        """One line: count, size and type counts under the holder."""
        types = ", ".join(f"{name} {n}" for name, n in
                          sorted(self.types.items(), key=lambda t: -t[1]))
        plural = "" if self.count == 1 else "s"
        return (f"{self.count} object{plural}, {self.size} B under it "
                f"({types})")


class Retention:
    """The holders of a set of objects.

    *chains*: at most ``max_chains`` ``Chain`` objects, largest first (by
    count, then size); *holders*: how many independent holders there are
    in all; *count*: how many distinct objects were asked about;
    *reached*: how many of them are reachable from a root; *types*:
    ``{type name: count}`` of all of them; *blocks*: for a site's
    retention (site_retention()), ``(count, size)`` of the site's live
    blocks when the search ran, objects or not; else None.
    """

    def __init__(self, chains, holders, count, reached, types, blocks=None):
        self.chains = chains
        self.holders = holders
        self.count = count
        self.reached = reached
        self.types = types
        self.blocks = blocks

    def __repr__(self):
        return (f"<Retention {self.count} objects, {self.holders} "
                f"holder(s), {len(self.chains)} chain(s)>")

    def format(self, limit=None):
        """Lines: each chain, then its summary, indented."""
        lines = []
        for chain in self.chains[:limit]:
            lines.append(str(chain))
            lines.append("    " + chain.summary())
        if self.holders > len(lines) // 2:
            lines.append(f"({self.holders - len(lines) // 2} more "
                         f"holder(s))")
        return lines

    def __str__(self):
        return "\n".join(self.format())

    def no_chain(self):
        """What is known when there is no chain to show: only what the
        search checked (the site's live blocks, the objects found)."""
        if self.count:
            return (f"{self.count} object(s), no chain asked for "
                    f"(max_chains=0)")
        if self.blocks is None:
            return "no object asked about"
        blocks, size = self.blocks
        if not blocks:
            return ("no live block of this line left: all freed before "
                    "the search")
        plural = "" if blocks == 1 else "s"
        return (f"no object found in the {blocks} live block{plural} of "
                f"this line ({size} B): none is an object that the "
                f"collector, a container or a frame refers to, nor a "
                f"list's, dict's, set's or bytearray's buffer (an object "
                f"that only C code or a leaked reference keeps is not "
                f"seen)")

    def as_dict(self):
        """JSON-ready data: the chains (Chain.as_dict()) and the totals."""
        return {
            "chains": [chain.as_dict() for chain in self.chains],
            "holders": self.holders,
            "count": self.count,
            "reached": self.reached,
            "types": dict(self.types),
        }


# ---- roots -------------------------------------------------------------

def _class_dict(cls):
    # The dict behind cls.__dict__ (a mappingproxy): what tp_traverse
    # walks.
    try:
        proxy = cls.__dict__
    except Exception:
        return None
    for referent in gc.get_referents(proxy):
        if isinstance(referent, dict):
            return referent
    return None


def _all_classes():
    seen = set()
    order = []
    todo = [object]
    while todo:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        order.append(cls)
        try:
            subclasses = type.__subclasses__(cls)
        except TypeError:
            continue
        todo.extend(reversed(subclasses))
    return order


def _thread_names():
    names = {}
    for thread in threading.enumerate():
        if thread.ident is not None:
            names[thread.ident] = thread.name
    return names


def roots(skip_frames=None):
    """The roots the search starts from, in order: a list of
    ``(kind, description, namespace)``, where *namespace* is the object
    the search walks from (a module's ``__dict__``, a class's, a copy of a
    frame's locals, ``gc.garbage``, a thread's state dict).

    *skip_frames*: a set of code objects whose frames are not roots.
    """
    skip_frames = skip_frames or ()
    # gc.garbage as one holder, not each of its items: the search walks
    # from a list around it (retention_paths() drops it from the chains).
    result = [("gc.garbage", "gc.garbage", [gc.garbage])]
    for name, module in list(sys.modules.items()):
        try:
            namespace = getattr(module, "__dict__", None)
        except Exception:
            # An object in sys.modules whose __getattr__ raises something
            # else than AttributeError (a lazy namespace): no globals.
            namespace = None
        if isinstance(namespace, dict):
            result.append(("module", f"module {name}", namespace))
    for cls in _all_classes():
        namespace = _class_dict(cls)
        if namespace is not None:
            result.append(("class", f"class {_type_name(cls)}", namespace))
    names = _thread_names()
    for ident, namespace in _tracemalloc._thread_dicts():
        name = names.get(ident, ident)
        result.append(("thread", f"thread {name}, state dict", namespace))
    # Each thread's current contextvars.Context, which only its thread
    # state refers to (ContextVar.set() keeps the value there), and each
    # asyncio task's: walked from their variables, by name.
    for ident, context in _tracemalloc._thread_contexts():
        name = names.get(ident, ident)
        result.append(("context", f"thread {name}, context",
                       _context_variables(context)))
    for task in _asyncio_tasks():
        context = _task_context(task)
        if context is not None:
            result.append(("context",
                           f"asyncio task {_task_name(task)}, context",
                           _context_variables(context)))
    # The frames, read in C: their locals without frame.f_locals (which
    # on 3.11 copies them into the frame, bringing a deleted local back),
    # a frame's own locals mapping when it is not a function's (a module,
    # a class body, exec(code, namespace): its globals then), and the
    # values on its evaluation stack (a for loop's iterator, the list a
    # comprehension is building) when they can be read.
    for ident, code, lineno, namespace, stack in _tracemalloc._frame_roots():
        if code in skip_frames:
            continue
        name = names.get(ident, ident)
        where = (f"thread {name}, frame {code.co_name}() at "
                 f"{code.co_filename}:{lineno}")
        if namespace is not None:
            result.append(("frame", where, namespace))
        if stack:
            result.append(("frame", where, _Stack(stack)))
    # The globals of running frames that are no module's: code run by
    # exec(code, globals, locals) keeps its globals there (s38 review, G5).
    # f_globals is read as is, without copying anything into the frame.
    known = {id(namespace) for _, _, namespace in result}
    for ident, frame in sys._current_frames().items():
        name = names.get(ident, ident)
        while frame is not None:
            namespace = frame.f_globals
            code = frame.f_code
            if id(namespace) not in known and code not in skip_frames:
                known.add(id(namespace))
                result.append((
                    "frame-globals",
                    f"thread {name}, frame {code.co_name}() at "
                    f"{code.co_filename}:{frame.f_lineno}, its globals",
                    namespace))
            frame = frame.f_back
        del frame
    return result


class _Stack(tuple):
    """The values on a frame's evaluation stack (a root's namespace)."""
    __slots__ = ()


def _context_variables(context):
    """{name: value} of the variables set in *context* (a
    contextvars.Context): the namespace of a context root.  A name that
    several variables share gets its variable's id."""
    namespace = {}
    for variable, value in context.items():
        name = variable.name
        if name in namespace:
            name = f"{name} (at {id(variable):#x})"
        namespace[name] = value
    return namespace


def _asyncio_tasks():
    """The asyncio tasks not done yet, of every loop (none if asyncio was
    never imported)."""
    tasks_module = sys.modules.get("asyncio.tasks")
    if tasks_module is None:
        return []
    tasks = []
    # 3.12+: _scheduled_tasks and _eager_tasks; 3.11: _all_tasks.
    for name in ("_scheduled_tasks", "_eager_tasks", "_all_tasks"):
        registry = getattr(tasks_module, name, None)
        if registry is None:
            continue
        try:
            tasks.extend(list(registry))
        except Exception:
            continue
    result = []
    seen = set()
    for task in tasks:
        if id(task) in seen:
            continue
        seen.add(id(task))
        try:
            if task.done():
                continue
        except Exception:
            continue
        result.append(task)
    return result


def _task_context(task):
    get_context = getattr(type(task), "get_context", None)
    try:
        if get_context is not None:
            return get_context(task)
        context = getattr(task, "_context", None)  # the pure-Python Task
        if context is not None:
            return context
        # 3.11's C Task keeps its context in a field of its own, which it
        # shows the collector only.
        import contextvars
        for referent in gc.get_referents(task):
            if type(referent) is contextvars.Context:
                return referent
    except Exception:
        pass
    return None


def _task_name(task):
    try:
        return task.get_name()
    except Exception:
        return f"at {id(task):#x}"


def _own_code():
    # The frames of this module's functions are not roots: their locals
    # are the search's own.
    own = set()
    for value in globals().values():
        code = getattr(value, "__code__", None)
        if code is not None:
            own.add(code)
    return own


# ---- naming the steps --------------------------------------------------

def _copied(view, parent):
    """list(view(parent)): the items of a dict, list or tuple as they are
    now.  The copy is one C call that other threads cannot interleave with
    for a built-in container; [] if it changed size all the same."""
    for _ in range(3):
        try:
            return list(view(parent))
        except RuntimeError:
            continue        # "changed size during iteration": try again
    return []


def _how(parent, child):
    """How PARENT refers to CHILD: a short string, '' if unknown.

    Only the C types' own functions look into PARENT (dict.items,
    list.__iter__, ...), looked up by type(PARENT), not by isinstance(),
    which a __class__ property fools (Mock(spec=dict)): a subclass's
    items() or __iter__ may hide or reorder what it holds, or fail."""
    cls = type(parent)
    if issubclass(cls, dict):
        # A copy, made in C without running Python code: another thread
        # may change the dict while the step is named (s38 review, G4).
        for key, value in _copied(dict.items, parent):
            if value is child:
                return f"[{_short_repr(key)}]"
        return "key"
    if issubclass(cls, (list, tuple)):
        items = _copied(list.__iter__ if issubclass(cls, list)
                        else tuple.__iter__, parent)
        for index, value in enumerate(items):
            if value is child:
                return f"[{index}]"
        return ""
    if issubclass(cls, (set, frozenset)):
        return "key"
    if cls is types.CellType:
        return "cell_contents"
    if cls is types.CodeType:
        for name in ("co_consts", "co_names"):
            if getattr(parent, name) is child:
                return f".{name}"
        return ""
    if cls is types.MethodType:
        if parent.__self__ is child:
            return ".__self__"
        if parent.__func__ is child:
            return ".__func__"
        return ""
    if issubclass(cls, type):
        if _class_dict(parent) is child:
            return "__dict__"
    if cls is types.FunctionType:
        # Only a function's own attributes: getattr() on any object could
        # run its __getattr__.
        # (Not __annotations__: reading it makes a dict when there is
        # none.)
        for name in ("__defaults__", "__kwdefaults__", "__closure__",
                     "__globals__", "__code__", "__dict__"):
            if getattr(parent, name, None) is child:
                return f".{name}"
    namespace = None
    mro = type.__dict__["__mro__"].__get__(cls)
    for base in mro:
        descriptor = _class_dict(base).get("__dict__") \
            if _class_dict(base) is not None else None
        if descriptor is not None:
            # Only the instance dict's own C getter: a property named
            # __dict__ is user code.
            if type(descriptor) is types.GetSetDescriptorType:
                try:
                    namespace = descriptor.__get__(parent, cls)
                except Exception:
                    namespace = None
            break
    if type(namespace) is dict:
        if namespace is child:
            return ".__dict__"
        for key, value in dict.items(namespace):
            if value is child:
                return f".{key}"
    # Slots, and a C type's members: their descriptors, whatever
    # __slots__ was written as (one string, a private name, which the
    # descriptor has mangled).
    for base in mro:
        namespace = _class_dict(base)
        if namespace is None:
            continue
        for descriptor in list(dict.values(namespace)):
            if type(descriptor) is not types.MemberDescriptorType:
                continue
            try:
                if descriptor.__get__(parent, cls) is child:
                    return f".{descriptor.__name__}"
            except Exception:
                pass
    return ""


_NAMESPACE_STEP = {"module": "global", "class": "attribute",
                   "frame": "local", "context": "ContextVar"}


def _steps(objects, root_kind):
    """Steps for the chain OBJECTS (its first object the namespace)."""
    steps = []
    i = 1
    while i < len(objects):
        parent, child = objects[i - 1], objects[i]
        how = _how(parent, child)
        if i == 1 and root_kind in _NAMESPACE_STEP and how.startswith("['"):
            how = f"{_NAMESPACE_STEP[root_kind]} {how[2:-2]}"
        elif i == 1 and type(parent) is _Stack:
            how = "evaluation stack"
        following = objects[i + 1] if i + 1 < len(objects) else None
        # An instance's __dict__: one step, ".name".
        if how == ".__dict__" and following is not None:
            inner = _how(child, following)
            if inner.startswith("['"):
                steps.append(Step(f".{inner[2:-2]}", _type_name(following)))
                i += 2
                continue
        # A function's closure: ".__closure__" [i] cell -> contents.
        if (how == ".__closure__" and isinstance(parent, types.FunctionType)
                and i + 2 < len(objects)):
            index = _how(child, following)
            contents = objects[i + 2]
            try:
                name = parent.__code__.co_freevars[int(index[1:-1])]
            except (ValueError, IndexError):
                name = index
            steps.append(Step(f"closure {name}", _type_name(contents)))
            i += 3
            continue
        # A default argument: ".__defaults__" [i].
        if (how == ".__defaults__" and isinstance(parent, types.FunctionType)
                and following is not None):
            index = _how(child, following)
            code = parent.__code__
            try:
                names = code.co_varnames[:code.co_argcount]
                position = len(names) - len(parent.__defaults__) \
                    + int(index[1:-1])
                name = names[position]
            except (ValueError, IndexError):
                name = index
            steps.append(Step(f"default {name}", _type_name(following)))
            i += 2
            continue
        if (how == ".__kwdefaults__" and following is not None):
            inner = _how(child, following)
            steps.append(Step(f"default {inner[2:-2]}",
                              _type_name(following)))
            i += 2
            continue
        steps.append(Step(how, _type_name(child)))
        i += 1
    return steps


# ---- the search --------------------------------------------------------

def retention_paths(objects, *, max_chains=MAX_CHAINS):
    """Who holds *objects* (an iterable) alive: a ``Retention``.

    Each independent holder gives a chain from a root down to one of the
    objects it holds; the *max_chains* (default 3) largest are kept.  The
    container *objects* itself (and the search's own) are not holders.
    """
    _check_max_chains(max_chains)
    return _untraced(_retention_paths, objects, max_chains)


def _check_max_chains(max_chains):
    if isinstance(max_chains, bool) or not isinstance(max_chains, int):
        raise TypeError("max_chains must be an int")
    if max_chains < 0:
        raise ValueError("max_chains must be >= 0")


def _untraced(func, *args):
    # The roots, the result, and what is made and dropped on the way, with
    # this thread's tracing suspended: none of it shows in a snapshot.
    try:
        return _tracemalloc._untraced_call(func, *args)
    finally:
        # What was made untraced and freed is on the free lists (the
        # engine would trace it at the line that reuses it): emptied, so
        # that the program's next objects are new blocks, as before the
        # search.
        clear = getattr(_tracemalloc, "_clear_free_lists", None)
        if clear is not None:
            clear()


def _retention_paths(objects, max_chains):
    container = objects
    targets = objects if isinstance(objects, (list, tuple)) \
        else list(objects)
    root_list = roots(_own_code())
    namespaces = [namespace for _, _, namespace in root_list]
    ignore = [container, root_list]
    ignore.extend(root_list)
    groups, all_types, holders, reached = _tracemalloc._retention_paths(
        targets, namespaces, ignore, max_chains)
    chains = []
    for (kind, root_index, chain, count, size, group_types, refcount,
         referrers) in groups:
        step_kind = None
        if kind == "root":
            root_kind, root, _ = root_list[root_index]
            if root_kind == "gc.garbage":
                chain = chain[1:]
            elif root_kind == "frame-globals":
                # A frame's globals: a frame root, whose names are globals.
                root_kind, step_kind = "frame", "module"
            objects_on_chain = chain
        else:
            root_kind = root = None
            # The head object is the holder itself: a pseudo-namespace.
            objects_on_chain = (None,) + chain
        steps = _steps(objects_on_chain, step_kind or root_kind)
        if kind != "root":
            steps[0] = Step("", steps[0].type)
        chains.append(Chain(
            kind, root_kind, root, steps, len(chain), count, size,
            {_type_name(t): n for t, n in group_types.items()},
            refcount if kind == "no-referrer" else None,
            referrers if kind == "no-referrer" else None))
    del groups, namespaces, root_list, ignore
    return Retention(chains, holders, sum(all_types.values()), reached,
                     {_type_name(t): n for t, n in all_types.items()})


def site_objects(filename, lineno=None):
    """The live objects whose allocation tracemalloc traced at
    *filename*:*lineno* (the most recent frame; any line if *lineno* is
    None): a list.  Objects that the collector does not track (bytes, str,
    int, ...) are found through the tracked objects that refer to them.
    When none of the site's blocks is an object, the site grew a container
    made elsewhere (``_BUF.extend(data)``): its objects are then the lists,
    dicts, sets and bytearrays whose buffer is one of those blocks.
    """
    if not _tracemalloc.is_tracing():
        raise RuntimeError("the tracemalloc module must be tracing memory "
                           "allocations to find a site's objects")
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a str, not "
                        f"{type(filename).__name__}")
    return _tracemalloc._site_objects(filename, lineno)


def _site_location(site):
    """(filename, lineno) of SITE, or None if it is not in domain 0."""
    if isinstance(site, tuple) and len(site) == 2 \
            and isinstance(site[0], str):
        return site
    if hasattr(site, "filename") and hasattr(site, "lineno"):
        # A Frame, or a leak report's site (tracemalloc.leaks.LeakSite).
        if getattr(site, "domain", 0) != 0:
            return None
        return site.filename, site.lineno
    traceback = getattr(site, "traceback", site)
    try:
        frame = traceback[-1]       # a Traceback ends with its most recent
        return frame.filename, frame.lineno
    except (TypeError, IndexError, AttributeError):
        raise TypeError(f"not a site: {site!r} (expected (filename, lineno), "
                        f"a Frame, a Traceback, a Statistic, a StatisticDiff "
                        f"or a tracemalloc.leaks.LeakSite)") from None


def site_retention(site, *, max_chains=MAX_CHAINS):
    """``retention_paths()`` of the live objects allocated at *site*: a
    ``(filename, lineno)`` pair, a ``tracemalloc.Frame``, a
    ``tracemalloc.Traceback`` (its most recent frame), a ``Statistic`` or
    ``StatisticDiff`` of a snapshot (its traceback's), or a leak report's
    ``tracemalloc.leaks.LeakSite``.  A site of another domain than 0 (a C
    extension's own blocks, which are not objects) has no objects."""
    _check_max_chains(max_chains)
    location = _site_location(site)
    if location is None:
        return retention_paths([], max_chains=max_chains)
    objects = site_objects(*location)
    return _untraced(_site_retention, objects, location, max_chains)


def _site_retention(objects, location, max_chains):
    result = _retention_paths(objects, max_chains)
    result.blocks = _tracemalloc._site_blocks(*location)
    return result
