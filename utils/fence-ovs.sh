#!/bin/sh
# fence-ovs.sh -- an example fence-command for Nic-KV on a BlueField DPU:
# cut the old master's service traffic off at the DPU's own switch, so that
# no client can reach it, whatever its clock says.
#
#   fence-command /usr/share/skv/fence-ovs.sh          (in nic-kv.conf)
#   fence-ovs.sh <old-ip> <old-port> <new-ip> <new-port> <epoch>   (Nic-KV runs it)
#   fence-ovs.sh release <old-ip> <old-port>           (an operator, afterwards)
#
# On a BlueField in DPU mode all of the host's traffic passes through the
# OVS bridge on the DPU's Arm cores (the host's PF representor, pf0hpf, is
# a port of it). This adds, with the epoch as its cookie, a flow that drops
# TCP from the old master's address and port coming out of the host: its
# replies to clients, and so every acknowledgement it could still give.
# Traffic to Nic-KV itself does not pass that port on the way in (Nic-KV
# runs on the DPU), so Nic-KV can still make the old master a replica; once
# it is one (INFO failover: repoint_pending 0), remove the flow with
# "release", or the host stays cut off on that port.
#
# Settings (environment, or edit the defaults): FENCE_OVS_BRIDGE (ovsbr1),
# FENCE_OVS_HOST_PORT (pf0hpf), FENCE_OVS_DRY_RUN=1 (print, run nothing).
#
# Tested here only in dry-run mode (tests/unit/fence-ovs.tcl): check the
# bridge and port names with "ovs-vsctl show" on your DPU, and try it once
# by hand before relying on it.
set -eu
bridge=${FENCE_OVS_BRIDGE:-ovsbr1}
hostport=${FENCE_OVS_HOST_PORT:-pf0hpf}

run() {
    if [ "${FENCE_OVS_DRY_RUN:-0}" = 1 ]; then echo "$*"; else "$@"; fi
}

if [ "${1:-}" = release ]; then
    [ $# -eq 3 ] || { echo "usage: $0 release <old-ip> <old-port>" >&2; exit 2; }
    run ovs-ofctl del-flows "$bridge" "tcp,in_port=$hostport,nw_src=$2,tp_src=$3"
    exit 0
fi
[ $# -eq 5 ] || { echo "usage: $0 <old-ip> <old-port> <new-ip> <new-port> <epoch>" >&2; exit 2; }
old_ip=$1 old_port=$2 epoch=$5
case "$old_ip" in *[!0-9.]*|'') echo "fence-ovs: not an IPv4 address: $old_ip" >&2; exit 2 ;; esac
case "$old_port$epoch" in *[!0-9]*) echo "fence-ovs: bad port or epoch" >&2; exit 2 ;; esac
run ovs-ofctl add-flow "$bridge" \
    "cookie=$epoch,priority=60000,tcp,in_port=$hostport,nw_src=$old_ip,tp_src=$old_port,actions=drop"
echo "fence-ovs: $old_ip:$old_port is cut off at $bridge/$hostport (epoch $epoch)" >&2
