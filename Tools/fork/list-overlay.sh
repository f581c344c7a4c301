#!/usr/bin/env bash
# List our own interpreter files (relative paths), run from the repo root.
set -euo pipefail
for d in Include Objects Python Modules Lib Doc Parser Programs Misc PC Tools; do
    [ -d "$d" ] || continue
    find "$d" -type f \
        -not -path 'Tools/fork/*' -not -path 'Tools/bench/*' \
        -not -path '*/__pycache__/*' -not -name '*.pyc' -not -name '*~'
done | sort
