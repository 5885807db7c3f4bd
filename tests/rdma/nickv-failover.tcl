# Nic-KV's failover over RDMA: the master streams to Nic-KV over RDMA,
# Nic-KV to three replicas with rdma-replication yes. The master is killed
# under a WAIT writer: a replica is promoted, the two others follow it on
# its RDMA port (INFO rdma), Nic-KV's link follows it over RDMA, nothing
# acknowledged is lost, and the old master, restarted, becomes a replica.

source tests/skv/helpers.tcl
if {![rdma_available]} {
    puts "skipping tests/rdma/nickv-failover: no RDMA devices (run through utils/rdma-vm.sh)"
    return
}

set mrport [rdma_port]
# nickv-lease no until the replicas synced directly: a master with it on
# serves no PSYNC before a Nic-KV grants it a lease.
start_server [list tags {"rdma nickv repl"} overrides [concat [rdma_overrides $mrport] save {""} nickv-lease no [nickv_user_overrides]]] {
    set m [srv 0 client]
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    set nkrport [rdma_port]
    set rports {}
    foreach _ {1 2 3} { lappend rports [rdma_port] }
    # Nic-KV repoints an RDMA replica to the new master's RDMA port at the
    # address it reaches that master by (here 10.77.0.1: the master lists
    # its replicas there): their RDMA listeners answer on both addresses.
    set rconf [concat [list save "" nickv-lease yes rdma-replication yes rdma-bind "\"$::rdma_host $::rdma_host2\""] \
                   [nickv_user_overrides]]
    start_server [list overrides [concat [rdma_overrides [lindex $rports 0] $::rdma_host2] $rconf]] {
    start_server [list overrides [concat [rdma_overrides [lindex $rports 1] $::rdma_host2] $rconf]] {
    start_server [list overrides [concat [rdma_overrides [lindex $rports 2] $::rdma_host2] $rconf]] {
        set replicas [list [srv -2 client] [srv -1 client] [srv 0 client]]
        set ports [list [srv -2 port] [srv -1 port] [srv 0 port]]
        # Nic-KV probes each node at its RDMA address, over TCP.
        foreach r [concat $m $replicas] { nickv_listen_everywhere $r }
        # The replicas first replicate directly, from 10.77.0.1 (the
        # master's address); behind Nic-KV they connect from 10.77.0.2
        # (Nic-KV's). Nic-KV, started now, reads the master's list before
        # the hand-over: it knows each replica at both addresses, as on a
        # DPU whose replicas reach the master and Nic-KV by different
        # networks.
        foreach r $replicas { $r replicaof $::rdma_host $mrport }
        foreach r $replicas { wait_for_sync $r }
        $m config set nickv-lease yes
        # The members: every node at each address Nic-KV reaches it by.
        set members {}
        foreach p [concat $mport $ports] {
            lappend members --node $::rdma_host:$p --node $::rdma_host2:$p --node 127.0.0.1:$p
        }
        set nk [nickv_start $mport {*}[nickv_user_args] {*}$members --master-host $::rdma_host \
                    --master-rdma-port $mrport --rdma-port $nkrport --rdma-bind $::rdma_host2 \
                    --announce-ip $::rdma_host2 --protected-mode no --failover yes --min-slaves 1]
        nickv_wait_replicas $nk 3
        nickv_wait_failover_view $nk 3
        # Nic-KV's view holds a replica's address behind it once it streams
        # there, and its direct one from the master's list: the last one
        # handed over (one at a time) may be connected to Nic-KV but not yet
        # online when the counts above are reached.
        proc known_twice {nk ports} {
            set twice 0
            set fo [nickv_cmd $nk info failover]
            foreach p $ports {
                if {[regexp -all "addr=$::rdma_host:$p," $fo] && [regexp -all "addr=$::rdma_host2:$p," $fo]} {
                    incr twice
                }
            }
            return $twice
        }
        wait_for_condition 50 100 {
            [known_twice $nk $ports] == 3
        } else {
            fail "Nic-KV does not know each replica at both addresses: [nickv_cmd $nk info failover]"
        }

        test {Nic-KV over RDMA: master kill -9 under a WAIT writer; the replicas follow the new master over RDMA} {
            assert_equal rdma [nickv_info $nk master_link_transport]
            set full [lmap r $replicas {status $r sync_full}]
            lassign [fo_append $nk lst 400 200 { exec kill -9 $mpid }] acked n
            fo_wait_failovers $nk 1
            lassign [nickv_master_addr $nk] host nport
            set w [lsearch $ports $nport]
            if {$w < 0} { set w [lsearch $rports $nport] }
            if {$w < 0} {
                fail "Nic-KV names $host:$nport as the master, not one of $ports (TCP) or $rports (RDMA):\
                      [nickv_cmd $nk info failover]"
            }
            set nm [lindex $replicas $w]
            set wrport [lindex $rports $w]
            # Nic-KV streams from the new master, over RDMA, on its RDMA port.
            wait_for_condition 100 100 {
                [nickv_info $nk master_port] == $wrport && [nickv_info $nk master_link_status] eq {up}
            } else {
                # The guest's tmpfs goes with the VM: say it all here.
                fail "Nic-KV's link did not follow: [nickv_cmd $nk info replication]\n\
                      [nickv_cmd $nk info failover]\n\
                      Nic-KV: [exec grep -v Probe: [dict get $nk log] | tail -n 40]\n\
                      new master: [exec tail -n 40 [srv [expr {$w - 2}] stdout]]"
            }
            assert_equal rdma [nickv_info $nk master_link_transport]
            # The two others: REPLICAOF <its RDMA address> <its RDMA port>.
            set others [lreplace $replicas $w $w]
            foreach r $others {
                wait_for_condition 100 100 {
                    [lindex [$r role] 2] == $wrport && [status $r master_link_status] eq {up}
                } else {
                    fail "a replica did not follow over RDMA: [$r role] [nickv_cmd $nk info failover]"
                }
                assert_match "*rdma_replication:1*" [$r info rdma]
            }
            wait_for_condition 100 100 {
                [nickv_info $nk repoint_pending] == 1
            } else {
                fail "repoints: [nickv_cmd $nk info failover]"
            }
            # The old master, dead, is the one left to repoint.
            assert_match "*repoint0:addr=$::rdma_host:$mport,old_master=1,*" [nickv_cmd $nk info failover]
            $nm select 9
            nickv_wait_served $nm
            fo_assert_acked $acked [$nm lrange lst 0 -1] $n
            puts "    ($n appends, [llength $acked] acknowledged, 0 lost over RDMA; last failover [nickv_info $nk last_failover_ms] ms)"
            assert {[llength $acked] > 200}
            # A write: once the replicas that followed count as good for
            # min-slaves 1 (they reconnect to it, and Nic-KV names them).
            nickv_write_when_good $nk $nm incr after
            nickv_assert_digests $nm $others
            # Partial resyncs only: the promoted replica kept the history.
            assert_equal [lindex $full $w] [status $nm sync_full]
            nickv_assert_no_bug $nk
        }

        test {Nic-KV over RDMA: the old master, restarted, becomes a replica of the new one} {
            restart_server -3 true false
            nickv_listen_everywhere [srv -3 client]
            wait_for_condition 100 100 {
                [nickv_info $nk repoint_pending] == 0
            } else {
                fail "the old master is not repointed: [nickv_cmd $nk info failover]"
            }
            # (Its clients were killed as it was demoted: a new one.)
            set om [redis 127.0.0.1 [srv -3 port]]
            wait_for_condition 100 100 {
                [status $om master_link_status] eq {up}
            } else {
                fail "the old master does not replicate: [$om info replication]"
            }
            # It runs rdma-replication no: it follows on the TCP port.
            assert_equal $nport [lindex [$om role] 2]
            nickv_write_when_good $nk $nm incr after
            nickv_assert_digests $nm [concat $others [list $om]]
        }
        nickv_stop $nk
    }
    }
    }
}
