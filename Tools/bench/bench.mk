# Tools/bench/bench.mk -- benchmark targets for the tracemalloc fork.
#
# Included by the top-level Makefile (`include Tools/bench/bench.mk`), and
# also usable on its own from the repository root:
#
#     make -f Tools/bench/bench.mk bench-pristine
#     make -f Tools/bench/bench.mk bench-quick FORK_PYTHON=/path/to/python
#
# Targets
#   bench-pristine  build unmodified upstream CPython of the base (BASE=3.11,
#                   the default: 3.11.2; BASE=3.13: 3.13.15) from the
#                   verified tarball with the fork's configure/compiler
#                   flags (cached, one build per base and flags)
#   bench           full suite (time, memory, scaling, instructions,
#                   longrun, snapshots, retention, allocations); writes
#                   Tools/bench/RESULTS.md and the README.md summary
#   bench-quick     a short subset of every suite; prints tables only
#   bench-instructions  callgrind instruction counts per alloc+free pair
#   bench-longrun   engine memory over changing call paths (issue 7)
#   bench-snapshots snapshot API at 10^4..10^6 live traces
#   bench-retention retention paths' search at 10^5 and 10^6 live objects
#   bench-allocations  allocation profiles and labels beside plain tracing (issue 33):
#                   callgrind instructions and engine memory
#   bench-native    native tracing (issue 32) off, exact, sampled, with and
#                   without native frames: callgrind instructions on
#                   native-heavy workloads, engine bytes per native trace;
#                   plus pristine under memray when bench-memray built it
#   bench-memray    build memray from a local source tree (MEMRAY_SRC; Cython
#                   >= 3.1 as CYTHON, e.g. "python3 /path/to/cython/cython.py")
#                   against the pristine interpreter, into
#                   CACHE_DIR/memray-VERSION-PYVERSION (Tools/bench/memray_build.sh;
#                   nothing is fetched, and no test needs it)
#   bench-results   regenerate RESULTS.md and the README summary from the
#                   latest saved run (Tools/bench/results/latest-full.json)
#
# Variables (all overridable; the top-level Makefile normally sets them)
#   BASE             the upstream base (Tools/fork/bases/BASE/pin.sh)
#   CACHE_DIR        tarball / pristine-build cache
#   BUILD_DIR        the fork's build directory (informational here)
#   FORK_PYTHON      the fork's interpreter
#   PREFIX           --prefix given to configure (as for the fork)
#   CONFIGURE_FLAGS  configure arguments shared by the fork and pristine
#   CFLAGS_EXTRA     extra compiler flags, passed to configure as CFLAGS=
#   BENCH_ARGS       extra arguments for Tools/bench/run.py
#   BENCH_NICE       prefix for the pristine build (default: nice -n 10)
#   MEMRAY_SRC       memray's source tree, for bench-memray
#   CYTHON           the Cython command for bench-memray (default: cython3)

BENCH_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
# Repository root = two levels above this file.
BENCH_REPO_ROOT := $(abspath $(BENCH_MK_DIR)/../..)

# Were we included by another Makefile, or run with -f directly?
BENCH_STANDALONE := $(if $(filter 1,$(words $(MAKEFILE_LIST))),yes,)

CACHE_DIR       ?= $(or $(TRACEMALLOC_FORK_CACHE),$(XDG_CACHE_HOME),$(HOME)/.cache)$(if $(TRACEMALLOC_FORK_CACHE),,/tracemalloc-fork)
PREFIX          ?= /usr/local
BUILD_DIR       ?= build
FORK_PYTHON     ?= ./python
CONFIGURE_FLAGS ?=
CFLAGS_EXTRA    ?=
BENCH_ARGS      ?=
BENCH_NICE      ?= nice -n 10
BENCH_JOBS      ?= 2

# The base's pin (version and sha256) comes from Tools/fork/pin.sh, the same
# file the fork's build and fetch-tarball.sh read.
BENCH_PIN := $(shell here="$(BENCH_REPO_ROOT)/Tools/fork"; \
	TRACEMALLOC_FORK_BASE="$(BASE)"; . "$$here/pin.sh" && \
	echo "$$FORK_BASE $$UPSTREAM_VERSION $$UPSTREAM_SHA256 $$UPSTREAM_TARBALL")
