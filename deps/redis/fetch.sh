#!/usr/bin/env bash
# fetch.sh -- fetch, verify, unpack and patch the pinned upstream Redis.
#
#   deps/redis/fetch.sh <tree>        make <tree> the patched upstream source
#   deps/redis/fetch.sh --base <tree> only upstream + Debian's patches (no SKV
#                                     series): the base of the patch queue
#
# Reads deps/redis/pin. Downloads Debian's source package with
# `apt-get source --download-only` into build/download (kept as a cache),
# checks both tarballs against the pinned sha256, unpacks the upstream tarball
# into a fresh directory, applies Debian's patches (minus the excluded ones)
# in Debian's order, then SKV's series from deps/redis/patches/series.
#
# Debian's patches are applied the way quilt applies them: no fuzz, offsets
# allowed (several of Debian's backports apply with an offset). SKV's own
# patches must apply exactly: no fuzz and no offset, since we can refresh
# them ourselves with utils/patch-queue.sh.
#
# Every failure stops the script with a message naming what failed and what
# to do. The tree is built next to <tree> and renamed into place at the end,
# so an interrupted run never leaves a half-patched tree behind.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

die() { printf 'deps/redis/fetch.sh: %s\n' "$*" >&2; exit 1; }

base_only=0
if [ "${1:-}" = "--base" ]; then base_only=1; shift; fi
[ $# -eq 1 ] || die "usage: fetch.sh [--base] <tree>"
tree=$(realpath -m "$1")

# SKV_PIN and SKV_PATCHES override the pin file and the patch directory
# (the tests use them to feed fetch.sh a bad pin or a bad patch).
pin=$(realpath "${SKV_PIN:-$here/pin}")
patchdir=$(realpath "${SKV_PATCHES:-$here/patches}")
# shellcheck source=pin
. "$pin"

download=${SKV_DOWNLOAD_DIR:-$top/build/download}
mkdir -p "$download"

# ----------------------------------------------------------------- fetch ---
# Download only what is missing; a file that is there but wrong is reported
# below, never silently replaced.
if [ ! -f "$download/$ORIG_TARBALL" ] || [ ! -f "$download/$DEBIAN_TARBALL" ]; then
    echo "==> fetching Debian source package $DEB_PACKAGE=$DEB_VERSION into $download"
    command -v apt-get >/dev/null || die "apt-get not found: SKV fetches upstream Redis from Debian's source package, so it builds on Debian (12, bookworm) or a derivative"
    # As root, apt warns that it downloads unsandboxed: harmless here.
    (cd "$download" && apt-get source --download-only -q "$DEB_PACKAGE=$DEB_VERSION" \
        2> >(grep -v "unsandboxed" >&2)) || true
    [ -f "$download/$ORIG_TARBALL" ] && [ -f "$download/$DEBIAN_TARBALL" ] || die \
"could not download source package $DEB_PACKAGE=$DEB_VERSION.
  - If apt has no deb-src entries for bookworm and $DEB_SUITE, run utils/setup-deps.sh
    (make runs it for you) and try again.
  - If they are there, Debian has probably superseded this revision in $DEB_SUITE
    (the security archive keeps only the newest). Move the pin to the new revision:
    see 'Moving to a new upstream' in README.md."
fi

# ---------------------------------------------------------------- verify ---
for pair in "$ORIG_TARBALL:$ORIG_SHA256" "$DEBIAN_TARBALL:$DEBIAN_SHA256"; do
    f=${pair%%:*} want=${pair#*:}
    got=$(sha256sum "$download/$f" | cut -d' ' -f1)
    [ "$got" = "$want" ] || die "checksum mismatch for $download/$f
  expected $want ($pin)
  got      $got
  The file is not the one SKV was pinned to. Delete it and run make again; if the
  mismatch stays, the archive serves different bytes under the same name: do not
  build from it, report it."
done
echo "==> verified $ORIG_TARBALL and $DEBIAN_TARBALL (sha256 as pinned)"

# ---------------------------------------------------------------- unpack ---
parent=$(dirname "$tree")
mkdir -p "$parent"
work=$(mktemp -d "$parent/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -xzf "$download/$ORIG_TARBALL" -C "$work"
tar -xJf "$download/$DEBIAN_TARBALL" -C "$work"
src="$work/redis-$UPSTREAM_VERSION"
[ -d "$src" ] || die "$ORIG_TARBALL did not contain redis-$UPSTREAM_VERSION/"

# apply_one <patch> <label> <strict>: apply with no fuzz; strict also refuses
# offsets. Prints nothing on success.
apply_one() {
    local p=$1 label=$2 strict=$3 out hint
    if [ "$strict" = 1 ]; then
        hint="Refresh it: utils/patch-queue.sh checkout, fix the commit, utils/patch-queue.sh export."
    else
        hint="Debian's own series should apply to its own tarball: check the pin (deps/redis/pin)."
    fi
    if ! out=$(cd "$src" && patch -p1 -F0 -N --dry-run --no-backup-if-mismatch < "$p" 2>&1); then
        die "$label does not apply to upstream $UPSTREAM_VERSION (no fuzz allowed):
$out
  $hint"
    fi
    if [ "$strict" = 1 ] && grep -q "offset" <<<"$out"; then
        die "$label applies only with an offset; SKV's patches must apply exactly:
$out
  $hint"
    fi
    (cd "$src" && patch -p1 -F0 -N -s --no-backup-if-mismatch < "$p") >/dev/null
}

excluded() {
    local name=$1 pat
    for pat in $DEB_PATCHES_EXCLUDE; do
        # shellcheck disable=SC2053
        [[ $name == $pat ]] && return 0
    done
    return 1
}

# ------------------------------------------------------- Debian's patches ---
n=0
while read -r name _; do
    case "$name" in ''|'#'*) continue ;; esac
    excluded "$name" && continue
    apply_one "$work/debian/patches/$name" "Debian patch $name" 0
    n=$((n+1))
done < "$work/debian/patches/series"
echo "==> applied $n of Debian's patches ($DEB_VERSION)"

# ---------------------------------------------------------- SKV's series ---
if [ $base_only = 0 ]; then
    n=0
    while read -r name _; do
        case "$name" in ''|'#'*) continue ;; esac
        [ -f "$patchdir/$name" ] || die "$patchdir/series names $name, which does not exist"
        apply_one "$patchdir/$name" "SKV patch $name" 1
        n=$((n+1))
    done < "$patchdir/series"
    echo "==> applied $n SKV patches"
fi

# ---------------------------------------------------------------- finish ---
rm -rf "$tree"
mv "$src" "$tree"
echo "==> upstream tree ready: $tree"
