# Nic-KV's failure detection: it probes the master and every replica (those
# behind it and direct ones) on connections of their own; a replica that
# does not answer within waiting-time stops counting for WAIT and
# min-replicas, and with min-slaves set the master refuses writes while too
# few replicas answer. A dead Nic-KV stops no write.

source tests/skv/helpers.tcl

proc nickv_write_refused {master key} {
    expr {[catch {$master set $key 1} e] == 1 && [string match "NOREPLICAS*" $e]}
}

nickv_topology {replicas {{} {} {nickv-offload no}} nickv {--waiting-time 500} nickv_first yes
                serves 2} {
    lassign $replicas r1 r2 r3
    lassign $replica_ports p1 - p3
    lassign $replica_pids pid1 - pid3

    test {Nic-KV probes: every node is listed and valid, direct replicas included} {
        wait_for_condition 100 100 {
            [nickv_info $nk valid_replicas] == 3 && [nickv_info $nk replica_view] eq {ok}
        } else {
            fail "Nic-KV does not see three valid replicas: [nickv_cmd $nk info failover]"
        }
        assert_equal 0 [nickv_info $nk invalid_replicas]
        assert_match {role=master,via=,flags=ok,*} [nickv_probe_node $nk "127.0.0.1:$master_port"]
        assert_match {role=replica,via=nickv,flags=ok,*} [nickv_probe_node $nk "127.0.0.1:$p1"]
        assert_match {role=replica,via=direct,flags=ok,*} [nickv_probe_node $nk "127.0.0.1:$p3"]
        # Probes are answered: their round trip is measured.
        regexp {rtt_us=(\d+)} [nickv_probe_node $nk "127.0.0.1:$p3"] -> rtt
        assert {$rtt > 0}
        wait_for_condition 50 100 {
            [nickv_status $master nickv_health_reports] > 0
        } else {
            fail "the master heard nothing of the probes"
        }
        assert_equal 3 [nickv_status $master nickv_valid_replicas]
        assert_equal 0 [nickv_status $master nickv_invalid_replicas]
        # min-slaves 0: nothing is enforced.
        assert_equal 0 [nickv_status $master nickv_min_slaves]
    }

    test {Nic-KV probes: min-slaves, CONFIG SET at run time, reaches the master} {
        assert_equal {min-slaves 0} [nickv_cmd $nk config get min-slaves]
        assert_equal OK [nickv_cmd $nk config set min-slaves 3]
        assert_equal {waiting-time 500} [nickv_cmd $nk config get waiting-time]
        assert_equal {probe-interval 100} [nickv_cmd $nk config get probe-interval]
        catch {nickv_cmd $nk config set waiting-time 5} e
        assert_match {*waiting-time*} $e
        wait_for_condition 50 100 {
            [nickv_status $master nickv_min_slaves] == 3
        } else {
            fail "the master did not learn min-slaves"
        }
        $master set with-three 1
        assert_equal 3 [$master wait 3 2000]
    }

    test {Nic-KV probes: a stopped replica behind Nic-KV is invalid within waiting-time: -NOREPLICAS, WAIT does not count it} {
        # Sentinel's events about it, on Nic-KV's port.
        set ev [redis 127.0.0.1 [dict get $nk port] 1]
        $ev psubscribe *sdown
        assert_equal {psubscribe *sdown 1} [$ev read]
        exec kill -STOP $pid1
        set start [clock milliseconds]
        wait_for_condition 100 20 {
            [nickv_write_refused $master stopped1]
        } else {
            exec kill -CONT $pid1
            fail "writes still accepted with a replica that answers nothing"
        }
        set took [expr {[clock milliseconds] - $start}]
        puts [format "    (writes refused %d ms after SIGSTOP; waiting-time 500)" $took]
        catch {$master set stopped1 1} e
        assert_equal {NOREPLICAS Not enough good replicas to write.} $e
        assert_match {*flags=invalid,*why=no answer for * ms} [nickv_probe_node $nk "127.0.0.1:$p1"]
        assert_equal 1 [nickv_status $master nickv_invalid_replicas]
        assert_equal 2 [nickv_status $master nickv_valid_replicas]
        # WAIT counts only the two that answer, though the stopped one's
        # last ACK covered everything before.
        $master config set min-replicas-to-write 0
        assert_equal 2 [$master wait 3 300]
        # Reads still work.
        assert_equal 1 [$master get with-three]
        exec kill -CONT $pid1
        wait_for_condition 100 50 {
            ![nickv_write_refused $master resumed1]
        } else {
            fail "writes still refused once the replica answers again"
        }
        assert_match {*flags=ok,*} [nickv_probe_node $nk "127.0.0.1:$p1"]
        assert_equal 0 [nickv_status $master nickv_invalid_replicas]
        assert_equal 3 [$master wait 3 2000]
        nickv_assert_digests $master $replicas
        set slave "slave 127.0.0.1:$p1 127.0.0.1 $p1 @ mymaster 127.0.0.1 $master_port"
        assert_equal [list pmessage *sdown +sdown $slave] [$ev read]
        assert_equal [list pmessage *sdown -sdown $slave] [$ev read]
        $ev close
    }

    test {Nic-KV probes: a stopped direct replica counts out the same way} {
        exec kill -STOP $pid3
        wait_for_condition 100 20 {
            [nickv_write_refused $master stopped3]
        } else {
            exec kill -CONT $pid3
            fail "writes still accepted with a direct replica that answers nothing"
        }
        assert_match {role=replica,via=direct,flags=invalid,*} [nickv_probe_node $nk "127.0.0.1:$p3"]
        assert_equal 2 [$master wait 3 300]
        # min-slaves 0: the verdicts are shown and change nothing (WAIT
        # and min-replicas-to-write keep upstream's meaning).
        assert_equal OK [nickv_cmd $nk config set min-slaves 0]
        wait_for_condition 50 100 {
            ![nickv_write_refused $master min0]
        } else {
            fail "writes refused with min-slaves 0"
        }
        assert_equal 0 [nickv_status $master nickv_invalid_replicas]
        assert_equal 3 [nickv_status $master nickv_valid_replicas]
        assert_equal 1 [nickv_info $nk invalid_replicas]
        exec kill -CONT $pid3
        wait_for_condition 100 50 {
            [nickv_info $nk invalid_replicas] == 0
        } else {
            fail "the direct replica does not answer again"
        }
        assert_equal 3 [$master wait 3 2000]
    }

    test {Nic-KV probes: a replica with an address the master cannot be told of counts out, and costs nothing else} {
        # A quote in its announced address: before, the health message
        # could not be split, the master answered it with an error and
        # dropped the daemon every second.
        assert_equal OK [nickv_cmd $nk config set min-slaves 2]
        set joins [nickv_status $master nickv_daemon_joins]
        $r3 config set replica-announce-ip {x"y}
        $r3 client kill type master
        wait_for_condition 100 100 {
            [string match {*ip=x"y,*} [$master info replication]] &&
            [nickv_status $master nickv_valid_replicas] == 2
        } else {
            fail "the replica with a quote in its address still counts: [$master info replication]"
        }
        assert_stays 2 {[nickv_status $master nickv_daemon_joins] == $joins &&
                        [nickv_status $master nickv_daemon] eq {healthy} &&
                        [nickv_status $master nickv_min_slaves] == 2} \
            "the quote in a replica's address upset the daemon"
        assert_equal $joins [nickv_status $master nickv_daemon_joins]
        assert_equal healthy [nickv_status $master nickv_daemon]
        assert_equal 2 [nickv_status $master nickv_min_slaves]
        assert {![nickv_write_refused $master quote]}
        assert_match {*flags=invalid,*why=not a numeric address*} [nickv_probe_node $nk "x\"y:$p3"]
        $r3 config set replica-announce-ip ""
        $r3 client kill type master
        wait_for_condition 100 100 {
            [nickv_status $master nickv_valid_replicas] == 3
        } else {
            fail "the replica does not count again under its own address"
        }
        assert_equal OK [nickv_cmd $nk config set min-slaves 0]
    }

    test {Nic-KV probes: a dead Nic-KV stops no write; its verdicts lapse} {
        assert_equal OK [nickv_cmd $nk config set min-slaves 3]
        exec kill -STOP $pid1
        wait_for_condition 100 20 {
            [nickv_write_refused $master beforedeath]
        } else {
            exec kill -CONT $pid1
            fail "writes not refused"
        }
        nickv_stop $nk KILL
        wait_for_condition 100 50 {
            ![nickv_write_refused $master afterdeath]
        } else {
            exec kill -CONT $pid1
            fail "writes still refused after Nic-KV died"
        }
        assert_equal 0 [nickv_status $master nickv_min_slaves]
        exec kill -CONT $pid1
        set nk [nickv_restart $nk]
        assert_equal OK [nickv_cmd $nk config set min-slaves 3]
        wait_for_condition 100 100 {
            [nickv_status $master nickv_min_slaves] == 3 &&
            [nickv_status $master nickv_valid_replicas] == 3
        } else {
            fail "the restarted Nic-KV did not report again"
        }
        assert_equal OK [nickv_cmd $nk config set min-slaves 0]
    }

    test {Nic-KV probes: a replica killed (kill -9) is invalid at once: its port refuses} {
        assert_equal OK [nickv_cmd $nk config set min-slaves 3]
        wait_for_condition 50 100 {
            ![nickv_write_refused $master beforekill]
        } else {
            fail "writes refused with three replicas"
        }
        exec kill -9 $pid3
        wait_for_condition 100 20 {
            [string match {*why=connection refused*} [nickv_probe_node $nk "127.0.0.1:$p3"]]
        } else {
            fail "Nic-KV did not see the port refuse: [nickv_probe_node $nk 127.0.0.1:$p3]"
        }
        catch {$master set afterkill 1} e
        assert_equal {NOREPLICAS Not enough good replicas to write.} $e
        assert_equal OK [nickv_cmd $nk config set min-slaves 2]
        wait_for_condition 50 100 {
            ![nickv_write_refused $master two]
        } else {
            fail "writes refused with min-slaves 2 and two replicas"
        }
        assert_equal 2 [$master wait 2 2000]
        nickv_assert_no_bug $nk
    }
}

# The probes carry no password to a replica: a replica names its own
# address and port, which may be anybody's. The master's probe
# authenticates (it reads INFO), as the link does.
start_server {tags {"nickv repl external:skip"} overrides {save "" requirepass s3cret}} {
    set master [srv 0 client]
    $master auth s3cret
    set mport [srv 0 port]
    set nk [nickv_start $mport --masterauth s3cret]
    nickv_wait_link_up $nk

    test {Nic-KV probes: a replica's announced port gets a PING, never the password} {
        # A listener of its own (this process's event loop does not run
        # while a test waits) writes down what it hears. On a port the
        # kernel picks, which it prints: one found free beforehand was once
        # taken meanwhile by another test file's relay (nickv-coordinator,
        # the same range), and Nic-KV's PINGs went there.
        set dir [tmpdir probe-listener]
        set script $dir/listen.tcl
        set f [open $script w]
        puts $f [string map [list @OUT@ $dir/heard] {
            proc heard {fd} {
                set data [read $fd]
                set out [open @OUT@ a]
                fconfigure $out -translation binary
                puts -nonewline $out $data
                close $out
                if {[eof $fd]} { close $fd }
            }
            set s [socket -server {apply {{fd addr port} {
                fconfigure $fd -translation binary -blocking 0
                fileevent $fd readable [list heard $fd]
            }}} -myaddr 127.0.0.1 0]
            puts [lindex [fconfigure $s -sockname] 2]
            flush stdout
            vwait forever
        }]
        close $f
        set lfd [open "|tclsh $script" r]
        set listener [pid $lfd]
        set lport [gets $lfd]
        assert {[string is integer -strict $lport]}
        # Until it listens (a connection closed at once adds nothing to heard).
        wait_for_condition 100 20 {
            [catch {close [socket 127.0.0.1 $lport]}] == 0
        } else {
            fail "the listener does not listen"
        }
        set fd [nickv_fake_replica $nk $master $lport]
        wait_for_condition 100 50 {
            [file exists $dir/heard] && [string match "*PING*" [exec cat $dir/heard]]
        } else {
            exec kill $listener
            catch {close $lfd}
            fail "Nic-KV did not probe the replica's port: [nickv_cmd $nk info failover]"
        }
        close $fd
        exec kill $listener
        catch {close $lfd}
        set heard [exec cat $dir/heard]
        assert_no_match "*AUTH*" $heard
        assert_no_match "*s3cret*" $heard
        # The master's probe did authenticate: it read the master's INFO.
        assert_equal ok [nickv_info $nk replica_view]
    }
    nickv_stop $nk
}

# A master change made by someone else (here an operator's FAILOVER) is
# followed, not fought: the probes see the master become a replica, probe
# its new master, and the link goes there, continuing the stream (a
# partial resync: the new master keeps the old history as its replid2);
# the fan-out goes on for the new master. Before, Nic-KV kept streaming
# from the demoted node and served nobody.
nickv_topology {replicas {{} {nickv-offload no}} nickv {} nickv_first yes} {
    set m $master
    set r1 [lindex $replicas 0]
    set d [lindex $replicas 1]
    set dport [lindex $replica_ports 1]
    # D joined as a direct replica (no capa nickv: FAILOVER needs one);
    # as a master it takes a Nic-KV.
    $d config set nickv-offload yes
    nickv_wait_replicas $nk 1

    set nkport [dict get $nk port]
    set find_master "
from redis.sentinel import Sentinel
s = Sentinel(\[('127.0.0.1', $nkport)\], socket_timeout=2)
print(s.discover_master('mymaster'))
print(sorted(s.discover_slaves('mymaster')))
m = s.master_for('mymaster', socket_timeout=2, db=9)
m.set('via-sentinel', 'yes')
print(m.get('via-sentinel').decode())
"

    # redis-py 5 speaks RESP2; 8 opens its connections with HELLO 3 and
    # reads RESP3's maps (SENTINEL MASTERS) and pushes (SUBSCRIBE).
    test {Nic-KV answers SENTINEL: redis-py's Sentinel client finds the master through it (redis-py 5 and 8)} {
        wait_for_condition 100 100 {
            [llength [nickv_cmd $nk sentinel replicas mymaster]] == 2
        } else {
            fail "SENTINEL REPLICAS: [nickv_cmd $nk sentinel replicas mymaster]"
        }
        assert_equal [list 127.0.0.1 $master_port] [nickv_cmd $nk sentinel get-master-addr-by-name mymaster]
        assert_equal {} [nickv_cmd $nk sentinel get-master-addr-by-name othermaster]
        set state [lindex [nickv_cmd $nk sentinel masters] 0]
        assert_equal mymaster [dict get $state name]
        assert_equal master [dict get $state flags]
        assert_equal 2 [dict get $state num-slaves]
        assert_equal {} [nickv_cmd $nk sentinel sentinels mymaster]
        catch {nickv_cmd $nk sentinel replicas othermaster} e
        assert_equal {ERR No such master with that name} $e
        foreach version {5 8} {
            $m del via-sentinel
            set out [skv_redis_py $find_master $version]
            assert_equal [list "('127.0.0.1', $master_port)" \
                              "\[('127.0.0.1', [srv -1 port]), ('127.0.0.1', $dport)\]" yes] [split $out "\n"]
            assert_equal yes [$m get via-sentinel]
        }
    }

    # Clients that wait for +switch-master: one of each redis-py, each
    # printing the first message it gets (a push, to redis-py 8).
    set wait_switch "
import redis
p = redis.Redis(port=$nkport, socket_timeout=300).pubsub(ignore_subscribe_messages=True)
p.subscribe('+switch-master')
print('subscribed', flush=True)
for m in p.listen():
    print(m\['channel'\].decode(), m\['data'\].decode())
    break
"
    set subs {}
    foreach version {5 8} {
        set out [file normalize [tmpfile switch$version]]
        set pid [skv_redis_py_bg $wait_switch $out $version]
        lappend subs $version $pid $out
        wait_for_condition 100 100 {
            [file exists $out] && [string match "subscribed*" [exec cat $out]]
        } else {
            fail "redis-py $version did not subscribe: [exec cat $out]"
        }
    }

    test {Nic-KV follows an operator's FAILOVER: the link goes to the new master, no full sync} {
        $m set before 1
        nickv_assert_digests $m [list $r1 $d]
        assert_equal 0 [nickv_info $nk master_moves]
        set full_m [status $m sync_full]
        set full_d [status $d sync_full]
        assert_equal OK [$m failover to 127.0.0.1 $dport]
        wait_for_condition 100 100 {
            [nickv_info $nk master_port] == $dport && [nickv_info $nk master_link_status] eq {up}
        } else {
            fail "Nic-KV did not follow the new master: [exec tail -n 20 [dict get $nk log]]"
        }
        assert_equal 1 [nickv_info $nk master_moves]
        wait_for_condition 100 100 {
            [nickv_status $d nickv_daemon] eq {healthy}
        } else {
            fail "the new master does not have Nic-KV as its daemon"
        }
        assert_equal none [nickv_status $m nickv_daemon]
        assert_match "*node0:addr=127.0.0.1:$dport,role=master,*flags=ok*" [nickv_cmd $nk info failover]
        # The demoted master refuses the daemon role: it is a replica.
        set c [redis 127.0.0.1 $master_port]
        catch {$c replconf nickv "hello ? 1 0 [string repeat d 40] [string repeat f 40] 0"} e
        $c close
        assert_match "NICKV refused: this node is a replica of 127.0.0.1:$dport" $e
        $d set after 1
        $d incr counter
        nickv_assert_digests $d [list $m $r1]
        # Only partial resyncs: Nic-KV continued its stream.
        assert_equal $full_d [status $d sync_full]
        assert_equal $full_m [status $m sync_full]
        # The fan-out goes on for the new master: the old one, now its
        # replica, is handed over to Nic-KV.
        wait_for_condition 100 100 {
            [nickv_status $m nickv_link_via] ne {}
        } else {
            fail "the demoted master does not stream through Nic-KV: [$d info replication]"
        }
        $d set via 1
        nickv_assert_digests $d [list $m $r1]
        assert_equal $full_d [status $d sync_full]
        assert_equal $full_m [status $m sync_full]
        nickv_assert_no_bug $nk
    }

    test {Nic-KV answers SENTINEL with the new master after the FAILOVER: redis-py writes there (5 and 8)} {
        assert_equal [list 127.0.0.1 $dport] [nickv_cmd $nk sentinel get-master-addr-by-name mymaster]
        foreach version {5 8} {
            $d del via-sentinel
            set out [lindex [split [skv_redis_py $find_master $version] "\n"] 0]
            assert_equal "('127.0.0.1', $dport)" $out
            assert_equal yes [$d get via-sentinel]
            wait_for_ofs_sync $d $m
            assert_equal yes [$m get via-sentinel]
        }
    }

    test {redis-py 5 and 8 subscribed to +switch-master get the FAILOVER's message} {
        foreach {version pid out} $subs {
            wait_for_condition 100 100 {
                [llength [split [string trim [exec cat $out]] "\n"]] >= 2
            } else {
                catch {exec kill $pid}
                fail "redis-py $version got no +switch-master: [exec cat $out]"
            }
            catch {exec kill $pid}
            assert_equal [list subscribed "+switch-master mymaster 127.0.0.1 $master_port 127.0.0.1 $dport"] \
                [split [string trim [exec cat $out]] "\n"]
        }
    }
}