ifneq ($(words $(BENCH_PIN)),4)
$(error bench.mk: no pin for BASE=$(BASE) (see Tools/fork/bases/))
endif
BASE              := $(word 1,$(BENCH_PIN))
PY_VERSION        := $(word 2,$(BENCH_PIN))
PY_TARBALL_SHA256 := $(word 3,$(BENCH_PIN))
PY_TARBALL        := $(word 4,$(BENCH_PIN))
BENCH_FETCH       := $(BENCH_REPO_ROOT)/Tools/fork/fetch-tarball.sh

# Host interpreter only drives the runner; children are the two builds.
BENCH_DRIVER ?= $(firstword $(wildcard $(PRISTINE_PYTHON)) python3)

# Pass CC to configure only if the user set it (configure's own choice
# otherwise, exactly as for the fork).
BENCH_CC_ARG := $(if $(filter default,$(origin CC)),,CC="$(CC)")
BENCH_CFLAGS_ARG := $(if $(strip $(CFLAGS_EXTRA)),CFLAGS="$(CFLAGS_EXTRA)",)
BENCH_CONFIGURE_ARGS = --prefix=$(PREFIX) $(CONFIGURE_FLAGS) $(BENCH_CC_ARG) $(BENCH_CFLAGS_ARG)
BENCH_CC_VERSION := $(shell $(if $(filter default,$(origin CC)),gcc,$(CC)) --version 2>/dev/null | head -n 1)

# Cache key: anything that changes generated code.
BENCH_PRISTINE_KEY := $(shell printf '%s\n' '$(PY_VERSION)' '$(PY_TARBALL_SHA256)' \
	'$(PREFIX)' '$(CONFIGURE_FLAGS)' '$(CFLAGS_EXTRA)' '$(BENCH_CC_ARG)' '$(BENCH_CC_VERSION)' \
	| sha256sum | cut -c1-12)

PRISTINE_ROOT   := $(CACHE_DIR)/pristine-$(PY_VERSION)-build
PRISTINE_DIR    := $(PRISTINE_ROOT)/$(BENCH_PRISTINE_KEY)
PRISTINE_SRC    := $(PRISTINE_DIR)/Python-$(PY_VERSION)
PRISTINE_PYTHON := $(PRISTINE_SRC)/python
PRISTINE_STAMP  := $(PRISTINE_DIR)/.built

BENCH_RUN := $(BENCH_MK_DIR)/run.py

# In the top-level Makefile the fork is built by `build`; standalone we just
# use whatever FORK_PYTHON points at.
BENCH_FORK_DEPS ?= $(if $(BENCH_STANDALONE),,build)

.PHONY: bench bench-quick bench-pristine bench-results bench-pristine-path \
	bench-instructions bench-longrun bench-snapshots bench-retention \
	bench-allocations bench-native bench-memray

BENCH_ALL_SUITES := time,memory,scaling,instructions,longrun,snapshots,retention,allocations,native

bench-pristine: $(PRISTINE_STAMP)
	@echo "PRISTINE_PYTHON = $(PRISTINE_PYTHON)"

bench-pristine-path:
	@echo $(PRISTINE_PYTHON)

