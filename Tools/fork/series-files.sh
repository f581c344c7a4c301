#!/usr/bin/env bash
# Print the upstream files the patch series touches, one per line.
here=$(cd "$(dirname "$0")" && pwd)
"$here/series.sh" | while read -r p; do
    "$here/patch-files.sh" "$here/patches/$p"
done | sort -u
