# Nic-KV: the master streams once, to Nic-KV, which streams to the replicas.
# Everything an application relies on stays: the data on every replica,
# WAIT, min-replicas-to-write, partial resyncs, and replication survives
# Nic-KV dying.

source tests/skv/helpers.tcl
source tests/skv/nickv-suite.tcl

# The master, Nic-KV and three replicas, over each transport: one body of
# tests (tests/nickv-suite.tcl), so that a scenario cannot drift between
# them. Over RDMA it needs the Soft-RoCE VM, where tests/rdma/nickv.tcl runs
# it (tests/rdma/run-in-vm.sh).
foreach transport {tcp rdma} {
    if {$transport eq "rdma" && ![rdma_available]} {
        puts "skipping the Nic-KV suite over RDMA: no RDMA devices (tests/rdma/nickv.tcl runs it in the Soft-RoCE VM)"
        continue
    }
    nickv_suite $transport
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

    test {Nic-KV: a master back with another password: the log says why the link stays down} {
        set nk [nickv_start $mport --masterauth s3cret]
        nickv_wait_link_up $nk
        # The outage begins with the link closed; the AUTH refused comes after.
        $master config set requirepass other
        $master client kill type replica
        wait_for_condition 100 100 {
            [catch {exec grep -c "refused our AUTH" [dict get $nk log]} n] == 0 && $n >= 1
        } else {
            $master config set requirepass s3cret
            catch {exec kill [dict get $nk pid]}
            fail "the refused AUTH is not in the log: [exec tail -n 5 [dict get $nk log]]"
        }
        assert_equal down [nickv_info $nk master_link_status]
        # Said once, not at every attempt.
        assert_stays 2.5 {[exec grep -c "refused our AUTH" [dict get $nk log]] == 1} \
            "the refused AUTH said again"
        $master config set requirepass s3cret
        nickv_wait_link_up $nk
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
        }

        test {Nic-KV: a replica with masterauth asks a master in a long script, after AUTH, and stays behind Nic-KV} {
            nickv_check_busy_script $master [srv -1 host] $mport [list $r] [srv -1 host] s3cret
            # A stopped Nic-KV: the master answers the ask (+OK, +PONG),
            # and the replica leaves.
            exec kill -STOP [dict get $nk pid]
            wait_for_condition 100 100 {
                [nickv_status $r nickv_link_via] eq {} && [status $r master_link_status] eq {up}
            } else {
                exec kill -CONT [dict get $nk pid]
                fail "the replica still waits for the stopped Nic-KV: [$r info nickv]"
            }
            exec kill -CONT [dict get $nk pid]
            assert_equal 1 [nickv_status $r nickv_via_timeouts]
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

# An EOF-marked RDB proxied to a replica is found complete by its last 40
# bytes: the stream must not follow it before the replica says it loaded
# it (its first REPLCONF ACK), or the two arrive in one read and the
# replica waits for ever. Seen under load; made certain here by stopping
# the replica during the transfer and writing meanwhile.
# The replica r (the server at level 0, the master at -1) starts a full
# sync through Nic-KV and is stopped from its +FULLRESYNC on, until the
# whole RDB went through Nic-KV: everything comes while it does not read.
# (About 2 s of RDB; its first bytes may come late, as the master's child
# writes them in blocks.) The caller resumes it (kill -CONT).
proc nk_proxied_sync_stopped {master r nk} {
    $master config set rdb-key-save-delay 20000
    set proxied [nickv_info $nk sync_full_proxied]
    set loglines [count_log_lines 0]
    $r replicaof 127.0.0.1 [dict get $nk port]
    wait_for_log_messages 0 {"*Full resync from master*"} $loglines 100 50
    exec kill -STOP [srv 0 pid]
    wait_for_condition 100 100 {
        [nickv_info $nk sync_full_proxied] == $proxied + 1
    } else {
        exec kill -CONT [srv 0 pid]
        fail "the RDB did not get through Nic-KV: [nickv_sync_diag $nk $r [srv -1 stdout]]"
    }
}

start_server {tags {"nickv repl external:skip"}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    start_server {} {
        set r [srv 0 client]
        test {Nic-KV: a replica that reads the end of a proxied RDB late still finds it, then streams} {
            nickv_mixed_load $master 50
            set nk [nickv_start $mport]
            wait_for_condition 100 100 {
                [nickv_info $nk master_link_status] eq {up}
            } else {
                fail "Nic-KV did not join the master"
            }
            nk_proxied_sync_stopped $master $r $nk
            # The stream has something to send right after the RDB.
            for {set i 0} {$i < 20} {incr i} { $master set late:$i $i }
            after 300 ;# the replica, stopped, reads the RDB's end late
            exec kill -CONT [srv 0 pid]
            wait_for_condition 100 100 {
                [status $r master_link_status] eq {up}
            } else {
                fail "the replica did not finish its sync: [nickv_sync_diag $nk $r [srv -1 stdout]]"
            }
            $master config set rdb-key-save-delay 0
            nickv_mixed_load $master 10
            nickv_assert_digests $master [list $r]
            nickv_stop $nk
        } {} {needs:debug}

        test {Nic-KV: a replica loading a proxied RDB while the master's history changes is not streamed the new one} {
            nickv_mixed_load $master 50
            set nk [nickv_start $mport]
            wait_for_condition 100 100 {
                [nickv_info $nk master_link_status] eq {up}
            } else {
                fail "Nic-KV did not join the master"
            }
            $r replicaof no one
            $r flushall
            $r set only-here 1
            nk_proxied_sync_stopped $master $r $nk
            # While it waits to load: a new history on Nic-KV's link, which
            # starts below the replica's offset (the master restarted: a new
            # replication id, offsets from 0), and grows past it: the
            # replica's offset is in the new backlog, and means nothing there.
            set offset [expr {[nickv_info $nk master_repl_offset]}]
            $master config set rdb-key-save-delay 0
            set dir [lindex [$master config get dir] 1]
            file delete -force $dir/[lindex [$master config get dbfilename] 1]
            restart_server -1 true false 1 nosave
            set master [srv -1 client]
            assert_equal 0 [$master dbsize]
            wait_for_condition 100 100 {
                [nickv_info $nk master_link_status] eq {up} &&
                [nickv_info $nk master_replid] eq [status $master master_replid]
            } else {
                exec kill -CONT [srv 0 pid]
                fail "Nic-KV's link did not start a new history"
            }
            $master set new-history:filler [string repeat x [expr {$offset + 1000}]]
            for {set i 0} {$i < 20} {incr i} { $master set new-history:$i $i }
            set last 19
            assert {[status $master master_repl_offset] > $offset}
            exec kill -CONT [srv 0 pid]
            # Its stream does not start in a history it has no RDB of: it
            # syncs again, and ends with the master's data.
            wait_for_condition 200 100 {
                [status $r master_link_status] eq {up} &&
                [$r get new-history:$last] eq $last
            } else {
                fail "the replica did not sync again: [nickv_sync_diag $nk $r [srv -1 stdout]]"
            }
            # (Streamed the new history from its old offset, it kept the
            # old data under the new stream: the digests differ.)
            nickv_assert_digests $master [list $r]
            assert_match {*history changed before its stream started*} [exec cat [dict get $nk log]]
            nickv_stop $nk
        } {} {needs:debug}

        test {Nic-KV: a replica that never acknowledges its proxied RDB is closed after repl-timeout} {
            set nk [nickv_start $mport --repl-timeout 2]
            wait_for_condition 100 100 {
                [nickv_info $nk master_link_status] eq {up}
            } else {
                fail "Nic-KV did not join the master"
            }
            # A plain replica's handshake, the RDB read, then silence.
            set fd [socket 127.0.0.1 [dict get $nk port]]
            fconfigure $fd -translation binary
            foreach cmd {{REPLCONF listening-port 1} {REPLCONF capa eof capa psync2} {PSYNC ? -1}} {
                puts -nonewline $fd [nickv_resp {*}$cmd]
            }
            flush $fd
            fconfigure $fd -blocking 0
            set start [clock milliseconds]
            set got {}
            while {![eof $fd] && [clock milliseconds] - $start < 10000} {
                append got [read $fd]
                after 50
            }
            set elapsed [expr {[clock milliseconds] - $start}]
            close $fd
            assert_match {*+FULLRESYNC*} [string range $got 0 200]
            assert {$elapsed < 10000}
            assert_match {*silent for repl-timeout (2 s) after its RDB*} [exec cat [dict get $nk log]]
            nickv_stop $nk
        }
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
            fail "the upstream replica did not sync through Nic-KV: [exec tail -n 5 $dir/log]\n[nickv_sync_diag $nk $up [srv 0 stdout]]"
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
