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
    out=$(lintian --display-info --tag-display-limit 0 "$server" "$nk_amd64" "$nk_arm64" 2>&1 |
          grep -v 'running with root privileges')
    [ -z "$out" ] || { echo "$out"; return 1; }
}
check "lintian --display-info: no error, no warning, no info (hardening-no-bindnow, ...-no-fortify-functions among them; overrides: README)" lintian_clean

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

# Each unit's Documentation= names a file the packages ship.
units_docs() {
    local u d n=0
    for u in skv-server.service nic-kv.service; do
        for d in $(sed -n 's/^Documentation=//p' "$root/lib/systemd/system/$u"); do
            n=$((n + 1))
            [[ "$d" == file://* ]] || continue
            [ -f "$root${d#file://}" ] || { echo "$u: Documentation=$d: no such file in the packages"; return 1; }
        done
    done
    [ $n -ge 2 ] || { echo "$n Documentation= lines"; return 1; }
}
check "the units' Documentation= files are in the packages" units_docs

# The package's nic-kv.conf keeps the state file where the unit makes its
# directory (the sample's is relative: nic-kv/nic-kv.conf).
nickv_state_file() {
    grep -qx 'state-file /var/lib/skv/nic-kv.state' "$root/etc/skv/nic-kv.conf" ||
        { grep -n '^state-file' "$root/etc/skv/nic-kv.conf"; return 1; }
}
check "the package's nic-kv.conf: state-file /var/lib/skv/nic-kv.state" nickv_state_file

# dpkg -i in a throw-away Debian 12 root (debootstrap, cached): Debian's
# redis-server first, holding a key and settings of its own; then
# skv-server in its place, which must serve them (utils/deb/debian-redis.sh);
# then Debian's again (the downgrade), which must serve what SKV wrote;
# skv-server again, over data of SKV's own, which it must leave alone;
# then skv-nic-kv and skv-server purged, leaving nothing behind. systemd
# does not run there: the servers are started as their units would.
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
    # The chroot shares this machine's network: a port of its own.
    local port=${SKV_DEB_PORT:-16379} pass=skv-deb-test out v
    local cli=("${in[@]}" redis-cli -p "$port" -a "$pass" --no-auth-warning)
    "${in[@]}" apt-get update -q >/dev/null || return 1
    "${in[@]}" apt-get install -y -q --no-install-recommends redis-server >/dev/null || return 1
    "${in[@]}" dpkg -s redis-server | grep -q '^Status: install ok installed' || { echo "Debian's redis-server not installed"; return 1; }

    # Debian's server, as its user: a key saved, and settings kept by
    # CONFIG REWRITE in /etc/redis/redis.conf (the port too).
    "${in[@]}" su -s /bin/sh redis -c "redis-server /etc/redis/redis.conf --port $port --daemonize yes --logfile /tmp/debian.log" || return 1
    wait_ping "${in[@]}" redis-cli -p "$port" || { cat "$r/tmp/debian.log"; return 1; }
    "${in[@]}" redis-cli -p "$port" set from-debian 42 >/dev/null
    "${in[@]}" redis-cli -p "$port" config set maxmemory 123mb >/dev/null
    "${in[@]}" redis-cli -p "$port" config set requirepass "$pass" >/dev/null
    v=$("${cli[@]}" config rewrite); [ "$v" = OK ] || { echo "config rewrite: $v"; return 1; }
    "${cli[@]}" shutdown >/dev/null 2>&1 || true
    wait_down "${in[@]}" redis-cli -p "$port" || return 1
    [ -f "$r/var/lib/redis/dump.rdb" ] || { echo "Debian's server saved no /var/lib/redis/dump.rdb"; return 1; }

    # apt takes our package in place of Debian's: it removes redis-server
    # and redis-tools (Conflicts), and installs our dependencies. skv-server
    # says it takes Debian's settings and data over, and records it.
    out=$("${in[@]}" apt-get install -y -q --no-install-recommends /tmp/"$(basename "$server")" \
        /tmp/"$(basename "$nk_amd64")" 2>&1) || { echo "$out"; return 1; }
    for v in "skv-server: took over the settings of Debian's redis-server: /etc/redis/redis.conf into /etc/skv/conf.d/debian-redis.conf" \
             "skv-server: took over the data of Debian's redis-server: /var/lib/redis/dump.rdb copied to /var/lib/skv/dump.rdb"; do
        grep -qxF "$v" <<<"$out" || { echo "apt's output lacks: $v"; echo "$out"; return 1; }
        grep -qF "${v#skv-server: }" "$r/var/lib/skv/debian-redis.log" ||
            { echo "/var/lib/skv/debian-redis.log lacks: $v"; cat "$r/var/lib/skv/debian-redis.log"; return 1; }
    done
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
    local own; own=$("${in[@]}" stat -c %U:%a /etc/skv/redis.conf /etc/skv /var/lib/skv/dump.rdb)
    [ "$own" = "$(printf 'skv:640\nskv:2770\nskv:640')" ] || { echo "owners: $own"; return 1; }

    # SKV starts as its unit starts it (as skv, in /var/lib/skv, with its
    # config) and serves Debian's key on Debian's port, with Debian's
    # password and maxmemory.
    "${in[@]}" su -s /bin/sh skv -c 'cd /var/lib/skv && redis-server /etc/skv/redis.conf --daemonize yes --logfile /tmp/skv.log' || return 1
    wait_ping "${cli[@]}" || { cat "$r/tmp/skv.log"; return 1; }
    v=$("${cli[@]}" info server | tr -d '\r' | sed -n 's/^skv_version://p')
    [ "$v" = "$skv" ] || { echo "not SKV on port $port: skv_version '$v'"; return 1; }
    v=$("${cli[@]}" get from-debian); [ "$v" = 42 ] || { echo "SKV: GET from-debian: '$v'"; return 1; }
    v=$("${cli[@]}" config get maxmemory | tail -n 1); [ "$v" = 128974848 ] || { echo "SKV: maxmemory '$v'"; return 1; }
    v=$("${in[@]}" redis-cli -p "$port" ping 2>&1); [[ "$v" == NOAUTH* ]] || { echo "SKV without the password: '$v'"; return 1; }
    "${cli[@]}" set from-skv 7 >/dev/null
    "${cli[@]}" shutdown >/dev/null 2>&1 || true
    wait_down "${cli[@]}" || return 1

    # The downgrade: skv-server removed hands its data back, and Debian's
    # redis-server installed again serves it.
    out=$("${in[@]}" apt-get remove -y -q skv-server 2>&1) || { echo "$out"; return 1; }
    v="skv-server: handed SKV's data back to Debian's redis-server: /var/lib/skv/dump.rdb moved to /var/lib/redis/dump.rdb"
    grep -qxF "$v" <<<"$out" || { echo "apt's output lacks: $v"; echo "$out"; return 1; }
    "${in[@]}" apt-get install -y -q --no-install-recommends redis-server >/dev/null || return 1
    own=$("${in[@]}" stat -c %U:%G /var/lib/redis/dump.rdb)
    [ "$own" = redis:redis ] || { echo "/var/lib/redis/dump.rdb: owner $own"; return 1; }
    "${in[@]}" su -s /bin/sh redis -c "redis-server /etc/redis/redis.conf --daemonize yes" || return 1
    wait_ping "${cli[@]}" || { cat "$r/tmp/debian.log"; return 1; }
    v=$("${cli[@]}" info server | tr -d '\r' | grep -c '^skv_version:')
    [ "$v" = 0 ] || { echo "SKV, not Debian's redis-server, on port $port"; return 1; }
    v=$("${cli[@]}" get from-skv); [ "$v" = 7 ] || { echo "Debian's again: GET from-skv: '$v'"; return 1; }
    v=$("${cli[@]}" get from-debian); [ "$v" = 42 ] || { echo "Debian's again: GET from-debian: '$v'"; return 1; }
    "${cli[@]}" shutdown nosave >/dev/null 2>&1 || true
    wait_down "${cli[@]}" || return 1

    # Installed again where SKV has data of its own: nothing is taken.
    echo "SKV's own" > "$r/var/lib/skv/dump.rdb"
    out=$("${in[@]}" apt-get install -y -q --no-install-recommends /tmp/"$(basename "$server")" 2>&1) ||
        { echo "$out"; return 1; }
    v="skv-server: Debian's redis-server not taken over: SKV has data of its own (/var/lib/skv/dump.rdb)"
    grep -qxF "$v" <<<"$out" || { echo "apt's output lacks: $v"; echo "$out"; return 1; }
    [ "$(cat "$r/var/lib/skv/dump.rdb")" = "SKV's own" ] || { echo "SKV's own dump.rdb was overwritten"; return 1; }
    [ ! -e "$r/etc/skv/conf.d/debian-redis.conf" ] || { echo "settings taken over all the same"; return 1; }

    # Purged, ours leave no dpkg-statoverride behind.
    "${in[@]}" apt-get purge -y -q skv-server skv-nic-kv >/dev/null || return 1
    [ ! -e "$r/usr/bin/nic-kv" ] || { echo "nic-kv left after purge"; return 1; }
    v=$("${in[@]}" dpkg-statoverride --list | grep /etc/skv)
    [ -z "$v" ] || { echo "dpkg-statoverride entries left after purge: $v"; return 1; }
}

# wait_ping <redis-cli command...>: PONG within 5 s.
wait_ping() {
    local i
    for i in $(seq 50); do [ "$("$@" ping 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done
    echo "no PONG from: $*"; return 1
}

# wait_down <redis-cli command...>: no answer within 5 s (shut down).
wait_down() {
    local i
    for i in $(seq 50); do "$@" ping >/dev/null 2>&1 || return 0; sleep 0.1; done
    echo "still answering: $*"; return 1
}
if [ "${SKV_DEB_CHROOT:-1}" = 1 ]; then
    check "dpkg: skv-server replaces Debian's redis-server in a Debian 12 root (apt), serves its key and settings as skv; the downgrade serves SKV's; SKV's own data left alone; purges" chroot_install
fi

exit $failed
