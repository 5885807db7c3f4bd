# The master's whole server partitioned away (NIC-KV.md, "Many Nic-KVs"):
# the master and its Nic-KV run in a network namespace of their own, joined
# to this host by a veth pair; the two replicas, their Nic-KVs and a
# 3-member etcd cluster (Debian's etcd-server) run on the host. iptables in
# the namespace then drops everything between that server and the rest,
# except one client of the test, which keeps writing to the old master the
# whole time (the partition Jepsen's Sentinel analysis starts from: the
# master still reachable by some clients, cut from its replicas and its
# authority). Checked:
#   - never two writable masters: the old master accepts its last write
#     before the new one accepts its first (the test's loop alternates
#     between them, so the order is its own);
#   - no acknowledged append (RPUSH then WAIT 1 >= 1) lost.
# min-slaves is 0: with 1, the old master's own Nic-KV, which it still
# reaches, would stop its writes at once (its replicas no longer answer),
# and the lease chain (etcd unreachable: no more grants before the leader
# key can expire) would go untested. Here only the lease stops them.
#   - healed, the old master is a replica of the new one, its Nic-KV a
#     standby naming the new master, leadership on the new master's server,
#     the same data on every node.
# Needs root (ip netns, iptables); without, one test says so and fails.

source tests/skv/helpers.tcl
source tests/skv/etcd.tcl

# (This file is sourced inside a proc of the harness: pt is made global.)
global pt
array unset pt
set pt(ns) skvp[pid]
set pt(net) 10.79.[expr {[pid] % 250}]
set pt(host) $pt(net).1        ;# this host's end: replicas, etcd, standbys
set pt(client) $pt(net).3      ;# this host's end too: the one client that keeps reaching the old master
set pt(far) $pt(net).2         ;# the namespace: the master and its Nic-KV

proc pt_sh {args} { exec {*}$args 2>@1 }
proc pt_in_ns {args} { exec ip netns exec $::pt(ns) {*}$args 2>@1 }

proc pt_netns_up {} {
    global pt
    # Namespaces an earlier run left behind (it died before pt_netns_down).
    foreach ns [split [exec ip netns list] "\n"] {
        set ns [lindex $ns 0]
        if {![regexp {^skvp([0-9]+)$} $ns -> owner] || ![catch {exec kill -0 $owner}]} continue
        foreach p [split [exec ip netns pids $ns] "\n"] { catch {exec kill -9 $p} }
        catch {exec ip netns del $ns}
        catch {exec ip link del ${ns}h}
    }
    pt_sh ip netns add $pt(ns)
    pt_sh ip link add $pt(ns)h type veth peer name $pt(ns)n
    pt_sh ip link set $pt(ns)n netns $pt(ns)
    pt_sh ip addr add $pt(host)/24 dev $pt(ns)h
    pt_sh ip addr add $pt(client)/24 dev $pt(ns)h
    pt_sh ip link set $pt(ns)h up
    pt_in_ns ip addr add $pt(far)/24 dev $pt(ns)n
    pt_in_ns ip link set $pt(ns)n up
    pt_in_ns ip link set lo up
}

proc pt_netns_down {} {
    global pt
    foreach pid $pt(ns_pids) { catch {exec kill -9 $pid} }
    catch {exec ip netns del $pt(ns)}
    catch {exec ip link del $pt(ns)h}
}

# Cut the namespace off from $pt(host), keep $pt(client).
proc pt_cut {} {
    set ::pt(cut) 1
    pt_in_ns iptables -I INPUT -s $::pt(host) -j DROP
    pt_in_ns iptables -I OUTPUT -d $::pt(host) -j DROP
}

proc pt_heal {} {
    set ::pt(cut) 0
    pt_in_ns iptables -D INPUT -s $::pt(host) -j DROP
    pt_in_ns iptables -D OUTPUT -d $::pt(host) -j DROP
}

# A client of upstream's harness whose connection leaves from myaddr.
proc pt_redis_from {myaddr host port} {
    set fd [socket -myaddr $myaddr $host $port]
    fconfigure $fd -translation binary
    set id [incr ::redis::id]
    set ::redis::fd($id) $fd
    set ::redis::addr($id) [list $host $port]
    set ::redis::blocking($id) 1
    set ::redis::deferred($id) 0
    set ::redis::readraw($id) 0
    set ::redis::reconnect($id) 0
    set ::redis::tls($id) 0
    ::redis::redis_reset_state $id
    interp alias {} ::redis::redisHandle$id {} ::redis::__dispatch__ $id
}

