# The Nic-KV daemon's place on the master, and a replica's redirects: what
# a review of the liveness change found (a dead daemon's link counted by
# WAIT, a stale redirect followed after REPLICAOF, FAILOVER choosing the
# daemon, a hello without a stream, a daemon that is no longer the
# nickv-user), each kept from coming back.

source tests/skv/helpers.tcl

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]

    test {Nic-KV: WAIT never counts the link of a daemon that went silent} {
        # The stand-in acknowledges the write (the stream reached it), then
        # hangs. The master drops it a second later; its link, freed after
        # that, must never count as a replica: no replica has the write.
        set fake [fake_nickv_start $master $mport hang]
        set timeouts [nickv_status $master nickv_daemon_timeouts]
        set rd [redis_deferring_client]
        $rd set hang-now 1
        $rd read
        $rd wait 1 2500
        assert_equal 0 [$rd read]
        $rd close
        assert_equal [expr {$timeouts + 1}] [nickv_status $master nickv_daemon_timeouts]
        assert_equal 0 [status $master connected_slaves]
        catch {exec kill $fake}
    }

    test {Nic-KV: a daemon whose PSYNC became a full sync is not cut off by the join timer} {
        # Our stream's history is gone (a master restarted empty looks the
        # same): the daemon's PSYNC gets a full sync, which waits for
        # repl-diskless-sync-delay, longer here than the 5 s join timer.
        set nk [nickv_start $mport]
        nickv_wait_link_up $nk
        set connects [nickv_info $nk master_link_connects]
        set delay [lindex [$master config get repl-diskless-sync-delay] 1]
        $master config set repl-diskless-sync-delay 6
        $master debug change-repl-id
        $master client kill type replica
        wait_for_condition 200 100 {
            [nickv_info $nk master_link_status] eq {up} &&
            [nickv_info $nk master_replid] eq [status $master master_replid]
        } else {
            set tail [exec tail -n 5 [dict get $nk log]]
            nickv_stop $nk
            $master config set repl-diskless-sync-delay $delay
            fail "Nic-KV did not rejoin after its full sync: $tail"
        }
        # One connect, one full sync: never closed half-way.
        assert_equal [expr {$connects + 1}] [nickv_info $nk master_link_connects]
        assert_equal 0 [count_log_message 0 "did not start streaming in time"]
        $master config set repl-diskless-sync-delay $delay
        nickv_stop $nk
    }

    test {Nic-KV: a hello with no stream after it is forgotten, and counts as no replica} {
        set c [redis $mhost $mport]
        set reply [$c replconf nickv "hello 10.0.0.66 6666 0 [string repeat c 40] [string repeat f 40] 0"]
        assert_match {[0-9a-f]* [0-9]*} $reply
        # Not in server.slaves (no PSYNC): connected_slaves stays 0.
        assert_equal 0 [status $master connected_slaves]
        wait_for_condition 100 100 {
            [nickv_status $master nickv_daemon] eq {none}
        } else {
            fail "a daemon that never streamed is still attached"
        }
        assert_equal 0 [status $master connected_slaves]
        assert_error "*I/O error*" {$c ping}
        catch {$c close}
    }

    set nk [nickv_start $mport]
    start_server {overrides {save ""}} {
        set r [srv 0 client]
        $r replicaof $mhost $mport
        wait_for_sync $r
        nickv_wait_replicas $nk 1

        test {Nic-KV: FAILOVER never picks the daemon's link} {
            set replid [status $master master_replid]
            # The only replica is behind Nic-KV, which FAILOVER cannot reach.
            assert_error "*FAILOVER requires connected replicas*" {$master failover}
            assert_error "*FAILOVER requires connected replicas*" {$master failover to 127.0.0.1 [dict get $nk port]}
            assert_stays 1 {[status $master master_replid] eq $replid &&
                            [status $master master_failover_state] eq {no-failover} &&
                            [status $master role] eq {master}} \
                "the master failed over to the daemon's link"
            assert_equal $replid [status $master master_replid]
            assert_equal no-failover [status $master master_failover_state]
            assert_equal master [status $master role]
            assert_equal 1 [nickv_info $nk connected_replicas]
        }

        test {Nic-KV: a daemon that is no longer the nickv-user is dropped, and refused} {
            set joins [nickv_status $master nickv_daemon_joins]
            $master config set nickv-user someone-else
            wait_for_condition 50 100 {
                [nickv_status $master nickv_daemon] eq {none}
            } else {
                fail "the daemon stayed attached after nickv-user changed"
            }
            assert_stays 1.5 {[nickv_status $master nickv_daemon] eq {none} &&
                              [nickv_status $master nickv_daemon_joins] == $joins} \
                "the daemon joined again as a user that is not nickv-user"
            assert_equal none [nickv_status $master nickv_daemon]
            assert_equal $joins [nickv_status $master nickv_daemon_joins]
            $master config set nickv-user default
            wait_for_condition 100 100 {
                [nickv_status $master nickv_daemon] eq {healthy}
            } else {
                fail "the daemon did not come back"
            }
            nickv_wait_replicas $nk 1
            $master set after-user-change 1
            wait_for_ofs_sync $master $r
            assert_equal 1 [$r get after-user-change]
        }

        test {Nic-KV: announce-ip is set at startup only} {
            assert_match "*can't set immutable config*" [nickv_cmd $nk config set announce-ip 10.1.1.1]
        }
    }
    nickv_stop $nk

    test {Nic-KV: a redirect is not followed after REPLICAOF another master} {
        # A stand-in master redirects every replica to a port where a test
        # listener only counts connections.
        set fmport [find_available_port [expr {$::baseport + 460}] 20]
        set nkport [find_available_port [expr {$fmport + 1}] 20]
        set out [file normalize [tmpdir fake-master]]/out
        set fm [exec tclsh tests/skv/fake-peer.tcl master $fmport $nkport > $out 2>@1 &]
        wait_for_condition 50 100 {
            [string match "*listening*" [exec cat $out]]
        } else {
            catch {exec kill $fm}
            fail "the stand-in master did not start"
        }
        start_server {overrides {save ""}} {
            set r [srv 0 client]
            $r replicaof 127.0.0.1 $fmport
            # Redirected; its next connect (within a second) would follow.
            # Before that, it is told to replicate from the real master.
            wait_for_condition 300 10 {
                [nickv_status $r nickv_redirects_followed] >= 1
            } else {
                catch {exec kill $fm}
                fail "the stand-in master did not redirect the replica"
            }
            $r replicaof $mhost $mport
            wait_for_sync $r
            set status [catch {
                assert_stays 1.5 {![string match "*nickv-port: connection*" [exec cat $out]]} \
                    "the replica went to the stand-in's nickv-port"
            } e]
            catch {exec kill $fm}
            if {$status} { error $e $::errorInfo }
            assert_no_match "*nickv-port: connection*" [exec cat $out]
            assert_equal master [nickv_status $r nickv_replica_path]
            $master set after-replicaof 1
            wait_for_ofs_sync $master $r
            assert_equal 1 [$r get after-replicaof]
            nickv_assert_no_server_bug 0
        }
    }
}

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]

    test {Nic-KV: a daemon whose stream stands still gets no replica, though its heartbeat goes on} {
        set fake [fake_nickv_start $master $mport stall]
        # The master writes; the daemon's ACK stays where it joined.
        $master set moved 1
        wait_for_condition 50 100 {
            [nickv_status $master nickv_daemon] eq {lagging}
        } else {
            catch {exec kill $fake}
            fail "the master still takes a stalled daemon for healthy"
        }
        start_server {overrides {save ""}} {
            set r [srv 0 client]
            $r replicaof $mhost $mport
            wait_for_sync $r
            assert_stays 2.5 {[nickv_status $master nickv_handoffs] == 0 &&
                              [nickv_status $master nickv_redirects] == 0 &&
                              [nickv_status $r nickv_link_via] eq {}} \
                "a replica handed to a lagging daemon"
            assert_equal 0 [nickv_status $master nickv_handoffs]
            assert_equal 0 [nickv_status $master nickv_redirects]
            assert_equal {} [nickv_status $r nickv_link_via]
            assert_equal lagging [nickv_status $master nickv_daemon]
        }
        catch {exec kill $fake}
    }
}