# The tree is built in place; the stamp is written only after a successful
# build and smoke test, so an interrupted build is redone from scratch.
$(PRISTINE_STAMP):
	@set -e; \
	if [ -x "$(BENCH_FETCH)" ]; then \
	    tarball=$$(TRACEMALLOC_FORK_BASE=$(BASE) "$(BENCH_FETCH)"); \
	else \
	    tarball="$(CACHE_DIR)/$(PY_TARBALL)"; \
	    echo "bench-pristine: $(BENCH_FETCH) not found, using $$tarball" >&2; \
	fi; \
	test -f "$$tarball" || { echo "bench-pristine: no tarball at $$tarball" >&2; exit 1; }; \
	echo "$(PY_TARBALL_SHA256)  $$tarball" | sha256sum -c --quiet - \
	    || { echo "bench-pristine: checksum mismatch for $$tarball" >&2; exit 1; }; \
	rm -rf "$(PRISTINE_DIR)"; mkdir -p "$(PRISTINE_DIR)"; \
	tar -xf "$$tarball" -C "$(PRISTINE_DIR)"; \
	src="$(PRISTINE_SRC)"; \
	echo "bench-pristine: ./configure $(BENCH_CONFIGURE_ARGS)  (in $$src)"; \
	( cd "$$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $(BENCH_NICE) ./configure $(BENCH_CONFIGURE_ARGS) > configure.log 2>&1 ) \
	    || { tail -n 40 "$$src/configure.log" >&2; exit 1; }; \
	echo "bench-pristine: make -j$(BENCH_JOBS) (log: $$src/build.log)"; \
	( cd "$$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES $(BENCH_NICE) make -j$(BENCH_JOBS) > build.log 2>&1 ) \
	    || { tail -n 40 "$$src/build.log" >&2; exit 1; }; \
	"$$src/python" -c 'import sys, tracemalloc, json, re, asyncio, _json, _asyncio; assert "%d.%d.%d" % sys.version_info[:3] == "$(PY_VERSION)", sys.version'; \
	{ echo "version=$(PY_VERSION)"; \
	  echo "configure=$(BENCH_CONFIGURE_ARGS)"; \
	  echo "cc=$(BENCH_CC_VERSION)"; \
	  grep -E '^(OPT|CONFIGURE_CFLAGS|CONFIGURE_CFLAGS_NODIST)[[:space:]]*=' "$$src/Makefile"; \
	} > "$(PRISTINE_DIR)/build-info.txt"; \
	touch "$(PRISTINE_STAMP)"; \
	echo "bench-pristine: built $(PRISTINE_PYTHON)"

# The fork is checked inside the recipes (not as a prerequisite) so that
# `make -j bench` cannot check it before `build` has produced it.
BENCH_CHECK_FORK = @test -x "$(FORK_PYTHON)" || { echo "bench: FORK_PYTHON=$(FORK_PYTHON) is not executable" >&2; exit 1; }

bench: $(BENCH_FORK_DEPS) bench-pristine
	$(BENCH_CHECK_FORK)
	$(BENCH_DRIVER) $(BENCH_RUN) --pristine "$(PRISTINE_PYTHON)" --fork "$(FORK_PYTHON)" \
	    --suites $(BENCH_ALL_SUITES) --results $(BENCH_ARGS)

bench-quick: $(BENCH_FORK_DEPS) bench-pristine
	$(BENCH_CHECK_FORK)
	$(BENCH_DRIVER) $(BENCH_RUN) --pristine "$(PRISTINE_PYTHON)" --fork "$(FORK_PYTHON)" \
	    --quick --suites $(BENCH_ALL_SUITES) $(BENCH_ARGS)

# One suite alone (full size; add BENCH_ARGS=--quick for the short one).
# They save results/latest-custom.json (or -quick) and leave RESULTS.md alone.
bench-instructions bench-longrun bench-snapshots bench-retention bench-allocations bench-native: bench-%: $(BENCH_FORK_DEPS) bench-pristine
	$(BENCH_CHECK_FORK)
	$(BENCH_DRIVER) $(BENCH_RUN) --pristine "$(PRISTINE_PYTHON)" --fork "$(FORK_PYTHON)" \
	    --suites $* $(BENCH_ARGS)

# memray beside the fork in the native suite: built once per memray and
# pristine version; the suite finds it in the cache by itself.
bench-memray: bench-pristine
	@test -n "$(MEMRAY_SRC)" || { echo "bench-memray: set MEMRAY_SRC=/path/to/memray (a source tree, e.g. a release tag's git archive)" >&2; exit 1; }
	PRISTINE_PYTHON="$(PRISTINE_PYTHON)" BASE="$(BASE)" TRACEMALLOC_FORK_CACHE="$(CACHE_DIR)" \
	    CYTHON="$(CYTHON)" $(BENCH_MK_DIR)/memray_build.sh "$(MEMRAY_SRC)"

bench-results:
	$(BENCH_DRIVER) $(BENCH_MK_DIR)/report.py
