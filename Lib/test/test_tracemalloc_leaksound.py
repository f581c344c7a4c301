"""The leak checker's wrong answers of issue 29 (section 2), each a test
that failed before its fix.

2.5: a coroutine function, a generator function or an asynchronous
generator function as the target got a clean verdict: its body never ran.
It now runs to its end in each round.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from tracemalloc import leaks

KEEP = []


async def coroutine_leak():
    import asyncio
    await asyncio.sleep(0)
    KEEP.append([0] * 1000)


async def coroutine_clean():
    import asyncio
    await asyncio.sleep(0)
    local = [0] * 1000
    del local


def generator_leak():
    KEEP.append([0] * 1000)
    yield 1
    KEEP.append([0] * 1000)


async def async_generator_leak():
    KEEP.append([0] * 1000)
    yield 1


def generator_raises():
    yield 1
    raise ValueError("raised by the body")


class TargetKindsTest(unittest.TestCase):

    def tearDown(self):
        KEEP.clear()

    def test_coroutine_function_leak_found(self):
        self.assertTrue(leaks.check(coroutine_leak))

    def test_coroutine_function_clean(self):
        self.assertFalse(leaks.check(coroutine_clean))

    def test_generator_function_leak_found(self):
        report = leaks.check(generator_leak)
        self.assertTrue(report)

    def test_async_generator_function_leak_found(self):
        self.assertTrue(leaks.check(async_generator_leak))

    def test_generator_body_exception_propagates(self):
        with self.assertRaises(ValueError):
            leaks.check(generator_raises)

    def test_cli_coroutine_function_leak_exits_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "amod.py"), "w") as f:
                f.write(textwrap.dedent("""\
                    import asyncio
                    keep = []
                    async def leak():
                        await asyncio.sleep(0)
                        keep.append([0] * 1000)
                    """))
            env = dict(os.environ)
            env.pop("PYTHONTRACEMALLOC", None)
            proc = subprocess.run(
                [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                 "amod:leak"], cwd=tmp, env=env, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("amod.py:5", proc.stderr)
        self.assertNotIn("never awaited", proc.stderr)


if __name__ == "__main__":
    unittest.main()
