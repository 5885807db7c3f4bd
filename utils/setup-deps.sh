#!/usr/bin/env bash
# setup-deps.sh -- install what building or testing SKV needs, when missing.
#
#   utils/setup-deps.sh build   packages to fetch and build SKV, and the
#                               deb-src entries that `apt-get source` needs
#   utils/setup-deps.sh test    the above, plus what the test suites need
#   utils/setup-deps.sh vm      the above, plus the Soft-RoCE VM (qemu, a
#                               Debian kernel, virtme-ng) for the RDMA tests
#   utils/setup-deps.sh arm64   build packages, plus the aarch64 cross
#                               compiler, arm64 rdma-core (Debian multiarch:
#                               adds the arm64 architecture to dpkg) and
#                               qemu-user, for make nic-kv-arm64 and its test
#   utils/setup-deps.sh deb     arm64's, plus lintian and debootstrap, for
#                               make deb and its checks
#
# Idempotent: it checks first and changes nothing when everything is there,
# so `make` can call it every time. It prints each thing it installs. It needs
# root (or sudo) only when something is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
what=${1:-build}

say() { printf 'setup-deps: %s\n' "$*"; }
die() { printf 'setup-deps: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else die "need root to run: $* (install it by hand, or run make as root)"
    fi
}

# Packages, by purpose. Kept short: only what a fresh Debian 12 lacks.
# BUILD_RDMA=no (make's variable, in the environment) builds without rdma-core.
build_pkgs="build-essential pkg-config libssl-dev libsystemd-dev patch xz-utils ca-certificates git"
[ "${BUILD_RDMA:-yes}" = no ] || build_pkgs="$build_pkgs libibverbs-dev librdmacm-dev"
test_pkgs="etcd-server etcd-client prometheus-redis-exporter tcl openssl procps iproute2 iptables openvswitch-switch ethtool socat libjemalloc2 liblzf1 libatomic1 python3-venv python3-pip golang-go default-jdk-headless spin"
vm_pkgs="qemu-system-x86 linux-image-amd64 rdma-core ibverbs-utils rdmacm-utils kmod
         python3-pip python3-venv busybox-static iptables"
arm64_pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross libc6:arm64 libssl-dev:arm64 qemu-user-static"
[ "${BUILD_RDMA:-yes}" = no ] || arm64_pkgs="$arm64_pkgs libibverbs-dev:arm64 librdmacm-dev:arm64"

case "$what" in
    build) pkgs=$build_pkgs ;;
    test)  pkgs="$build_pkgs $test_pkgs" ;;
    vm)    pkgs="$build_pkgs $test_pkgs $vm_pkgs" ;;
    arm64) pkgs="$build_pkgs $arm64_pkgs" ;;
    deb)   pkgs="$build_pkgs $arm64_pkgs dpkg-dev lintian debootstrap" ;;
    *) die "usage: setup-deps.sh build|test|vm|arm64|deb" ;;
esac

command -v dpkg-query >/dev/null || die "this is not a Debian system: SKV builds on Debian 12 (bookworm)"

# ------------------------------------------------------------------- apt ---
# Another apt or dpkg (unattended-upgrades, a second make) may hold dpkg's
# lock: apt-get waits for it, up to SKV_APT_LOCK_TIMEOUT seconds (600),
# instead of failing at once. Its output is dropped but for its first
# "Waiting for cache lock: ... held by process N (...)" (on stdout, and
# only without -q), which says who we wait for.
lock_timeout=${SKV_APT_LOCK_TIMEOUT:-600}
apt_get() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$lock_timeout" "$@" |
        awk -v t="$lock_timeout" '/^Waiting for cache lock/ && !n++ {
            print "setup-deps: " $0 " (waiting up to " t " s)"; fflush() }'
}

updated=0
apt_update() {
    [ $updated = 1 ] && return
    say "apt-get update"
    apt_get update
    updated=1
}

