# The tracemalloc fork of CPython.  `make help` lists the targets.
#
# BASE selects the upstream base: 3.13 (CPython 3.13.15, the default) or 3.11
# (CPython 3.11.2: `make BASE=3.11 ...` builds and tests the 3.11.2 fork as
# before 3.13 became the default).  Each base has its pin
# (Tools/fork/bases/BASE/pin.sh), its patch series (Tools/fork/patches/BASE/),
# its adapter (Python/tracemalloc_baseNNN.h) and its own build tree, so both
# can exist side by side:
#
# build/BASE/pristine  upstream, extracted from the verified tarball
# build/BASE/src       pristine + our files + Tools/fork/patches/BASE (the series)
# build/BASE/obj       the out-of-tree build; ./python is a script exec'ing
#                      build/BASE/obj/python for the base built last
#
# Doc/internals/tracemalloc-bases.rst says what differs between the bases and
# what a new base needs.

# The default base is FORK_DEFAULT_BASE of Tools/fork/pin.sh.
ifeq ($(origin BASE),undefined)
BASE        := $(shell sed -n 's/^FORK_DEFAULT_BASE=//p' Tools/fork/pin.sh)
endif
BASE_PIN    := $(shell here=Tools/fork; TRACEMALLOC_FORK_BASE="$(BASE)"; \
                 . Tools/fork/pin.sh && echo "$$UPSTREAM_VERSION $$ENGINE_PORTED $$FORK_CACHE")
ifneq ($(words $(BASE_PIN)),3)
$(error unknown BASE=$(BASE): the bases are those of Tools/fork/bases/)
endif
BASE_VERSION  := $(word 1,$(BASE_PIN))
ENGINE_PORTED := $(word 2,$(BASE_PIN))
CACHE_DIR     := $(word 3,$(BASE_PIN))
ALLOW_UNPORTED ?=
export TRACEMALLOC_FORK_BASE := $(BASE)

BUILD_DIR   := $(CURDIR)/build/$(BASE)
OBJ_DIR     := $(BUILD_DIR)/obj
SRC_DIR     := $(BUILD_DIR)/src
FORK_PYTHON := $(CURDIR)/python
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX      ?= /usr/local
# Shared by the fork's build and the pristine build of `make bench`, so that
# both are compiled alike.
CONFIGURE_FLAGS ?=
# The engine relies on the GIL (or on its own lock for callers without it)
# and on pymalloc's pools; the free-threaded build of 3.13 (--disable-gil,
# Py_GIL_DISABLED) has neither.  Refused here, and after configure below.
ifneq ($(filter --disable-gil,$(CONFIGURE_FLAGS)),)
$(error the free-threaded build (--disable-gil) is not supported by the tracing engine: build without --disable-gil (Doc/internals/tracemalloc-bases.rst, "The free-threaded build"))
endif
export BUILD_DIR

.PHONY: all build help demo test deps prepare check-patches refresh-patches \
        new-patch install clean distclean sanitizer-test asan-build tsan tsan-build \
        valgrind fuzz \
        test-all clang-test engine-ported

all: build

help:
	@echo "make [BASE=3.13|3.11] build ./python (pristine $(BASE_VERSION) + our files + patches/$(BASE))"
	@echo "                     BASE applies to every target; default 3.13 (3.13.15);"
	@echo "                     BASE=3.11 builds and tests the 3.11.2 fork"
	@echo "make demo            build, then show a leak found under -X tracemalloc=25"
	@echo "make test            build, then run the conformance, fork and regression tests"
	@echo "make check-patches   apply the base's series to a fresh pristine tree, zero fuzz"
	@echo "make refresh-patches regenerate the base's patches from edits in build/BASE/src"
	@echo "make new-patch NAME=slug FILES='upstream/file ...'   start a new patch"
	@echo "make install PREFIX=/opt/python-tm   install the fork"
	@echo "make dist            a relocatable binary tarball of the fork in build/BASE/dist"
	@echo "make bench | bench-quick   fork vs pristine $(BASE_VERSION) benchmarks"
	@echo "make bench-pristine  build pristine $(BASE_VERSION) with the same flags (cached)"
	@echo "make bench-leakcheck  cost of a leak check in a 10^5-live-trace process"
	@echo "make test-real-suites the pytest plugin on real projects' suites (Debian sources)"
	@echo "make abi-check       extensions built for stock 3.13.15 loaded and tested in the fork, traced"
	@echo "make bench-pytest-leakcheck  wall-time factor of pytest --tracemalloc-leaks"
	@echo "make bench-instructions | bench-longrun | bench-snapshots | bench-retention | bench-allocations | bench-native   one benchmark suite"
	@echo "make sanitizer-test  ASan+UBSan build (build/BASE/asan), engine tests and a traced suite slice"
	@echo "make tsan            ThreadSanitizer build (build/BASE/tsan), thread tests and stress under it"
	@echo "make clang-test      clang build (build/BASE/clang), the engine's tests under it"
	@echo "make valgrind        the tracemalloc tests under Valgrind, PYTHONMALLOC=malloc"
	@echo "make fuzz            fuzz Snapshot.load() for FUZZ_SECONDS (default 300)"
	@echo "make fuzz-differential  the engine against pristine $(BASE_VERSION) for FUZZ_SECONDS"
	@echo "make fuzz-differential-asan | fuzz-differential-tsan   the same on the sanitized builds"
	@echo "make test-all [TESTS='test_gc ...'] [CHUNK=40 [RESUME=1]]  the whole suite: fork, fork traced, pristine"
	@echo "make clean | distclean   (distclean removes build/BASE; build/ holds every base)"

