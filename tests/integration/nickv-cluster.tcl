# Nic-KV with a Redis Cluster shard: the cluster decides failovers, Nic-KV
# never promotes; after CLUSTER FAILOVER, or the cluster's own failover of
# the shard, it follows the shard's new master and keeps the fan-out.
# Before it followed, it kept streaming from the demoted node, served
# nobody, and said master_link_status:up. Three masters, so that the
# cluster can vote; Nic-KV serves the first one's shard.

source tests/skv/helpers.tcl

start_cluster 3 3 {tags {"nickv repl cluster external:skip"} overrides {save "" cluster-enabled yes cluster-node-timeout 500}} {
    set a [Rn 0]
    set aport [srv 0 port]
    set apid [srv 0 pid]
    set b [Rn 3]
    set bport [srv -3 port]
    set bpid [srv -3 pid]
    # Keys of the first master's slots (0-5460).
    set keys {}
    for {set i 0} {[llength $keys] < 100} {incr i} {
        if {[$a cluster keyslot k$i] <= 5460} { lappend keys k$i }
    }
    # Nic-KV's own user on every node, as NIC-KV.md's recipe gives it: in a
    # cluster it reads CLUSTER NODES too.
    for {set i 0} {$i < 6} {incr i} {
        [Rn $i] acl setuser nickv on >cl-secret +psync +replconf +ping +auth +info +replicaof \
            +config|rewrite +client|kill +cluster|nodes
        [Rn $i] config set nickv-user nickv
    }
    set nk [nickv_start $aport --failover yes --masteruser nickv --masterauth cl-secret]
    nickv_wait_replicas $nk 1

    test {Nic-KV in cluster mode: the shard's replica streams from it; Nic-KV never fails a master over} {
        foreach k $keys { $a set $k 1 }
        assert_equal 1 [$a wait 1 5000]
        nickv_assert_digests $a [list $b]
        assert_match {*slave0:*via=nickv*} [$a info replication]
        catch {nickv_cmd $nk failover} e
        assert_match {*not in cluster mode*} $e
    }

    test {Nic-KV in cluster mode: min-slaves as high as the shard's replica count is warned of} {
        # One replica in the shard: after a failover the new master would
        # have none, and min-slaves 1 would stall the shard until the dead
        # node is back (issue 33).
        wait_for_condition 50 100 {
            [nickv_info $nk cluster_shard_replicas] == 1
        } else {
            fail "the shard's replicas are not counted: [nickv_cmd $nk info cluster]"
        }
        assert_equal no [nickv_info $nk cluster_min_slaves_stalls]
        assert_equal OK [nickv_cmd $nk config set min-slaves 1]
        wait_for_condition 50 100 {
            [nickv_info $nk cluster_min_slaves_stalls] eq {yes} &&
            ![catch {exec grep -q "Cluster: min-slaves 1 with 1 replica(s) in this shard" [dict get $nk log]}]
        } else {
            fail "no warning: [nickv_cmd $nk info cluster]"
        }
        assert_equal OK [nickv_cmd $nk config set min-slaves 0]
        assert_equal no [nickv_info $nk cluster_min_slaves_stalls]
    }

    test {Nic-KV follows CLUSTER FAILOVER: the link goes to the shard's new master, the fan-out kept, no full sync} {
        set full_a [status $a sync_full]
        set full_b [status $b sync_full]
        assert_equal OK [$b cluster failover]
        wait_for_condition 100 100 {
            [nickv_info $nk master_port] == $bport && [nickv_info $nk master_link_status] eq {up} &&
            [nickv_status $b nickv_daemon] eq {healthy}
        } else {
            fail "Nic-KV did not follow the new master: [exec tail -n 20 [dict get $nk log]]"
        }
        assert_equal 1 [nickv_info $nk master_moves]
        assert_equal none [nickv_status $a nickv_daemon]
        wait_for_cluster_state ok
        foreach k $keys { $b incr $k }
        # The demoted master streams from Nic-KV again.
        wait_for_condition 100 100 {
            [string match {*slave0:*via=nickv*} [$b info replication]]
        } else {
            fail "the fan-out is not back: [$b info replication]"
        }
        assert_equal 1 [$b wait 1 5000]
        nickv_assert_digests $b [list $a]
        assert_equal $full_b [status $b sync_full]
        assert_equal $full_a [status $a sync_full]
        assert_equal 0 [nickv_info $nk failovers]
    }

    test {Nic-KV leaves a stopped master to the cluster, and follows the replica the cluster promotes} {
        exec kill -STOP $bpid
        wait_for_condition 50 100 {
            [string match {*cluster mode*} [nickv_info $nk failover_blocked]]
        } else {
            exec kill -CONT $bpid
            fail "no word on cluster mode: [nickv_cmd $nk info failover]"
        }
        wait_for_condition 100 100 {
            [s 0 role] eq {master}
        } else {
            exec kill -CONT $bpid
            fail "the cluster promoted nobody"
        }
        exec kill -CONT $bpid
        wait_for_condition 100 100 {
            [nickv_info $nk master_port] == $aport && [nickv_info $nk master_link_status] eq {up} &&
            [nickv_status $a nickv_daemon] eq {healthy}
        } else {
            fail "Nic-KV did not follow the cluster's choice: [exec tail -n 20 [dict get $nk log]]"
        }
        assert_equal 0 [nickv_info $nk failovers]
        wait_for_cluster_state ok
        foreach k $keys { $a incr $k }
        wait_for_condition 100 100 {
            [string match {*slave0:*via=nickv*} [$a info replication]]
        } else {
            fail "the fan-out is not back: [$a info replication]"
        }
        assert_equal 1 [$a wait 1 5000]
        nickv_assert_digests $a [list $b]
        assert_equal 3 [$a get [lindex $keys 0]]
        nickv_assert_no_bug $nk
    }

    test {Nic-KV in cluster mode: a user without +cluster|nodes is counted and said, not waited on in silence} {
        # (Before, the refusals were dropped: INFO cluster said pending, with
        # cluster_view_errors:0, and nothing was logged.)
        assert_equal 0 [nickv_info $nk cluster_view_errors]
        for {set i 0} {$i < 6} {incr i} { [Rn $i] acl setuser nickv -cluster|nodes }
        wait_for_condition 100 100 {
            [nickv_info $nk cluster_view_errors] > 0
        } else {
            fail "no view error counted: [nickv_cmd $nk info cluster]"
        }
        assert_match "*answers CLUSTER NODES with an error: NOPERM*needs +cluster|nodes*" \
            [exec cat [dict get $nk log]]
        for {set i 0} {$i < 6} {incr i} { [Rn $i] acl setuser nickv +cluster|nodes }
    }
    nickv_stop $nk
}

