# utils/fence-ovs.sh against a real ovs-vswitchd (Debian's openvswitch-switch,
# its userspace datapath: no kernel module needed), in a directory of its
# own: a bridge with three network namespaces on veths around it, standing
# for a BlueField's host (a redis-server, the old master), a client, and
# Nic-KV on the DPU's Arm cores. After the fence the client reaches neither
# the master's port nor RoCE's (UDP 4791) on the host; Nic-KV reaches both.
#
# Needs root and network namespaces: skipped with a message without them,
# failed instead when CI or SKV_REQUIRE_RDMA_VM=1 is set. Everything it
# creates is removed at the end, and at the start when a failed run left it.

source tests/skv/helpers.tcl

proc fo_required {} {
    expr {([info exists ::env(CI)] && $::env(CI) ne "") ||
          ([info exists ::env(SKV_REQUIRE_RDMA_VM)] && $::env(SKV_REQUIRE_RDMA_VM) eq "1")}
}

# Why this machine cannot run the test, or "".
proc fo_cannot {} {
    if {[exec id -u] ne "0"} { return "not root" }
    foreach prog {ip ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ethtool socat} {
        if {[auto_execok $prog] eq ""} { return "no $prog (utils/setup-deps.sh test installs it)" }
    }
    set probe skvfo-probe-[pid]
    if {[catch {exec ip netns add $probe} err]} { return "no network namespaces: $err" }
    catch {exec ip netns del $probe}
    return ""
}

# Names of this run's things: the base port keeps two runs apart.
set ::fo_tag [expr {$::baseport % 100000}]
set ::fo_dir /tmp/skv-fence-ovs-$::fo_tag
set ::fo_bridge fobr$::fo_tag
set ::fo_roles {host client nickv}
array set ::fo_ip {host 10.231.0.1 client 10.231.0.2 nickv 10.231.0.3}
set ::fo_port [expr {$::baseport + 7}]
set ::fo_pids {}

proc fo_ns {role} { return skvfo$::fo_tag-$role }
proc fo_veth {role side} { return fo$::fo_tag[string index $role 0]$side }
proc fo_in {role args} { exec ip netns exec [fo_ns $role] {*}$args }

proc fo_vsctl {args} { exec ovs-vsctl --db=unix:$::fo_dir/db.sock --timeout=5 {*}$args }

# Removes all of it; quiet about what is not there.
proc fo_cleanup {} {
    foreach pid $::fo_pids { catch {exec kill -9 $pid} }
    set ::fo_pids {}
    foreach f {ovs-vswitchd.pid ovsdb-server.pid} {
        if {![catch {set fd [open $::fo_dir/$f]}]} {
            set pid [string trim [read $fd]]
            close $fd
            if {$pid ne ""} { catch {exec kill -9 $pid} }
        }
    }
    foreach role $::fo_roles {
        catch {exec ip netns del [fo_ns $role]}
        catch {exec ip link del [fo_veth $role o]}
    }
    file delete -force $::fo_dir
}

proc fo_setup {} {
    fo_cleanup
    file mkdir $::fo_dir
    set ::env(OVS_RUNDIR) $::fo_dir
    set d $::fo_dir
    exec ovsdb-tool create $d/conf.db /usr/share/openvswitch/vswitch.ovsschema
    exec ovsdb-server $d/conf.db --remote=punix:$d/db.sock --pidfile=$d/ovsdb-server.pid \
        --unixctl=$d/ovsdb-server.ctl --log-file=$d/ovsdb-server.log --detach 2>>$d/stderr.log
    fo_vsctl --no-wait init
    exec ovs-vswitchd unix:$d/db.sock --pidfile=$d/ovs-vswitchd.pid \
        --unixctl=$d/ovs-vswitchd.ctl --log-file=$d/ovs-vswitchd.log --detach 2>>$d/stderr.log
    fo_vsctl add-br $::fo_bridge -- set bridge $::fo_bridge datapath_type=netdev
    foreach role $::fo_roles {
        set ns [fo_ns $role]
        set in [fo_veth $role i]
        set out [fo_veth $role o]
        exec ip netns add $ns
        exec ip link add $out type veth peer name $in
        exec ip link set $in netns $ns
        exec ip -n $ns link set lo up
        exec ip -n $ns addr add $::fo_ip($role)/24 dev $in
        exec ip -n $ns link set $in up
        exec ip link set $out up
        # The userspace datapath passes packets on as they are: checksums
        # left to the veth's offload would reach the peer unfilled.
        fo_in $role ethtool -K $in tx off >/dev/null
        exec ethtool -K $out tx off >/dev/null
        fo_vsctl add-port $::fo_bridge $out
    }
    set dir [file normalize [tmpdir fence-ovs]]
    lappend ::fo_pids [exec ip netns exec [fo_ns host] src/redis-server --port $::fo_port \
        --bind $::fo_ip(host) --protected-mode no --save {} --appendonly no --dir $dir \
        >>& $dir/host-redis.log &]
    # Counts RoCE's datagrams at the host: one line each.
    lappend ::fo_pids [exec ip netns exec [fo_ns host] socat -u UDP4-RECV:4791 - \
        >> $::fo_dir/roce.out &]
    wait_for_condition 50 100 {
        [fo_ping client 2] eq "PONG"
    } else {
        fail "the client never reached the host's redis-server through $::fo_bridge: [fo_ping client 2]"
    }
}

