# The fork's upstream bases.  Sourced (POSIX sh) by the scripts beside it and
# by the Makefile, with $here set to this directory.
#
# Each base has its pin in bases/BASE/pin.sh (version, tarball, sha256, where
# to fetch it) and its patch series in patches/BASE/.  The base is chosen by
# $TRACEMALLOC_FORK_BASE (`make BASE=...` sets it); without it, the default
# base below (3.13; `make BASE=3.11` builds the 3.11.2 fork).
FORK_DEFAULT_BASE=3.13
FORK_BASE=${TRACEMALLOC_FORK_BASE:-$FORK_DEFAULT_BASE}
if [ ! -f "$here/bases/$FORK_BASE/pin.sh" ]; then
    echo "pin.sh: unknown base '$FORK_BASE' (bases: $(ls "$here/bases" | tr '\n' ' '))" >&2
    return 1 2>/dev/null || exit 1
fi
. "$here/bases/$FORK_BASE/pin.sh"
FORK_PATCHES=$here/patches/$FORK_BASE

# Where verified tarballs and pristine builds are cached (outside the repo).
FORK_CACHE=${TRACEMALLOC_FORK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tracemalloc-fork}
