#!/usr/bin/env bash
# Usage: memray_build.sh MEMRAY_SRC
#
# Build memray (https://github.com/bloomberg/memray) from the local source
# tree MEMRAY_SRC against the pristine interpreter of the base, so that the
# native suite (native_workloads.py, `make bench-native`) can put memray's
# rows beside the fork's.  Only what `memray.Tracker(path,
# native_traces=...)` needs is built: the `memray._memray` extension and
# memray's Python package (plus `rich`, which `_memray` imports); not the
# reporters' assets, `_inject` or `_test_utils`.  Tested with memray 1.19.3
# (its setup.py; 1.20 builds with CMake instead).
#
# Nothing is fetched: MEMRAY_SRC is a source tree you have (a `git
# archive` of a release tag, or an unpacked sdist), and so is Cython's.
#
# Environment:
#   PRISTINE_PYTHON  the pristine interpreter (an in-tree build); default:
#                    `make -s bench-pristine-path` of the top-level Makefile
#                    for BASE
#   BASE             the fork's base when PRISTINE_PYTHON is not given
#   CYTHON           the command that runs Cython >= 3.1, e.g.
#                    "python3 /path/to/cython-3.1.8/cython.py" (Cython runs
#                    uncompiled from its source tree); default: cython3 or
#                    cython on PATH if recent enough (Debian 12's is 0.29)
#   RICH_DIR         the `rich` package to copy beside memray (pure Python);
#                    default: Debian's python3-rich
#   MEMRAY_OUT       output directory; default:
#                    $FORK_CACHE/memray-VERSION-PYVERSION
#   MEMRAY_NICE      prefix of the compilations (default: nice -n 10)
#   MEMRAY_JOBS      parallel compilations (default: 2)
#
# Result: MEMRAY_OUT/site holds `memray` and `rich`; the native suite finds
# it there by itself (or through MEMRAY_PYTHONPATH).  The stamp .built is
# written last, after the interpreter imported memray and traced a block.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

log() { echo "memray_build: $*" >&2; }
die() { log "$*"; exit 1; }

[ $# -eq 1 ] || die "usage: $0 MEMRAY_SRC (a memray source tree)"
src=$(cd "$1" && pwd) || die "no directory $1"
if [ ! -f "$src/src/memray/_memray.pyx" ] || [ ! -f "$src/src/memray/_version.py" ]; then
    die "$src is not a memray source tree (no src/memray/_memray.pyx)"
fi

[ -z "${BASE:-}" ] || export TRACEMALLOC_FORK_BASE=$BASE
here=$root/Tools/fork
# shellcheck disable=SC1091
. "$here/pin.sh" || die "unknown BASE=${BASE:-}"

python=${PRISTINE_PYTHON:-}
if [ -z "$python" ]; then
    python=$(make -s --no-print-directory -C "$root" bench-pristine-path \
             BASE="$FORK_BASE")
fi
[ -x "$python" ] || die "no pristine interpreter at $python (make BASE=$FORK_BASE bench-pristine)"

# What the interpreter says about itself: version, compiler flags, headers.
pyversion='' cxx='' pycflags='' ccshared='' ext_suffix='' inc='' platinc=''
eval "$("$python" -S -c '
import shlex, sys, sysconfig as s
v = s.get_config_var
paths = s.get_paths()
for name, value in (
        ("pyversion", "%d.%d.%d" % sys.version_info[:3]),
        ("cxx", v("CXX") or "g++"),
        ("pycflags", v("CFLAGS") or ""),
        ("ccshared", v("CCSHARED") or "-fPIC"),
        ("ext_suffix", v("EXT_SUFFIX")),
        ("inc", paths["include"]),
        ("platinc", paths["platinclude"])):
    print("%s=%s" % (name, shlex.quote(value)))
')"

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/src/memray/_version.py")
[ -n "$version" ] || die "no __version__ in $src/src/memray/_version.py"
out=${MEMRAY_OUT:-$FORK_CACHE/memray-$version-$pyversion}
nice=${MEMRAY_NICE-nice -n 10}
jobs=${MEMRAY_JOBS:-2}

# Cython >= 3.1: memray's setup.py sets the freethreading_compatible
# directive, which older Cythons reject.
cython=${CYTHON:-}
if [ -z "$cython" ]; then
    for c in cython3 cython; do
        command -v "$c" >/dev/null && { cython=$c; break; }
    done
fi
[ -n "$cython" ] || die "no Cython: set CYTHON=\"python3 /path/to/cython-3.1.x/cython.py\""
# shellcheck disable=SC2086
cyversion=$($cython --version 2>&1 | sed -n 's/^Cython version \([0-9.]*\).*/\1/p') || true
[ -n "$cyversion" ] || die "cannot run Cython as: $cython"
case $cyversion in
    3.[1-9]*|3.[1-9][0-9]*|[4-9].*) ;;
    *) die "Cython $cyversion ($cython) is too old: memray $version needs >= 3.1; set CYTHON=\"python3 /path/to/cython-3.1.x/cython.py\" (it runs from its source tree)" ;;
esac

rich=${RICH_DIR:-/usr/lib/python3/dist-packages/rich}
[ -f "$rich/__init__.py" ] || die "no rich package at $rich (apt-get install python3-rich, or RICH_DIR=...)"

# Word-split on purpose below: $libs, $cxxflags, $nice and $cython are
# lists of words.
libs="liblz4 libunwind libdebuginfod"
# shellcheck disable=SC2086
pkg-config --exists $libs \
    || die "missing development files: apt-get install liblz4-dev libunwind-dev libdebuginfod-dev"