# The cluster's own failover of a master that crashed: nothing on the dead
# master says where its shard went, only the cluster's view does (CLUSTER
# NODES from the shard's replicas). Before nickv_cluster.c, Nic-KV stayed on
# the dead port for ever (master_moves:0), the promoted master streamed to
# its replica directly, and SENTINEL named the dead master; a Nic-KV
# restarted while its shard's master was dead tried a failover of its own
# (REPLICAOF NO ONE refused in cluster mode, hundreds of aborted attempts)
# and left a repoint pending for ever.

# A list-append writer on one shard: RPUSH key i then WAIT 1, through the
# master Nic-KV's SENTINEL names; at i == at, runs fault. Returns the
# acknowledged values.
proc cl_append {nk key n at fault} {
    set r {}
    set acked {}
    for {set i 0} {$i < $n} {incr i} {
        if {$i == $at} { uplevel 1 $fault }
        set deadline [expr {[clock milliseconds] + 20000}]
        while {1} {
            if {$r eq {}} { catch {set r [redis {*}[nickv_master_addr $nk]]} }
            if {$r ne {} && [catch {$r rpush $key $i} e] == 0} {
                if {[catch {$r wait 1 2000} w] == 0 && $w >= 1} { lappend acked $i }
                break
            }
            if {$r ne {}} { catch {$r close}; set r {} }
            if {[clock milliseconds] > $deadline} { fail "no master takes writes: [nickv_cmd $nk info cluster]" }
            after 50
        }
    }
    if {$r ne {}} { $r close }
    return $acked
}

