# The tracemalloc fork of CPython 3.11.2.  `make help` lists the targets.
#
# build/pristine  upstream 3.11.2, extracted from the verified tarball
# build/src       pristine + our files + Tools/fork/patches (the series)
# build/obj       the out-of-tree build; ./python is a script exec'ing build/obj/python

BUILD_DIR   := $(CURDIR)/build
OBJ_DIR     := $(BUILD_DIR)/obj
SRC_DIR     := $(BUILD_DIR)/src
FORK_PYTHON := $(CURDIR)/python
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX      ?= /usr/local
CACHE_DIR   := $(shell . Tools/fork/pin.sh && echo $$FORK_CACHE)
# Shared by the fork's build and the pristine build of `make bench`, so that
# both are compiled alike.
CONFIGURE_FLAGS ?=
export BUILD_DIR

.PHONY: all build help demo test deps prepare check-patches refresh-patches \
        new-patch install clean distclean sanitizer-test

all: build

help:
	@echo "make                 build ./python (pristine 3.11.2 + our files + patches)"
	@echo "make demo            build, then show a leak found under -X tracemalloc=25"
	@echo "make test            build, then run the conformance, fork and regression tests"
	@echo "make check-patches   apply the series to a fresh pristine tree, zero fuzz"
	@echo "make refresh-patches regenerate the patches from edits in build/src"
	@echo "make new-patch NAME=slug FILES='upstream/file ...'   start a new patch"
	@echo "make install PREFIX=/opt/python-tm   install the fork"
	@echo "make bench | bench-quick   fork vs pristine 3.11.2 benchmarks"
	@echo "make sanitizer-test  ASan+UBSan build (build/asan), engine tests under it"
	@echo "make clean | distclean"

deps:
	@Tools/fork/deps.sh

prepare: deps
	@Tools/fork/prepare-tree.sh

$(OBJ_DIR)/Makefile: | prepare
	mkdir -p $(OBJ_DIR)
	@echo "build: configuring build/obj (log in build/obj/configure.log)"
	cd $(OBJ_DIR) && $(SRC_DIR)/configure --prefix=$(PREFIX) $(CONFIGURE_FLAGS) > configure.log \
	    || { tail -n 30 configure.log; exit 1; }

# ./python is a tiny script, not a symlink: it execs the real binary by its
# path in build/obj, so sys.executable is that path and venvs (their `home`)
# and children started with a made-up argv[0] find the build tree, as they do
# with build/obj/python itself.  (Through a symlink, sys.executable named the
# repository root, which Python does not recognise as a build directory.)
build: prepare $(OBJ_DIR)/Makefile
	@echo "build: compiling in build/obj with $(JOBS) jobs (from scratch: several minutes)"
	$(MAKE) -C $(OBJ_DIR) -j$(JOBS) -s
	@printf '#!/bin/sh\n# Written by `make build`: run the fork from its build tree.\nexec "%s" "$$@"\n' \
	    "$(OBJ_DIR)/python" > $(FORK_PYTHON).tmp
	@chmod +x $(FORK_PYTHON).tmp && mv -f $(FORK_PYTHON).tmp $(FORK_PYTHON)
	@$(FORK_PYTHON) -c "import ssl, ctypes, zlib, sqlite3, lzma, bz2, readline, uuid, dbm.gnu" \
	    || { echo "build: some stdlib extension modules are missing" >&2; exit 1; }

demo: build
	@Tools/fork/demo.sh $(FORK_PYTHON)

test: build
	@$(FORK_PYTHON) Tools/fork/run_tests.py --python $(FORK_PYTHON) --jobs $(JOBS)

check-patches:
	@Tools/fork/check-patches.sh

refresh-patches:
	@Tools/fork/refresh-patches.sh

new-patch:
	@Tools/fork/new-patch.sh $(NAME) $(FILES)

install: build
	$(MAKE) -C $(OBJ_DIR) install prefix=$(PREFIX) exec_prefix=$(PREFIX)

# The engine's tests under AddressSanitizer and UndefinedBehaviorSanitizer,
# in a second out-of-tree build of the same build/src.
ASAN_DIR := $(BUILD_DIR)/asan
sanitizer-test: prepare
	mkdir -p $(ASAN_DIR)
	test -f $(ASAN_DIR)/Makefile || (cd $(ASAN_DIR) && $(SRC_DIR)/configure \
	    --with-address-sanitizer --with-undefined-behavior-sanitizer > configure.log)
	# CPython leaks by design at exit: leak checking stays off.
	ASAN_OPTIONS=detect_leaks=0 $(MAKE) -C $(ASAN_DIR) -j$(JOBS) -s
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
	    UBSAN_OPTIONS=print_stacktrace=1 ./python -m unittest \
	    test.test_tracemalloc $(foreach c,TracebackTest StoreExactnessTest \
	    UserAllocatorStoreTest ThreadStressTest BookkeepingOOMTest ForkTest \
	    TrackTest,test.test_tracemalloc_engine.$(c))

clean:
	-$(MAKE) -C $(OBJ_DIR) clean
	rm -f $(FORK_PYTHON)

distclean:
	rm -rf $(BUILD_DIR) $(FORK_PYTHON)

-include Tools/bench/bench.mk
