# Nic-KV: the master streams once, to Nic-KV, which streams to the replicas.
# Everything an application relies on stays: the data on every replica,
# WAIT, min-replicas-to-write, partial resyncs, and replication survives
# Nic-KV dying.

source tests/skv/helpers.tcl

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]
    set nk [nickv_start $mport]

    start_server {overrides {save ""}} {
    start_server {overrides {save ""}} {
    start_server {} {
        set r1 [srv -2 client]
        set r2 [srv -1 client]
        set r3 [srv 0 client]
        set replicas [list $r1 $r2 $r3]

        test {Nic-KV: replicas configured with replicaof <master> end up behind Nic-KV} {
            foreach r $replicas { $r replicaof $mhost $mport }
            foreach r $replicas { wait_for_sync $r }
            nickv_wait_replicas $nk 3
            wait_for_condition 100 100 {
                [nickv_status $master nickv_replicas] == 3
            } else {
                fail "the master does not count the replicas behind Nic-KV"
            }
            # The master streams to one link: Nic-KV's.
            assert_equal 1 [llength [split [string trim [$master client list type replica]] "\n"]]
            assert_equal healthy [nickv_status $master nickv_daemon]
            assert_equal 3 [status $master connected_slaves]
            assert_match "*slave0:*via=nickv*slave1:*via=nickv*slave2:*via=nickv*nickv:ip=*replicas=3*" \
                [$master info replication]
            # ROLE and INFO on a replica still name the real master.
            assert_equal [list slave $mhost $mport] [lrange [$r1 role] 0 2]
            assert_equal $mhost [nickv_status $r1 nickv_link_via]
        }

        test {Nic-KV: a mixed write load reaches every replica (DEBUG DIGEST)} {
            nickv_mixed_load $master 200
            $master flushall
            nickv_mixed_load $master 300
            nickv_assert_digests $master $replicas
            # Expired keys are deleted on the replicas through the stream too.
            assert_equal 0 [$r2 exists short:1]
            assert_equal 300 [$r3 get counter]
            # Only Nic-KV's link carried the stream: three replicas, and
            # Nic-KV sent it to each of them.
            foreach i {0 1 2} {
                assert_match "*online*" [nickv_info $nk replica$i]
            }
        } {} {needs:debug}

        test {Nic-KV: WAIT counts the replicas behind Nic-KV} {
            $master set waitkey 1
            assert_equal 3 [$master wait 3 2000]
            set pid [srv -1 pid]
            exec kill -STOP $pid
            $master set waitkey 2
            set acked [$master wait 3 1000]
            exec kill -CONT $pid
            assert_equal 2 $acked
            wait_for_ofs_sync $master $r2
        }

        test {Nic-KV: min-replicas-to-write counts healthy replicas behind Nic-KV} {
            $master config set min-replicas-to-write 3
            $master config set min-replicas-max-lag 2
            wait_for_condition 50 100 {
                [catch {$master set minkey 1} e] == 0
            } else {
                fail "writes refused with three healthy replicas: $e"
            }
            set pid [srv -1 pid]
            exec kill -STOP $pid
            wait_for_condition 100 100 {
                [catch {$master set minkey 2} e] == 1
            } else {
                exec kill -CONT $pid
                fail "writes accepted with a stopped replica"
            }
            exec kill -CONT $pid
            $master config set min-replicas-to-write 0
            assert_match {*NOREPLICAS*} $e
            wait_for_ofs_sync $master $r2
        }

        test {Nic-KV: a restarted replica resyncs partially from Nic-KV, not from the master} {
            set r3 [nickv_check_restart_resyncs_from_nickv $master $nk]
            set replicas [list $r1 $r2 $r3]
            $master incr counter
            nickv_assert_digests $master $replicas
        } {} {needs:debug}

        test {Nic-KV: killed under load, then restarted: nothing lost, replicas come back} {
            set nk [nickv_check_kill_under_load $master $mhost $mport $nk $replicas]
            assert_equal 3 [nickv_info $nk connected_replicas]
        } {} {needs:debug}

        foreach threads {1 2 4} {
            test "Nic-KV: thread-num $threads gives the same data" {
                nickv_stop $nk
                dict set nk args [list --thread-num $threads]
                set nk [nickv_restart $nk]
                nickv_wait_replicas $nk 3
                assert_equal $threads [nickv_info $nk thread_num]
                set cores [exec nproc]
                set most [expr {min($threads, $cores, 3)}]
                assert {[nickv_info $nk fanout_threads] <= $most}
                assert {[nickv_info $nk fanout_threads] >= 1}
                nickv_mixed_load $master 100
                nickv_assert_digests $master $replicas
            } {} {needs:debug}
        }

        test {Nic-KV: a replica away longer than both backlogs gets a full sync} {
            nickv_stop $nk
            dict set nk args [list --backlog-size 1mb]
            set nk [nickv_restart $nk]
            nickv_wait_replicas $nk 3
            $master config set repl-backlog-size 1mb
            set full [status $master sync_full]
            set pid [srv -1 pid]
            exec kill -STOP $pid
            # Far more than 1 MB of stream while it is away.
            for {set i 0} {$i < 300} {incr i} { $master set away:$i [string repeat a 100000] }
            wait_for_condition 100 100 {
                [nickv_info $nk connected_replicas] == 2
            } else {
                exec kill -CONT $pid
                fail "Nic-KV did not drop the replica that fell behind"
            }
            exec kill -CONT $pid
            wait_for_condition 300 100 {
                [status $master sync_full] > $full && [status $r2 master_link_status] eq {up}
            } else {
                fail "no full sync for the replica that was away"
            }
            nickv_assert_digests $master $replicas
            nickv_wait_replicas $nk 3
        } {} {needs:debug}

        test {Nic-KV: bad input on its port gets an error and leaves the others alone} {
            set port [dict get $nk port]
            # Garbage bytes.
            set fd [socket 127.0.0.1 $port]
            fconfigure $fd -translation binary
            puts -nonewline $fd "*99999999\r\n\x00\x01garbage"
            flush $fd
            assert_match {*Protocol error*} [gets $fd]
            close $fd
            # A PSYNC with a bogus id from a redirected SKV replica: sent back to
            # the master.
            set c [redis 127.0.0.1 $port]
            $c replconf capa nickv-via
            catch {$c psync 0123456789012345678901234567890123456789 12345} e
            assert_match {*NICKV cannot serve offset 12345*} $e
            catch {$c close}
            # The master's replication id with an offset the stream never
            # reaches: it waits for the stream, then is refused.
            set c [redis 127.0.0.1 $port]
            $c replconf capa nickv-via
            set replid [status $master master_replid]
            set far [expr {[status $master master_repl_offset] + 1000000000}]
            catch {$c psync $replid $far} e
            assert_match "*NICKV cannot serve offset $far*" $e
            catch {$c close}
            # A PSYNC whose offset is not a number.
            set c [redis 127.0.0.1 $port]
            catch {$c psync abc def} e
            assert_match {*not an integer*} $e
            catch {$c close}
            # An unknown command.
            assert_match {*unknown command*} [nickv_cmd $nk flushall]
            # A client that never reads its replies is closed.
            set fd [socket 127.0.0.1 $port]
            fconfigure $fd -translation binary
            for {set i 0} {$i < 20000} {incr i} { puts -nonewline $fd "*2\r\n\$4\r\nINFO\r\n\$3\r\nall\r\n" }
            catch {flush $fd}
            wait_for_condition 100 100 {
                [catch {exec grep -c "does not read its replies" [dict get $nk log]} n] == 0 && $n >= 1
            } else {
                fail "the client that never reads was not closed"
            }
            catch {close $fd}
            # The replicas were not disturbed.
            assert_equal 3 [nickv_info $nk connected_replicas]
            $master incr counter
            nickv_assert_digests $master $replicas
        } {} {needs:debug}
    }
    }
    }
    nickv_stop $nk
}

