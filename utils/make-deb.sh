#!/usr/bin/env bash
# make-deb.sh -- SKV's Debian packages, from the built tree, into build/deb/.
#
#   utils/make-deb.sh        (make deb runs it after make and make nic-kv-arm64)
#
# Three binary packages, assembled with dpkg-deb (no source package: the
# source is this repository plus the pinned upstream that make fetches):
#
#   skv-server   amd64   redis-server (SKV) and its tools, /etc/skv/redis.conf,
#                        skv-server.service; replaces Debian's redis-server,
#                        redis-tools and redis-sentinel
#   skv-nic-kv   amd64   nic-kv, /etc/skv/nic-kv.conf, nic-kv.service,
#   skv-nic-kv   arm64   /usr/share/skv/fence-ovs.sh (the DPU's build)
#
# Version: <upstream>+skv<SKV>-<revision>, e.g. 7.0.15+skv0.1.0-1. Both
# services run as the system user skv (made by the maintainer scripts),
# keep their state in /var/lib/skv (StateDirectory=) and may lock memory
# without limit (LimitMEMLOCK=infinity: RDMA registers memory).
# Installed over Debian's redis-server, skv-server takes over its settings
# and data, and hands the data back when removed (utils/deb/debian-redis.sh,
# in its postinst and postrm; DEPLOY.md). The binaries were built with
# Debian's hardening flags (the Makefile's HARDENING).
# Dependencies are computed by dpkg-shlibdeps from the binaries themselves.
# tests/deb/check-deb.sh checks the result (lintian, systemd-analyze,
# the binaries), as the deb suite of make test.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/deps/redis/pin"
skv=$(sed -n 's/^#define SKV_VERSION "\(.*\)"/\1/p' "$top/src/skv_version.h")
rev=${SKV_DEB_REVISION:-1}
version="$UPSTREAM_VERSION+skv$skv-$rev"
out="$top/build/deb"
work="$top/build/deb-work"
src="$top/build/redis/src"
arm64_bin="$top/build/redis-arm64/src/nic-kv"
# No mailing list exists yet: a placeholder address (lintian refuses localhost).
maintainer="SKV authors <skv-maintainers@example.org>"
date=$(date -R -d "@$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)")

die() { printf 'make-deb: %s\n' "$*" >&2; exit 1; }
[ -f "$top/build/redis/COPYING" ] || die "no build/redis/COPYING: run make first"
for b in redis-server redis-cli redis-benchmark nic-kv skv-rdma-tool; do
    [ -x "$src/$b" ] || die "no $src/$b: run make first"
done
[ -x "$arm64_bin" ] || die "no $arm64_bin: run make nic-kv-arm64 first"

rm -rf "$work" "$out"
mkdir -p "$work" "$out"

# --------------------------------------------------------------- helpers ---

# strip <arch> <file>: what Debian's dh_strip does for a release binary.
strip_bin() {
    local tool=strip
    [ "$1" = arm64 ] && tool=aarch64-linux-gnu-strip
    "$tool" --remove-section=.comment --remove-section=.note --strip-unneeded "$2"
}

# shlibs <arch> <file>...: the Depends dpkg-shlibdeps computes for them.
shlibs() {
    local arch=$1; shift
    local d; d=$(mktemp -d)
    mkdir -p "$d/debian"
    printf 'Source: skv\n\nPackage: skv\nArchitecture: any\n' > "$d/debian/control"
    local args=()
    for f in "$@"; do args+=("-e$f"); done
    (cd "$d" && dpkg-architecture -a"$arch" -c dpkg-shlibdeps -O "${args[@]}" 2>/dev/null) |
        sed -n 's/^shlibs:Depends=//p'
    rm -rf "$d"
}

