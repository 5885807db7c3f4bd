# Nic-KV liveness and the daemon's identity: a stopped Nic-KV loses its
# replicas to the master within seconds (not after repl-timeout), an idle
# one keeps them, and only the configured user may act as the daemon.

source tests/skv/helpers.tcl

nickv_topology {replicas 3 nickv {} nickv_first yes serves 3} {
    set mhost [srv -3 host]

    test {Nic-KV: an idle stream through Nic-KV keeps its replicas} {
        # Nothing is written for 4 s: the master PINGs through Nic-KV,
        # and no replica mistakes the silence for a dead Nic-KV.
        set joins [nickv_status $master nickv_daemon_joins]
        assert_stays 4 {[lsort -unique [lmap rep $replicas {nickv_status $rep nickv_via_timeouts}]] eq {0} &&
                        [nickv_status $master nickv_daemon_joins] == $joins} \
            "the idle stream taken for a dead Nic-KV"
        foreach r $replicas {
            assert_equal 0 [nickv_status $r nickv_via_timeouts]
            assert_equal $mhost [nickv_status $r nickv_link_via]
        }
        assert_equal 3 [nickv_info $nk connected_replicas]
        assert_equal healthy [nickv_status $master nickv_daemon]
        assert_equal $joins [nickv_status $master nickv_daemon_joins]
        assert_equal 0 [nickv_status $master nickv_daemon_timeouts]
    }

    test {Nic-KV: stopped (SIGSTOP), its replicas stream from the master within seconds} {
        $master set before-stop 1
        nickv_assert_digests $master $replicas
        set full [status $master sync_full]
        set start [clock milliseconds]
        exec kill -STOP [dict get $nk pid]
        foreach r $replicas {
            wait_for_condition 50 100 {
                [status $r master_link_status] eq {up} && [nickv_status $r nickv_link_via] eq {}
            } else {
                exec kill -CONT [dict get $nk pid]
                fail "a replica still waits for the stopped Nic-KV"
            }
        }
        set took [expr {[clock milliseconds] - $start}]
        puts [format "    (replicas back with the master %.1f s after SIGSTOP)" [expr {$took / 1000.0}]]
        # The master counts what it hears from: three direct replicas,
        # none "via=nickv", and WAIT sees them at once.
        assert_equal none [nickv_status $master nickv_daemon]
        assert_equal 1 [nickv_status $master nickv_daemon_timeouts]
        assert_no_match "*via=nickv*" [$master info replication]
        assert_equal 3 [status $master connected_slaves]
        $master set during-stop 1
        assert_equal 3 [$master wait 3 5000]
        # Partial resyncs from the master's backlog, no full sync.
        assert_equal $full [status $master sync_full]
        foreach r $replicas { assert_equal 1 [nickv_status $r nickv_via_timeouts] }
        nickv_assert_digests $master $replicas
    }

    test {Nic-KV: resumed (SIGCONT), it rejoins and takes its replicas back} {
        exec kill -CONT [dict get $nk pid]
        wait_for_condition 100 100 {
            [nickv_status $master nickv_daemon] eq {healthy}
        } else {
            fail "Nic-KV did not rejoin the master"
        }
        nickv_wait_replicas $nk 3
        wait_for_condition 100 100 {
            [nickv_status $master nickv_replicas] == 3
        } else {
            fail "the master does not count the replicas behind Nic-KV again"
        }
        $master set after-cont 1
        assert_equal 3 [$master wait 3 5000]
        nickv_assert_digests $master $replicas
        foreach r $replicas { assert_equal via [nickv_status $r nickv_replica_path] }
        foreach level {-2 -1 0} { nickv_assert_no_server_bug $level }
    }
}