start_cluster 3 3 {tags {"nickv repl cluster external:skip"} overrides {save "" cluster-enabled yes cluster-node-timeout 500}} {
    set a [Rn 0]
    set aport [srv 0 port]
    set b [Rn 3]
    set bport [srv -3 port]
    # A key of the first master's slots (0-5461).
    for {set i 0} {[$a cluster keyslot list$i] > 5461} {incr i} {}
    set key list$i
    set nk [nickv_start $aport --failover yes]
    nickv_wait_replicas $nk 1
    wait_for_condition 50 100 {
        [nickv_info $nk cluster_shard] eq {ok} && [nickv_info $nk cluster_shard_slots] == 5462
    } else {
        fail "Nic-KV does not know its shard: [nickv_cmd $nk info cluster]"
    }

    test {A cluster master killed: Nic-KV says the shard is lost, then follows the replica the cluster promotes} {
        set acked [cl_append $nk $key 300 100 {
            # The cluster may not promote B yet: Nic-KV says so, and never
            # fails the shard over itself.
            $b config set cluster-replica-no-failover yes
            exec kill -9 [srv 0 pid]
            wait_for_condition 100 100 {
                [string match {lost: the master 127.0.0.1:*is invalid*} [nickv_info $nk cluster_shard]]
            } else {
                fail "Nic-KV does not say its shard is lost: [nickv_cmd $nk info cluster]"
            }
            assert_match {*cluster mode*} [nickv_info $nk failover_blocked]
            # B is asked once per probe interval (100 ms) meanwhile, not at
            # the speed of its answers (which were thousands a second).
            set v0 [nickv_info $nk cluster_views]
            after 1000
            assert_range [expr {[nickv_info $nk cluster_views] - $v0}] 1 20
            $b config set cluster-replica-no-failover no
            wait_for_condition 100 100 {
                [nickv_info $nk master_port] == $bport && [nickv_info $nk master_link_status] eq {up} &&
                [nickv_status $b nickv_daemon] eq {healthy}
            } else {
                fail "Nic-KV did not follow the promoted replica: [nickv_cmd $nk info cluster]\n[exec tail -n 20 [dict get $nk log]]"
            }
            assert_equal [list 127.0.0.1 $bport] [nickv_master_addr $nk]
            # The dead master comes back: the cluster makes it B's replica,
            # and B hands it to Nic-KV.
            restart_server 0 true false
            set a [Rn 0]
        }]
        wait_for_condition 100 100 {
            [string match {*slave0:*via=nickv*} [$b info replication]]
        } else {
            fail "the restarted master does not stream from Nic-KV: [$b info replication]"
        }
        assert_equal 1 [$b wait 1 5000]
        fo_assert_acked $acked [$b lrange $key 0 -1] 300
        assert_morethan [llength $acked] 150
        nickv_assert_digests $b [list $a]
        assert_equal 1 [nickv_info $nk cluster_follows]
        assert_equal 1 [nickv_info $nk master_moves]
        assert_equal 0 [nickv_info $nk failovers]
        assert_equal 0 [nickv_info $nk failovers_aborted]
        assert_equal ok [nickv_info $nk cluster_shard]
        assert_match {*Cluster: the cluster promoted 127.0.0.1:*} [exec grep "Cluster:" [dict get $nk log]]
    }

    test {A Nic-KV restarted while its shard's master is dead follows the cluster's choice, tries no failover, repoints nothing} {
        set args [dict get $nk args]
        set state [lindex $args [expr {[lsearch -exact $args --state-file] + 1}]]
        # Nic-KV knows its shard's replica (A, back since the last test),
        # and the cluster's view lists it as one of the shard's nodes.
        wait_for_condition 50 100 {
            [string match "*\nreplica \"127.0.0.1\" $aport\n*" [exec cat $state]] &&
            [string match "*\ncluster \[0-9a-f\]* \[0-9\]*\ncluster-slots 0-5461\ncluster-member \[0-9a-f\]* 127.0.0.1 $aport\n*" [exec cat $state]]
        } else {
            fail "the state file does not list the replica: [exec cat $state]"
        }
        nickv_stop $nk KILL
        set bpid [srv -3 pid]
        exec kill -9 $bpid
        wait_for_condition 100 100 {
            [s 0 role] eq {master}
        } else {
            fail "the cluster promoted nobody"
        }
        set nk [nickv_restart $nk]
        wait_for_condition 100 100 {
            [nickv_info $nk master_port] == $aport && [nickv_info $nk master_link_status] eq {up} &&
            [nickv_status $a nickv_daemon] eq {healthy}
        } else {
            fail "Nic-KV did not follow the cluster's choice: [nickv_cmd $nk info cluster]\n[exec tail -n 20 [dict get $nk log]]"
        }
        restart_server -3 true false
        set b [Rn 3]
        wait_for_condition 100 100 {
            [string match {*slave0:*via=nickv*} [$a info replication]]
        } else {
            fail "the restarted node does not stream from Nic-KV: [$a info replication]"
        }
        $a rpush $key done
        assert_equal 1 [$a wait 1 5000]
        nickv_assert_digests $a [list $b]
        assert_equal 0 [nickv_info $nk failovers]
        assert_equal 0 [nickv_info $nk failovers_aborted]
        assert_equal 0 [nickv_info $nk repoint_pending]
        assert_equal yes [nickv_info $nk cluster_mode]
        # redis-server's field, which redis_exporter exports as
        # redis_cluster_enabled (issue 33: it said 0 on a shard's Nic-KV).
        assert_equal 1 [nickv_info $nk cluster_enabled]
        assert_equal [list 127.0.0.1 $aport] [nickv_master_addr $nk]
        if {![catch {exec grep -c "REPLICAOF\\|promoting" [dict get $nk log]} n]} {
            fail "Nic-KV tried a failover of its own: [exec grep "REPLICAOF\\|promoting" [dict get $nk log]]"
        }
        nickv_assert_no_bug $nk
    }

    test {nickv-lease yes is refused in cluster mode, by CONFIG SET and at start-up} {
        catch {$a config set nickv-lease yes} e
        assert_match {*nickv-lease yes cannot be used with cluster-enabled yes*} $e
        assert_equal {nickv-lease no} [$a config get nickv-lease]
        set port [find_available_port [expr {$::baseport + 560}] 20]
        set dir [tmpdir cluster-lease]
        catch {exec src/redis-server --port $port --save "" --dir $dir --cluster-enabled yes \
                   --nickv-lease yes --nickv-user nk} out
        assert_match {*Fatal config error: nickv-lease yes cannot be used with cluster-enabled yes*} $out
    }
    nickv_stop $nk
}

