# Nic-KV redirects that do not work out: a replica that Nic-KV sends back
# (-NICKV) and a replica that cannot reach the Nic-KV it is sent to both
# end up served by the master, and stay there for a while (nickv-hold)
# instead of bouncing between the two.

source tests/skv/helpers.tcl

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]

    test {Nic-KV: a replica sent back with -NICKV stays with the master (nickv-hold)} {
        # A stand-in daemon that reports a backlog holding everything, and
        # answers every replica's PSYNC with -NICKV.
        set fake [fake_nickv_start $master $mport bounce]
        start_server {overrides {save ""}} {
            set r [srv 0 client]
            $r replicaof $mhost $mport
            # A full sync from the master (a new replica has no replid to
            # redirect; repl-diskless-sync-delay is 5 s), then the
            # hand-over, the redirect and the bounce.
            wait_for_condition 300 100 {
                [nickv_status $r nickv_bounces] == 1 && [status $r master_link_status] eq {up}
            } else {
                catch {exec kill $fake}
                fail "the replica was not sent back, or did not come back to the master"
            }
            assert_equal 1 [nickv_status $master nickv_handoffs]
            assert_equal 1 [nickv_status $master nickv_redirects]
            assert_equal 1 [nickv_status $r nickv_redirects_followed]
            assert_equal {} [nickv_status $r nickv_link_via]
            # Held: the master neither hands it over nor redirects it again.
            assert_stays 3 {[nickv_status $master nickv_handoffs] == 1 &&
                            [nickv_status $master nickv_redirects] == 1 &&
                            [nickv_status $r nickv_bounces] == 1} \
                "the held replica handed over or redirected again"
            assert_equal 1 [nickv_status $master nickv_handoffs]
            assert_equal 1 [nickv_status $master nickv_redirects]
            assert_equal 1 [nickv_status $r nickv_bounces]
            assert_equal up [status $r master_link_status]
            $master set held 1
            wait_for_ofs_sync $master $r
            assert_equal 1 [$r get held]
            assert_equal held [nickv_status $r nickv_replica_path]
            nickv_assert_no_server_bug 0
        }
        catch {exec kill $fake}
        wait_for_condition 50 100 {
            [nickv_status $master nickv_daemon] eq {none}
        } else {
            fail "the master did not notice the stand-in daemon leave"
        }
    }

    test {Nic-KV: three redirects that give no link, then the replica stays with the master} {
        # Nic-KV announces an address where nothing listens (it binds
        # 127.0.0.1 only): every redirect there fails to connect.
        set nk [nickv_start $mport --announce-ip 127.0.0.2]
        wait_for_condition 100 100 {
            [nickv_status $master nickv_daemon] eq {healthy}
        } else {
            fail "Nic-KV did not join"
        }
        set redirects [nickv_status $master nickv_redirects]
        start_server {overrides {save ""}} {
            set r [srv 0 client]
            $r replicaof $mhost $mport
            wait_for_condition 300 100 {
                [nickv_status $r nickv_redirects_followed] >= 3 &&
                [status $r master_link_status] eq {up}
            } else {
                fail "the replica did not give up on the unreachable Nic-KV"
            }
            # Three tries, then held with the master (30 s).
            assert_stays 3 {[nickv_status $r nickv_redirects_followed] == 3 &&
                            [nickv_status $master nickv_redirects] - $redirects == 3} \
                "a fourth try at the unreachable Nic-KV"
            assert_equal 3 [nickv_status $r nickv_redirects_followed]
            assert_equal 3 [expr {[nickv_status $master nickv_redirects] - $redirects}]
            assert_equal up [status $r master_link_status]
            assert_equal {} [nickv_status $r nickv_link_via]
            assert_equal 0 [nickv_info $nk connected_replicas]
            $master set held-too 1
            wait_for_ofs_sync $master $r
            assert_equal 1 [$r get held-too]
            assert_equal held [nickv_status $r nickv_replica_path]
            nickv_assert_no_server_bug 0
        }
        nickv_stop $nk
    }
}

# The master's count of its online replicas (INFO replication: direct
# ones with state=online, and those behind Nic-KV).
proc rd_online {master} {
    regexp -all {slave[0-9]+:[^\r\n]*state=online} [$master info replication]
}