# nickv-user: the daemon role belongs to one ACL user; while a daemon is
# healthy, a second one is refused.
start_server {tags {"nickv repl external:skip"} overrides {save "" nickv-user nk-daemon}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    $master acl setuser nk-daemon on >daemon-secret +@all ~*

    test {Nic-KV: the daemon role is only for the nickv-user} {
        set nk [nickv_start $mport --masteruser nk-daemon --masterauth daemon-secret]
        wait_for_condition 100 100 {
            [nickv_status $master nickv_daemon] eq {healthy}
        } else {
            fail "Nic-KV authenticated as the nickv-user did not join"
        }
        set joins [nickv_status $master nickv_daemon_joins]
        # A client of the default user claims to be Nic-KV.
        set c [redis [srv 0 host] $mport]
        catch {$c replconf nickv "hello 10.0.0.66 6666 0 [string repeat e 40] [string repeat f 40] 0"} e
        assert_match {NICKV refused: only the user named by nickv-user (nk-daemon) may act as Nic-KV} $e
        $c close
        assert_equal healthy [nickv_status $master nickv_daemon]
        assert_equal "127.0.0.1:[dict get $nk port]" [nickv_status $master nickv_daemon_addr]
        assert_equal $joins [nickv_status $master nickv_daemon_joins]
        assert_equal 1 [nickv_status $master nickv_daemons_refused]
    }

    test {Nic-KV: a second daemon is refused while the first is healthy, and takes over after it} {
        set nk2 [nickv_start $mport --masteruser nk-daemon --masterauth daemon-secret]
        wait_for_condition 100 100 {
            [string match "*refuses us as its Nic-KV: NICKV refused: another Nic-KV*" \
                 [exec cat [dict get $nk2 log]]]
        } else {
            fail "the second Nic-KV was not told why it is refused"
        }
        # The first stays: nobody replaced anybody.
        assert_stays 2 {[nickv_status $master nickv_daemon_joins] == $joins &&
                        [nickv_status $master nickv_daemon_addr] eq "127.0.0.1:[dict get $nk port]"} \
            "the second Nic-KV replaced the first"
        assert_equal $joins [nickv_status $master nickv_daemon_joins]
        assert_equal "127.0.0.1:[dict get $nk port]" [nickv_status $master nickv_daemon_addr]
        assert_equal down [nickv_info $nk2 master_link_status]
        nickv_stop $nk KILL
        wait_for_condition 100 100 {
            [nickv_status $master nickv_daemon_addr] eq "127.0.0.1:[dict get $nk2 port]" &&
            [nickv_status $master nickv_daemon] eq {healthy}
        } else {
            fail "the second Nic-KV did not take over from the dead one"
        }
        assert_equal up [nickv_info $nk2 master_link_status]
        nickv_stop $nk2
    }
}

# The master's cron runs once a second (hz 1): it must not take every one
# of its own ticks for a block that excuses the daemon's silence.
nickv_topology {master {hz 1} replicas 1 nickv {} nickv_first yes serves 1} {
    set r [lindex $replicas 0]

    test {Nic-KV: with the master at hz 1, a stopped Nic-KV still loses its replica to it} {
        exec kill -STOP [dict get $nk pid]
        wait_for_condition 80 100 {
            [status $r master_link_status] eq {up} && [nickv_status $r nickv_link_via] eq {}
        } else {
            exec kill -CONT [dict get $nk pid]
            fail "the replica still waits for the stopped Nic-KV"
        }
        assert_equal none [nickv_status $master nickv_daemon]
        exec kill -CONT [dict get $nk pid]
        $master set hz1 1
        assert_equal 1 [$master wait 1 5000]
    }
}

# A Nic-KV that shuts down (SIGTERM: a restart, an upgrade) must leave the
# master before it closes its replicas' links: a Redis 7 replica reconnects
# to the master the moment its link ends, and a master that still counted
# the daemon would redirect it back to the daemon's port, where the Nic-KV
# started next cannot serve it (its backlog begins where the master is by
# then): it bounced, and stayed with the master for nickv-hold's 30 s. A
# hand-written replica plays the Redis replica, as fast as one can be.
start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    set nk [nickv_start $mport]

    test {Nic-KV: shut down, it leaves the master before its replicas reconnect to it} {
        nickv_wait_link_up $nk
        for {set i 0} {$i < 5} {incr i} {
            wait_for_condition 100 50 {
                [nickv_status $master nickv_daemon] eq {healthy} &&
                [nickv_status $master nickv_backlog_first_byte_offset] > 0
            } else {
                fail "Nic-KV did not rejoin"
            }
            set fd [nickv_fake_replica $nk $master]
            $master set shutdown:$i 1
            wait_for_condition 100 10 {
                [nickv_replica_sent $nk 1] == [status $master master_repl_offset]
            } else {
                fail "Nic-KV did not stream to the replica"
            }
            set replid [status $master master_replid]
            exec kill -TERM [dict get $nk pid]
            # Everything Nic-KV sent, up to the end of the link.
            fconfigure $fd -blocking 1
            set got [string length [read $fd]]
            close $fd
            # At once, as replicationHandleMasterDisconnection does.
            set m [socket 127.0.0.1 $mport]
            fconfigure $m -translation binary -buffering none
            puts -nonewline $m [nickv_resp REPLCONF capa eof capa psync2 capa nickv]
            assert_match {+OK*} [gets $m]
            puts -nonewline $m [nickv_resp PSYNC $replid [expr {[status $master master_repl_offset] + 1}]]
            set reply [gets $m]
            close $m
            assert_match "+CONTINUE*" $reply
            wait_for_condition 100 50 {
                [catch {exec kill -0 [dict get $nk pid]}] == 1
            } else {
                fail "nic-kv did not stop"
            }
            nickv_assert_no_bug $nk
            set nk [nickv_restart $nk]
        }
        assert_equal 0 [nickv_status $master nickv_redirects]
    }
    nickv_stop $nk
}
