"""Programs of the differential test test_tracemalloc_parity.

scenarios.py holds deterministic programs, one function per scenario;
runner.py runs one of them with tracemalloc on and prints the traces whose
allocating frame is in scenarios.py.  Both use the standard library only,
so that the same files run on the fork and on pristine CPython 3.11.2.
"""
