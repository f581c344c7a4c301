#!/usr/bin/env bash
# Make sure the Debian/Ubuntu packages the build needs are installed.  As
# root, missing ones are installed with apt-get; otherwise the exact command
# is printed and the build stops.
set -euo pipefail
packages=(
    build-essential pkg-config autoconf patch xz-utils curl ca-certificates
    libffi-dev libssl-dev zlib1g-dev libbz2-dev liblzma-dev libsqlite3-dev
    libreadline-dev uuid-dev libgdbm-dev libgdbm-compat-dev libncurses-dev
    libexpat1-dev libunwind-dev libdw-dev
)
if ! command -v dpkg-query >/dev/null; then
    echo "deps: not a Debian-like system; make sure the equivalents of: ${packages[*]} are installed" >&2
    exit 0
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
else
    echo "deps: missing packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
