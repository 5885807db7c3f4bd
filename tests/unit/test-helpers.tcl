# The shared test helpers of tests/helpers.tcl that other tests lean on:
# assert_stays fails as soon as its condition turns false, and only then;
# nickv_failover_overrides is the one override list of the failover tests;
# nickv_topology builds a master, its replicas and their Nic-KV.

source tests/skv/helpers.tcl

start_server {tags {"skv"}} {
    test {assert_stays passes, after the whole time, when the condition holds} {
        set n 0
        set start [clock milliseconds]
        assert_stays 0.5 {[incr n] > 0}
        set took [expr {[clock milliseconds] - $start}]
        assert_range $took 500 1500
        # Checked all along (every 50 ms), not once at the end.
        assert_range $n 5 12
    }

    test {assert_stays fails at once, with its message and when, when the condition turns false mid-way} {
        set deadline [expr {[clock milliseconds] + 300}]
        set start [clock milliseconds]
        set code [catch {
            assert_stays 3 {[clock milliseconds] < $deadline} "the counter moved"
        } err]
        set took [expr {[clock milliseconds] - $start}]
        assert_equal 1 $code
        assert_match {assertion:the counter moved: false after * ms of 3 s: *deadline*} $err
        regexp {false after (\d+) ms} $err -> at
        assert_range $at 300 1000
        # It did not wait out the 3 s.
        assert_range $took 300 1000
    }

    test {assert_stays fails on a condition false from the start, without a message} {
        catch {assert_stays 2 {1 == 2}} err
        assert_match {assertion:false after * ms of 2 s: 1 == 2} $err
    }

    test {assert_stays sees the caller's variables as they change} {
        # A server's state, read through the caller's client, as the tests use it.
        r set stays 1
        assert_stays 0.2 {[r get stays] == 1}
        r set stays 2
        assert_error {assertion:*false after*} {assert_stays 0.2 {[r get stays] == 1}}
    }

    test {nickv_failover_overrides: no saves, leases, Nic-KV's user, and the extra options} {
        set user [nickv_user_overrides]
        assert_equal [concat {save "" nickv-lease yes} $user] [nickv_failover_overrides]
        assert_equal [concat {save "" nickv-lease yes appendonly no} $user] \
            [nickv_failover_overrides appendonly no]
        assert_equal [concat {save "" nickv-lease yes enable-debug-command yes appendonly no} $user] \
            [nickv_failover_overrides enable-debug-command yes appendonly no]
        # Even in length: start_server reads it as name value pairs.
        assert_equal 0 [expr {[llength [nickv_failover_overrides appendonly no]] % 2}]
        assert_equal yes [dict get [nickv_failover_overrides] nickv-lease]
    }

    test {nickv_topology: replicas synced, Nic-KV serving them, each node's own overrides} {
        nickv_topology {tags {"repl"} replicas {{} {appendonly yes}} nickv {} serves 2} {
            # The nodes nest as start_server blocks do: the master is srv -2.
            assert_equal [list [srv -2 port] [srv -2 pid]] [list $master_port $master_pid]
            assert_equal [list [srv -1 port] [srv 0 port]] $replica_ports
            assert_equal [list [srv -1 pid] [srv 0 pid]] $replica_pids
            assert_equal PONG [$master ping]
            foreach r $replicas { assert_equal up [status $r master_link_status] }
            assert_equal {appendonly yes} [[lindex $replicas 1] config get appendonly]
            assert_equal {appendonly no} [[lindex $replicas 0] config get appendonly]
            assert_equal 2 [nickv_info $nk connected_replicas]
            set topo_nk $nk
        }
        # Its Nic-KV is gone once the body is done.
        assert_equal 1 [catch {exec kill -0 [dict get $topo_nk pid]}]
    }

    test {nickv_topology: a body's error comes out, its Nic-KV stopped all the same} {
        catch {
            nickv_topology {tags {"repl"} replicas 1 nickv {}} {
                set topo_nk $nk
                error "the body's own error"
            }
        } err
        assert_equal "the body's own error" $err
        assert_equal 1 [catch {exec kill -0 [dict get $topo_nk pid]}]
    }

    test {nickv_topology: without Nic-KV, nk is empty and the replicas sync directly} {
        nickv_topology {tags {"repl"} replicas 2} {
            assert_equal {} $nk
            assert_equal 2 [status $master connected_slaves]
        }
    }
}