# docs <root> <package>: copyright and changelog, as policy wants them,
# and the one lintian override (README.md, "Packages", says why).
docs() {
    local d="$1/usr/share/doc/$2"
    mkdir -p "$d" "$1/usr/share/lintian/overrides"
    printf '# Not uploaded to Debian: there is no bug to close.\n%s: initial-upload-closes-no-bugs\n' "$2" \
        > "$1/usr/share/lintian/overrides/$2"
    # SKV's services need systemd (Type=notify, the sandbox, StateDirectory):
    # no sysvinit script.
    printf '# The services need systemd (sd_notify, StateDirectory=, the sandbox): no init.d script.\n%s: package-supports-alternative-init-but-no-init.d-script\n' "$2" \
        >> "$1/usr/share/lintian/overrides/$2"
    # Both licences as their projects ship them: ours from LICENSE,
    # upstream's from the fetched source (build/redis/COPYING).
    {
        printf 'SKV: Redis %s (from Debian'"'"'s source package redis %s, patched at\n' "$UPSTREAM_VERSION" "$DEB_VERSION"
        printf 'build time) with an RDMA transport and the Nic-KV daemon.\n\n'
        printf '%s\n\n' '--- SKV (LICENSE) ---'
        cat "$top/LICENSE"
        printf '\n%s\n\n' '--- Redis (COPYING of the source package; its bundled deps/ keep their own licences) ---'
        cat "$top/build/redis/COPYING"
    } > "$d/copyright"
    printf '%s (%s) unstable; urgency=medium\n\n  * Built from the SKV tree (commit %s).\n\n -- %s  %s\n' \
        "$2" "$version" "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        "$maintainer" "$date" | gzip -9n > "$d/changelog.Debian.gz"
}

# A man page for each program: what it is and where its documentation is.
manpage() { # root name section summary text (the package: root's last part)
    local d="$1/usr/share/man/man$3"
    mkdir -p "$d"
    printf '.TH %s %s "" "SKV %s" "SKV"\n.SH NAME\n%s \\- %s\n.SH DESCRIPTION\n%s\n.PP\nRun it with \\fB--help\\fR (nic-kv) or see /usr/share/doc/%s.\n' \
        "$(echo "$2" | tr a-z A-Z)" "$3" "$skv" "$2" "$4" "$5" "$(basename "$1" | sed 's/-\(amd64\|arm64\)$//')" |
        gzip -9n > "$d/$2.$3.gz"
}

# The maintainer scripts both packages share: the system user, and the
# service enabled and started as debhelper's snippets do it. /etc/skv
# belongs to both: its dpkg-statoverride goes with the last one purged.
# skv-server's also take over Debian's redis-server (utils/deb/debian-redis.sh).
scripts() { # root unit conffile other-package [takeover]
    local root=$1 unit=$2 conf=$3 other=$4 takeover=${5:-}
    local lib="" take="" back=""
    if [ -n "$takeover" ]; then
        lib="SKV_CONF_MD5=$(md5sum < "$root/etc/skv/redis.conf" | cut -d' ' -f1)
$(cat "$top/utils/deb/debian-redis.sh")
"
        take="    skvTakeOver"
        back='if [ "$1" = remove ]; then
    skvHandBack
fi'
    fi
    cat > "$root/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
$lib
if [ "\$1" = configure ]; then
    if ! getent passwd skv >/dev/null; then
        adduser --system --group --home /var/lib/skv --no-create-home --quiet skv
    fi
    # The service reads its config, and CONFIG REWRITE replaces it (a new
    # file in the same directory, renamed): both belong to skv, as
    # Debian's redis-server does with /etc/redis.
    for p in /etc/skv:2770 $conf:640; do
        f=\${p%:*}
        dpkg-statoverride --list "\$f" >/dev/null || dpkg-statoverride --update --add skv skv "\${p#*:}" "\$f"
    done
$take
fi
if [ "\$1" = configure ] || [ "\$1" = abort-upgrade ] || [ "\$1" = abort-deconfigure ] || [ "\$1" = abort-remove ]; then
    deb-systemd-helper unmask '$unit' >/dev/null || true
    if deb-systemd-helper --quiet was-enabled '$unit'; then
        deb-systemd-helper enable '$unit' >/dev/null || true
    else
        deb-systemd-helper update-state '$unit' >/dev/null || true
    fi
    if [ -d /run/systemd/system ]; then
        systemctl --system daemon-reload >/dev/null || true
        deb-systemd-invoke restart '$unit' >/dev/null || true
    fi
fi
EOF
    cat > "$root/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "\$1" = remove ]; then
    deb-systemd-invoke stop '$unit' >/dev/null || true
fi
EOF
    cat > "$root/DEBIAN/postrm" <<EOF
#!/bin/sh
set -e
$lib
$back
if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi
if [ "\$1" = remove ] && command -v deb-systemd-helper >/dev/null; then
    deb-systemd-helper mask '$unit' >/dev/null || true
fi
if [ "\$1" = purge ]; then
    dpkg-statoverride --remove $conf >/dev/null 2>&1 || true
    if [ -z "\$(dpkg-query -W -f='\${db:Status-Status}\n' $other 2>/dev/null | grep -vx not-installed)" ]; then
        dpkg-statoverride --remove /etc/skv >/dev/null 2>&1 || true
    fi
fi
if [ "\$1" = purge ] && command -v deb-systemd-helper >/dev/null; then
    deb-systemd-helper purge '$unit' >/dev/null || true
    deb-systemd-helper unmask '$unit' >/dev/null || true
fi
EOF
    chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
}