# Nic-KV's stats are counted by the file that owns each (nickv.c, the
# replica lifecycle, the link): the INFO sections read as they always have,
# and CONFIG RESETSTAT reaches every one of them.
start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    set nk [nickv_start $mport]
    nickv_wait_link_up $nk

    proc nickv_section_fields {nk section} {
        set names {}
        foreach line [split [nickv_cmd $nk info $section] "\r\n"] {
            if {[regexp {^([a-z_0-9]+):(.*)$} $line -> name value]} { lappend names $name $value }
        }
        return $names
    }

    test {Nic-KV: INFO stats keeps its fields in order, and CONFIG RESETSTAT zeroes them all} {
        # One partial resync, one PSYNC sent back to the master, one
        # protocol error.
        set fd [nickv_fake_replica $nk $master 7]
        nickv_wait_replicas $nk 1
        set c [redis 127.0.0.1 [dict get $nk port]]
        $c replconf capa nickv-via
        catch {$c psync 0123456789012345678901234567890123456789 12345} e
        assert_match {*NICKV cannot serve offset 12345*} $e
        catch {$c close}
        set raw [nickv_raw_connect $nk]
        puts -nonewline $raw "*x\r\n"
        assert_match {*Protocol error*} [nickv_raw_line $raw]
        close $raw

        set stats [nickv_section_fields $nk stats]
        assert_equal [concat total_connections_received total_commands_processed sync_partial_ok sync_partial_err \
            sync_full_proxied sync_redirected_to_master sync_waited_for_stream auth_failures \
            protocol_errors link_pin_waits link_pin_drops resolutions resolve_failures \
            resolve_pending rejected_connections \
            client_output_buffer_limit_disconnections auth_timeouts] [dict keys $stats]
        assert_equal 1 [dict get $stats sync_partial_ok]
        assert_equal 1 [dict get $stats sync_partial_err]
        assert_equal 1 [dict get $stats sync_redirected_to_master]
        assert_equal 1 [dict get $stats protocol_errors]
        assert {[dict get $stats total_connections_received] >= 4}
        assert_equal [concat backlog_size backlog_first_byte_offset backlog_last_byte_offset \
            backlog_histlen] [dict keys [nickv_section_fields $nk backlog]]
        set replicas [nickv_section_fields $nk replicas]
        assert_equal {connected_replicas replica0} [dict keys $replicas]
        assert_match {id=*,ip=127.0.0.1,port=7,transport=tcp,state=online,*,thread=0} \
            [dict get $replicas replica0]

        assert_equal OK [nickv_cmd $nk config resetstat]
        set stats [nickv_section_fields $nk stats]
        # The INFO connection itself is the one connection since; the
        # RESETSTAT the one command (counted once it ran, as Redis counts).
        assert_equal 1 [dict get $stats total_connections_received]
        assert_equal 1 [dict get $stats total_commands_processed]
        dict for {name value} $stats {
            if {$name ni {total_connections_received total_commands_processed}} {
                assert_equal "$name:0" "$name:$value"
            }
        }
        close $fd
        nickv_wait_replicas $nk 0
        nickv_assert_no_bug $nk
    }
    nickv_stop $nk
}