# Direct replicas go to Nic-KV one at a time (after a failover every
# replica is direct): one in transit answers no WAIT until it streams
# behind Nic-KV, and all three handed over at once left none online.
# Nic-KV starts once they all stream directly from the master, as the
# master counts them (a replica's link is up before the master's cron
# reaps the RDB child and calls it online).
nickv_topology {replicas 3} {
    wait_for_condition 100 50 {
        [rd_online $master] == 3
    } else {
        fail "the master does not count its three replicas online: [$master info replication]"
    }
    set before [nickv_status $master nickv_handoffs]
    set nk [nickv_start $master_port]
    test {Nic-KV: direct replicas are handed over one at a time: the others stay online meanwhile} {
        # The master's online replicas, direct or behind Nic-KV, as often
        # as INFO can say, until all three are behind it.
        set least 3
        set samples 0
        set deadline [expr {[clock milliseconds] + 20000}]
        while {[clock milliseconds] < $deadline} {
            set info [$master info replication]
            set online [regexp -all {slave[0-9]+:[^\r\n]*state=online} $info]
            if {$online < $least} {
                set least $online
                set ms [clock milliseconds]
                set at_least "[clock format [expr {$ms / 1000}] -format %H:%M:%S].[format %03d [expr {$ms % 1000}]]: [regexp -all -inline -line {^(?:slave|nickv).*$} $info]"
            }
            incr samples
            if {[regexp -all {slave[0-9]+:[^\r\n]*via=nickv} $info] == 3} break
        }
        assert_equal 3 [regexp -all {slave[0-9]+:[^\r\n]*via=nickv} [$master info replication]]
        assert_equal [expr {$before + 3}] [nickv_status $master nickv_handoffs]
        # Two of three online at every sample.
        if {$least < 2} {
            # What the master said then, and its hand-overs (CI saw this
            # once, never reproduced: the next run says why).
            set log [exec grep -E "Nic-KV|MASTER|Replica|replica" [srv -3 stdout]]
            fail "$least replica(s) online at one moment ($samples samples), at $at_least\n[join [lrange [split $log \n] end-40 end] \n]"
        }
    }
    nickv_stop $nk
}

# A replica still syncing holds the hand-overs back: it answers no WAIT
# either, and handing another over then leaves the master's count one
# short. (Before, a full sync of one of three and a hand-over left one
# replica online; nickv-redirects above saw it at the start of a run.)
nickv_topology {replicas 3} {
    set z [lindex $replicas 2]
    test {Nic-KV: no replica is handed over while another one is still syncing} {
        # A full sync of z that waits 3 s for its RDB (replicaof no one
        # gives it a history of its own).
        $master config set repl-diskless-sync yes
        $master config set repl-diskless-sync-delay 3
        $z replicaof no one
        $z replicaof 127.0.0.1 $master_port
        wait_for_condition 50 20 {
            [regexp {slave[0-9]+:[^\r\n]*state=wait_bgsave} [$master info replication]]
        } else {
            fail "z is not waiting for its RDB: [$master info replication]"
        }
        set before [nickv_status $master nickv_handoffs]
        set nk [nickv_start $master_port]
        wait_for_condition 100 20 {
            [nickv_status $master nickv_daemon] eq {healthy}
        } else {
            fail "Nic-KV did not join"
        }
        # Until z is online: nobody handed over.
        while {[rd_online $master] < 3} {
            set h [nickv_status $master nickv_handoffs]
            if {$h != $before} {
                fail "[expr {$h - $before}] replica(s) handed over while z syncs: [$master info replication]"
            }
            after 20
        }
        # Then all three, one at a time.
        wait_for_condition 200 50 {
            [regexp -all {slave[0-9]+:[^\r\n]*via=nickv} [$master info replication]] == 3
        } else {
            fail "not all three behind Nic-KV: [$master info replication]"
        }
        assert_equal [expr {$before + 3}] [nickv_status $master nickv_handoffs]
        $master set after-sync 1
        nickv_assert_digests $master $replicas
    }
    if {[info exists nk]} { nickv_stop $nk }
}
