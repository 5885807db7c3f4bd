# Redis Cluster (7.0.15, Debian's) keeps a slot bound to a master that
# stopped claiming it, marked "not claimed" (owner_not_claiming_slot), and
# clears the mark only when that master's claims change again. A mark left
# behind (the master claimed the slot again: a message that arrived out of
# order on one of the two bus links between two nodes, a DELSLOTS undone)
# outlived a failover: the promoted replica owned the slot with the mark
# still set, so the old master, restarted with its old view, took the slot
# back with its lower epoch. The slot then had the wrong owner, or none
# in the promoted node's view once the old master became its replica
# (nickv-cluster.tcl's CLUSTERDOWN after a reshard and a kill -9, slot 99:
# the reshard's last slot). Patch 0020 forgets the mark when a slot changes
# owner.

source tests/skv/helpers.tcl

start_cluster 3 3 {tags {"cluster external:skip"} overrides {save "" cluster-enabled yes cluster-node-timeout 1000}} {
    test {A replica promoted after its master stopped claiming a slot for a moment keeps that slot when the old master comes back} {
        # Shard 0: master R 0 (slots 0-5460) and its replica, R $r (one of
        # R 3-5). Slot 100: no keys.
        set slot 100
        set r -1
        for {set i 3} {$i < 6} {incr i} {
            if {[status [Rn $i] master_port] == [srv 0 port]} { set r $i }
        }
        assert {$r >= 3}
        for {set i 0} {[R 0 cluster keyslot "k$i"] != $slot} {incr i} {}
        set key k$i
        # R 0 stops claiming the slot and claims it again: R $r marks it (it
        # sees R 0's claims change), and the claim back changes nothing in
        # its view (the slot never left R 0), so the mark stays.
        R 0 cluster delslots $slot
        after 1500
        R 0 cluster addslots $slot
        after 1500
        wait_for_cluster_propagation
        # kill -9 of R 0: the cluster promotes R $r.
        set epoch [CI $r cluster_current_epoch]
        exec kill -9 [srv 0 pid]
        wait_for_condition 100 100 {
            [string match "*role:master*" [R $r info replication]] && [CI $r cluster_state] eq {ok}
        } else {
            fail "R $r was not promoted: [R $r cluster info]"
        }
        assert_morethan [CI $r cluster_current_epoch] $epoch
        # R 0 comes back with its old view (its nodes.conf): it claims its
        # old slots with its old epoch, learns it was replaced and becomes a
        # replica of R $r, which keeps every slot.
        restart_server 0 true false
        wait_for_condition 100 100 {
            [string match "*role:slave*" [R 0 info replication]]
        } else {
            fail "the old master did not become a replica: [R 0 cluster nodes]"
        }
        wait_for_condition 100 100 {
            [CI $r cluster_slots_assigned] == 16384 && [CI $r cluster_state] eq {ok} &&
            [CI 0 cluster_state] eq {ok} && [CI 1 cluster_state] eq {ok}
        } else {
            fail "the promoted node's view: [R $r cluster info] [R $r cluster nodes]"
        }
        wait_for_cluster_propagation
        assert_equal OK [R $r set $key v]
        assert_equal v [R $r get $key]
    }
}