deps:
	@Tools/fork/deps.sh

prepare: deps
	@Tools/fork/prepare-tree.sh

# The engine's C files are written for the bases whose pin says
# ENGINE_PORTED=yes; the other bases can be laid out and checked, not built.
engine-ported:
ifneq ($(ENGINE_PORTED)$(ALLOW_UNPORTED),no)
	@true
else
	@echo "build: the engine is not ported to base $(BASE) ($(BASE_VERSION)) yet:" >&2
	@echo "  make BASE=$(BASE) prepare | check-patches | bench-pristine work today;" >&2
	@echo "  ALLOW_UNPORTED=1 tries the build anyway (see Doc/internals/tracemalloc-bases.rst)" >&2
	@exit 1
endif

$(OBJ_DIR)/Makefile: | engine-ported prepare
	mkdir -p $(OBJ_DIR)
	@echo "build: configuring build/$(BASE)/obj (log in build/$(BASE)/obj/configure.log)"
	cd $(OBJ_DIR) && $(SRC_DIR)/configure --prefix=$(PREFIX) $(CONFIGURE_FLAGS) > configure.log \
	    || { tail -n 30 configure.log; exit 1; }
	@if grep -q '^#define Py_GIL_DISABLED' $(OBJ_DIR)/pyconfig.h; then \
	    echo "build: configure chose the free-threaded build (Py_GIL_DISABLED)," \
	         "which the tracing engine does not support" >&2; \
	    rm -f $(OBJ_DIR)/Makefile; exit 1; fi

# ./python is a tiny script, not a symlink: it execs the real binary by its
# path in build/BASE/obj, so sys.executable is that path and venvs (their
# `home`) and children started with a made-up argv[0] find the build tree, as
# they do with build/BASE/obj/python itself.  (Through a symlink,
# sys.executable named the repository root, which Python does not recognise
# as a build directory.)  It runs the base built last.
build: engine-ported prepare $(OBJ_DIR)/Makefile
	@echo "build: compiling base $(BASE) in build/$(BASE)/obj with $(JOBS) jobs (from scratch: several minutes)"
	$(MAKE) -C $(OBJ_DIR) -j$(JOBS) -s
	@printf '#!/bin/sh\n# Written by `make build` (BASE=%s): run the fork from its build tree.\nexec "%s" "$$@"\n' \
	    "$(BASE)" \
	    "$(OBJ_DIR)/python" > $(FORK_PYTHON).tmp
	@chmod +x $(FORK_PYTHON).tmp && mv -f $(FORK_PYTHON).tmp $(FORK_PYTHON)
	@$(FORK_PYTHON) -c "import ssl, ctypes, zlib, sqlite3, lzma, bz2, readline, uuid, dbm.gnu" \
	    || { echo "build: some stdlib extension modules are missing" >&2; exit 1; }

demo: build
	@Tools/fork/demo.sh $(FORK_PYTHON)

# The parity test compares with the pristine build of `make bench-pristine`
# when it exists (and skips, saying so, when it does not).
PARITY_ENV = $(if $(TRACEMALLOC_PRISTINE_PYTHON),,$(if $(wildcard $(PRISTINE_STAMP)),TRACEMALLOC_PRISTINE_PYTHON=$(PRISTINE_PYTHON)))

