#!/bin/sh
# Summarise a sanitizer run: `log_path=PREFIX` makes the sanitizer write one
# PREFIX.PID file per process that had something to report.  Prints them,
# counts the reports, and fails if there is any.
name=$1
prefix=$2
set -- "$prefix".*
if [ ! -e "$1" ]; then
    echo "$name: clean (no report)"
    exit 0
fi
cat "$@"
# A report starts with "WARNING: ThreadSanitizer: <kind>" (races, use after
# free), "==PID==ERROR: <Sanitizer>: <kind>" (a signal, ASan's errors) or
# UBSan's "runtime error:".
reports=$(cat "$@" | grep -c '^WARNING: ThreadSanitizer\|^\(==[0-9]*==\)\?ERROR: [A-Za-z]*Sanitizer\|runtime error:')
echo "$name: $reports reports in $# processes (see $prefix.*)"
exit 1
