# A promoted master takes writes from its first one: the replicas Nic-KV
# repoints to it count for min-slaves while their PSYNCs are under way
# (health's joining list, NICKV_JOINING_MS in src/nickv_proto.h), instead
# of -NOREPLICAS until they are connected.

source tests/skv/helpers.tcl

set fo_conf [nickv_failover_overrides]

# The master's side, driven by hand as Nic-KV's probe connection would: a
# lease, then health messages with and without a joining list.
start_server [list tags {"nickv repl external:skip"} overrides $fo_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    set c [redis 127.0.0.1 $mport]
    $c auth $::nickv_test_user $::nickv_test_pass
    set inst [string repeat b 40]

    # A lease of ms from now, from this connection (the grantor).
    proc grant {c inst ms} {
        set now [lindex [$c replconf nickv "lease 0 $ms $inst [string repeat f 40]"] 1]
        $c replconf nickv "lease $now $ms $inst [string repeat f 40]"
    }

    test {Nic-KV joining: a replica named joining counts for min-slaves until the window ends} {
        grant $c $inst 10000
        assert_equal OK [$m set k 0]
        # min-slaves 1 and no replica: writes are refused.
        $c replconf nickv "health 1 0"
        catch {$m set k 1} e
        assert_match {NOREPLICAS*} $e
        assert_equal 0 [nickv_status $m nickv_joining_replicas]
        # One valid and joining, not connected: it counts.
        $c replconf nickv "health 1 1 10.0.0.9 7000 1 10.0.0.9 7000"
        assert_equal OK [$m set k 2]
        assert_equal 1 [nickv_status $m nickv_joining_replicas]
        assert_equal 1 [nickv_status $m nickv_valid_replicas]
        assert_equal 0 [nickv_status $m nickv_invalid_replicas]
        # For NICKV_JOINING_MS (3 s) after the first message that named
        # it, however often it is named again (the reports go on, or the
        # verdicts would lapse after 2 s).
        set named [clock milliseconds]
        while {[clock milliseconds] - $named < 6000} {
            after 250
            $c replconf nickv "health 1 1 10.0.0.9 7000 1 10.0.0.9 7000"
            if {[catch {$m set k 3} e]} break
        }
        set counted [expr {[clock milliseconds] - $named}]
        assert_match {NOREPLICAS*} $e
        assert {$counted >= 2500 && $counted < 4500}
        assert_equal 0 [nickv_status $m nickv_joining_replicas]
        assert_equal 0 [nickv_status $m nickv_valid_replicas]
        # Named joining again after a message that left it out: no new
        # window (the master remembers the first naming for 30 s).
        $c replconf nickv "health 1 1 10.0.0.9 7000"
        $c replconf nickv "health 1 1 10.0.0.9 7000 1 10.0.0.9 7000"
        catch {$m set k 3} e
        assert_match {NOREPLICAS*} $e
        assert_equal 0 [nickv_status $m nickv_joining_replicas]
        # WAIT never counts it: only replicas' acknowledgements do.
        $c replconf nickv "health 1 1 10.0.0.9 7009 1 10.0.0.9 7009"
        assert_equal OK [$m set k 4]
        assert_equal 0 [$m wait 1 100]
    }

    test {Nic-KV joining: a malformed joining list counts no replica} {
        grant $c $inst 10000
        # (A new port each time: a replica's window is counted once.)
        set p 7100
        foreach msg {
            "health 1 1 10.0.0.9 PORT 2 10.0.0.9 PORT"
            "health 1 1 10.0.0.9 PORT 1 10.0.0.9"
            "health 1 1 10.0.0.9 PORT -1"
            "health 1 1 10.0.0.9 PORT x 10.0.0.9 PORT"
            "health 1 1 10.0.0.9 PORT 1 10.0.0.9 PORT extra"
            "health 1 1 10.0.0.9 PORT 99999999999 10.0.0.9 PORT"
        } {
            incr p
            $c replconf nickv "health 1 1 10.0.0.9 $p 1 10.0.0.9 $p"
            assert_equal OK [$m set k 5]
            $c replconf nickv [string map [list PORT $p] $msg]
            catch {$m set k 6} e
            assert_match {NOREPLICAS*} $e
            assert_equal 0 [nickv_status $m nickv_joining_replicas]
        }
        # A bad port or address leaves that entry out, not the rest.
        $c replconf nickv "health 1 2 10.0.0.9 7001 10.0.0.8 7001 2 10.0.0.9 99999 10.0.0.8 7001"
        assert_equal 1 [nickv_status $m nickv_joining_replicas]
        assert_equal OK [$m set k 7]
        # Joining counts only a replica also named valid, once, and never
        # port 0.
        foreach {msg want} {
            "health 2 0 2 10.0.0.7 7002 10.0.0.6 7002" 0
            "health 3 1 10.0.0.5 7003 3 10.0.0.5 7003 10.0.0.5 7003 10.0.0.5 7003" 1
            "health 1 1 10.0.0.4 0 1 10.0.0.4 0" 0
        } {
            $c replconf nickv $msg
            assert_equal $want [nickv_status $m nickv_joining_replicas]
            catch {$m set k 8} e
            assert_match {NOREPLICAS*} $e
        }
        $c replconf nickv "health 0 0"
    }
    $c close
}

# The whole path: a failover under a writer that never pauses; the new
# master must answer no -NOREPLICAS.
nickv_topology [list overrides $fo_conf replicas 2 \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1]] {
    set nodes {}
    foreach p $replica_ports r $replicas { dict set nodes $p $r }
    wait_for_condition 100 100 {
        [nickv_info $nk valid_replicas] == 2 && [nickv_info $nk master_lease] eq {on}
    } else {
        fail "Nic-KV does not see the topology: [nickv_cmd $nk info failover]"
    }

    test {Nic-KV joining: a master promoted with min-slaves 1 refuses no write while its replicas join} {
        exec kill -9 $master_pid
        wait_for_condition 100 50 {
            [nickv_info $nk failovers] >= 1
        } else {
            fail "no failover: [nickv_cmd $nk info failover]"
        }
        lassign [nickv_cmd $nk sentinel get-master-addr-by-name mymaster] host new
        set w [redis 127.0.0.1 $new]
        # From its lease on, every write: accepted, or refused for the
        # lease only (until Nic-KV's probe grants it), never for want
        # of replicas.
        set ok 0
        set errors {}
        set deadline [expr {[clock milliseconds] + 5000}]
        while {$ok < 2000 && [clock milliseconds] < $deadline} {
            if {[catch {$w set j$ok $ok} e]} {
                if {![string match {READONLY*no lease*} $e]} { lappend errors $e }
                if {[llength $errors] > 10} break
            } else {
                incr ok
            }
        }
        $w close
        assert_equal {} $errors
        assert_equal 2000 $ok
        # The other replica joined for real: counted, no longer as joining.
        set r [dict get $nodes $new]
        wait_for_condition 100 100 {
            [nickv_status $r nickv_valid_replicas] == 1 && [nickv_status $r nickv_joining_replicas] == 0
        } else {
            fail "the other replica does not count on the new master: [$r info nickv]"
        }
        nickv_assert_no_bug $nk
    }
}