# A relocatable binary tarball of the installed fork, for CI jobs to
# download (Tools/fork/dist.sh; `make test` checks it).
.PHONY: dist
dist: build
	@TRACEMALLOC_FORK_BASE=$(BASE) Tools/fork/dist.sh $(OBJ_DIR) $(BUILD_DIR)/dist

test: build dist
	@$(PARITY_ENV) $(FORK_PYTHON) Tools/fork/run_tests.py --python $(FORK_PYTHON) --jobs $(JOBS)

check-patches:
	@Tools/fork/check-patches.sh

refresh-patches:
	@Tools/fork/refresh-patches.sh

new-patch:
	@Tools/fork/new-patch.sh $(NAME) $(FILES)

# After upstream's install, the pytest entry point of tracemalloc.pytest_plugin
# goes into the installed standard library directory, which the venvs of the
# installed interpreter see (see Tools/fork/install-pytest-entry-point.sh).
install: build
	$(MAKE) -C $(OBJ_DIR) install prefix=$(PREFIX) exec_prefix=$(PREFIX)
	@Tools/fork/install-pytest-entry-point.sh \
	    "$(DESTDIR)$(PREFIX)/lib/python$(BASE)"

# The checkers below run the stress and bookkeeping failure tests apart,
# through Tools/fork/unittest_driver.py, without the tests that a bug of
# the base's own interpreter fails or makes the checker report (JSON lists
# of test ids, the same as BASE_BUGS in run_tests.py; each reproduced on the
# base's pristine build).  gh-122752: 3.13's MAKE_FUNCTION releases the
# code object a second time when PyFunction_New() fails, which the
# nomemory sweeps and the scattered bookkeeping failures make happen; the
# freed code object is then used again (a crash, or Memcheck's invalid
# reads and writes under PYTHONMALLOC=malloc).
comma := ,
ifeq ($(BASE),3.13)
STRESS_BASE_BUGS := ["test.test_tracemalloc_stress.StressTest.test_nomemory_statistics", \
    "test.test_tracemalloc_stress.StressTest.test_nomemory_compare_to", \
    "test.test_tracemalloc_stress.StressTest.test_nomemory_dump", \
    "test.test_tracemalloc_stress.StressTest.test_nomemory_load"]
OOM_BASE_BUGS := ["test.test_tracemalloc_engine.BookkeepingOOMTest.test_failures_scattered_over_a_workload"]
# Under AddressSanitizer the shutdown scenario fails too: gh-124878, a
# daemon thread asked to drop the GIL reads its thread state in drop_gil()
# (the eval breaker, which 3.13 moved into the thread state) after
# _Py_Finalize() freed it in _PyThreadState_DeleteList(); ASan aborts the
# child on that read, also with tracing off.  Pristine 3.13.15 under TSan
# reports the same use after free with nothing but busy daemon threads at
# exit (the script in Tools/fork/tsan.supp).  make tsan keeps the test:
# TSan's report goes to its log, and the child's exit status stays 0.
ASAN_STRESS_BASE_BUGS := $(subst ],$(comma) "test.test_tracemalloc_stress.StressTest.test_shutdown_while_tracing"],$(STRESS_BASE_BUGS))
else
STRESS_BASE_BUGS := []
OOM_BASE_BUGS := []
ASAN_STRESS_BASE_BUGS := []
endif
# $(call unittest_without,COMMAND,TEST,BUGS): in the current directory, run
# the test name TEST through unittest_driver with COMMAND (environment and
# checker) before ./python, without the tests of the variable named BUGS.
# unittest_driver prints its counts as JSON and exits 0: the counts say
# whether a test failed.
unittest_without = out=$$(PYTHONPATH=$(CURDIR)/Tools/fork $(1) ./python -m \
    unittest_driver $(2) '$($(3))'); status=$$?; echo "$$out"; \
    test $$status = 0 && echo "$$out" | grep -q '"failed": 0,'

# The engine's tests under AddressSanitizer and UndefinedBehaviorSanitizer,
# in a second out-of-tree build of the same build/BASE/src.
ASAN_DIR := $(BUILD_DIR)/asan
ASAN_ENV := ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1
asan-build: engine-ported prepare
	mkdir -p $(ASAN_DIR)
	test -f $(ASAN_DIR)/Makefile || (cd $(ASAN_DIR) && $(SRC_DIR)/configure \
	    --with-address-sanitizer --with-undefined-behavior-sanitizer > configure.log)
	# CPython leaks by design at exit: leak checking stays off.
	ASAN_OPTIONS=detect_leaks=0 $(MAKE) -C $(ASAN_DIR) -j$(JOBS) -s

