#!/usr/bin/env bash
# new-patch.sh SLUG FILE...: start a new patch at the end of the chosen
# base's series (patches/BASE) that owns FILE... (already edited in the
# base's build/BASE/src), with a header to fill in.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"
[ $# -ge 2 ] || { echo "usage: make new-patch NAME=slug FILES='path ...'" >&2; exit 2; }
slug=$1; shift
last=$("$here/series.sh" | tail -n1 | cut -c1-4)
num=$(printf '%04d' $((10#${last:-0} + 1)))
name=$num-$slug.patch
{
    echo "Description: TODO say why this change to upstream exists"
    echo "Forwarded: not-needed"
    echo
    for f in "$@"; do printf -- '--- a/%s\n+++ b/%s\n' "$f" "$f"; done
} > "$FORK_PATCHES/$name"
echo "$name" >> "$FORK_PATCHES/series"
"$here/refresh-patches.sh"
echo "created Tools/fork/patches/$FORK_BASE/$name: now write its Description header"
