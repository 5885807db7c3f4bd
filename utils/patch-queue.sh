#!/usr/bin/env bash
# patch-queue.sh -- edit SKV's patch series on upstream Redis with plain git.
#
#   utils/patch-queue.sh checkout [dir]   make [dir] (default build/patch-queue)
#       a git working copy of upstream + Debian's patches (commit tagged
#       skv-base), with one commit per patch of deps/redis/patches/series.
#       Refuses to overwrite a working copy that has commits or changes the
#       series does not have, unless --force is given.
#   utils/patch-queue.sh export [dir]     write the commits skv-base..HEAD of
#       [dir] back into deps/redis/patches (one file per commit, and series).
#   utils/patch-queue.sh check            fail when the committed series is not
#       what a fresh checkout + export gives (CI runs this).
#
# The export is deterministic: no dates, no commit hashes, no blob hashes, no
# git version, so the same commits always give the same files. A patch's
# commit message is its header: the first line says what it does, the body
# says why it exists and when it could be dropped.
#
# Workflow: checkout, change things with ordinary git (commit --amend,
# rebase -i skv-base, new commits), build and test in the working copy with
# `make -C build/patch-queue`, export, then commit deps/redis/patches.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
patches="$top/deps/redis/patches"
die() { printf 'patch-queue: %s\n' "$*" >&2; exit 1; }

# Commits made by this script carry a fixed identity and date; they never
# leave the working copy (export drops both).
git_q() {
    git -c user.name="SKV patch queue" -c user.email="skv@localhost" \
        -c commit.gpgsign=false -c core.autocrlf=false "$@"
}

series_names() { grep -v -E '^[[:space:]]*(#|$)' "$1/series" | awk '{print $1}'; }

# ---------------------------------------------------------------- checkout ---
cmd_checkout() {
    local force=0
    if [ "${1:-}" = "--force" ]; then force=1; shift; fi
    local dir=${1:-$top/build/patch-queue}
    if [ -d "$dir/.git" ] && [ $force = 0 ]; then
        # Only replace a working copy that holds nothing the series lacks.
        local tmp; tmp=$(mktemp -d)
        if [ -n "$(git -C "$dir" status --porcelain --untracked-files=no)" ] ||
           ! export_to "$dir" "$tmp" || ! diff -qr "$tmp" "$patches" >/dev/null; then
            rm -rf "$tmp"
            die "$dir has work that is not in deps/redis/patches (export it first, or use --force to discard it)"
        fi
        rm -rf "$tmp"
    fi
    "$top/deps/redis/fetch.sh" --base "$dir" >/dev/null
    (
        cd "$dir"
        git_q init -q
        # Build outputs stay out of the history.
        printf '%s\n' '*.o' '*.d' '*.a' '.make-*' 'src/redis-*' '!src/redis-*.c' '!src/redis-*.h' \
            'src/release.h' 'src/skv-*' 'src/nic-kv' 'deps/*/*.so' 'tests/tmp/' 'tests/skv' > .git/info/exclude
        git_q add -A
        GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" \
            git_q commit -q -m "upstream Redis + Debian's patches (see deps/redis/pin)"
        git_q tag skv-base
        local name
        for name in $(series_names "$patches"); do
            git_q am -q --keep-cr "$patches/$name" ||
                die "git am failed on $name; see $dir (git am --abort to give up)"
        done
    )
    echo "patch queue ready in $dir: $(git -C "$dir" rev-list --count skv-base..HEAD) patches on skv-base"
}

# ------------------------------------------------------------------ export ---
# export_to <working copy> <output dir>: write patches and series.
export_to() {
    local dir=$1 out=$2
    git -C "$dir" rev-parse -q --verify skv-base >/dev/null || { echo "$dir has no skv-base tag" >&2; return 1; }
    mkdir -p "$out"
    local raw; raw=$(mktemp -d)
    git -C "$dir" -c core.abbrev=12 -c diff.noprefix=false -c diff.mnemonicprefix=false \
        format-patch -q --zero-commit --no-signature --no-numbered --no-renames \
        --no-binary --stat=72 -o "$raw" skv-base..HEAD
    : > "$out/series"
    local f name
    for f in "$raw"/*.patch; do
        [ -e "$f" ] || continue
        name=$(basename "$f")
        # Drop what changes from one export to the next without the patch
        # changing: the date header and the blob hashes of index lines.
        awk 'BEGIN { header = 1 }
             header && /^Date: / { next }
             header && /^$/ { header = 0 }
             /^index [0-9a-f]+\.\.[0-9a-f]+/ { next }
             { print }' "$f" > "$out/$name"
        echo "$name" >> "$out/series"
    done
    rm -rf "$raw"
}

cmd_export() {
    local dir=${1:-$top/build/patch-queue}
    [ -d "$dir/.git" ] || die "$dir is not a patch-queue working copy (run checkout first)"
    [ -z "$(git -C "$dir" status --porcelain --untracked-files=no)" ] ||
        die "$dir has uncommitted changes: commit them first"
    local tmp; tmp=$(mktemp -d)
    export_to "$dir" "$tmp" || die "export failed"
    rm -f "$patches"/*.patch "$patches/series"
    cp "$tmp"/* "$patches"/
    rm -rf "$tmp"
    echo "exported $(series_names "$patches" | wc -l) patches to deps/redis/patches"
    git -C "$top" status --short -- deps/redis/patches
}

# ------------------------------------------------------------------- check ---
cmd_check() {
    local tmp; tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    cmd_checkout --force "$tmp/wc" >/dev/null
    export_to "$tmp/wc" "$tmp/out" || die "export failed"
    if ! diff -ru "$patches" "$tmp/out" > "$tmp/diff"; then
        cat "$tmp/diff"
        die "deps/redis/patches differs from a fresh checkout + export (above).
  Regenerate it: utils/patch-queue.sh checkout --force && utils/patch-queue.sh export"
    fi
    echo "patch series is clean: $(series_names "$patches" | wc -l) patches, export matches"
}

case "${1:-}" in
    checkout) shift; cmd_checkout "$@" ;;
    export)   shift; cmd_export "$@" ;;
    check)    shift; cmd_check "$@" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