# A field of the old master's INFO, on a connection of its own (one open
# across the partition may have been closed).
proc pt_far_status {field} {
    if {[catch {
        set r [redis $::pt(far) $::pt(port,0)]
        set v [status $r $field]
        $r close
    }]} { return {} }
    return $v
}

# The master the host's Nic-KVs name: {host port}, or {}.
proc pt_master_addr {} {
    foreach i {1 2} {
        if {![catch {nickv_cmd $::pt(nk,$i) sentinel get-master-addr-by-name mymaster} a] &&
            [llength $a] == 2} {
            return $a
        }
    }
    return {}
}

proc pt_state {} {
    set s {}
    foreach i {0 1 2} {
        append s "\n--- Nic-KV $i:\n"
        # (The one cut off would hold the test for TCP's connect timeout.)
        if {$i == 0 && $::pt(cut)} {
            catch {append s [exec tail -n 15 [dict get $::pt(nk,$i) log]]}
            continue
        }
        catch {append s [nickv_cmd $::pt(nk,$i) info coordinator]}
        catch {append s [nickv_cmd $::pt(nk,$i) info failover]}
        catch {append s [exec tail -n 15 [dict get $::pt(nk,$i) log]]}
    }
    return $s
}

tags {"nickv repl external:skip"} {
if {[catch {pt_sh ip netns list} why] || [catch {pt_sh iptables -L -n} why]} {
    test {Many Nic-KVs: the master's server partitioned away (needs root: ip netns, iptables)} {
        fail "cannot make a network namespace or use iptables here: $why"
    }
} else {
set pt(ns_pids) {}
set pt(cut) 0
pt_netns_up
set conf [nickv_failover_overrides appendonly no protected-mode no]
# The namespace goes whatever happens in the tests.
set code [catch {
start_server [list overrides $conf] {
start_server [list overrides $conf] {
    global pt
    # The master, in the namespace.
    set pt(port,0) [find_available_port [expr {$::baseport + 700}] 100]
    set dir [file normalize [tmpdir partition-master]]
    # (A file: exec would take the password's ">" for a redirection.)
    set f [open $dir/master.conf w]
    puts $f "port $pt(port,0)\nbind $pt(far)\nsave \"\"\nappendonly no\nprotected-mode no"
    puts $f "enable-debug-command yes\ndir $dir\nlogfile $dir/log\nnickv-lease yes"
    foreach {k v} [nickv_user_overrides] { puts $f "$k $v" }
    close $f
    lappend pt(ns_pids) [exec ip netns exec $pt(ns) src/redis-server $dir/master.conf &]
    wait_for_condition 100 50 {
        [catch {redis $pt(far) $pt(port,0)} m] == 0
    } else {
        fail "the master in the namespace did not start: [exec tail -n 10 $dir/log]"
    }
    set pt(master) $m
    $m select 9
    set pt(port,1) [srv -1 port]
    set pt(port,2) [srv 0 port]
    # The replicas listen on this host's end of the veth too (the harness
    # takes a bind override for the address it connects to).
    foreach l {-1 0} {
        [srv $l client] config set bind "127.0.0.1 $pt(host)"
        [srv $l client] replicaof $pt(far) $pt(port,0)
    }
    set etcd [etcd_cluster_start 3 [dict create host $pt(host)]]
    set urls [etcd_cluster_urls]
    set common [list {*}[nickv_user_args] --failover yes --min-slaves 0 --coordinator $urls \
                    --coordinator-insecure yes --master-host $pt(far) --node $pt(far):$pt(port,0) \
                    --node $pt(host):$pt(port,1) --node $pt(host):$pt(port,2)]
    set pt(nk,0) [nickv_start_under [list ip netns exec $pt(ns)] $pt(port,0) {*}$common \
                      --bind $pt(far) --protected-mode no --local-node $pt(far):$pt(port,0)]
    lappend pt(ns_pids) [dict get $pt(nk,0) pid]
    for {set i 1} {$i < 3} {incr i} {
        set pt(nk,$i) [nickv_start $pt(port,0) {*}$common --local-node $pt(host):$pt(port,$i)]
    }

    test {Many Nic-KVs: the master's server, in its own network namespace, leads and streams} {
        wait_for_condition 300 100 {
            [nickv_info $pt(nk,0) coordinator_role] eq {leader} &&
            [nickv_info $pt(nk,0) master_lease] eq {on} &&
            [nickv_info $pt(nk,0) valid_replicas] == 2 &&
            [nickv_info $pt(nk,0) master_link_status] eq {up} &&
            [nickv_info $pt(nk,0) connected_replicas] == 2
        } else {
            fail "the master's Nic-KV does not lead with two valid replicas: [pt_state]"
        }
        assert_equal [list $pt(far) $pt(port,0)] [pt_master_addr]
    }

    test {Many Nic-KVs: the master's server partitioned away: one writable master at a time, no acknowledged write lost} {
        # The old master's client leaves from $pt(client), which the cut spares.
        set old [pt_redis_from $pt(client) $pt(far) $pt(port,0)]
        $old select 9
        set n 0
        set acked {}
        set accepted_old {}       ;# {ms value} of each write the old master took
        set e {}
        for {set k 0} {$k < 50} {incr k} {
            if {[catch {$old rpush list $n} e] == 0 && [catch {$old wait 1 1000} e] == 0 && $e >= 1} {
                lappend acked $n
            }
            incr n
        }
        if {[llength $acked] != 50} { fail "[llength $acked] of 50 acknowledged before the cut (last: $e) [$old info replication] [$old info nickv] [pt_state]" }

        set t0 [clock milliseconds]
        pt_cut
        set new {}
        set first_new 0
        set deadline [expr {$t0 + 30000}]
        while {[clock milliseconds] < $deadline} {
            # The old master: it may take writes until its lease runs out,
            # but none can be acknowledged (no replica hears it).
            if {[catch {$old rpush list $n} e] == 0} {
                lappend accepted_old [list [clock milliseconds] $n]
                if {![catch {$old wait 1 20} w] && $w >= 1} { lappend acked $n }
            }
            incr n
            # The new one, once the host's Nic-KVs name one.
            if {$new eq {}} {
                set a [pt_master_addr]
                if {$a ne {} && [lindex $a 1] != $pt(port,0)} {
                    set new [redis {*}$a]
                    $new select 9
                }
            }
            if {$new ne {}} {
                if {[catch {$new rpush list $n} e] == 0} {
                    if {!$first_new} { set first_new [clock milliseconds] }
                    if {![catch {$new wait 1 1000} w] && $w >= 1} { lappend acked $n }
                }
                incr n
                if {$first_new && [clock milliseconds] > $first_new + 2000} break
            }
            after 20
        }
        if {!$first_new} { fail "no new master took a write in 30 s: [pt_state]" }
        set last_old [expr {[llength $accepted_old] ? [lindex $accepted_old end 0] : $t0}]
        puts "    (partition at 0 ms: the old master took its last write at [expr {$last_old - $t0}] ms, \
              [llength $accepted_old] in all; the new master its first at [expr {$first_new - $t0}] ms)"
        # Never two writable masters.
        assert {$last_old < $first_new}
        catch {$old close}

        # Healed: the old master follows the new one, its Nic-KV stands by,
        # leadership moves to the new master's server.
        pt_heal
        lassign [pt_master_addr] nhost nport
        set ni [expr {$nport == $pt(port,1) ? 1 : 2}]
        wait_for_condition 300 100 {
            [pt_far_status master_port] == $nport &&
            [pt_far_status master_link_status] eq {up} &&
            [nickv_info $pt(nk,0) coordinator_role] eq {standby} &&
            [nickv_info $pt(nk,$ni) coordinator_role] eq {leader} &&
            [nickv_info $pt(nk,$ni) master_link_status] eq {up} &&
            [nickv_master_addr $pt(nk,0)] eq [list $nhost $nport]
        } else {
            fail "not whole again after the partition healed: [pt_state]"
        }
        # Every acknowledged append is there, in order; every node agrees.
        set got [$new lrange list 0 -1]
        set lost 0
        set pos 0
        foreach v $acked {
            set i [lsearch -exact -start $pos $got $v]
            if {$i < 0} { incr lost; continue }
            set pos [expr {$i + 1}]
        }
        puts "    ([llength $acked] appends acknowledged, $lost lost)"
        assert_equal 0 $lost
        set others {}
        foreach i {0 1 2} {
            if {$i == $ni} continue
            set r [redis [expr {$i == 0 ? $pt(far) : "127.0.0.1"}] $pt(port,$i)]
            $r select 9
            lappend others $r
        }
        nickv_assert_digests $new $others
        foreach r $others { $r close }
        $new close
    }

    foreach i {0 1 2} { catch {nickv_stop $pt(nk,$i)} }
    catch {$pt(master) close}
    etcd_cluster_stop
}
}
} err opts]
pt_netns_down
if {$code} { return -options $opts $err }
}
}