# build <root> <package> <arch>: the .deb, with its installed size.
build() {
    local root=$1 pkg=$2 arch=$3 size
    size=$(du -k -s --exclude=DEBIAN "$root" | cut -f1)
    sed -i "s/^Installed-Size: .*/Installed-Size: $size/" "$root/DEBIAN/control"
    find "$root" -type d -exec chmod 0755 {} +
    # md5sums, as dh_md5sums writes it: every file but the conffiles.
    (cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' |
        grep -vxF -f <(sed 's|^/||' DEBIAN/conffiles) | LC_ALL=C sort | xargs -d '\n' md5sum) > "$root/DEBIAN/md5sums"
    dpkg-deb --root-owner-group -Zxz --build "$root" "$out/${pkg}_${version}_${arch}.deb" >/dev/null
    echo "make-deb: $out/${pkg}_${version}_${arch}.deb"
}

# Both services' sandbox, in each unit. Not PrivateDevices: RDMA needs
# /dev/infiniband.
hardening='# Hardening. Not PrivateDevices: RDMA needs /dev/infiniband.
NoNewPrivileges=true
PrivateTmp=true
ProtectHome=true
ProtectSystem=strict
ReadWritePaths=/etc/skv
ProtectControlGroups=true
ProtectKernelModules=true
ProtectKernelTunables=true
ProtectKernelLogs=true
ProtectClock=true
ProtectHostname=true
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK AF_IB
RestrictNamespaces=true
RestrictRealtime=true
LockPersonality=true
MemoryDenyWriteExecute=true'

# ------------------------------------------------------------ skv-server ---

r="$work/skv-server"
mkdir -p "$r/DEBIAN" "$r/usr/bin" "$r/etc/skv" "$r/lib/systemd/system"
for b in redis-server redis-cli redis-benchmark skv-rdma-tool; do
    install -m 0755 "$src/$b" "$r/usr/bin/$b"
    strip_bin amd64 "$r/usr/bin/$b"
done
# As upstream's make install: one binary, which acts on its name.
for l in redis-sentinel redis-check-aof redis-check-rdb; do ln -s redis-server "$r/usr/bin/$l"; done
install -m 0644 "$top/redis.conf" "$r/etc/skv/redis.conf"
# Last, so that they win: the settings taken over from Debian's
# redis-server at install (utils/deb/debian-redis.sh), and files of the
# admin's own. A pattern that matches nothing is no error.
cat >> "$r/etc/skv/redis.conf" <<'EOF'

