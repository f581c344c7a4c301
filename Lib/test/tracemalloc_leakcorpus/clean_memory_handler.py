"""logging.handlers.MemoryHandler(capacity=4): each call logs a record,
which the handler buffers; every fourth record flushes the buffer to its
target, emptying it."""

import itertools
import logging
import logging.handlers

_requests = itertools.count(1000)
_logger = logging.getLogger("tracemalloc_leakcorpus.memory_handler")
_logger.propagate = False
_logger.setLevel(logging.INFO)
_logger.addHandler(logging.handlers.MemoryHandler(
    capacity=4, target=logging.NullHandler()))


def run():
    _logger.info("request %d handled", next(_requests))
