#!/usr/bin/env bash
# Print the path of the verified pristine upstream tarball of the chosen base
# ($TRACEMALLOC_FORK_BASE, see pin.sh), fetching it first if the cache does
# not hold a good copy.  Sources, in order:
#   1. the cache ($TRACEMALLOC_FORK_CACHE, default ~/.cache/tracemalloc-fork)
#   2. python.org's release URL
#   3. Debian's source package (its .orig tarball is byte-identical), fetched
#      with a private apt state directory that enables deb-src, for the
#      machine's own suites or for the base's DEBIAN_SUITE (sid for 3.13);
#      the machine's apt configuration is never touched.
# The sha256 is checked every time, including for a cached copy.  A file that
# does not match is never used: it is moved aside and the next source tried.
#
# `fetch-tarball.sh --apt-sources DIR` only writes the private apt sources
# into DIR (read from $TRACEMALLOC_FORK_APT_ETC, default /etc/apt, and
# $TRACEMALLOC_FORK_OS_RELEASE, default /etc/os-release), for the tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pin.sh"
apt_etc=${TRACEMALLOC_FORK_APT_ETC:-/etc/apt}
os_release=${TRACEMALLOC_FORK_OS_RELEASE:-/etc/os-release}

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
    curl -fsSL --connect-timeout 15 --max-time 300 -o "$tmp/download" "$UPSTREAM_URL" \
        || { log "python.org download failed"; return 1; }
    install_candidate "$tmp/download"
}

# deb_src_sources DIR: write into DIR apt source files that enable deb-src.
# With no DEBIAN_SUITE, every configured binary source becomes a source one.
# With a DEBIAN_SUITE, the archives that serve the machine's own release
# (their Suites name its codename) are asked for that suite's main instead;
# the mirror is the machine's, never one named here.
deb_src_sources() {
    local dir=$1 f codename found=1
    if [ -z "$DEBIAN_SUITE" ]; then
        for f in "$apt_etc"/sources.list.d/*.sources; do
            [ -e "$f" ] || continue
            sed 's/^Types:.*$/Types: deb-src/' "$f" > "$dir/$(basename "$f")"
            found=0
        done
        for f in "$apt_etc"/sources.list "$apt_etc"/sources.list.d/*.list; do
            [ -e "$f" ] || continue
            sed -n 's/^deb \(.*\)$/deb-src \1/p' "$f" > "$dir/$(basename "$f").list"
            found=0
        done
        return $found
    fi
    codename=$(. "$os_release" 2>/dev/null && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || { log "no VERSION_CODENAME in $os_release"; return 1; }
    for f in "$apt_etc"/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        # One deb822 stanza per paragraph: keep those whose Suites has the
        # codename itself (not -security, -updates), with their keyring.
        awk -v codename="$codename" -v suite="$DEBIAN_SUITE" '
            function flush() {
                if (uris != "" && hit)
                    printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n%s\n", uris, suite, signed
                uris = ""; signed = ""; hit = 0
            }
            /^[[:space:]]*$/ { flush(); next }
            /^URIs:/ { uris = $0; sub(/^URIs:[[:space:]]*/, "", uris) }
            /^Signed-By:/ { signed = $0 "\n" }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == codename) hit = 1 }
            END { flush() }
        ' "$f" > "$dir/$(basename "$f")"
        [ -s "$dir/$(basename "$f")" ] && found=0
    done
    for f in "$apt_etc"/sources.list "$apt_etc"/sources.list.d/*.list; do
        [ -e "$f" ] || continue
        awk -v codename="$codename" -v suite="$DEBIAN_SUITE" '
            $1 == "deb" {
                i = 2; opts = ""
                if ($2 ~ /^\[/) { while ($i !~ /\]$/) { opts = opts $i " "; i++ } opts = opts $i " "; i++ }
                if ($(i + 1) == codename) print "deb-src " opts $i " " suite " main"
            }' "$f" > "$dir/$(basename "$f").list"
        [ -s "$dir/$(basename "$f").list" ] && found=0
    done
    return $found
}

from_debian() {
    command -v apt-get >/dev/null || { log "apt-get not available; skipping Debian"; return 1; }
    local state=$tmp/apt
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/parts" "$state/dl"
    deb_src_sources "$state/parts" || { log "no usable apt sources configured"; return 1; }
    local opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$state/parts"
                -o Dir::State::Lists="$state/lists" -o Dir::Cache="$state/cache"
                -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    local want=$DEBIAN_SOURCE_PACKAGE${DEBIAN_SOURCE_VERSION:+=$DEBIAN_SOURCE_VERSION}
    log "fetching Debian source package $want${DEBIAN_SUITE:+ from $DEBIAN_SUITE} (private apt state)"
    apt-get "${opts[@]}" -qq update >&2 || { log "apt-get update failed"; return 1; }
    # The exact version first; another Debian revision of the same upstream
    # release has the same orig tarball (the sha256 decides).
    (cd "$state/dl" && apt-get "${opts[@]}" -qq source --download-only --tar-only "$want" >&2) \
        || { [ -n "$DEBIAN_SOURCE_VERSION" ] && log "trying any version of $DEBIAN_SOURCE_PACKAGE" \
             && (cd "$state/dl" && apt-get "${opts[@]}" -qq source --download-only --tar-only \
                 "$DEBIAN_SOURCE_PACKAGE" >&2); } \
        || { log "apt-get source failed"; return 1; }
    local orig=$state/dl/$DEBIAN_ORIG_TARBALL
    [ -f "$orig" ] && install_candidate "$orig" && return 0
    log "Debian's source package has no matching $DEBIAN_ORIG_TARBALL (got: $(cd "$state/dl" && ls | tr '\n' ' '))"
    return 1
}

if [ "${1:-}" = --apt-sources ]; then
    mkdir -p "$2"
    deb_src_sources "$2"
    exit
fi

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