# Settings taken over from Debian's redis-server when skv-server replaced
# it (/etc/skv/conf.d/debian-redis.conf; DEPLOY.md), and any file of yours
# named *.conf there: read last, they win.
include /etc/skv/conf.d/*.conf
EOF
cat > "$r/lib/systemd/system/skv-server.service" <<EOF
[Unit]
Description=SKV key-value store (Redis with RDMA and Nic-KV)
Documentation=file:///usr/share/doc/skv-server/README.md.gz
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
ExecStart=/usr/bin/redis-server /etc/skv/redis.conf --supervised systemd --daemonize no
User=skv
Group=skv
StateDirectory=skv
StateDirectoryMode=0750
WorkingDirectory=/var/lib/skv
RuntimeDirectory=skv
RuntimeDirectoryMode=0755
UMask=007
TimeoutStartSec=infinity
TimeoutStopSec=infinity
Restart=on-failure
# RDMA registers (pins) memory for every connection.
LimitMEMLOCK=infinity
LimitNOFILE=65536
$hardening
CapabilityBoundingSet=
RestrictSUIDSGID=true
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
EOF
docs "$r" skv-server
install -m 0644 "$top/README.md" "$top/RDMA.md" "$r/usr/share/doc/skv-server/"
gzip -9n "$r/usr/share/doc/skv-server/README.md" "$r/usr/share/doc/skv-server/RDMA.md"
manpage "$r" redis-server 1 "SKV's key-value server (Redis $UPSTREAM_VERSION with RDMA)" \
    "redis-server is Redis $UPSTREAM_VERSION with SKV's RDMA transport and the master's side of Nic-KV."
manpage "$r" redis-cli 1 "command-line client for SKV and Redis" \
    "redis-cli is upstream's client; --rdma connects over RDMA."
manpage "$r" redis-benchmark 1 "benchmark for SKV and Redis" \
    "redis-benchmark is upstream's benchmark; --rdma runs it over RDMA."
manpage "$r" skv-rdma-tool 1 "SKV's TCP-to-RDMA proxy and RDMA test clients" \
    "skv-rdma-tool proxies TCP clients to an RDMA server and drives RDMA test clients."
for l in redis-sentinel redis-check-aof redis-check-rdb; do
    ln -s redis-server.1.gz "$r/usr/share/man/man1/$l.1.gz"
done
echo /etc/skv/redis.conf > "$r/DEBIAN/conffiles"
scripts "$r" skv-server.service /etc/skv/redis.conf skv-nic-kv takeover
cat > "$r/DEBIAN/control" <<EOF
Package: skv-server
Version: $version
Architecture: amd64
Maintainer: $maintainer
Installed-Size: 0
Depends: $(shlibs amd64 "$r/usr/bin/redis-server" "$r/usr/bin/skv-rdma-tool"), adduser
Conflicts: redis-server, redis-tools, redis-sentinel
Replaces: redis-server, redis-tools, redis-sentinel
Provides: redis-server, redis-tools, redis-sentinel
Section: database
Priority: optional
Description: key-value store with RDMA and SmartNIC-offloaded replication
 SKV is Redis $UPSTREAM_VERSION (every command, persistence, ACLs, Sentinel
 and Cluster) with an RDMA transport for clients and replication, and the
 master's side of Nic-KV, a daemon on a BlueField DPU that fans the
 replication stream out to the replicas and fails the master over.
 .
 This package holds redis-server, redis-sentinel, redis-cli,
 redis-benchmark, redis-check-aof, redis-check-rdb and skv-rdma-tool, SKV's
 /etc/skv/redis.conf and the skv-server service. It replaces Debian's
 redis-server and redis-tools.
EOF
build "$r" skv-server amd64

# ------------------------------------------------------------ skv-nic-kv ---

nickv_pkg() { # arch binary
    local arch=$1 bin=$2
    local r="$work/skv-nic-kv-$arch"
    mkdir -p "$r/DEBIAN" "$r/usr/bin" "$r/etc/skv" "$r/lib/systemd/system" "$r/usr/share/skv"
    install -m 0755 "$bin" "$r/usr/bin/nic-kv"
    strip_bin "$arch" "$r/usr/bin/nic-kv"
    # The sample keeps its state file in the working directory; the
    # package's is in /var/lib/skv, which the unit makes.
    sed 's|^state-file nic-kv.state$|state-file /var/lib/skv/nic-kv.state|' "$top/nic-kv/nic-kv.conf" > "$r/etc/skv/nic-kv.conf"
    grep -qx 'state-file /var/lib/skv/nic-kv.state' "$r/etc/skv/nic-kv.conf" ||
        die "nic-kv/nic-kv.conf has no line 'state-file nic-kv.state'"
    chmod 0644 "$r/etc/skv/nic-kv.conf"
    install -m 0755 "$top/utils/fence-ovs.sh" "$r/usr/share/skv/fence-ovs.sh"
    cat > "$r/lib/systemd/system/nic-kv.service" <<EOF
[Unit]
Description=Nic-KV, SKV's replication fan-out and failover daemon
Documentation=file:///usr/share/doc/skv-nic-kv/NIC-KV.md.gz
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart=/usr/bin/nic-kv /etc/skv/nic-kv.conf --daemonize no
User=skv
Group=skv
# The failover's state file (state-file /var/lib/skv/nic-kv.state).
StateDirectory=skv
StateDirectoryMode=0750
WorkingDirectory=/var/lib/skv
UMask=007
Restart=on-failure
RestartSec=1
# RDMA registers the backlog ring for every RDMA replica.
LimitMEMLOCK=infinity
LimitNOFILE=65536
$hardening

[Install]
WantedBy=multi-user.target
EOF
    docs "$r" skv-nic-kv
    install -m 0644 "$top/NIC-KV.md" "$top/DEPLOY.md" "$top/DESIGN.md" "$r/usr/share/doc/skv-nic-kv/"
    gzip -9n "$r/usr/share/doc/skv-nic-kv/NIC-KV.md" "$r/usr/share/doc/skv-nic-kv/DEPLOY.md" \
        "$r/usr/share/doc/skv-nic-kv/DESIGN.md"
    manpage "$r" nic-kv 1 "SKV's replication fan-out and failover daemon" \
        "nic-kv streams from an SKV master and sends the stream to its replicas; it probes them all and fails the master over."
    echo /etc/skv/nic-kv.conf > "$r/DEBIAN/conffiles"
    scripts "$r" nic-kv.service /etc/skv/nic-kv.conf skv-server
    cat > "$r/DEBIAN/control" <<EOF
Package: skv-nic-kv
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: 0
Depends: $(shlibs "$arch" "$r/usr/bin/nic-kv"), adduser
Section: database
Priority: optional
Description: SKV's replication fan-out and failover daemon (Nic-KV)
 Nic-KV runs on the Arm cores of a BlueField DPU in the SKV master's
 server (or any machine near it): the master sends its replication stream
 once, to Nic-KV, which sends it to every replica, over TCP or RDMA with
 zero copy. It probes the master and the replicas, enforces a minimum of
 healthy replicas and fails the master over with a lease that fences it.
 .
 This package holds nic-kv, /etc/skv/nic-kv.conf, the nic-kv service and
 an example fence-command for the DPU's OVS (/usr/share/skv/fence-ovs.sh).
EOF
    build "$r" skv-nic-kv "$arch"
}
nickv_pkg amd64 "$src/nic-kv"
nickv_pkg arm64 "$arm64_bin"
rm -rf "$work"
