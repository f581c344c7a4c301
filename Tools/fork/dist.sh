#!/bin/bash
# Tools/fork/dist.sh OBJ_DIR OUT_DIR -- a relocatable binary tarball of the
# fork (issue 31, item 9): `make dist` calls it with build/BASE/obj.
#
# The tarball holds one directory, python-tracemalloc-VERSION-linux-ARCH/,
# the fork as `make install` lays it out (bin/python3, lib/pythonX.Y with
# pip from ensurepip, the pytest entry point of tracemalloc.pytest_plugin),
# without the interpreter's own test suite (lib/pythonX.Y/test).
# Extracted anywhere, it runs from there: the interpreter finds its prefix
# from its own location, and the scripts of bin/ (pip3, pydoc3, idle3,
# python3-config) find their interpreter next to themselves instead of
# naming the prefix the build was configured with.  What still names that
# prefix: the build variables of sysconfig (_sysconfigdata, the config
# Makefile), which only matter to building a C extension from source.
#
# The install goes to a staging directory (DESTDIR), never to the machine's
# prefix; the built tree is not reconfigured.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"

[ $# = 2 ] || { echo "usage: $0 OBJ_DIR OUT_DIR" >&2; exit 2; }
obj=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
[ -x "$obj/python" ] || { echo "dist: no built interpreter in $obj (run make first)" >&2; exit 1; }

prefix=$(sed -n 's/^prefix=[[:space:]]*//p' "$obj/Makefile" | head -n 1)
[ -n "$prefix" ] || { echo "dist: no prefix in $obj/Makefile" >&2; exit 1; }
short=$FORK_BASE
name=python-tracemalloc-$UPSTREAM_VERSION-linux-$(uname -m)
stage=$(mktemp -d "${TMPDIR:-/tmp}/tracemalloc-dist.XXXXXX")
trap 'rm -rf "$stage"' EXIT

echo "dist: installing $obj into a staging directory (make install DESTDIR=...)"
make -C "$obj" -s install DESTDIR="$stage" >"$stage/install.log" 2>&1 \
    || { tail -n 30 "$stage/install.log"; exit 1; }
root=$stage$prefix
[ -x "$root/bin/python$short" ] || { echo "dist: make install wrote no bin/python$short" >&2; exit 1; }
"$here/install-pytest-entry-point.sh" "$root/lib/python$short" >/dev/null

# The scripts of bin/ that start with "#!PREFIX/bin/python...": the same
# script, started by sh, which runs the interpreter beside it (the text
# after the first lines is Python, to which the sh lines are a string).
for script in "$root"/bin/*; do
    [ -f "$script" ] && [ ! -L "$script" ] || continue
    first=$(head -c 200 "$script" | head -n 1) || true
    case $first in
    "#!$prefix/bin/python"*)
        # (python3.X, which every base installs: the shebang's own name
        # may be a link that make install does not write, or none.)
        interpreter=python$short
        {
            printf '#!/bin/sh\n'
            printf "'''exec' \"\$(dirname -- \"\$(readlink -f -- \"\$0\")\")/%s\" \"\$0\" \"\$@\"\n" "$interpreter"
            printf "' '''\n"
            tail -n +2 "$script"
        } > "$script.tmp"
        chmod --reference="$script" "$script.tmp"
        mv -f "$script.tmp" "$script"
        ;;
    esac
done
if grep -rlI --exclude='_sysconfigdata*' --exclude='Makefile' --exclude='*.pc' \
        --exclude='python*-config' -- "#!$prefix" "$root/bin" >/dev/null 2>&1; then
    echo "dist: a script of bin/ still names $prefix:" >&2
    grep -rlI -- "#!$prefix" "$root/bin" >&2
    exit 1
fi

# The interpreter's own regression tests (150 MiB, a third of the
# install) stay out; `import test.support` is not for users' code.
rm -rf "$root/lib/python$short/test"

mv "$root" "$stage/$name"
tarball=$out/$name.tar.gz
tar -C "$stage" -czf "$tarball.tmp" "$name"
mv -f "$tarball.tmp" "$tarball"
echo "dist: wrote $tarball ($(du -h "$tarball" | cut -f1))"