start_server {tags {"nickv repl external:skip"} overrides {requirepass s3cret}} {
    set master [srv 0 client]
    $master auth s3cret
    $master select 9           ;# the harness's select failed before AUTH
    set mport [srv 0 port]

    test {Nic-KV: authenticates to the master; strangers get nothing} {
        set nk [nickv_start $mport --masterauth s3cret]
        wait_for_condition 100 100 {
            [nickv_info $nk master_link_status] eq {up}
        } else {
            fail "Nic-KV could not authenticate to the master"
        }
        # requirepass defaults to masterauth, which is what replicas send.
        set c [redis 127.0.0.1 [dict get $nk port]]
        catch {$c info} e
        assert_match {*NOAUTH*} $e
        catch {$c psync ? -1} e
        assert_match {*NOAUTH*} $e
        catch {$c auth wrong} e
        assert_match {*WRONGPASS*} $e
        catch {$c info} e
        assert_match {*NOAUTH*} $e
        assert_equal OK [$c auth s3cret]
        assert_match {*role:nickv*} [$c info]
        catch {$c close}
        nickv_stop $nk
        # A wrong masterauth: the link never comes up, and the log says why.
        set nk [nickv_start $mport --masterauth wrong]
        wait_for_condition 100 100 {
            [catch {exec grep -c "refused our AUTH" [dict get $nk log]} n] == 0 && $n >= 1
        } else {
            fail "no clear error for a wrong masterauth"
        }
        assert_equal down [nickv_info $nk master_link_status]
        nickv_stop $nk
    }

    start_server {} {
        set r [srv 0 client]
        test {Nic-KV: replicas with masterauth move behind an authenticated Nic-KV} {
            set nk [nickv_start $mport --masterauth s3cret]
            $r config set masterauth s3cret
            $r replicaof [srv -1 host] $mport
            wait_for_sync $r
            nickv_wait_replicas $nk 1
            $master set authkey v
            wait_for_ofs_sync $master $r
            assert_equal v [$r get authkey]
            nickv_stop $nk
        }
    }
}