sanitizer-test: asan-build
	cd $(ASAN_DIR) && $(ASAN_ENV) ./python -m unittest \
	    test.test_tracemalloc $(foreach c,TracebackTest StoreExactnessTest \
	    UserAllocatorStoreTest ThreadStressTest ForkTest \
	    TrackTest,test.test_tracemalloc_engine.$(c)) \
	    test.test_tracemalloc_hardening test.test_tracemalloc_peak \
	    test.test_tracemalloc_threads test.test_tracemalloc_module \
	    test.test_tracemalloc_fuzz_corpus test.test_tracemalloc_edgecases \
	    test.test_tracemalloc_sampling test.test_tracemalloc_soundness \
	    test.test_tracemalloc_retention test.test_tracemalloc_differential \
	    test.test_tracemalloc_native test.test_tracemalloc_nativeframes
	cd $(ASAN_DIR) && $(call unittest_without,$(ASAN_ENV),test.test_tracemalloc_engine.BookkeepingOOMTest,OOM_BASE_BUGS)
	cd $(ASAN_DIR) && $(call unittest_without,$(ASAN_ENV),test.test_tracemalloc_stress,ASAN_STRESS_BASE_BUGS)
	# A slice of the regression suite, traced: what the engine meets most.
	# -W prints a failing test's output (which test, what it said), still
	# as a failure.
	cd $(ASAN_DIR) && $(ASAN_ENV) PYTHONTRACEMALLOC=25 ./python -m test \
	    -j$(JOBS) -W --timeout=3600 $(SANITIZER_SLICE)

# A shared libpython (--enable-shared), in another out-of-tree build: its
# libpython defines the native interposers, and an LD_PRELOAD allocator
# comes before it (Python/tracemalloc_native.c, native_resolve()).  The
# conformance suite and the native tests (Tools/fork/run_tests.py --only
# shared).
SHARED_DIR := $(BUILD_DIR)/shared
.PHONY: shared-build shared-test
shared-build: engine-ported prepare
	mkdir -p $(SHARED_DIR)
	test -f $(SHARED_DIR)/Makefile || (cd $(SHARED_DIR) && $(SRC_DIR)/configure \
	    --enable-shared LDFLAGS="-Wl,-rpath,$(abspath $(SHARED_DIR))" > configure.log \
	    || { tail -n 30 configure.log; rm -f Makefile; exit 1; })
	nice -n 10 $(MAKE) -C $(SHARED_DIR) -j$(JOBS) -s

shared-test: shared-build
	@$(SHARED_DIR)/python Tools/fork/run_tests.py \
	    --python $(SHARED_DIR)/python --jobs $(JOBS) --only shared

# The engine with clang instead of gcc, in another out-of-tree build: the
# conformance suite and the engine's tests under it.
CLANG_DIR := $(BUILD_DIR)/clang
CLANG_TESTS := test.test_tracemalloc test.test_tracemalloc_engine \
    test.test_tracemalloc_hardening test.test_tracemalloc_peak \
    test.test_tracemalloc_threads test.test_tracemalloc_stress
clang-test: engine-ported prepare
	@command -v clang >/dev/null || { echo "clang-test: apt-get install clang" >&2; exit 1; }
	mkdir -p $(CLANG_DIR)
	test -f $(CLANG_DIR)/Makefile || (cd $(CLANG_DIR) && $(SRC_DIR)/configure \
	    CC=clang > configure.log)
	$(MAKE) -C $(CLANG_DIR) -j$(JOBS) -s
	cd $(CLANG_DIR) && ./python -X faulthandler -m unittest $(CLANG_TESTS)

# The traced slice of the suite that sanitizer-test runs (test_concurrent_
# futures skips itself on ASan builds: upstream finds it too slow there).
SANITIZER_SLICE := test_gc test_threading test_asyncio test_concurrent_futures \
    test_zlib test_bz2 test_lzma test_ctypes test_pickle