# ------------------------------------------------------- deb-src entries ---
# `apt-get source` needs deb-src lines for bookworm and bookworm-security.
# When the pinned version cannot be found, add them, mirroring the deb lines
# this machine already uses (so a local mirror keeps being used).
. "$top/deps/redis/pin"
has_src() { apt-cache showsrc "$DEB_PACKAGE" 2>/dev/null | grep -qx "Version: $DEB_VERSION"; }
if ! has_src; then
    list=/etc/apt/sources.list.d/skv-deb-src.list
    if [ ! -f "$list" ]; then
        say "adding deb-src entries for bookworm and bookworm-security in $list"
        tmp=$(mktemp)
        {
            # deb822 stanzas (Types/URIs/Suites) with a deb type: one
            # deb-src line per suite.
            for f in /etc/apt/sources.list.d/*.sources; do
                [ -f "$f" ] || continue
                awk 'BEGIN { RS = "" }
                     { t = u = s = k = ""
                       n = split($0, line, "\n")
                       for (i = 1; i <= n; i++) {
                           if (line[i] ~ /^Types:/)  t = line[i]
                           if (line[i] ~ /^URIs:/)   { u = line[i]; sub(/^URIs:[ \t]*/, "", u); sub(/[ \t].*/, "", u) }
                           if (line[i] ~ /^Suites:/) { s = line[i]; sub(/^Suites:[ \t]*/, "", s) }
                           if (line[i] ~ /^Signed-By:[ \t]*\//) { k = line[i]; sub(/^Signed-By:[ \t]*/, "", k); k = "[signed-by=" k "] " }
                       }
                       if (t ~ /[ \t]deb([ \t]|$)/ && u != "") {
                           m = split(s, suite, /[ \t]+/)
                           for (j = 1; j <= m; j++) print "deb-src " k u " " suite[j] " main"
                       } }' "$f"
            done
            # One-line format: the same line as deb-src.
            cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
                | sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p'
        } | grep -E '[[:space:]]bookworm(-security|-updates)?[[:space:]]' | sort -u > "$tmp" || true
        grep -q '[[:space:]]bookworm[[:space:]]' "$tmp" ||
            echo "deb-src http://deb.debian.org/debian bookworm main" >> "$tmp"
        grep -q '[[:space:]]bookworm-security[[:space:]]' "$tmp" ||
            echo "deb-src http://deb.debian.org/debian-security bookworm-security main" >> "$tmp"
        as_root install -m 0644 "$tmp" "$list"
        rm -f "$tmp"
    fi
    apt_update
    has_src || die "apt still has no source package $DEB_PACKAGE=$DEB_VERSION after adding deb-src entries ($list).
  Debian has probably superseded it in $DEB_SUITE: see 'Moving to a new upstream' in README.md."
fi

# ------------------------------------------------- arm64 (multiarch) ---
# The arm64 rdma-core libraries install beside the amd64 ones
# (/usr/lib/aarch64-linux-gnu) once dpkg knows the architecture.
if { [ "$what" = arm64 ] || [ "$what" = deb ]; } && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    say "dpkg --add-architecture arm64"
    as_root dpkg --add-architecture arm64
    updated=0
fi

# -------------------------------------------------------------- packages ---
missing=()
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt_update
    say "apt-get install ${missing[*]}"
    apt_get install -y --no-install-recommends "${missing[@]}"
fi

# ------------------------------------------------- Debian's redis-server ---
# The Nic-KV tests check that an unmodified upstream replica works behind
# Nic-KV: Debian's own redis-server binary, of the pinned version, unpacked
# under build/ (not installed: no service is started).
if [ "$what" != build ]; then
    debredis="$top/build/debian-redis"
    if [ ! -x "$debredis/usr/bin/redis-server" ]; then
        say "fetching Debian's redis-server $DEB_VERSION into $debredis"
        tmp=$(mktemp -d)
        (cd "$tmp" && apt-get -o DPkg::Lock::Timeout="$lock_timeout" download -q \
            "redis-server=$DEB_VERSION" "redis-tools=$DEB_VERSION" \
            2> >(grep -v unsandboxed >&2)) >/dev/null || die "cannot download redis-server=$DEB_VERSION"
        mkdir -p "$debredis"
        for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$debredis"; done
        rm -rf "$tmp"
    fi
fi

# ------------------------------------------------- a Sentinel client ---
# Nic-KV answers the SENTINEL subcommands client libraries use: the tests
# check it with redis-py's own Sentinel client, pinned, in venvs under
# build/ (the system Python is left alone). Two releases: 5.0 speaks RESP2;
# 8.x opens its connections with HELLO 3 and expects RESP3's maps and pushes.
REDIS_PY_VERSION=5.0.8
REDIS_PY8_VERSION=8.1.0
pyclient() {    # pyclient <venv> <version>
    if ! "$1/bin/python3" -c "import redis, sys; sys.exit(redis.__version__ != '$2')" 2>/dev/null; then
        say "pip install redis==$2 (into $1)"
        python3 -m venv "$1"
        "$1/bin/pip" install -q "redis==$2"
    fi
}
if [ "$what" != build ]; then
    pyclient "$top/build/pyclients" "$REDIS_PY_VERSION"
    pyclient "$top/build/pyclients8" "$REDIS_PY8_VERSION"
fi

