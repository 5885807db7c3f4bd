#!/usr/bin/env bash
# rdma-vm.sh -- run a command inside a throw-away VM with Soft-RoCE.
#
#   utils/rdma-vm.sh <command> [args...]
#
# Boots the Debian kernel (linux-image-amd64) under qemu with virtme-ng, in
# software emulation (nested KVM does not work here), with this machine's
# userspace: the host's binaries run unchanged. The guest sees the host's
# files read-only, except build/, which it may write. Inside, as root,
# tests/rdma/vm-guest.sh loads rdma_rxe, makes a veth pair 10.77.0.1 <->
# 10.77.0.2 with an rxe device on each end, then runs the command from the
# repository's top directory.
#
# Prints the guest's output; exits with the command's status, or 125 when
# the VM could not be started (missing packages, no kernel, qemu failure).
# Needs what `utils/setup-deps.sh vm` installs. SKV_VM_TIMEOUT (seconds,
# default 2400) bounds the whole run; SKV_VM_MEMORY (default 3G) and
# SKV_VM_CPUS (default: this machine's cores) size the guest.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
vmdir="$top/build/vm"
[ $# -ge 1 ] || { echo "usage: utils/rdma-vm.sh <command> [args...]" >&2; exit 2; }

fail_start() { echo "rdma-vm: cannot start the VM: $*" >&2; exit 125; }

vng="$top/build/venv/bin/vng"
[ -x "$vng" ] || fail_start "virtme-ng is missing (utils/setup-deps.sh vm installs it)"
command -v qemu-system-x86_64 >/dev/null || fail_start "qemu-system-x86_64 is missing (utils/setup-deps.sh vm)"
kernel=$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -n 1)
[ -n "$kernel" ] || fail_start "no Debian kernel in /boot (apt-get install linux-image-amd64)"
[ -d "/lib/modules/${kernel#/boot/vmlinuz-}/kernel/drivers/infiniband/sw/rxe" ] ||
    fail_start "the kernel's rdma_rxe module is missing for ${kernel#/boot/vmlinuz-}"

rm -rf "$vmdir"
mkdir -p "$vmdir"
# The command, quoted, for the guest.
printf '%q ' "$@" > "$vmdir/command"

echo "rdma-vm: booting ${kernel##*/} under software emulation (this takes a minute)"
PATH="$top/build/venv/bin:$PATH" timeout "${SKV_VM_TIMEOUT:-2400}" \
    "$vng" --run "$kernel" --disable-kvm \
        --memory "${SKV_VM_MEMORY:-3G}" --cpus "${SKV_VM_CPUS:-$(nproc)}" \
        --rwdir "$top/build" \
        --exec "$top/tests/rdma/vm-guest.sh $top" > "$vmdir/console.log" 2>&1
vng_status=$?

[ -f "$vmdir/guest.log" ] && cat "$vmdir/guest.log"
if [ ! -f "$vmdir/rc" ]; then
    echo "rdma-vm: the guest did not finish (vng exit $vng_status); console:" >&2
    tail -n 30 "$vmdir/console.log" >&2
    [ -f "$vmdir/started" ] && exit 1      # it booted: a failure, not a skip
    exit 125
fi
exit "$(cat "$vmdir/rc")"
