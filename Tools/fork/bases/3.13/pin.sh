# Base 3.13: the pinned upstream release, sourced through Tools/fork/pin.sh.
# To move to another 3.13.x release, change UPSTREAM_VERSION, UPSTREAM_SHA256
# and the Debian version, then run `make BASE=3.13 check-patches`.
UPSTREAM_VERSION=3.13.15
UPSTREAM_TARBALL=Python-$UPSTREAM_VERSION.tar.xz
UPSTREAM_SHA256=1e66a7945a48390ee4c2a4268a0e4185884059a13c4aab6d148aa208deea4a76
UPSTREAM_URL=https://www.python.org/ftp/python/$UPSTREAM_VERSION/$UPSTREAM_TARBALL
# Debian's source package whose .orig tarball is the same file.  Bookworm
# has no 3.13: the fetch looks in sid with a private apt state (it asks for
# this exact version first, then for whatever sid has, and keeps the orig
# tarball only if its sha256 is the pinned one).
DEBIAN_SOURCE_PACKAGE=python3.13
DEBIAN_SOURCE_VERSION=3.13.15-1
DEBIAN_SUITE=sid
DEBIAN_ORIG_TARBALL=python3.13_$UPSTREAM_VERSION.orig.tar.xz
# The engine's C files are written for this base (its adapter is
# Python/tracemalloc_base313.h): `make build` builds it.
ENGINE_PORTED=yes