# ------------------------------------------------ a Go Sentinel client ---
# A client of another language: go-redis v9's FailoverClient, in our own
# program (tests/goclient, go-redis pinned by its go.mod and go.sum), built
# with Debian's Go (golang-go, 1.19: /usr/bin/go, not a Go found first in
# PATH) into build/goclients. Its module cache and build cache stay there
# too (-modcacherw: rm -rf build can remove them); GOPROXY, when set, says
# where to fetch go-redis from. Built again when a source file is newer.
if [ "$what" != build ]; then
    gosrc="$top/tests/goclient"
    godir="$top/build/goclients"
    gobin="$godir/bin/nickv-goclient"
    if [ ! -x "$gobin" ] || [ -n "$(find "$gosrc" -type f -newer "$gobin")" ]; then
        say "go build tests/goclient (go-redis) into $gobin"
        (cd "$gosrc" && env GOPATH="$godir/gopath" GOCACHE="$godir/cache" \
            GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}" GOFLAGS="-mod=mod -modcacherw" \
            GO111MODULE=on /usr/bin/go build -o "$gobin" .) || die "cannot build tests/goclient with /usr/bin/go"
    fi
fi

# ---------------------------------------------- a Java Sentinel client ---
# A third client: Jedis' JedisSentinelPool, in our own program
# (tests/jedisclient/Main.java), compiled with Debian's javac
# (default-jdk-headless) into build/jedisclient/classes. The jars are Jedis
# and what its pom lists as runtime dependencies, from Maven Central, each
# pinned by sha256 (a jar that differs stops the script: it is not the one
# reviewed). MAVEN_REPO, when set, says where to fetch them from. Without
# javac, or when a jar cannot be fetched (offline), the step is skipped: the
# test then skips, or fails under CI.
JEDIS_JARS="
redis/clients/jedis/8.0.2/jedis-8.0.2.jar 34fb85c67291fd70cee4e2e86240b0c155ea8b998175975e264d86baaf54ffc2
org/apache/commons/commons-pool2/2.13.1/commons-pool2-2.13.1.jar f77a5060d6936a9144023584232f9de3f2248f1abfe156e9d31795f18770674f
org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar d3ef575e3e4979678dc01bf1dcce51021493b4d11fb7f1be8ad982877c16a1c0
com/google/code/gson/gson/2.14.0/gson-2.14.0.jar 2cbd119bf1961c28788310963dc80ba65f58cdeec1dd139c8bdb1240faa2c36f
org/json/json/20260719/json-20260719.jar c243f45f9590c12694a4142ed3f07fc70dfb71e4daebd05ae234bf92a2da92a6
redis/clients/authentication/redis-authx-core/0.1.1-beta2/redis-authx-core-0.1.1-beta2.jar cc56edb08b3df8562cddac108dca61907d21cc4ad04de05e9f5d1b01058390af
"
jedis_jars() {  # fetch the missing jars into $1; false when one cannot be fetched
    local lib=$1 path sum jar
    mkdir -p "$lib"
    while read -r path sum; do
        [ -n "$path" ] || continue
        jar="$lib/${path##*/}"
        [ -f "$jar" ] && continue
        say "fetch ${path##*/} (Maven Central)"
        curl -fsSL --retry 2 -o "$jar.part" "${MAVEN_REPO:-https://repo1.maven.org/maven2}/$path" ||
            { rm -f "$jar.part"; return 1; }
        [ "$(sha256sum < "$jar.part" | cut -d' ' -f1)" = "$sum" ] ||
            { rm -f "$jar.part"; die "${path##*/}: sha256 is not the pinned $sum"; }
        mv "$jar.part" "$jar"
    done <<< "$JEDIS_JARS"
}
if [ "$what" != build ] && command -v javac >/dev/null; then
    jsrc="$top/tests/jedisclient"
    jdir="$top/build/jedisclient"
    jclass="$jdir/classes/Main.class"
    if ! jedis_jars "$jdir/lib"; then
        say "cannot fetch Jedis' jars: the Jedis test will not run"
    elif [ ! -f "$jclass" ] || [ -n "$(find "$jsrc" "$jdir/lib" -type f -newer "$jclass")" ]; then
        say "javac tests/jedisclient (Jedis) into $jdir/classes"
        mkdir -p "$jdir/classes"
        javac -d "$jdir/classes" -cp "$jdir/lib/*" "$jsrc"/*.java ||
            die "cannot compile tests/jedisclient with javac"
    fi
fi

# ------------------------------------------------------------ virtme-ng ---
# The Soft-RoCE VM boots the Debian kernel with virtme-ng (`vng`), from PyPI,
# installed into a venv under build/ so the system Python is left alone.
if [ "$what" = vm ]; then
    venv="$top/build/venv"
    if [ ! -x "$venv/bin/vng" ]; then
        say "pip install virtme-ng (into $venv)"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q virtme-ng
    fi
fi
exit 0
