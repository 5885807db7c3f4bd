# Nic-KV's pin timeout: an RDMA replica's sends go out of Nic-KV's backlog
# ring with no copy, so the NIC reads the ring after the post returns and the
# replica pins what it may still read; the master link never overwrites a
# pinned byte. A replica whose NIC stops acknowledging must not stop the
# stream for the others: after NK_PIN_TIMEOUT_MS (2 s) the link drops it.
#
# Here that NIC is cut off with iptables. tests/rdma/vm-guest.sh gives the
# VM a third address, 10.77.0.3, whose traffic to 10.77.0.2 and 10.77.0.4
# crosses the veth (all other traffic between the VM's addresses stays in
# the kernel, where no filter sees it). The master listens on 10.77.0.4,
# Nic-KV on 10.77.0.2; one replica connects from 10.77.0.3
# (bind-source-addr), the two others take the kernel's shortcut. Dropping UDP
# 4791 between 10.77.0.3 and 10.77.0.2 silences that replica's NIC towards
# Nic-KV and nothing else: its process runs on, which SIGSTOP could not
# show (the NIC acknowledges in the kernel).

source tests/skv/helpers.tcl
if {![rdma_available]} {
    puts "skipping tests/rdma/nickv-pin: no RDMA devices (run through utils/rdma-vm.sh)"
    return
}

set ::pin_host 10.77.0.3       ;# the replica whose NIC goes silent
set ::pin_master 10.77.0.4     ;# the master's address, reached across the veth from it

# iptables rules that cut UDP 4791 (RoCE v2) between the silent replica and
# Nic-KV, both ways. $op is -I (insert) or -D (delete).
proc nickv_pin_cut {op} {
    foreach {src dst} [list $::pin_host $::rdma_host2 $::rdma_host2 $::pin_host] {
        exec iptables -w $op INPUT -s $src -d $dst -p udp --dport 4791 -j DROP
    }
}

# Packets the cut dropped so far.
proc nickv_pin_dropped {} {
    set n 0
    foreach line [split [exec iptables -w -L INPUT -v -n -x] "\n"] {
        if {[string match "*DROP*udp dpt:4791*" $line]} { incr n [lindex $line 0] }
    }
    return $n
}

