#!/usr/bin/env bash
# Install the pprof readers that test_tracemalloc_pprof checks the pprof
# export with (each test skips, saying why, when its reader is missing):
#   - protoc (Debian's protobuf-compiler): `protoc --decode` with
#     Tools/fork/pprof/profile.proto;
#   - pprof itself, twice: `go tool pprof` (Debian's golang-go ships it),
#     and pprof built from Debian's golang-github-google-pprof-dev sources
#     into $TRACEMALLOC_FORK_CACHE/pprof/pprof (GOPATH mode, offline: its
#     dependencies are Debian's golang-github-ianlancetaylor-demangle-dev
#     and golang-github-chzyer-readline-dev);
#   - pprof-format, the JavaScript decoder, from the npm registry into
#     $TRACEMALLOC_FORK_CACHE/npm (default ~/.cache/tracemalloc-fork/npm),
#     run by Debian's nodejs (Tools/fork/pprof/read_profile.js).
# The Debian packages are installed only as root; otherwise the
# apt-get line is printed.  Never fails the caller: a reader that cannot
# be installed is reported, and its test skips.
set -uo pipefail

cache=${TRACEMALLOC_FORK_CACHE:-$HOME/.cache/tracemalloc-fork}
status=0

missing=""
command -v protoc >/dev/null 2>&1 || missing="$missing protobuf-compiler"
# Google's protobuf for Python (test_tracemalloc_sampledsound parses the
# profiles with it under the system python3).
python3 -c "import google.protobuf" >/dev/null 2>&1 || missing="$missing python3-protobuf"
command -v go >/dev/null 2>&1 || missing="$missing golang-go"
gocode=/usr/share/gocode/src/github.com
for pkg in golang-github-google-pprof-dev:google/pprof \
           golang-github-ianlancetaylor-demangle-dev:ianlancetaylor/demangle \
           golang-github-chzyer-readline-dev:chzyer/readline; do
    [ -d "$gocode/${pkg#*:}" ] || missing="$missing ${pkg%%:*}"
done
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        install() {
            # shellcheck disable=SC2086
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
        }
        install || { apt-get update -qq >/dev/null && install; } \
            || { echo "install-readers: warning:$missing not installed; their pprof reader tests will skip" >&2; status=1; }
    else
        echo "install-readers: not root; to run every pprof reader test: apt-get install$missing" >&2
        status=1
    fi
fi

if command -v npm >/dev/null 2>&1; then
    if [ ! -f "$cache/npm/node_modules/pprof-format/package.json" ]; then
        mkdir -p "$cache/npm"
        # --prefix keeps package.json, the lock file and node_modules in
        # the cache, outside the repository.
        npm install --prefix "$cache/npm" --no-audit --no-fund --silent pprof-format >/dev/null \
            || { echo "install-readers: warning: npm could not install pprof-format; its test will skip" >&2; status=1; }
    fi
fi
# pprof from Debian's sources, built once per source version.
if command -v go >/dev/null 2>&1 && [ -f "$gocode/google/pprof/pprof.go" ]; then
    version=$(dpkg-query -W -f='${Version}' golang-github-google-pprof-dev 2>/dev/null)
    stamp="$cache/pprof/version"
    if [ ! -x "$cache/pprof/pprof" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$version" ]; then
        mkdir -p "$cache/pprof"
        if GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS='' \
                GOCACHE="$cache/pprof/go-build" \
                nice go build -o "$cache/pprof/pprof" github.com/google/pprof; then
            echo "$version" > "$stamp"
        else
            echo "install-readers: warning: pprof could not be built from golang-github-google-pprof-dev; its test will skip" >&2
            status=1
        fi
    fi
fi
[ "$status" = 0 ] && echo "install-readers: protoc, go tool pprof, pprof from Debian's sources and pprof-format are installed"
exit 0
