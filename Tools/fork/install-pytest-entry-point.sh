#!/usr/bin/env bash
# Usage: install-pytest-entry-point.sh DIRECTORY
#
# Write tracemalloc_fork-VERSION.dist-info into DIRECTORY: the metadata of a
# distribution whose entry_points.txt names tracemalloc.pytest_plugin in
# pytest's plugin group (pytest11), so that pytest loads the plugin without
# -p.  `make install` writes it into the installed standard library
# directory (PREFIX/lib/python3.X): a virtual environment made from the
# installed interpreter has that directory on its path, not the base
# interpreter's site-packages, and pytest finds plugins by scanning the
# path for dist-info directories.
#
# The entry point is named like the module, so that `-p
# tracemalloc.pytest_plugin` (or pytest_plugins = [...]) given as well
# names the same plugin, which pytest then registers once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"

[ $# = 1 ] || { echo "usage: $0 DIRECTORY" >&2; exit 2; }
target=$1
name=tracemalloc_fork
info="$target/$name-$UPSTREAM_VERSION.dist-info"

mkdir -p "$target"
rm -rf "$target/$name"-*.dist-info
mkdir -p "$info"
cat > "$info/METADATA" <<EOF
Metadata-Version: 2.1
Name: tracemalloc-fork
Version: $UPSTREAM_VERSION
Summary: The leak-checking pytest plugin of the tracemalloc fork of CPython (tracemalloc.pytest_plugin, in the standard library)
EOF
cat > "$info/entry_points.txt" <<'EOF'
[pytest11]
tracemalloc.pytest_plugin = tracemalloc.pytest_plugin
EOF
echo "fork" > "$info/INSTALLER"
echo "installed the pytest entry point: $info"
