#!/usr/bin/env bash
# Print the path of the verified pristine upstream tarball, fetching it first
# if the cache does not hold a good copy.  Sources, in order:
#   1. the cache ($TRACEMALLOC_FORK_CACHE, default ~/.cache/tracemalloc-fork)
#   2. python.org's release URL
#   3. Debian's source package (its .orig tarball is byte-identical), fetched
#      with a private apt state directory that enables deb-src; the machine's
#      apt configuration is never touched.
# The sha256 is checked every time, including for a cached copy.  A file that
# does not match is never used: it is moved aside and the next source tried.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"

log() { echo "fetch-tarball: $*" >&2; }

# verify FILE: 0 when FILE has the pinned sha256, else 1 with a message.
verify() {
    local file=$1 actual
    [ -f "$file" ] || return 1
    actual=$(sha256sum "$file" | cut -d' ' -f1)
    if [ "$actual" = "$UPSTREAM_SHA256" ]; then
        return 0
    fi
    log "REJECTED $file: sha256 is $actual,"
    log "  expected $UPSTREAM_SHA256 for $UPSTREAM_TARBALL (wrong or truncated file)"
    return 1
}

# install_candidate FILE: move a verified download into the cache.
install_candidate() {
    local file=$1
    if verify "$file"; then
        mv -f "$file" "$FORK_CACHE/$UPSTREAM_TARBALL"
        return 0
    fi
    rm -f "$file"
    return 1
}

from_python_org() {
    command -v curl >/dev/null || { log "curl not installed; skipping python.org"; return 1; }
    log "downloading $UPSTREAM_URL"
    curl -fsSL --connect-timeout 15 --max-time 300 -o "$tmp/dl.tgz" "$UPSTREAM_URL" \
        || { log "python.org download failed"; return 1; }
    install_candidate "$tmp/dl.tgz"
}

from_debian() {
    command -v apt-get >/dev/null || { log "apt-get not available; skipping Debian"; return 1; }
    local state=$tmp/apt
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/parts" "$state/dl"
    # Turn every configured binary source into a source one, in our own
    # sources directory only.
    local found=0
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
    local opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$state/parts"
                -o Dir::State::Lists="$state/lists" -o Dir::Cache="$state/cache"
                -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    log "fetching Debian source package $DEBIAN_SOURCE_PACKAGE (private apt state)"
    apt-get "${opts[@]}" -qq update >&2 || { log "apt-get update failed"; return 1; }
    (cd "$state/dl" && apt-get "${opts[@]}" -qq source --download-only --tar-only \
        "$DEBIAN_SOURCE_PACKAGE" >&2) || { log "apt-get source failed"; return 1; }
    local orig
    for orig in "$state"/dl/*_"$UPSTREAM_VERSION".orig.tar.gz; do
        [ -f "$orig" ] && install_candidate "$orig" && return 0
    done
    log "Debian's source package has no matching $UPSTREAM_VERSION .orig.tar.gz"
    return 1
}

mkdir -p "$FORK_CACHE"
cached=$FORK_CACHE/$UPSTREAM_TARBALL
if [ -f "$cached" ]; then
    if verify "$cached"; then
        echo "$cached"
        exit 0
    fi
    mv -f "$cached" "$cached.rejected"
    log "moved the bad cached copy to $cached.rejected"
fi

tmp=$(mktemp -d "$FORK_CACHE/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ "${TRACEMALLOC_FORK_OFFLINE:-0}" != 1 ]; then
    from_python_org || from_debian || true
fi
if verify "$cached" 2>/dev/null; then
    echo "$cached"
    exit 0
fi
log "could not obtain a verified $UPSTREAM_TARBALL (sha256 $UPSTREAM_SHA256)."
log "Place the file at $cached by hand, or set TRACEMALLOC_FORK_CACHE."
exit 1
