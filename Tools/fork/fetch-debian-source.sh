#!/usr/bin/env bash
# Usage: fetch-debian-source.sh PACKAGE...
#
# Print, one per line, the directory holding the unpacked upstream source of
# each Debian source PACKAGE (its .orig tarball), fetching it first if the
# cache ($TRACEMALLOC_FORK_CACHE/debian-src, default
# ~/.cache/tracemalloc-fork/debian-src) does not hold it yet.
#
# The real-suite tests (Lib/test/test_tracemalloc_realsuites.py) run the
# leak checker on these projects' own test suites.  apt-get fetches the
# source with a private apt state directory whose sources are the machine's
# binary sources turned into deb-src ones: the machine's apt configuration
# is never touched.  apt verifies the files against the signed Release
# files, as for any package.
#
# Exit status: 0 when every package is available; 1 otherwise (a message on
# stderr says which and why, for example no network); nothing is printed
# for a package that could not be fetched.  TRACEMALLOC_FORK_OFFLINE=1 uses
# the cache only.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"

log() { echo "fetch-debian-source: $*" >&2; }

[ $# -gt 0 ] || { log "usage: $0 PACKAGE..."; exit 2; }

cache=$FORK_CACHE/debian-src
mkdir -p "$cache" || exit 1

# The unpacked source of PACKAGE, if the cache has it: a directory with a
# stamp file written once the unpacking finished.
cached_dir() {
    local stamp
    for stamp in "$cache/$1"/*/.fetched; do
        [ -f "$stamp" ] && { dirname "$stamp"; return 0; }
    done
    return 1
}

state=""
apt_opts=()
# Prepare the private apt state once, on the first package not cached.
private_apt() {
    [ -n "$state" ] && return 0
    command -v apt-get >/dev/null || { log "apt-get not available"; return 1; }
    state=$(mktemp -d "$cache/apt.XXXXXX") || return 1
    trap 'rm -rf "$state"' EXIT
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/parts"
    local f found=0
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        sed 's/^Types:.*$/Types: deb-src/' "$f" > "$state/parts/$(basename "$f")"
        found=1
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -e "$f" ] || continue
        sed -n 's/^deb \(.*\)$/deb-src \1/p' "$f" > "$state/parts/$(basename "$f").list"
        found=1
    done
    [ $found = 1 ] || { log "no apt sources configured"; return 1; }
    apt_opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$state/parts"
              -o Dir::State::Lists="$state/lists" -o Dir::Cache="$state/cache"
              -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    log "updating a private apt state for deb-src (the machine's is untouched)"
    apt-get "${apt_opts[@]}" -qq update >&2 || { log "apt-get update failed (no network?)"; return 1; }
}

fetch() {
    local package=$1 dl orig version top
    private_apt || return 1
    dl=$(mktemp -d "$cache/dl.XXXXXX") || return 1
    log "fetching Debian source package $package"
    if ! (cd "$dl" && apt-get "${apt_opts[@]}" -qq source --download-only \
            --tar-only "$package" >&2); then
        log "apt-get source $package failed"
        rm -rf "$dl"
        return 1
    fi
    orig=$(ls "$dl"/*.orig.tar.* 2>/dev/null | head -n 1)
    if [ -z "$orig" ]; then
        log "$package: no .orig tarball in the source package"
        rm -rf "$dl"
        return 1
    fi
    # NAME_VERSION.orig.tar.EXT -> VERSION
    version=$(basename "$orig")
    version=${version#"${package}"_}
    version=${version%%.orig.tar.*}
    rm -rf "${cache:?}/$package"
    mkdir -p "$cache/$package/$version"
    if ! tar -xf "$orig" -C "$cache/$package/$version" --strip-components=1; then
        log "$package: could not unpack $(basename "$orig")"
        rm -rf "$dl" "${cache:?}/$package"
        return 1
    fi
    rm -rf "$dl"
    touch "$cache/$package/$version/.fetched"
}

status=0
for package in "$@"; do
    if dir=$(cached_dir "$package"); then
        echo "$dir"
        continue
    fi
    if [ "${TRACEMALLOC_FORK_OFFLINE:-0}" = 1 ]; then
        log "$package: not cached and TRACEMALLOC_FORK_OFFLINE=1"
        status=1
        continue
    fi
    if fetch "$package" && dir=$(cached_dir "$package"); then
        echo "$dir"
    else
        status=1
    fi
done
exit $status
