#!/usr/bin/env bash
# Print the upstream files the patch series touches, one per line.
here=$(cd "$(dirname "$0")" && pwd)
"$here/series.sh" | while read -r p; do
    sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$here/patches/$p"
done | sort -u
