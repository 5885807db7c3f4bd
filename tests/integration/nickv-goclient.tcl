# A Sentinel client of another language than Python: go-redis v9's
# FailoverClient (tests/goclient, built by utils/setup-deps.sh test into
# build/goclients) finds the master through Nic-KV, writes there over
# RESP3 (go-redis opens its connections with HELLO 3), and follows an
# operator's FAILOVER and Nic-KV's own failover of a master killed -9: it
# subscribes to +switch-master on Nic-KV and asks SENTINEL
# GET-MASTER-ADDR-BY-NAME again when its connections drop.

source tests/skv/helpers.tcl

# The go-redis client program; missing means setup-deps was not run (CI
# must not skip this test: it fails).
proc goclient_bin {} {
    set bin [file normalize ../goclients/bin/nickv-goclient]
    if {![file executable $bin]} {
        fail "no go-redis client in build/goclients: run utils/setup-deps.sh test"
    }
    return $bin
}

# The "wrote <i> <laddr> resp=<n>" lines of its output, as {i laddr resp}.
proc goclient_writes {out} {
    set writes {}
    foreach line [split [exec cat $out] "\n"] {
        if {[regexp {^wrote (\d+) (\S+) resp=(\S*)$} $line -> i addr resp]} {
            lappend writes [list $i $addr $resp]
        }
    }
    return $writes
}

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set m [srv 0 client]
    set mport [srv 0 port]
    set nk [nickv_start $mport]
    set nkport [dict get $nk port]
    start_server {overrides {save ""}} {
    start_server {overrides {save "" nickv-offload no}} {
        set r1 [srv -1 client]
        set d [srv 0 client]
        set dport [srv 0 port]
        # Started after Nic-KV: named members now, as an operator would.
        nickv_add_member $nk 127.0.0.1:[srv -1 port]
        nickv_add_member $nk 127.0.0.1:$dport
        $r1 replicaof 127.0.0.1 $mport
        $d replicaof 127.0.0.1 $mport
        wait_for_sync $r1
        wait_for_sync $d
        # D joined as a direct replica (FAILOVER TO needs one); as a master
        # it takes a Nic-KV.
        $d config set nickv-offload yes
        nickv_wait_replicas $nk 1

        # go-redis writes go:<i> until 5 writes went to a new master.
        set out [file normalize [tmpfile goclient]]
        set pid [exec [goclient_bin] -sentinel 127.0.0.1:$nkport -name mymaster -db 9 -prefix go \
                     -after 5 -timeout 20s >& $out &]
        wait_for_condition 100 100 {
            [llength [goclient_writes $out]] >= 3
        } else {
            catch {exec kill $pid}
            fail "go-redis wrote nothing through Nic-KV: [exec cat $out]"
        }

        test {go-redis' FailoverClient finds the master through Nic-KV and writes there, over RESP3} {
            set writes [goclient_writes $out]
            foreach w $writes {
                lassign $w i addr resp
                assert_equal "127.0.0.1:$mport 3" "$addr $resp"
                assert_equal $i [$m get go:$i]
            }
            # Its Sentinel connection to Nic-KV: subscribed (+switch-master
            # and +replica-reconf-done), in RESP3.
            set subscribed {}
            foreach line [split [nickv_cmd $nk client list] "\n"] {
                if {[string match "* sub=2 *" $line]} { lappend subscribed $line }
            }
            assert_equal 1 [llength $subscribed]
            assert_match "* psub=0 * cmd=subscribe * resp=3" [string trim [lindex $subscribed 0]]
        }

        test {go-redis follows an operator's FAILOVER: its writes go to the new master} {
            assert_equal OK [$m failover to 127.0.0.1 $dport]
            wait_for_condition 250 100 {
                [catch {exec kill -0 $pid}]
            } else {
                catch {exec kill $pid}
                fail "go-redis did not write 5 times to the new master: [exec tail -n 20 $out]"
            }
            assert_no_match "*timeout*" [exec cat $out]
            assert_equal [list 127.0.0.1 $dport] [nickv_cmd $nk sentinel get-master-addr-by-name mymaster]
            # Every write went to the old master, then every one to the new
            # one (at least the 5 it waited for), never back.
            set writes [goclient_writes $out]
            set seen_new 0
            set on_new 0
            foreach w $writes {
                lassign $w i addr resp
                assert_equal 3 $resp
                if {$addr eq "127.0.0.1:$dport"} {
                    set seen_new 1
                    incr on_new
                    assert_equal $i [$d get go:$i]
                } else {
                    assert_equal 0 $seen_new
                    assert_equal "127.0.0.1:$mport" $addr
                }
            }
            assert_equal 5 $on_new
            # go-redis took the new master's address (from +switch-master or
            # from asking Nic-KV again).
            assert_match "*log: sentinel: new master=\"mymaster\" addr=\"127.0.0.1:$dport\"*" [exec cat $out]
            # The demoted master has the writes, through Nic-KV.
            set last [lindex $writes end 0]
            wait_for_condition 100 100 {
                [$m get go:$last] eq $last
            } else {
                fail "the demoted master lacks go:$last"
            }
            nickv_assert_no_bug $nk
        }
    }
    }
    nickv_stop $nk
}

