#!/usr/bin/env bash
# Regenerate every patch of the chosen base's series (patches/BASE) from the
# edits made in that base's build tree (BUILD_DIR, build/BASE from make).
# Each patch keeps its header (everything before its first diff) and is
# rebuilt as a diff of its files, pristine against build/src.  A file belongs
# to exactly one patch.  Edited upstream files that no patch owns are listed,
# with the command that starts a new patch for them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/pin.sh"
build=${BUILD_DIR:-$repo/build/$FORK_BASE}
pristine=$build/pristine
src=$build/src
[ -d "$src" ] || { echo "refresh-patches: no build tree; run make first" >&2; exit 1; }

# diff_file REL: unified diff of one file, pristine -> build/src (a file
# absent from build/src is a deletion: a diff against /dev/null).
diff_file() {
    local rel=$1 old=$pristine/$1 new=$src/$1 la=a/$1 lb=b/$1
    [ -e "$old" ] || { old=/dev/null; la=/dev/null; }
    [ -e "$new" ] || { new=/dev/null; lb=/dev/null; }
    diff -u --label "$la" --label "$lb" "$old" "$new" || [ $? -eq 1 ]
}

declare -A owner=()
while read -r p; do
    file=$FORK_PATCHES/$p
    mapfile -t files < <("$here/patch-files.sh" "$file" | awk '!seen[$0]++')
    for f in "${files[@]}"; do
        [ -z "${owner[$f]:-}" ] || { echo "refresh-patches: $f is in both ${owner[$f]} and $p" >&2; exit 1; }
        owner[$f]=$p
    done
    {
        sed -n '/^--- /q;p' "$file"
        for f in "${files[@]}"; do diff_file "$f"; done
    } > "$file.new"
    if cmp -s "$file" "$file.new"; then
        rm -f "$file.new"
    else
        mv "$file.new" "$file"
        echo "refreshed $p"
    fi
done < <("$here/series.sh")

# Edits in build/src that nothing owns would be lost at the next re-layout.
mapfile -t overlay < <(cd "$repo" && "$here/list-overlay.sh")
for f in "${overlay[@]}"; do owner[$f]=ours; done
{ diff -rq "$pristine" "$src" 2>/dev/null || true; } | sed -n 's|^Files '"$pristine"'/\(.*\) and .* differ$|\1|p' |
while read -r f; do
    case "${owner[$f]:-}" in
        "") echo "refresh-patches: warning: $f is edited in build/$FORK_BASE/src but no patch owns it;"
            echo "  start one with: make BASE=$FORK_BASE new-patch NAME=short-slug FILES=$f" ;;
    esac
done >&2
for f in "${overlay[@]}"; do
    if [ -e "$src/$f" ] && ! cmp -s "$repo/$f" "$src/$f"; then
        echo "refresh-patches: warning: build/$FORK_BASE/src/$f differs from the repo's $f;" \
             "our files are edited in the repo, not in build/$FORK_BASE/src" >&2
    fi
done
