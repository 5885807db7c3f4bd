#!/usr/bin/env bash
# check-deb.sh -- check the packages make deb wrote into build/deb/.
#
# The deb suite of utils/run-tests.sh. Prints "[ok]: <check>" or
# "[err]: <check>" with the reason below it, one line per check, as
# upstream's harness does (run-tests.sh counts them); exits non-zero when
# one failed.
#
#   SKV_DEB_CHROOT=0   skip the install into a throw-away Debian root
#                      (debootstrap; cached as build/deb-root.tar)
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/deps/redis/pin"
skv=$(sed -n 's/^#define SKV_VERSION "\(.*\)"/\1/p' "$top/src/skv_version.h")
version="$UPSTREAM_VERSION+skv$skv-1"
deb="$top/build/deb"
server="$deb/skv-server_${version}_amd64.deb"
nk_amd64="$deb/skv-nic-kv_${version}_amd64.deb"
nk_arm64="$deb/skv-nic-kv_${version}_arm64.deb"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0

check() { # name command...: ok when the command succeeds; its output otherwise
    local name=$1 out; shift
    if out=$("$@" 2>&1); then
        echo "[ok]: $name"
    else
        echo "[err]: $name"
        printf '%s\n' "$out" | tail -n 20
        failed=1
    fi
}

# ELF machine of a file: 62 x86-64, 183 aarch64.
elf_machine() { od -An -t u2 -j 18 -N 2 "$1" | tr -d ' '; }

have_files() {
    for f in "$server" "$nk_amd64" "$nk_arm64"; do
        [ -f "$f" ] || { echo "missing: $f (present: $(ls "$deb" 2>/dev/null))"; return 1; }
    done
}
check "the three packages, version $version" have_files

field() { dpkg-deb -f "$1" "$2"; }
control_ok() {
    [ "$(field "$server" Version)" = "$version" ] || { echo "version $(field "$server" Version)"; return 1; }
    for f in Conflicts Replaces Provides; do
        local v; v=$(field "$server" $f)
        for p in redis-server redis-tools; do
            [[ ", $v," == *", $p,"* ]] || { echo "skv-server $f: '$v' lacks $p"; return 1; }
        done
    done
    [ "$(field "$nk_arm64" Architecture)" = arm64 ] || { echo "arm64 package: $(field "$nk_arm64" Architecture)"; return 1; }
    [ "$(field "$nk_amd64" Architecture)" = amd64 ] || return 1
    for d in "$server" "$nk_amd64" "$nk_arm64"; do
        field "$d" Depends | grep -q 'libibverbs1' || { echo "$d: Depends lacks rdma-core's libraries"; return 1; }
    done
}
check "control fields: versions, architectures, Conflicts/Replaces/Provides Debian's redis" control_ok

lintian_clean() {
    local out
    out=$(lintian --tag-display-limit 0 "$server" "$nk_amd64" "$nk_arm64" 2>&1 | grep -v 'running with root privileges')
    [ -z "$out" ] || { echo "$out"; return 1; }
}
check "lintian: no error, no warning, no info (one override: README)" lintian_clean

# The amd64 packages unpacked into a scratch root.
root="$scratch/root"
mkdir -p "$root"
for d in "$server" "$nk_amd64"; do dpkg-deb -x "$d" "$root"; done
binaries_run() {
    "$root/usr/bin/redis-server" --version | grep -q "skv=$skv" || return 1
    "$root/usr/bin/redis-sentinel" --version | grep -q "skv=$skv" || return 1
    "$root/usr/bin/redis-cli" --version | grep -q "$UPSTREAM_VERSION" || return 1
    "$root/usr/bin/redis-benchmark" --version | grep -q "$UPSTREAM_VERSION" || return 1
    "$root/usr/bin/nic-kv" --version | grep -q "Nic-KV v=$skv" || return 1
    [ "$(elf_machine "$root/usr/bin/nic-kv")" = 62 ] || return 1
    [ -f "$root/etc/skv/redis.conf" ] && [ -f "$root/etc/skv/nic-kv.conf" ] &&
        [ -x "$root/usr/share/skv/fence-ovs.sh" ]
}
check "amd64: the unpacked binaries run (--version), configs and fence script in place" binaries_run

arm64_binary() {
    local a="$scratch/arm64"
    mkdir -p "$a" && dpkg-deb -x "$nk_arm64" "$a"
    [ "$(elf_machine "$a/usr/bin/nic-kv")" = 183 ] || { echo "ELF machine $(elf_machine "$a/usr/bin/nic-kv")"; return 1; }
    qemu-aarch64-static "$a/usr/bin/nic-kv" --version | grep -q "Nic-KV v=$skv"
}
check "arm64: nic-kv is an aarch64 binary, and runs under qemu-user" arm64_binary

