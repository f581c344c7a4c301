# The pinned upstream base of the fork.  Sourced by the scripts beside it.
# To rebase onto another 3.11.x release, change these three lines, then run
# `make check-patches` and fix any patch that no longer applies (README).
UPSTREAM_VERSION=3.11.2
UPSTREAM_TARBALL=Python-$UPSTREAM_VERSION.tgz
UPSTREAM_SHA256=2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849
UPSTREAM_URL=https://www.python.org/ftp/python/$UPSTREAM_VERSION/$UPSTREAM_TARBALL
# Debian's source package whose .orig tarball is byte-identical.
DEBIAN_SOURCE_PACKAGE=python${UPSTREAM_VERSION%.*}

# Where verified tarballs and pristine builds are cached (outside the repo).
FORK_CACHE=${TRACEMALLOC_FORK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tracemalloc-fork}
