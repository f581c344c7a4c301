#!/usr/bin/env bash
# Print the upstream files the chosen base's patch series touches, one per
# line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"
"$here/series.sh" | while read -r p; do
    "$here/patch-files.sh" "$FORK_PATCHES/$p"
done | sort -u