# PING of the host's redis-server from a namespace: PONG, or what went wrong
# (a timeout, in at most $secs seconds).
proc fo_ping {role secs} {
    if {[catch {fo_in $role timeout $secs src/redis-cli -h $::fo_ip(host) -p $::fo_port PING} out]} {
        return "failed: $out"
    }
    return $out
}

# Sends one RoCE datagram (to UDP 4791) from a namespace to the host; returns
# the datagrams the host has had so far, after a moment for this one.
proc fo_roce {role text} {
    fo_in $role sh -c "echo $text | timeout 3 socat -u - UDP4-SENDTO:$::fo_ip(host):4791"
    after 300
    set fd [open $::fo_dir/roce.out]
    set got [split [string trim [read $fd]] "\n"]
    close $fd
    return $got
}

proc fo_fence {args} {
    fo_in nickv env OVS_RUNDIR=$::fo_dir FENCE_OVS_BRIDGE=$::fo_bridge \
        $::skv_root/utils/fence-ovs.sh {*}$args 2>@1
}

set why [fo_cannot]
if {$why ne ""} {
    if {[fo_required]} {
        start_server {tags {"nickv external:skip"}} {
            test {fence-ovs.sh against a real ovs-vswitchd can run here} {
                fail "fence-ovs-live: cannot run ($why), and CI or SKV_REQUIRE_RDMA_VM=1 requires it"
            }
        }
    } else {
        puts "skipping fence-ovs-live.tcl: $why"
    }
    return
}

start_server {tags {"nickv external:skip"}} {
    try {
        fo_setup

        test {fence-ovs.sh (live): before the fence the client and Nic-KV reach the master, RoCE reaches the host} {
            assert_equal PONG [fo_ping client 2]
            assert_equal PONG [fo_ping nickv 2]
            assert_equal {before} [fo_roce client before]
        }

        test {fence-ovs.sh (live): after the fence the client reaches neither the master's port nor RoCE; Nic-KV reaches both} {
            set epoch 42
            # Nic-KV's arguments: <old-ip> <old-port> <new-ip> <new-port> <epoch>;
            # its address is the one its routes give for the old master.
            set out [fo_fence $::fo_ip(host) $::fo_port 10.231.0.9 $::fo_port $epoch]
            assert_match "*cut off at $::fo_bridge but for $::fo_ip(nickv) (epoch 42)*" $out
            set flows [exec ovs-ofctl dump-flows $::fo_bridge]
            assert_equal 8 [regexp -all {cookie=0x2a,} $flows]

            set t0 [clock milliseconds]
            assert_match {failed:*} [fo_ping client 2]
            assert {[clock milliseconds] - $t0 < 2500}
            assert_equal PONG [fo_ping nickv 2]
            # The client's datagram is dropped; Nic-KV's comes through.
            assert_equal {before} [fo_roce client after-fence]
            assert_equal {before nickv} [fo_roce nickv nickv]
        }

        test {fence-ovs.sh (live): release gives the client back the master and RoCE} {
            fo_fence release $::fo_ip(host) $::fo_port
            set flows [exec ovs-ofctl dump-flows $::fo_bridge]
            assert_equal 0 [regexp -all {cookie=0x2a,} $flows]
            assert_equal PONG [fo_ping client 2]
            assert_equal {before nickv released} [fo_roce client released]
        }
    } finally {
        fo_cleanup
        unset -nocomplain ::env(OVS_RUNDIR)
    }
}
