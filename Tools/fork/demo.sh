#!/usr/bin/env bash
# make demo: run the embedded leaky service under -X tracemalloc=25.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${1:-$here/../../python}
echo "\$ ./python -X tracemalloc=25 Tools/fork/demo_leak.py"
"$python" -X tracemalloc=25 "$here/demo_leak.py"