start_server {tags {"nickv repl external:skip"}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    start_server {} {
        set r [srv 0 client]
        test {Nic-KV: an SKV replica configured with replicaof <nickv> syncs through it} {
            nickv_mixed_load $master 50
            set nk [nickv_start $mport]
            wait_for_condition 100 100 {
                [nickv_info $nk master_link_status] eq {up}
            } else {
                fail "Nic-KV did not join the master"
            }
            # Not redirected here, so not sent back to the master either:
            # Nic-KV is its master, and it needs a full sync.
            nickv_check_proxied_full_sync $master $nk
            nickv_stop $nk
        } {} {needs:debug}
    }
}

set debian_redis [file normalize $::skv_root/build/debian-redis/usr/bin/redis-server]
start_server {tags {"nickv repl external:skip"}} {
    set master [srv 0 client]
    set mport [srv 0 port]

    test {Nic-KV: an unmodified upstream replica (Debian's redis-server) pointed at Nic-KV} {
        if {![file executable $debian_redis]} {
            fail "Debian's redis-server is missing: utils/setup-deps.sh test fetches it"
        }
        nickv_mixed_load $master 100
        set nk [nickv_start $mport]
        set port [find_available_port [expr {$::baseport + 450}] 50]
        set dir [file normalize [tmpdir upstream-replica]]
        set pid [exec $debian_redis --port $port --bind 127.0.0.1 --dir $dir --save {} \
                     --logfile $dir/log --enable-debug-command yes \
                     --replicaof 127.0.0.1 [dict get $nk port] &]
        wait_for_condition 100 100 {
            [catch {set up [redis 127.0.0.1 $port]}] == 0
        } else {
            catch {exec kill $pid}
            fail "Debian's redis-server did not start: [exec tail -n 5 $dir/log]"
        }
        $up select 9
        # Its full sync comes through Nic-KV, then the stream.
        wait_for_condition 200 100 {
            [catch {status $up master_link_status} s] == 0 && $s eq {up}
        } else {
            catch {exec kill $pid}
            fail "the upstream replica did not sync through Nic-KV: [exec tail -n 5 $dir/log]"
        }
        assert_equal 1 [nickv_info $nk sync_full_proxied]
        nickv_mixed_load $master 100
        wait_for_ofs_sync $master $up
        assert_equal [$master debug digest] [$up debug digest]
        # It never talked to the master: Nic-KV did, for its RDB.
        assert_match "*redis_version:7.0.15*" [$up info server]
        assert_equal 1 [nickv_info $nk connected_replicas]
        catch {$up shutdown nosave}
        nickv_stop $nk
    } {} {needs:debug}
}
