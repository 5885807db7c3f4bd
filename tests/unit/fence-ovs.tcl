# utils/fence-ovs.sh, the example fence-command for a BlueField DPU: what
# it would run (dry run: this machine has no OVS), and what it refuses.

source tests/skv/helpers.tcl

proc fence_ovs {args} {
    set status [catch {exec env FENCE_OVS_DRY_RUN=1 FENCE_OVS_BRIDGE=br0 FENCE_OVS_HOST_PORT=pf0hpf \
                           $::skv_root/utils/fence-ovs.sh {*}$args 2>@1} out]
    list $status $out
}

start_server {tags {"nickv external:skip"}} {
    test {fence-ovs.sh: drops the old master's replies at the host's port, the epoch as cookie} {
        lassign [fence_ovs 10.0.0.1 6379 10.0.0.2 6379 7] status out
        assert_equal 0 $status
        assert_match "ovs-ofctl add-flow br0 cookie=7,priority=60000,tcp,in_port=pf0hpf,nw_src=10.0.0.1,tp_src=6379,actions=drop*cut off*" $out
        lassign [fence_ovs release 10.0.0.1 6379] status out
        assert_equal 0 $status
        assert_equal "ovs-ofctl del-flows br0 tcp,in_port=pf0hpf,nw_src=10.0.0.1,tp_src=6379" $out
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
    }
}
