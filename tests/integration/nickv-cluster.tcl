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
    set nk [nickv_start $aport --failover yes]
    nickv_wait_replicas $nk 1

    test {Nic-KV in cluster mode: the shard's replica streams from it; Nic-KV never fails a master over} {
        foreach k $keys { $a set $k 1 }
        assert_equal 1 [$a wait 1 5000]
        nickv_assert_digests $a [list $b]
        assert_match {*slave0:*via=nickv*} [$a info replication]
        catch {nickv_cmd $nk failover} e
        assert_match {*not in cluster mode*} $e
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
    nickv_stop $nk
}