# A Nic-KV per shard, writers on every shard, as an operator runs it: a
# reshard under load (ASK redirects followed by the writer), then a master
# of another shard killed. Each asserts nothing acknowledged lost, digests
# equal per shard, every shard's replica behind its Nic-KV, each Nic-KV's
# SENTINEL naming its shard's master.

# A cluster client of the test's own (the harness's follows no redirect):
# a connection per node address, MOVED and ASK followed, a node that does
# not answer replaced by any node that does (which redirects).
proc cl_conn {addr} {
    if {![info exists ::cl_conns($addr)]} {
        lassign [split $addr :] h p
        set ::cl_conns($addr) [redis $h $p]
    }
    return $::cl_conns($addr)
}
proc cl_drop {addr} {
    if {[info exists ::cl_conns($addr)]} {
        catch {$::cl_conns($addr) close}
        unset ::cl_conns($addr)
    }
}
# INCR key, then WAIT 1 on the master that took it: 1 if acknowledged.
# ::cl_route(key) is where it went last; ::cl_nodes every node's address.
proc cl_incr {key} {
    if {![info exists ::cl_route($key)]} { set ::cl_route($key) [lindex $::cl_nodes 0] }
    set addr $::cl_route($key)
    set asking 0
    set deadline [expr {[clock milliseconds] + 30000}]
    while {[clock milliseconds] < $deadline} {
        if {[catch {cl_conn $addr} c]} {
            set addr [lindex $::cl_nodes [expr {int(rand() * [llength $::cl_nodes])}]]
            after 20
            continue
        }
        if {$asking && [catch {$c asking}]} { cl_drop $addr; continue }
        if {[catch {$c incr $key} e] == 0} {
            if {!$asking} { set ::cl_route($key) $addr }
            return [expr {[catch {$c wait 1 500} w] == 0 && $w >= 1}]
        }
        if {[regexp {^MOVED [0-9]+ ([^ ]+)} $e -> to]} {
            set addr $to
            set ::cl_route($key) $to
            set asking 0
        } elseif {[regexp {^ASK [0-9]+ ([^ ]+)} $e -> to]} {
            incr ::cl_asks
            set addr $to
            set asking 1
        } else {
            # A dead node, CLUSTERDOWN while the cluster fails over, a
            # replica that refuses: another node, a moment later.
            cl_drop $addr
            set addr [lindex $::cl_nodes [expr {int(rand() * [llength $::cl_nodes])}]]
            set asking 0
            after 20
        }
    }
    set states {}
    foreach a $::cl_nodes {
        lassign [split $a :] h p
        catch {
            set c [redis $h $p]
            set info [$c cluster info]
            regexp {cluster_state:([a-z]+)} $info -> st
            if {$st ne {ok}} {
                # A node that says the cluster is down: why, in its view
                # (first in the message: a CI log cuts long lines).
                set why {}
                foreach f {slots_assigned slots_ok slots_pfail slots_fail size current_epoch my_epoch} {
                    if {[regexp "cluster_$f:(\[0-9\]+)" $info -> v]} { lappend why $f=$v }
                }
                set owned {}
                foreach line [split [$c cluster nodes] "\n"] {
                    set w [split [string trim $line] " "]
                    if {[llength $w] < 8} continue
                    lappend why "[lindex [split [lindex $w 1] @] 0] [lindex $w 2] e[lindex $w 6] [llength [lrange $w 8 end]]r"
                    foreach r [lrange $w 8 end] {
                        if {[string index $r 0] eq {[}} continue
                        lassign [split $r -] a b
                        if {$b eq {}} { set b $a }
                        lappend owned [list $a $b]
                    }
                }
                # The slots it sees no owner of (the first five).
                set holes {}
                set next 0
                foreach r [lsort -integer -index 0 $owned] {
                    lassign $r a b
                    for {set s $next} {$s < $a && [llength $holes] < 5} {incr s} { lappend holes $s }
                    if {$b + 1 > $next} { set next [expr {$b + 1}] }
                }
                for {set s $next} {$s < 16384 && [llength $holes] < 5} {incr s} { lappend holes $s }
                set why [linsert $why 0 "unowned: $holes"]
                set states [linsert $states 0 "$a down: [join $why {; }]"]
            } else {
                lappend states "$a [status $c role] $st"
            }
            $c close
        }
    }
    fail "no node takes writes for $key: $e (nodes: [join $states {, }])"
}
# Rounds of INCR + WAIT over keys; at round at(i), runs fault(i).
proc cl_write_rounds {keys rounds faults} {
    for {set r 0} {$r < $rounds} {incr r} {
        if {[dict exists $faults $r]} { uplevel 1 [dict get $faults $r] }
        foreach k $keys { if {[cl_incr $k]} { incr ::cl_acked($k) } }
    }
}
# Every key holds at least what was acknowledged, at most what was sent.
proc cl_assert_acked {keys rounds} {
    foreach k $keys {
        set c [cl_conn $::cl_route($k)]
        set v [$c get $k]
        if {$v eq {}} { set v 0 }
        if {$v < $::cl_acked($k) || $v > $rounds} {
            fail "$k holds $v: $::cl_acked($k) increments acknowledged, $rounds sent"
        }
    }
}

# Shards 0 and 1 half the slots each, shard 2 ten (emptied by the last test).
proc cl_slots_uneven {masters} {
    R 0 cluster addslotsrange 0 8191
    R 1 cluster addslotsrange 8192 16373
    R 2 cluster addslotsrange 16374 16383
}
# Which of shard i's two nodes (i or i + 3) is its master now.
proc cl_master_of {i} {
    expr {[string match {*role:master*} [R $i info replication]] ? $i : $i + 3}
}
# The slots master i owns, as its own view says.
proc cl_slots_of {i} {
    set n 0
    foreach line [split [R $i cluster nodes] "\n"] {
        if {![string match {*myself*} $line]} continue
        foreach w [lrange [split [string trim $line] " "] 8 end] {
            if {[string index $w 0] eq {[}} continue
            set r [split $w -]
            incr n [expr {[lindex $r end] - [lindex $r 0] + 1}]
        }
    }
    return $n
}

start_cluster 3 3 {tags {"nickv repl cluster external:skip"} overrides {save "" cluster-enabled yes cluster-node-timeout 2000}} {
    set ::cl_nodes {}
    for {set i 0} {$i < 6} {incr i} { lappend ::cl_nodes 127.0.0.1:[srv -$i port] }
    # Shard i: master at level -i, replica at -(i+3); a Nic-KV each, named
    # shard-i in SENTINEL.
    for {set i 0} {$i < 3} {incr i} {
        set nks($i) [nickv_start [srv -$i port] --master-name shard-$i]
    }
    for {set i 0} {$i < 3} {incr i} { nickv_wait_replicas $nks($i) 1 }
    # Keys: ten in slots 0-99 (the reshard moves them), ten on each shard.
    set moved {}
    set keys {}
    for {set i 0} {[llength $moved] < 10} {incr i} {
        if {[R 0 cluster keyslot m$i] < 100} { lappend moved m$i }
    }
    for {set i 0} {[llength $keys] < 30} {incr i} { lappend keys k$i }
    # Two keys in one slot of shard 0 outside 0-99, moved by hand, one key
    # at a time: the writer meets ASK between the two.
    for {set i 0} {[set slot [R 0 cluster keyslot "{s$i}"]] < 100 || $slot > 999} {incr i} {}
    set tag "{s$i}"
    set keys [concat $moved $keys [list ${tag}a ${tag}b]]
    foreach k $keys { set ::cl_acked($k) 0 }
    set ::cl_asks 0
    proc shard_check {arr} {
        upvar 1 $arr nks
        for {set i 0} {$i < 3} {incr i} {
            set m [cl_master_of $i]
            set r [expr {$m == $i ? $i + 3 : $i}]
            wait_for_condition 100 100 {
                [string match {*slave0:*via=nickv*} [R $m info replication]] &&
                [nickv_info $nks($i) master_port] == [srv -$m port]
            } else {
                fail "shard $i: the replica is not behind its Nic-KV: [R $m info replication]"
            }
            assert_equal 1 [R $m wait 1 5000]
            nickv_assert_digests [Rn $m] [list [Rn $r]]
            assert_equal [list 127.0.0.1 [srv -$m port]] [nickv_cmd $nks($i) sentinel get-master-addr-by-name shard-$i]
            assert_equal 0 [nickv_info $nks($i) failovers]
            nickv_assert_no_bug $nks($i)
        }
    }

    test {A reshard under writers on every shard: ASK redirects followed, nothing acknowledged lost, the shards' replicas stay behind their Nic-KVs} {
        set id0 [R 0 cluster myid]
        set id1 [R 1 cluster myid]
        set bg [tmpfile reshard]
        cl_write_rounds $keys 40 [dict create 5 {
            R 1 cluster setslot $slot importing $id0
            R 0 cluster setslot $slot migrating $id1
            R 0 migrate 127.0.0.1 [srv -1 port] "" 0 5000 keys ${tag}a
        } 15 {
            R 0 migrate 127.0.0.1 [srv -1 port] "" 0 5000 keys ${tag}b
            for {set i 0} {$i < 3} {incr i} { R $i cluster setslot $slot node $id1 }
            set pid [exec src/redis-cli --cluster reshard 127.0.0.1:[srv 0 port] --cluster-from $id0 \
                         --cluster-to $id1 --cluster-slots 100 --cluster-yes --cluster-pipeline 1 >& $bg &]
        }]
        wait_for_condition 200 100 {
            [catch {exec kill -0 $pid}]
        } else {
            fail "the reshard did not end: [exec tail -n 5 $bg]"
        }
        wait_for_condition 50 100 {
            [R 1 cluster countkeysinslot [R 1 cluster keyslot [lindex $moved 0]]] > 0
        } else {
            fail "the slots did not move: [exec tail -n 5 $bg]"
        }
        wait_for_condition 50 100 {
            [nickv_info $nks(0) cluster_shard_slots] == 8091 && [nickv_info $nks(1) cluster_shard_slots] == 8283
        } else {
            fail "the Nic-KVs do not see the shards' new slots: [nickv_cmd $nks(0) info cluster]"
        }
        assert_morethan $::cl_asks 0
        cl_assert_acked $keys 40
        shard_check nks
    }

    test {A master killed under writers on every shard: its Nic-KV follows the cluster, the others stay, nothing acknowledged lost} {
        cl_write_rounds $keys 40 [dict create 10 {
            exec kill -9 [srv -1 pid]
            wait_for_condition 100 100 {
                [nickv_info $nks(1) master_port] == [srv -4 port] && [nickv_info $nks(1) master_link_status] eq {up}
            } else {
                fail "shard 1's Nic-KV did not follow: [nickv_cmd $nks(1) info cluster]"
            }
            restart_server -1 true false
        }]
        cl_assert_acked $keys 80
        assert_equal 1 [nickv_info $nks(1) cluster_follows]
        assert_equal 0 [nickv_info $nks(0) cluster_follows]
        assert_equal 0 [nickv_info $nks(2) cluster_follows]
        shard_check nks
    }
    test {A shard of many slot ranges: its Nic-KV's state file keeps them, and a restart reads it} {
        # Every other slot of 1000-2599 (no keys there) to shard 1: shard
        # 0 owns 800 more ranges. Its state file's cluster line was one
        # line of more than 4096 bytes, which the reader cut in two: Nic-KV
        # then refused to start, calling its own file damaged.
        set m1 [cl_master_of 1]
        set id1 [R $m1 cluster myid]
        set before [cl_slots_of [cl_master_of 0]]
        set n 0
        for {set s 1000} {$s < 2600} {incr s 2} {
            if {[R 0 cluster countkeysinslot $s]} continue
            foreach i [list [cl_master_of 0] $m1 [cl_master_of 2]] { R $i cluster setslot $s node $id1 }
            incr n
        }
        assert_morethan $n 780
        set want [cl_slots_of [cl_master_of 0]]
        assert_equal [expr {$before - $n}] $want
        set args [dict get $nks(0) args]
        set state [lindex $args [expr {[lsearch -exact $args --state-file] + 1}]]
        wait_for_condition 50 100 {
            [nickv_info $nks(0) cluster_shard_slots] == $want && [regexp {[ ,]2599-} [exec cat $state]]
        } else {
            fail "the state file does not hold the slots: [nickv_cmd $nks(0) info cluster]"
        }
        set log [dict get $nks(0) log]
        set read [llength [regexp -all -inline {as the state file says} [exec cat $log]]]
        nickv_stop $nks(0) KILL
        set nks(0) [nickv_restart $nks(0)]
        assert_equal $want [nickv_info $nks(0) cluster_shard_slots]
        # It started from its file (its INFO may already say the master,
        # read within a probe round trip of the start).
        assert_equal [expr {$read + 1}] [llength [regexp -all -inline {as the state file says} [exec cat $log]]]
        wait_for_condition 50 100 {
            [nickv_info $nks(0) cluster_mode_from] eq {the master} && [nickv_info $nks(0) cluster_shard] eq {ok}
        } else {
            fail "Nic-KV does not read its master again: [nickv_cmd $nks(0) info cluster]"
        }
        shard_check nks
    }

    test {A master emptied by a reshard, which the cluster makes another shard's replica: its Nic-KV stays, says the shard is lost, and does not follow it there} {
        set m1 [cl_master_of 1]
        set id1 [R $m1 cluster myid]
        set id2 [R 2 cluster myid]
        set moves [nickv_info $nks(2) master_moves]
        set out [tmpfile drain]
        # redis-cli refuses to reshard while the nodes' views still differ
        # (the last test's moves propagating): asked again a moment later.
        for {set try 0} {$try < 20} {incr try} {
            set failed [catch {exec src/redis-cli --cluster reshard 127.0.0.1:[srv -2 port] --cluster-from $id2 \
                                   --cluster-to $id1 --cluster-slots 10 --cluster-yes --cluster-pipeline 1 >& $out}]
            if {!$failed || ![string match "*Nodes don't agree about configuration*" [exec cat $out]]} break
            after 250
        }
        if {$failed} {
            fail "the reshard failed: [exec tail -n 10 $out]"
        }
        # Redis moves a master that gave its last slot away under the
        # receiver (cluster-allow-replica-migration yes, the default).
        wait_for_condition 100 100 {
            [string match {*role:slave*} [R 2 info replication]]
        } else {
            fail "the emptied master did not become a replica: [R 2 info replication]"
        }
        wait_for_condition 100 100 {
            [string match {lost: the master replicates from 127.0.0.1:*, which is not a node of its shard*} \
                [nickv_info $nks(2) cluster_shard]]
        } else {
            fail "Nic-KV does not say its shard is gone: [nickv_cmd $nks(2) info cluster]"
        }
        assert_stays 1 {[nickv_info $nks(2) master_moves] == $moves &&
                        [catch {exec grep -q "following it" [dict get $nks(2) log]}]} \
            "Nic-KV follows a master out of its shard"
        assert_equal $moves [nickv_info $nks(2) master_moves]
        # Nor does its log say it follows, once a second.
        if {![catch {exec grep "following it" [dict get $nks(2) log]} lines]} {
            fail "Nic-KV says it follows: $lines"
        }
        assert_equal [srv -2 port] [nickv_info $nks(2) master_port]
        # Shard 1's own Nic-KV keeps serving it.
        assert_equal [srv -$m1 port] [nickv_info $nks(1) master_port]
        assert_equal 0 [nickv_info $nks(1) failovers]
        nickv_assert_no_bug $nks(2)
    }
    for {set i 0} {$i < 3} {incr i} { nickv_stop $nks($i) }
    foreach a [array names ::cl_conns] { cl_drop $a }
} cl_slots_uneven