# The master killed: Nic-KV fails it over (nickv-lease yes everywhere), and
# go-redis, its connections refused, finds the promoted replica.
set fo_conf [nickv_failover_overrides]
start_server [list tags {"nickv repl external:skip"} overrides $fo_conf] {
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides $fo_conf] {
    start_server [list overrides $fo_conf] {
        set nodes [dict create [srv -1 port] [srv -1 client] [srv 0 port] [srv 0 client]]
        dict for {port r} $nodes { $r replicaof 127.0.0.1 $mport }
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes]
        set nkport [dict get $nk port]
        wait_for_condition 100 100 {
            [nickv_info $nk valid_replicas] == 2 && [nickv_info $nk master_lease] eq {on}
        } else {
            fail "Nic-KV does not see the topology: [nickv_cmd $nk info failover]"
        }

        test {go-redis follows Nic-KV's failover of a master killed -9} {
            set out [file normalize [tmpfile goclient]]
            set pid [exec [goclient_bin] -sentinel 127.0.0.1:$nkport -name mymaster -db 9 -prefix gk \
                         -after 5 -timeout 30s >& $out &]
            wait_for_condition 100 100 {
                [llength [goclient_writes $out]] >= 3
            } else {
                catch {exec kill $pid}
                fail "go-redis wrote nothing through Nic-KV: [exec cat $out]"
            }
            exec kill -9 $mpid
            wait_for_condition 300 100 {
                [catch {exec kill -0 $pid}]
            } else {
                catch {exec kill $pid}
                fail "go-redis did not write 5 times to a new master: [exec tail -n 20 $out]\n[nickv_cmd $nk info failover]"
            }
            assert_no_match "*timeout*" [exec cat $out]
            lassign [nickv_cmd $nk sentinel get-master-addr-by-name mymaster] host new
            assert {[dict exists $nodes $new]}
            assert_equal 1 [nickv_info $nk failovers]
            # Writes went to the old master, then (after the errors of its
            # death) only to the new one, each there.
            set seen_new 0
            set on_new 0
            foreach w [goclient_writes $out] {
                lassign $w i addr resp
                assert_equal 3 $resp
                if {$addr eq "127.0.0.1:$new"} {
                    set seen_new 1
                    incr on_new
                    assert_equal $i [[dict get $nodes $new] get gk:$i]
                } else {
                    assert_equal 0 $seen_new
                    assert_equal "127.0.0.1:$mport" $addr
                }
            }
            assert_equal 5 $on_new
            assert_match "*log: sentinel: new master=\"mymaster\" addr=\"127.0.0.1:$new\"*" [exec cat $out]
            nickv_assert_no_bug $nk
        }
        nickv_stop $nk
    }
    }
}
