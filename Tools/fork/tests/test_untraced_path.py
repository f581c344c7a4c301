"""Tracing off costs one predictable branch: the allocator entry points
keep pristine's tail call (3.11.2 or 3.13.15, the base this interpreter
was built from).

Each public allocator function must test the tracing flag and then, on the
untraced path, jump to the installed allocator (`jmp *`), with no call and
no stack frame of its own.  Checked on the interpreter's own machine code
with objdump; skipped where objdump is missing or the code is not x86-64.
"""

import glob
import os
import platform
import re
import shutil
import subprocess
import sys
import unittest

FUNCTIONS = [
    f"{prefix}{name}"
    for prefix in ("PyMem_Raw", "PyMem_", "PyObject_")
    for name in ("Malloc", "Calloc", "Realloc", "Free")
]


def binary_with_symbols():
    """The file that holds libpython's code: a shared libpython if the
    interpreter links one, else the interpreter itself."""
    exe = os.path.realpath(sys.executable)
    libdir = os.path.dirname(exe)
    for name in os.listdir(libdir):
        if name.startswith("libpython3") and ".so" in name:
            return os.path.join(libdir, name)
    return exe


def pristine_binary():
    """Pristine upstream of this interpreter's version, as `make
    bench-pristine` builds it, or None: $TRACEMALLOC_PRISTINE_PYTHON, else
    the newest build in the cache."""
    path = os.environ.get("TRACEMALLOC_PRISTINE_PYTHON")
    if path:
        return path if os.path.exists(path) else None
    cache = os.environ.get("TRACEMALLOC_FORK_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "tracemalloc-fork")
    version = platform.python_version()
    root = os.path.join(cache, f"pristine-{version}-build")
    found = sorted(glob.glob(os.path.join(root, "*", f"Python-{version}",
                                          "python")), key=os.path.getmtime)
    return found[-1] if found else None


def disassemble(binary, function):
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", f"--disassemble={function}",
         binary], capture_output=True, text=True, check=True).stdout
    lines = []
    inside = False
    for line in out.splitlines():
        if re.match(rf"^[0-9a-f]+ <{re.escape(function)}>:$", line):
            inside = True
            continue
        if inside:
            if not line.strip():
                break
            parts = line.split("\t", 1)
            if len(parts) == 2:
                lines.append(parts[1].strip())
    return lines


def untraced_path(instructions):
    """Instructions from the entry up to the first indirect jump or return,
    following no branch: the fall-through path."""
    path = []
    for insn in instructions:
        path.append(insn)
        if insn.startswith("jmp") and "*" in insn:
            return path, "tail call"
        if insn.startswith("ret"):
            return path, "return"
    return path, "end"


@unittest.skipIf(shutil.which("objdump") is None, "needs objdump")
@unittest.skipUnless(platform.machine() in ("x86_64", "AMD64"),
                     "the check reads x86-64 code")
class UntracedPathTest(unittest.TestCase):

    def test_entry_points_tail_call_the_allocator(self):
        binary = binary_with_symbols()
        pristine = pristine_binary()
        if pristine is None:
            print(f"no pristine {platform.python_version()} build: path "
                  "lengths checked against a fixed bound", file=sys.stderr)
        for function in FUNCTIONS:
            with self.subTest(function=function):
                code = disassemble(binary, function)
                if not code:
                    self.skipTest(f"{function} not found in {binary}")
                path, end = untraced_path(code)
                text = "\n".join(path)
                # The size checks of the API return NULL early; the
                # untraced path continues after them to the tail call.
                self.assertFalse([i for i in path if i.startswith("call")],
                                 f"{function} calls on its untraced path:\n"
                                 f"{text}")
                self.assertFalse([i for i in path
                                  if i.startswith(("push", "sub "))
                                  and "%rsp" in i],
                                 f"{function} makes a frame:\n{text}")
                if end == "return":
                    # An early "return NULL" for a too-large size comes
                    # first in some layouts: then the tail call must still
                    # be in the function.
                    self.assertTrue([i for i in code
                                     if i.startswith("jmp") and "*" in i],
                                    f"{function} has no tail call:\n"
                                    + "\n".join(code))
                else:
                    self.assertEqual(end, "tail call", text)
                # The flag's load, test and branch: three instructions
                # more than pristine's path (or, without a pristine build
                # to compare with, a short path all the same).
                if pristine is not None:
                    pristine_path, _ = untraced_path(
                        disassemble(pristine, function))
                    self.assertLessEqual(len(path), len(pristine_path) + 3,
                                         f"{text}\n-- pristine:\n"
                                         + "\n".join(pristine_path))
                else:
                    self.assertLessEqual(len(path), 16, text)


if __name__ == "__main__":
    unittest.main()
