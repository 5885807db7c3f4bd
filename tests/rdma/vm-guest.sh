#!/usr/bin/env bash
# vm-guest.sh -- inside the Soft-RoCE VM (started by utils/rdma-vm.sh):
# make the RDMA devices, then run the command in build/vm/command.
#
# Two rxe devices on the ends of a veth pair, all in the initial network
# namespace (rxe on kernel 6.1 does not work across namespaces, nor on lo):
#   rxe0 on v0, 10.77.0.1    rxe1 on v1, 10.77.0.2
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
