#!/usr/bin/env bash
# Print the patch names of the chosen base's series, in order (comments and
# blanks skipped).  The base is $TRACEMALLOC_FORK_BASE (see pin.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"
sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$FORK_PATCHES/series"
