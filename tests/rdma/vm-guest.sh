#!/usr/bin/env bash
# vm-guest.sh -- inside the Soft-RoCE VM (started by utils/rdma-vm.sh):
# make the RDMA devices, then run the command in build/vm/command.
#
# Two rxe devices on the ends of a veth pair, all in the initial network
# namespace (rxe on kernel 6.1 does not work across namespaces, nor on lo):
#   rxe0 on v0, 10.77.0.1    rxe1 on v1, 10.77.0.2
#               10.77.0.3               10.77.0.4
# Between two addresses of one host the kernel takes a shortcut: rxe loops a
# packet back inside the device when source and destination are the same
# address, and routes it through lo otherwise, where rxe drops it. So
# 10.77.0.3 is a third simulated host whose traffic to 10.77.0.2 and
# 10.77.0.4 really crosses the veth (policy routes for locally sent packets,
# the local table looked up after them): the one path a test can cut with
# iptables on UDP 4791 (tests/rdma/nickv-pin.tcl). Everything else keeps
# to the shortcut, as before.
top=$1
vmdir="$top/build/vm"
exec > "$vmdir/guest.log" 2>&1
touch "$vmdir/started"

setup() {
    modprobe rdma_rxe || return 1
    ip link add v0 type veth peer name v1 || return 1
    ip addr add 10.77.0.1/24 dev v0 && ip addr add 10.77.0.2/24 dev v1 || return 1
    ip link set v0 up && ip link set v1 up && ip link set lo up || return 1
    rdma link add rxe0 type rxe netdev v0 || return 1
    rdma link add rxe1 type rxe netdev v1 || return 1
    ip addr add 10.77.0.3/32 dev v0 && ip addr add 10.77.0.4/32 dev v1 || return 1
    for c in all v0 v1; do
        sysctl -qw net.ipv4.conf.$c.accept_local=1 net.ipv4.conf.$c.rp_filter=0 || return 1
    done
    ip rule add pref 10 iif lo from 10.77.0.3 lookup 100 || return 1
    ip rule add pref 11 iif lo from 10.77.0.2 to 10.77.0.3 lookup 101 || return 1
    ip rule add pref 12 iif lo from 10.77.0.4 to 10.77.0.3 lookup 101 || return 1
    ip route add 10.77.0.2 dev v0 src 10.77.0.3 table 100 || return 1
    ip route add 10.77.0.4 dev v0 src 10.77.0.3 table 100 || return 1
    ip route add 10.77.0.3 dev v1 table 101 || return 1
    ip rule add pref 1000 lookup local && ip rule del pref 0 || return 1
    # No udev here: let unprivileged test servers open the devices.
    chmod 666 /dev/infiniband/* 2>/dev/null
    return 0
}
if ! setup; then
    echo "vm-guest: could not set up Soft-RoCE"
    echo 125 > "$vmdir/rc"
    exit 0
fi
echo "vm-guest: $(uname -r), $(rdma link | tr '\n' ' ')"
ulimit -l unlimited
ulimit -n 65536
cd "$top" || exit 1
eval "$(cat "$vmdir/command")"
echo $? > "$vmdir/rc"