log "memray $version from $src, Python $pyversion ($python), Cython $cyversion"
log "output: $out"
rm -rf "$out"
mkdir -p "$out/build" "$out/site"
build=$out/build

# libbacktrace, vendored by memray with its patches (as setup.py builds it).
bt=$src/src/vendor/libbacktrace
[ -x "$bt/configure" ] || die "$bt/configure missing (memray's vendored libbacktrace)"
mkdir -p "$build/libbacktrace"
log "libbacktrace (log: $build/libbacktrace.log)"
( cd "$build/libbacktrace" &&
  $nice "$bt/configure" --with-pic --prefix="$build/bt-install" \
      --includedir="$build/bt-install/include/libbacktrace" &&
  $nice make -j"$jobs" && make install ) > "$build/libbacktrace.log" 2>&1 \
    || { tail -n 30 "$build/libbacktrace.log" >&2; die "libbacktrace failed"; }

# Cython: the directives of memray's setup.py (release build).
log "cython _memray.pyx"
# shellcheck disable=SC2086
$cython --cplus -3 -I "$src/src/memray" --module-name memray._memray \
    -X language_level=3,embedsignature=True,boundscheck=False \
    -X wraparound=False,cdivision=True,profile=False,linetrace=False \
    -X c_string_type=unicode,c_string_encoding=utf8 \
    -X freethreading_compatible=True \
    -o "$build/_memray.cpp" "$src/src/memray/_memray.pyx" \
    > "$build/cython.log" 2>&1 \
    || { tail -n 30 "$build/cython.log" >&2; die "cython failed"; }

# The extension: the sources and flags of setup.py's MEMRAY_EXTENSION on
# Linux, compiled as setuptools would (the interpreter's CFLAGS and
# CCSHARED, then the extension's own arguments; cythonize() adds the
# directory of the .pxd files' extern headers).
sources=("$build/_memray.cpp")
for f in compat hooks tracking_api elf_shenanigans logging python_helpers \
         source sink records record_reader record_writer snapshot \
         socket_reader_thread native_resolver; do
    sources+=("$src/src/memray/_memray/$f.cpp")
done
for f in "${sources[@]:1}"; do
    [ -f "$f" ] || die "no $f: memray $version's sources are not laid out as 1.19's setup.py lists them"
done
# shellcheck disable=SC2086
cxxflags="$pycflags $ccshared -std=c++17 -Wall -flto -fvisibility=hidden \
-D_FILE_OFFSET_BITS=64 -DUSE_MEMRAY_TLS_MODEL=1 \
-I$src/src -I$src/src/memray/_memray -I$build/bt-install/include -I$inc -I$platinc \
$(pkg-config --cflags $libs)"
log "compiling ${#sources[@]} files with $cxx, $jobs at a time (log: $build/compile.log)"
compile() {
    local o
    o=$build/$(basename "$1" .cpp).o
    echo "$cxx $cxxflags -c $1 -o $o"
    # shellcheck disable=SC2086
    $nice $cxx $cxxflags -c "$1" -o "$o"
}
export -f compile
export build cxx cxxflags nice
# shellcheck disable=SC2016
printf '%s\0' "${sources[@]}" \
    | xargs -0 -n 1 -P "$jobs" bash -c 'compile "$1"' _ > "$build/compile.log" 2>&1 \
    || { grep -m 20 -A 5 'error' "$build/compile.log" >&2; die "compilation failed"; }
objects=()
for f in "${sources[@]}"; do
    objects+=("$build/$(basename "$f" .cpp).o")
done
mkdir -p "$out/site/memray"
so=$out/site/memray/_memray$ext_suffix
log "linking $(basename "$so")"
# shellcheck disable=SC2046,SC2086
$nice $cxx -shared $pycflags -flto -std=c++17 -o "$so" "${objects[@]}" \
    "$build/bt-install/lib/libbacktrace.a" $(pkg-config --libs $libs) -ldl \
    >> "$build/compile.log" 2>&1 \
    || { tail -n 30 "$build/compile.log" >&2; die "link failed"; }

# memray's Python package (without the C sources and the Cython files), and
# rich, which _memray imports at module level.
(cd "$src/src/memray" && tar -cf - --exclude=_memray --exclude='*.pyx' \
    --exclude='*.pxd' --exclude=__pycache__ .) | tar -xf - -C "$out/site/memray"
cp -r "$rich" "$out/site/rich"
find "$out/site/rich" -name __pycache__ -prune -exec rm -rf {} +

# Smoke test: the interpreter imports memray and records a block that
# the interpreter malloc()s (through its own PLT, which memray patches).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
"$python" -s -c '
import os, sys
sys.path.insert(0, sys.argv[1])
import memray
path = os.path.join(sys.argv[2], "probe.bin")
with memray.Tracker(path, native_traces=True):
    block = bytearray(123457)
    del block
sizes = [r.size for r in memray.FileReader(path).get_allocation_records()]
assert max(sizes) >= 123457, sizes
print("memray", memray.__version__, "records", len(sizes))
' "$out/site" "$probe" >&2 || die "smoke test failed"

{ echo "memray=$version"
  echo "source=$src"
  echo "python=$python ($pyversion)"
  echo "cython=$cyversion ($cython)"
  echo "rich=$rich"
  echo "cxx=$($cxx --version | head -n 1)"
  echo "cxxflags=$cxxflags"
} > "$out/build-info.txt"
rm -rf "$build"
touch "$out/.built"
log "built $out/site (MEMRAY_PYTHONPATH=$out/site)"
echo "$out/site"
