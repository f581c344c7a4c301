#!/usr/bin/env bash
# Print the patch names of the series, in order (comments and blanks skipped).
here=$(cd "$(dirname "$0")" && pwd)
sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$here/patches/series"
