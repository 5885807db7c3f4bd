#!/bin/sh
# fence-ovs.sh -- an example fence-command for Nic-KV on a BlueField DPU:
# cut the old master off at the DPU's own switch, so that no client or
# replica can reach it, whatever its clock says, while Nic-KV still can.
#
#   fence-command /usr/share/skv/fence-ovs.sh          (in nic-kv.conf)
#   fence-ovs.sh <old-ip> <old-port> <new-ip> <new-port> <epoch>   (Nic-KV runs it)
#   fence-ovs.sh release <old-ip> <old-port>           (an operator, afterwards)
#
# On a BlueField in DPU mode all of the host's traffic passes through an
# OVS bridge on the DPU's Arm cores (the host's PF representor, pf0hpf, is
# a port of it), and Nic-KV reaches the host through that bridge too (a
# scalable function's port, see DEPLOY.md). This adds, with the epoch as
# their cookie, flows that drop, in both directions, at any port of the
# bridge:
#   - TCP to or from the old master's address and port (clients, replicas,
#     and the replies it could still give them: every acknowledgement);
#   - RoCEv2 (UDP to port 4791) to or from the old master's address: every
#     RDMA connection of that host, Redis's or not, as RoCE has no ports of
#     its own to tell them apart;
# and, one priority above, flows that let both through between the old
# master and Nic-KV's own address(es), so that Nic-KV keeps probing it and
# can make it a replica. Once it is one (INFO failover: repoint_pending 0),
# remove the flows with "release", or the host stays cut off.
#
# Settings (environment: an Environment= line in a drop-in of nic-kv's
# unit, as Nic-KV passes its own on):
#   FENCE_OVS_BRIDGE     the bridge the host's port is on (ovsbr1)
#   FENCE_OVS_NICKV_IPS  Nic-KV's IPv4 address(es), spaces or commas
#                        between them; by default the source address this
#                        machine's routes give for the old master
#                        ("ip route get <old-ip>"), which is Nic-KV's when
#                        it runs here
#   FENCE_OVS_PASS       the actions of the flows that let Nic-KV's traffic
#                        through (normal: the bridge's own switching, as
#                        ovsbr1's on a BlueField; a bridge with flows of its
#                        own wants e.g. resubmit(,1))
#   FENCE_OVS_OFCTL      the ovs-ofctl command (ovs-ofctl; OVS_RUNDIR in the
#                        environment finds a bridge of another directory)
#   FENCE_OVS_DRY_RUN=1  print the commands, run nothing
#
# Tested here against a real ovs-vswitchd (userspace datapath) with veths
# and network namespaces standing for the host, a client and Nic-KV
# (tests/unit/fence-ovs-live.tcl); not on a BlueField: check the bridge
# name with "ovs-vsctl show" on your DPU, and try it once by hand before
# relying on it.
set -eu
bridge=${FENCE_OVS_BRIDGE:-ovsbr1}
pass=${FENCE_OVS_PASS:-normal}
ofctl=${FENCE_OVS_OFCTL:-ovs-ofctl}
roce=4791

is_ipv4() {
    case "$1" in *[!0-9.]*|'') return 1 ;; esac
}

# The flows, one a line, on stdout; ovs-ofctl add-flows reads them all
# before it sends any, the ones that let Nic-KV through first.
flows() {
    for nk in $nickv_ips; do
        for proto_ports in "tcp tp_src=$old_port tp_dst=$old_port" "udp tp_dst=$roce tp_dst=$roce"; do
            set -- $proto_ports
            echo "cookie=$epoch,priority=60001,$1,nw_src=$old_ip,nw_dst=$nk,$2,actions=$pass"
            echo "cookie=$epoch,priority=60001,$1,nw_src=$nk,nw_dst=$old_ip,$3,actions=$pass"
        done
    done
    echo "cookie=$epoch,priority=60000,tcp,nw_src=$old_ip,tp_src=$old_port,actions=drop"
    echo "cookie=$epoch,priority=60000,tcp,nw_dst=$old_ip,tp_dst=$old_port,actions=drop"
    echo "cookie=$epoch,priority=60000,udp,nw_src=$old_ip,tp_dst=$roce,actions=drop"
    echo "cookie=$epoch,priority=60000,udp,nw_dst=$old_ip,tp_dst=$roce,actions=drop"
}

if [ "${1:-}" = release ]; then
    [ $# -eq 3 ] || { echo "usage: $0 release <old-ip> <old-port>" >&2; exit 2; }
    is_ipv4 "$2" || { echo "fence-ovs: not an IPv4 address: $2" >&2; exit 2; }
    case "$3" in *[!0-9]*|'') echo "fence-ovs: bad port: $3" >&2; exit 2 ;; esac
    # del-flows without --strict removes every flow at least this narrow:
    # the drops and the flows that let Nic-KV through alike.
    for match in "tcp,nw_src=$2,tp_src=$3" "tcp,nw_dst=$2,tp_dst=$3" \
                 "udp,nw_src=$2,tp_dst=$roce" "udp,nw_dst=$2,tp_dst=$roce"; do
        if [ "${FENCE_OVS_DRY_RUN:-0}" = 1 ]; then echo "$ofctl del-flows $bridge $match"
        else $ofctl del-flows "$bridge" "$match"; fi
    done
    exit 0
fi
[ $# -eq 5 ] || { echo "usage: $0 <old-ip> <old-port> <new-ip> <new-port> <epoch>" >&2; exit 2; }
old_ip=$1 old_port=$2 epoch=$5
is_ipv4 "$old_ip" || { echo "fence-ovs: not an IPv4 address: $old_ip" >&2; exit 2; }
case "$old_port" in *[!0-9]*|'') echo "fence-ovs: bad port: $old_port" >&2; exit 2 ;; esac
case "$epoch" in *[!0-9]*|'') echo "fence-ovs: bad epoch: $epoch" >&2; exit 2 ;; esac

if [ -n "${FENCE_OVS_NICKV_IPS:-}" ]; then
    nickv_ips=$(echo "$FENCE_OVS_NICKV_IPS" | tr ',' ' ')
else
    nickv_ips=$(ip -4 -o route get "$old_ip" 2>/dev/null |
                sed -n 's/.* src \([0-9.]*\).*/\1/p')
fi
[ -n "$nickv_ips" ] || {
    echo "fence-ovs: no address of Nic-KV (no route to $old_ip here: set FENCE_OVS_NICKV_IPS)" >&2
    exit 2
}
for nk in $nickv_ips; do
    is_ipv4 "$nk" || { echo "fence-ovs: not an IPv4 address (FENCE_OVS_NICKV_IPS): $nk" >&2; exit 2; }
    [ "$nk" != "$old_ip" ] || { echo "fence-ovs: Nic-KV's address is the old master's: $nk" >&2; exit 2; }
done

if [ "${FENCE_OVS_DRY_RUN:-0}" = 1 ]; then
    echo "$ofctl add-flows $bridge -"
    flows
else
    flows | $ofctl add-flows "$bridge" -
fi
echo "fence-ovs: $old_ip (TCP $old_port, RoCE) is cut off at $bridge but for $(echo $nickv_ips) (epoch $epoch)" >&2
