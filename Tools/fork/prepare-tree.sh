#!/usr/bin/env bash
# Lay out the build tree of the chosen base (BASE, from $TRACEMALLOC_FORK_BASE;
# see pin.sh): pristine upstream + our files + the base's patch series.
#
#   build/BASE/pristine/  the verified upstream tarball, extracted, never edited
#   build/BASE/src/       the working source tree that configure and make use
#
# BUILD_DIR overrides build/BASE (make sets it).
#
# Only files whose content changes are rewritten in build/src, so editing one
# of our files and running `make` again rebuilds only what depends on it.
# A patch that does not apply stops here, naming the patch and the file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/pin.sh"
build=${BUILD_DIR:-$repo/build/$FORK_BASE}
pristine=$build/pristine
src=$build/src
manifest=$build/managed-files.txt

die() { echo "prepare-tree: error: $*" >&2; exit 1; }

# Before per-base trees, the build lived in build/{pristine,src,obj}.
for old in pristine src obj; do
    if [ -d "$repo/build/$old" ] && [ "$build" != "$repo/build" ]; then
        echo "prepare-tree: note: build/$old is from the old single-base layout" \
             "and is no longer used (the tree is now $build); remove it with" \
             "rm -rf build/pristine build/src build/obj build/asan build/tsan build/clang" >&2
        break
    fi
done

# 1. The pristine tree, re-extracted when the pin changes.
if [ "$(cat "$pristine/.fork-version" 2>/dev/null)" != "$UPSTREAM_SHA256" ]; then
    tarball=$("$here/fetch-tarball.sh")
    echo "prepare-tree: extracting $UPSTREAM_TARBALL" >&2
    rm -rf "$pristine" "$src" "$build/obj" "$manifest"
    mkdir -p "$pristine"
    tar -xf "$tarball" -C "$pristine" --strip-components=1
    echo "$UPSTREAM_SHA256" > "$pristine/.fork-version"
fi
if [ ! -d "$src" ]; then
    cp -a "$pristine" "$src"
fi

# 2. Our files: everything under the CPython directories of the repo, except
#    the fork's own machinery (Tools/fork, Tools/bench), which is not part of
#    the interpreter.
mapfile -t overlay < <(cd "$repo" && "$here/list-overlay.sh")

# 3. The patched files, computed in a staging copy from pristine sources.
stage=$(mktemp -d "$build/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mapfile -t patched < <("$here/series-files.sh")
for f in "${patched[@]}"; do
    for o in "${overlay[@]}"; do
        [ "$o" != "$f" ] || die "$f is both one of our files and patched; pick one"
    done
    if [ -f "$pristine/$f" ]; then
        mkdir -p "$stage/$(dirname "$f")"
        cp -p "$pristine/$f" "$stage/$f"
    fi
done
while read -r p; do
    if ! out=$(patch -p1 -d "$stage" --fuzz=0 --forward --no-backup-if-mismatch \
                     -r - < "$FORK_PATCHES/$p" 2>&1); then
        echo "$out" >&2
        files=$(echo "$out" | sed -n 's/^patching file //p' | tr '\n' ' ')
        die "patch $p does not apply (files: $files)"
    fi
done < <("$here/series.sh")

# 4. Sync: copy a managed file only when its content differs.  Files managed
#    last time but no longer (an overlay file deleted, a patch dropped) go
#    back to their pristine content.
sync_one() {  # sync_one WANTED_PATH RELATIVE_PATH
    local want=$1 rel=$2
    if [ -e "$want" ]; then
        if ! cmp -s "$want" "$src/$rel"; then
            mkdir -p "$src/$(dirname "$rel")"
            cp "$want" "$src/$rel"
            echo "  updated $rel" >&2
        fi
    elif [ -e "$src/$rel" ]; then
        rm -f "$src/$rel"
        echo "  removed $rel" >&2
    fi
}
declare -A now=()
for f in "${overlay[@]}"; do now[$f]=1; sync_one "$repo/$f" "$f"; done
for f in "${patched[@]}"; do now[$f]=1; sync_one "$stage/$f" "$f"; done
if [ -f "$manifest" ]; then
    while read -r f; do
        [ -n "$f" ] || continue
        [ -n "${now[$f]:-}" ] || sync_one "$pristine/$f" "$f"
    done < "$manifest"
fi
{ [ ${#now[@]} -eq 0 ] || printf '%s\n' "${!now[@]}"; } | sort > "$manifest.new"
mv "$manifest.new" "$manifest"
