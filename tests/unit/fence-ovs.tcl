# utils/fence-ovs.sh, the example fence-command for a BlueField DPU: what
# it would run (dry run; fence-ovs-live.tcl runs it against a real OVS),
# and what it refuses.

source tests/skv/helpers.tcl

proc fence_ovs {args} {
    set status [catch {exec env FENCE_OVS_DRY_RUN=1 FENCE_OVS_BRIDGE=br0 FENCE_OVS_NICKV_IPS=10.0.0.9,10.0.0.8 \
                           $::skv_root/utils/fence-ovs.sh {*}$args 2>@1} out]
    list $status $out
}

start_server {tags {"nickv external:skip"}} {
    test {fence-ovs.sh: drops the old master's TCP port and RoCE both ways, but for Nic-KV's addresses, the epoch as cookie} {
        lassign [fence_ovs 10.0.0.1 6379 10.0.0.2 6379 7] status out
        assert_equal 0 $status
        set want "ovs-ofctl add-flows br0 -"
        foreach nk {10.0.0.9 10.0.0.8} {
            append want "\ncookie=7,priority=60001,tcp,nw_src=10.0.0.1,nw_dst=$nk,tp_src=6379,actions=normal"
            append want "\ncookie=7,priority=60001,tcp,nw_src=$nk,nw_dst=10.0.0.1,tp_dst=6379,actions=normal"
            append want "\ncookie=7,priority=60001,udp,nw_src=10.0.0.1,nw_dst=$nk,tp_dst=4791,actions=normal"
            append want "\ncookie=7,priority=60001,udp,nw_src=$nk,nw_dst=10.0.0.1,tp_dst=4791,actions=normal"
        }
        append want "\ncookie=7,priority=60000,tcp,nw_src=10.0.0.1,tp_src=6379,actions=drop"
        append want "\ncookie=7,priority=60000,tcp,nw_dst=10.0.0.1,tp_dst=6379,actions=drop"
        append want "\ncookie=7,priority=60000,udp,nw_src=10.0.0.1,tp_dst=4791,actions=drop"
        append want "\ncookie=7,priority=60000,udp,nw_dst=10.0.0.1,tp_dst=4791,actions=drop"
        append want "\nfence-ovs: 10.0.0.1 (TCP 6379, RoCE) is cut off at br0 but for 10.0.0.9 10.0.0.8 (epoch 7)"
        assert_equal $want $out
        lassign [fence_ovs release 10.0.0.1 6379] status out
        assert_equal 0 $status
        assert_equal [join {
            "ovs-ofctl del-flows br0 tcp,nw_src=10.0.0.1,tp_src=6379"
            "ovs-ofctl del-flows br0 tcp,nw_dst=10.0.0.1,tp_dst=6379"
            "ovs-ofctl del-flows br0 udp,nw_src=10.0.0.1,tp_dst=4791"
            "ovs-ofctl del-flows br0 udp,nw_dst=10.0.0.1,tp_dst=4791"} "\n"] $out
    }

    test {fence-ovs.sh: refuses what it cannot fence, so the promotion is called off} {
        lassign [fence_ovs 10.0.0.1 6379] status out
        assert_equal 1 $status
        assert_match {*usage*} $out
        lassign [fence_ovs host.example 6379 10.0.0.2 6379 7] status out
        assert_equal 1 $status
        assert_match {*not an IPv4 address*} $out
        lassign [fence_ovs 10.0.0.1 63x9 10.0.0.2 6379 7] status out
        assert_equal 1 $status
        assert_match {*bad port: 63x9*} $out
        # Nic-KV's own address is the one fence that would cut it off too.
        set status [catch {exec env FENCE_OVS_DRY_RUN=1 FENCE_OVS_NICKV_IPS=10.0.0.1 \
                               $::skv_root/utils/fence-ovs.sh 10.0.0.1 6379 10.0.0.2 6379 7 2>@1} out]
        assert_equal 1 $status
        assert_match {*Nic-KV's address is the old master's: 10.0.0.1*} $out
    }
}