set mrport [rdma_port]
start_server [list tags {"rdma nickv repl"} overrides [concat [rdma_overrides $mrport $::pin_master] \
                                                         save {""} repl-backlog-size 64mb]] {
    set master [srv 0 client]
    set mport [srv 0 port]
    set nkrport [rdma_port]
    # A 1 MB backlog: a few megabytes of stream wrap it several times.
    set nk [nickv_start $mport --master-host $::pin_master --master-rdma-port $mrport \
                --rdma-port $nkrport --rdma-bind $::rdma_host2 --announce-ip $::rdma_host2 \
                --protected-mode no --backlog-size 1mb --thread-num 2]

    set ports {}
    foreach _ {1 2 3} { lappend ports [rdma_port] }
    start_server [list overrides [concat [rdma_overrides [lindex $ports 0] $::rdma_host2] \
                                      rdma-replication yes bind-source-addr $::pin_host]] {
    start_server [list overrides [concat [rdma_overrides [lindex $ports 1] $::rdma_host2] rdma-replication yes]] {
    start_server [list overrides [concat [rdma_overrides [lindex $ports 2] $::rdma_host2] rdma-replication yes]] {
        set r1 [srv -2 client]
        set r1port [srv -2 port]
        set r2 [srv -1 client]
        set r3 [srv 0 client]
        set replicas [list $r1 $r2 $r3]
        foreach r [concat $master $replicas] { nickv_listen_everywhere $r }

        test {Nic-KV pin timeout: iptables is there to cut one replica's NIC off} {
            if {[catch {exec iptables -w -L INPUT -n} e]} {
                fail "iptables does not work in the VM (utils/setup-deps.sh vm installs it): $e"
            }
        }

        test {Nic-KV pin timeout: three RDMA replicas behind Nic-KV, one across the veth} {
            # The first connection across the veth has been seen to take
            # 25 s and more under emulation (in CI once more than 30 s):
            # resolve the neighbours both ways first (a TCP connect from that
            # address, refused or not), then give it 2 minutes.
            foreach dst [list $::pin_master $::rdma_host2] {
                catch {close [socket -myaddr $::pin_host $dst $mport]}
            }
            foreach r $replicas { $r replicaof $::pin_master $mrport }
            set t0 [clock milliseconds]
            wait_for_condition 1200 100 {
                [status $r1 master_link_status] eq {up}
            } else {
                fail "the replica on $::pin_host did not sync: [exec tail -n 15 [srv -2 stdout]]"
            }
            puts "    (the replica on $::pin_host synced [expr {[clock milliseconds] - $t0}] ms after REPLICAOF)"
            foreach r $replicas { wait_for_sync $r }
            nickv_wait_replicas $nk 3
            for {set i 0} {$i < 3} {incr i} {
                assert_match "*transport=rdma,state=online*" [nickv_info $nk replica$i]
            }
            # Nic-KV sees the silent-to-be replica at its own address.
            assert_match "*ip=$::pin_host,port=$r1port,*" [nickv_cmd $nk info all]
            $master set before-cut 1
            nickv_assert_digests $master $replicas
        }

        test {Nic-KV pin timeout: a replica whose NIC stops acknowledging is dropped, the others stream on} {
            set waits [nickv_info $nk link_pin_waits]
            set drops [nickv_info $nk link_pin_drops]
            set full [status $master sync_full]
            set proxied [nickv_info $nk sync_full_proxied]
            set partial [expr {[status $master sync_partial_ok] + [nickv_info $nk sync_partial_ok]}]
            nickv_pin_cut -I
            try {
                # About 4 MB of stream, 4 times the ring: Nic-KV posts the
                # first of it to the silent replica, whose sends then never
                # complete, and the ring comes round to what they pin.
                for {set i 0} {$i < 20} {incr i} {
                    $master set pin:$i [string repeat [format %c [expr {65 + $i}]] 200000]
                }
                wait_for_condition 300 100 {
                    [nickv_info $nk link_pin_drops] > $drops
                } else {
                    fail "no pin drop: waits [nickv_info $nk link_pin_waits] (were $waits),\
                          [nickv_pin_dropped] packets cut, [exec tail -n 20 [dict get $nk log]]"
                }
                assert_morethan [nickv_info $nk link_pin_waits] $waits
                assert_morethan [nickv_pin_dropped] 0
                # The one dropped is the replica that was cut off, and only it.
                set why "Replica ${::pin_host}:$r1port: its RDMA sends did not complete in time"
                assert_equal 1 [llength [lsearch -all [split [exec cat [dict get $nk log]] "\n"] "*$why*"]]
                assert_equal [expr {$drops + 1}] [nickv_info $nk link_pin_drops]
                # The others got the whole stream, and what WAIT acknowledged
                # is on them.
                $master set after-drop 1
                assert_morethan_equal [$master wait 2 5000] 2
                nickv_assert_digests $master [list $r2 $r3]
                assert_equal [string repeat T 200000] [$r2 get pin:19]
                assert_equal 0 [nickv_info $nk master_link_paused]
            } finally {
                nickv_pin_cut -D
            }
            # Its NIC answers again: it comes back with a partial resync (the
            # master's backlog is larger than what it missed), no full sync.
            # Under emulation that has taken from a few seconds to over 20
            # (its side of the cut connection must time out first).
            set t0 [clock milliseconds]
            wait_for_condition 900 100 {
                [status $r1 master_link_status] eq {up} &&
                [nickv_info $nk connected_replicas] == 3
            } else {
                fail "the cut-off replica did not come back: [exec tail -n 20 [dict get $nk log]]"
            }
            puts "    (the cut-off replica was back [expr {[clock milliseconds] - $t0}] ms after the cut ended)"
            nickv_assert_digests $master $replicas
            assert_equal $full [status $master sync_full]
            assert_equal $proxied [nickv_info $nk sync_full_proxied]
            assert_morethan [expr {[status $master sync_partial_ok] + [nickv_info $nk sync_partial_ok]}] $partial
            assert_match "*ip=$::pin_host,port=$r1port,transport=rdma,state=online*" [nickv_cmd $nk info all]
            nickv_assert_no_bug $nk
        } {} {needs:debug}

        nickv_stop $nk
    }
    }
    }
}
