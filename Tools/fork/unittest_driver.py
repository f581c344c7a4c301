"""Run one test module with unittest and print its counts as JSON.

Used by run_tests.py in a child interpreter, as `python -m unittest_driver
MODULE SKIPS_JSON`: through runpy and unittest.main, like `python -m
unittest`, so tests that look at stack depth see what they expect.
"""

import json
import sys
import unittest

from test import support


def strip(suite, skips):
    out = unittest.TestSuite()
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            out.addTest(strip(test, skips))
        elif test.id() not in skips:
            out.addTest(test)
    return out


class CountingLoader(unittest.TestLoader):
    skips = set()

    def loadTestsFromNames(self, names, module=None):
        return strip(super().loadTestsFromNames(names, module), self.skips)


def main():
    name, skips = sys.argv[1], set(json.loads(sys.argv[2]))
    support.use_resources = []      # like regrtest without -u
    CountingLoader.skips = skips
    prog = unittest.main(module=None, argv=["unittest_driver", name],
                         testLoader=CountingLoader(), exit=False,
                         testRunner=unittest.TextTestRunner(stream=sys.stderr))
    result = prog.result
    failed = (len(result.failures) + len(result.errors)
              + len(result.unexpectedSuccesses))
    skipped = len(result.skipped)
    print("COUNTS " + json.dumps({
        "passed": result.testsRun - failed - skipped, "failed": failed,
        "skipped": skipped, "excluded": len(skips)}))


if __name__ == "__main__":
    main()