# ThreadSanitizer, in a third out-of-tree build (3.11's configure has no
# switch for it, and 3.13's --with-thread-sanitizer adds the same
# -fsanitize=thread: the flags are passed by hand on both).  TSan cannot see
# the barrier that membarrier(2) puts on other threads, so the engine lock
# is built with real fences on both sides (PY_TRACEMALLOC_NO_MEMBARRIER);
# the suppressions in Tools/fork/tsan.supp are upstream's own races, each
# explained.
TSAN_DIR   := $(BUILD_DIR)/tsan
TSAN_FLAGS := -fsanitize=thread -DPY_TRACEMALLOC_NO_MEMBARRIER
TSAN_TESTS := $(foreach c,ThreadStressTest ForkTest TrackTest,test.test_tracemalloc_engine.$(c)) \
    test.test_tracemalloc_edgecases test.test_tracemalloc_sampling \
    $(foreach t,exact sampled,test.test_tracemalloc_native.InProcessTest.test_$(t)) \
    test.test_tracemalloc_native.RealNativeCodeTest
# 3.13: isolated interpreters with GILs of their own allocate in parallel,
# the engine's lock taken from several GIL holders at once (PEP 684).
ifeq ($(BASE),3.13)
TSAN_TESTS += test.test_tracemalloc_subinterp
endif
# Not InProcessTest.test_native_frames: at a thread's exit, libunwind's
# per-thread cache destructor (native frames' unw_backtrace()) locks a
# mutex through TSan's interceptor after TSan has finished the thread,
# and TSan's runtime crashes (a libunwind/TSan interaction, outside the
# engine; test_tracemalloc_nativeframes runs under ASan and Valgrind).
# exitcode=0: the tests judge behaviour, sanitizer-reports.sh the reports.
TSAN_ENV   := TSAN_OPTIONS="exitcode=0 halt_on_error=0 second_deadlock_stack=1 \
    die_after_fork=0 report_signal_unsafe=0 allocator_may_return_null=1 \
    suppressions=$(CURDIR)/Tools/fork/tsan.supp log_path=$(TSAN_DIR)/tsan-report"
tsan-build: engine-ported prepare
	mkdir -p $(TSAN_DIR)
	test -f $(TSAN_DIR)/Makefile || (cd $(TSAN_DIR) && $(SRC_DIR)/configure \
	    CFLAGS="$(TSAN_FLAGS)" LDFLAGS="-fsanitize=thread" > configure.log)
	# The build runs the new interpreter (setup.py): reports, not failures.
	TSAN_OPTIONS="exitcode=0 suppressions=$(CURDIR)/Tools/fork/tsan.supp" \
	    nice -n 10 $(MAKE) -C $(TSAN_DIR) -j$(JOBS) -s

tsan: tsan-build
	rm -f $(TSAN_DIR)/tsan-report.*
	cd $(TSAN_DIR) && $(TSAN_ENV) nice -n 10 ./python -m unittest $(TSAN_TESTS)
	cd $(TSAN_DIR) && $(call unittest_without,$(TSAN_ENV) nice -n 10,test.test_tracemalloc_stress,STRESS_BASE_BUGS)
	@Tools/fork/sanitizer-reports.sh tsan $(TSAN_DIR)/tsan-report

# Valgrind on the tracemalloc tests, with the system allocator so that
# Valgrind sees every block (pymalloc's arenas would hide them).  Memcheck
# replaces malloc() in every object unless told to leave the executable's
# alone (somalloc=nouserintercepts): the native interposers then run, and
# forward to the C library's malloc(), which Memcheck replaces.
# Invalid reads, writes and frees are what is checked: undefined-value
# errors are off, because 3.11's _PyLong_FromByteArray() reads the digit of
# a zero-sized int (upstream's, fixed in 3.12), and Memcheck then sees the
# small int 0 -- and everything computed from it -- as undefined.
VALGRIND_TESTS := test.test_tracemalloc test.test_tracemalloc_module \
    test.test_tracemalloc_hardening $(foreach c,TracebackTest \
    StoreExactnessTest TrackTest,test.test_tracemalloc_engine.$(c)) \
    test.test_tracemalloc_sampling test.test_tracemalloc_native.InProcessTest
VALGRIND := PYTHONMALLOC=malloc nice -n 10 valgrind -q --error-exitcode=99 \
    --leak-check=no --undef-value-errors=no \
    --soname-synonyms=somalloc=nouserintercepts \
    --suppressions=$(SRC_DIR)/Misc/valgrind-python.supp
valgrind: build
	cd $(OBJ_DIR) && $(VALGRIND) ./python -m unittest $(VALGRIND_TESTS)
	cd $(OBJ_DIR) && $(call unittest_without,$(VALGRIND),test.test_tracemalloc_engine.BookkeepingOOMTest,OOM_BASE_BUGS)