# systemd-analyze verify, in the unpacked root (its ExecStart must exist
# there) with this machine's own units beside ours; any line it prints
# (an unknown key, a bad value) fails.
units_verify() {
    mkdir -p "$root/usr/lib/systemd" && cp -a /lib/systemd/system "$root/usr/lib/systemd/"
    local out
    out=$(systemd-analyze verify --root="$root" /lib/systemd/system/skv-server.service \
          /lib/systemd/system/nic-kv.service 2>&1) || { echo "$out"; return 1; }
    [ -z "$out" ] || { echo "$out"; return 1; }
}
check "systemd-analyze verify: skv-server.service and nic-kv.service" units_verify

# dpkg -i in a throw-away Debian 12 root (debootstrap, cached): Debian's
# redis-server first, then skv-server in its place; then skv-nic-kv.
chroot_install() {
    local base="$top/build/deb-root.tar" r="$scratch/chroot"
    if [ ! -f "$base" ]; then
        local b="$scratch/base"
        debootstrap --variant=minbase bookworm "$b" http://deb.debian.org/debian >"$scratch/debootstrap.log" 2>&1 ||
            { tail -n 20 "$scratch/debootstrap.log"; return 1; }
        tar -C "$b" -cf "$base.tmp" . && mv "$base.tmp" "$base"
        rm -rf "$b"
    fi
    mkdir -p "$r" && tar -C "$r" -xf "$base"
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    cp "$server" "$nk_amd64" "$r/tmp/"
    local in=(chroot "$r" env DEBIAN_FRONTEND=noninteractive LC_ALL=C)
    "${in[@]}" apt-get update -q >/dev/null || return 1
    "${in[@]}" apt-get install -y -q --no-install-recommends redis-server >/dev/null || return 1
    "${in[@]}" dpkg -s redis-server | grep -q '^Status: install ok installed' || { echo "Debian's redis-server not installed"; return 1; }
    # apt takes our package in place of Debian's: it removes redis-server
    # and redis-tools (Conflicts), and installs our dependencies.
    "${in[@]}" apt-get install -y -q --no-install-recommends /tmp/"$(basename "$server")" \
        /tmp/"$(basename "$nk_amd64")" || return 1
    # (Removed, its conffiles stay: "deinstall ok config-files".)
    for p in redis-server redis-tools; do
        "${in[@]}" dpkg -s $p 2>/dev/null | grep -q '^Status: install ok installed' &&
            { echo "Debian's $p is still installed"; return 1; }
    done
    "${in[@]}" dpkg -s skv-server | grep -q '^Status: install ok installed' || return 1
    "${in[@]}" dpkg -s skv-nic-kv | grep -q '^Status: install ok installed' || return 1
    "${in[@]}" redis-server --version | grep -q "skv=$skv" || return 1
    "${in[@]}" nic-kv --version | grep -q "Nic-KV v=$skv" || return 1
    "${in[@]}" getent passwd skv >/dev/null || { echo "no skv user"; return 1; }
    local own; own=$("${in[@]}" stat -c %U:%a /etc/skv/redis.conf /etc/skv)
    [ "$own" = "$(printf 'skv:640\nskv:2770')" ] || { echo "owners: $own"; return 1; }
    # The server starts as the service would: as skv, with its config.
    "${in[@]}" su -s /bin/sh skv -c 'cd /tmp && redis-server /etc/skv/redis.conf --port 16379 --daemonize yes --logfile /tmp/skv.log' || return 1
    sleep 1
    local pong; pong=$("${in[@]}" redis-cli -p 16379 ping)
    "${in[@]}" redis-cli -p 16379 shutdown nosave >/dev/null 2>&1 || true
    [ "$pong" = PONG ] || { echo "ping: $pong"; cat "$r/tmp/skv.log"; return 1; }
    "${in[@]}" apt-get purge -y -q skv-server skv-nic-kv >/dev/null || return 1
    [ ! -e "$r/usr/bin/redis-server" ] || { echo "redis-server left after purge"; return 1; }
}
if [ "${SKV_DEB_CHROOT:-1}" = 1 ]; then
    check "dpkg: skv-server replaces Debian's redis-server in a Debian 12 root (apt), runs as skv, purges" chroot_install
fi

exit $failed
