#!/usr/bin/env bash
# Apply the chosen base's whole series (patches/BASE, BASE from
# $TRACEMALLOC_FORK_BASE, see pin.sh) to a fresh pristine tree of that base
# with zero fuzz and no offsets.  Any drift (a hunk that needs fuzz or lands at another line, a
# patch that fails, a file claimed by two patches or also shipped whole by
# us, a patch without a Description header) fails loudly.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/pin.sh"
tarball=$("$here/fetch-tarball.sh")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf "$tarball" -C "$tmp" --strip-components=1
status=0
declare -A owner=()
mapfile -t overlay < <(cd "$repo" && "$here/list-overlay.sh")
for f in "${overlay[@]}"; do owner[$f]="our own file"; done
count=0
while read -r p; do
    file=$FORK_PATCHES/$p
    [ -f "$file" ] || { echo "FAIL $p: listed in series but missing"; status=1; continue; }
    grep -q '^Description: ' "$file" || { echo "FAIL $p: no Description: header"; status=1; }
    while read -r f; do
        if [ -n "${owner[$f]:-}" ]; then
            echo "FAIL $p: $f is already owned by ${owner[$f]}"; status=1
        fi
        owner[$f]=$p
    done < <("$here/patch-files.sh" "$file")
    if ! out=$(patch -p1 -d "$tmp" --fuzz=0 --forward --no-backup-if-mismatch -r - < "$file" 2>&1); then
        echo "FAIL $p: does not apply"; echo "$out" | sed 's/^/    /'; status=1
    elif echo "$out" | grep -qiE 'offset|fuzz'; then
        echo "FAIL $p: applies only with drift"; echo "$out" | sed 's/^/    /'; status=1
    else
        echo "ok   $p"
    fi
    count=$((count + 1))
done < <("$here/series.sh")
for p in "$FORK_PATCHES"/*.patch; do
    [ -e "$p" ] || continue
    "$here/series.sh" | grep -qx "$(basename "$p")" || { echo "FAIL $(basename "$p"): not in series"; status=1; }
done
if [ $status = 0 ]; then
    echo "check-patches: base $FORK_BASE: all $count patches apply to pristine $(basename "$tarball") with zero fuzz"
else
    echo "check-patches: FAILED" >&2
fi
exit $status