# A bounded mutation fuzzer for Snapshot.load(); findings are saved into
# Lib/test/tracemalloc_fuzz/crashes/, which `make test` replays.
FUZZ_SECONDS ?= 300
fuzz: build
	$(FORK_PYTHON) Tools/fork/fuzz_snapshot.py --seconds $(FUZZ_SECONDS)

# The differential fuzzer of the engine (Tools/fork/fuzz_differential.py):
# exact mode against pristine, sampling mode against the fork's own answers.
.PHONY: fuzz-differential
fuzz-differential: build
	$(FORK_PYTHON) Tools/fork/fuzz_differential.py --fork-python $(FORK_PYTHON) \
	    --both-modes --keep-going --seconds $(FUZZ_SECONDS)

# The same under AddressSanitizer+UBSan and under ThreadSanitizer: the
# sanitized build's programs are compared with pristine as above, and a
# sanitizer's report makes the program exit with its own status (66), a
# mismatch that the fuzzer prints with the report.
.PHONY: fuzz-differential-asan fuzz-differential-tsan
fuzz-differential-asan: build asan-build
	ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:exitcode=66 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=66 \
	    $(FORK_PYTHON) Tools/fork/fuzz_differential.py --fork-python $(ASAN_DIR)/python \
	    --both-modes --keep-going --seconds $(FUZZ_SECONDS)
fuzz-differential-tsan: build tsan-build
	TSAN_OPTIONS="exitcode=66 halt_on_error=0 die_after_fork=0 \
	    report_signal_unsafe=0 allocator_may_return_null=1 \
	    suppressions=$(CURDIR)/Tools/fork/tsan.supp" \
	    $(FORK_PYTHON) Tools/fork/fuzz_differential.py --fork-python $(TSAN_DIR)/python \
	    --both-modes --keep-going --seconds $(FUZZ_SECONDS)

# CPython's whole regression suite, three ways (about an hour each here);
# TESTS="test_gc test_zlib" runs a subset; CHUNK=40 runs 40 modules at a
# time in the three configurations, so that a partial run still compares;
# RESUME=1 (with the same CHUNK) carries on from where a stopped run got.
# See Tools/fork/test_all.py.
TESTS ?=
CHUNK ?=
RESUME ?=
test-all: build bench-pristine
	$(FORK_PYTHON) Tools/fork/test_all.py --fork $(FORK_PYTHON) \
	    --pristine $(PRISTINE_PYTHON) --jobs $(JOBS) $(if $(TESTS),--tests "$(TESTS)") \
	    $(if $(CHUNK),--chunk $(CHUNK)) $(if $(RESUME),--resume)

clean:
	-$(MAKE) -C $(OBJ_DIR) clean
	rm -f $(FORK_PYTHON)

distclean:
	rm -rf $(BUILD_DIR) $(FORK_PYTHON)

# Binary compatibility with stock CPython (3.13 base): the extension
# modules of pristine's own build and a third-party C extension (Debian's
# markupsafe), built with pristine's headers, loaded into the fork and
# tested traced; public struct layouts compared.  Also part of make test
# (test_tracemalloc_abi).  See Tools/fork/binary_compat.py.
.PHONY: abi-check
abi-check: build bench-pristine
	@test "$(BASE)" = 3.13 || { echo "abi-check: the 3.13 base only" >&2; exit 1; }
	$(FORK_PYTHON) Tools/fork/binary_compat.py --fork $(OBJ_DIR)/python \
	    --pristine $(PRISTINE_PYTHON)

# The pytest plugin on slices of real projects' test suites (Debian source
# packages, fetched once into the cache; skipped, saying so, without them).
# Not part of `make test`, which stays short; .ci/run runs both.
.PHONY: test-real-suites
test-real-suites: build
	@$(FORK_PYTHON) Tools/fork/run_tests.py --python $(FORK_PYTHON) --jobs $(JOBS) \
	    --only real-suites

# Wall-time factor of pytest --tracemalloc-leaks on the same slices.
.PHONY: bench-pytest-leakcheck
bench-pytest-leakcheck: build
	$(FORK_PYTHON) Tools/bench/pytest_leakcheck.py

# Cost of tracemalloc.leaks per round in a process with 10^5 live traces.
.PHONY: bench-leakcheck
bench-leakcheck: build
	$(FORK_PYTHON) Tools/bench/leakcheck.py

-include Tools/bench/bench.mk
