#!/usr/bin/env bash
# patch-files.sh PATCH: print the upstream files that PATCH touches, one per
# line, in order: the `+++ b/FILE` of each diff, or its `--- a/FILE` when
# the patch deletes the file (`+++ /dev/null`).
awk '
    /^--- a\//  { old = substr($2, 3); next }
    /^\+\+\+ b\// { print substr($2, 3); next }
    /^\+\+\+ \/dev\/null/ { if (old != "") print old }
' "$1"
