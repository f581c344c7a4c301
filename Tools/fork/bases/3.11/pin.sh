# Base 3.11: the pinned upstream release, sourced through Tools/fork/pin.sh.
# To move to another 3.11.x release, change UPSTREAM_VERSION and
# UPSTREAM_SHA256, then run `make BASE=3.11 check-patches` and fix any patch
# of Tools/fork/patches/3.11 that no longer applies (README, "Rebasing").
UPSTREAM_VERSION=3.11.2
UPSTREAM_TARBALL=Python-$UPSTREAM_VERSION.tgz
UPSTREAM_SHA256=2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849
UPSTREAM_URL=https://www.python.org/ftp/python/$UPSTREAM_VERSION/$UPSTREAM_TARBALL
# Debian's source package whose .orig tarball is byte-identical, from the
# suites the machine's apt already uses (bookworm ships 3.11.2).
DEBIAN_SOURCE_PACKAGE=python3.11
DEBIAN_SOURCE_VERSION=
DEBIAN_SUITE=
DEBIAN_ORIG_TARBALL=python3.11_$UPSTREAM_VERSION.orig.tar.gz
# The engine's C files are written for this base: `make build` builds it.
ENGINE_PORTED=yes
