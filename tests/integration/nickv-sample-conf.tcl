# The sample nic-kv/nic-kv.conf as shipped, outside the package: it keeps
# its state file in the working directory (as Redis' dir), so it starts
# from any directory; a state file whose directory is missing stops
# Nic-KV (failover yes) with the option, the path and what to do.

source tests/skv/helpers.tcl

# nic-kv run from the directory dir with the sample config and args;
# returns its pid (stdout and stderr into dir/nickv.out).
proc sample_nickv {dir args} {
    set bin [file normalize [nickv_binary]]
    set pid [exec sh -c "cd '$dir' && exec '$bin' '$::skv_root/nic-kv/nic-kv.conf' $args" >>& $dir/nickv.out &]
    lappend ::nickv_pids $pid
    return $pid
}

start_server {tags {"nickv external:skip"}} {
    set mport [srv 0 port]

    test {Nic-KV: the sample nic-kv.conf starts in any working directory and keeps its state file there} {
        set dir [file normalize [tmpdir nickv-sample]]
        # The harness's servers take ports from the same range: another
        # port when one took it first (as nickv_start does).
        for {set attempt 0} {$attempt < 5} {incr attempt} {
            set port [find_available_port [expr {$::baseport + 250}] 200]
            file delete $dir/nickv.log
            set pid [sample_nickv $dir --port $port --master-port $mport --logfile nickv.log]
            wait_for_condition 100 50 {
                ![catch {exec grep -q "listening on port $port," $dir/nickv.log}] || [catch {exec kill -0 $pid}]
            } else {
                fail "nic-kv did not start: [exec cat $dir/nickv.out]"
            }
            if {![catch {exec kill -0 $pid}]} break
        }
        set nk [dict create port $port pid $pid log $dir/nickv.log master $mport]
        wait_for_condition 100 50 {[file exists $dir/nic-kv.state]} else {
            catch {exec kill $pid}
            fail "no $dir/nic-kv.state: [exec cat $dir/nickv.log]"
        }
        assert_equal PONG [nickv_cmd $nk ping]
        assert_equal {state-file nic-kv.state} [nickv_cmd $nk config get state-file]
        assert_equal {failover yes} [nickv_cmd $nk config get failover]
        set fd [open $dir/nic-kv.state]
        set text [read $fd]
        close $fd
        assert_match "*\nconfigured \"127.0.0.1\" $mport\n*" $text
        nickv_stop $nk
    }

    test {Nic-KV: a state file in a missing directory stops it, naming the option, the path and the fix} {
        set dir [file normalize [tmpdir nickv-sample]]
        set port [find_available_port [expr {$::baseport + 250}] 200]
        set state $dir/var/lib/skv/nic-kv.state
        catch {exec timeout 20 sh -c "cd '$dir' && exec '[file normalize [nickv_binary]]' \
                   '$::skv_root/nic-kv/nic-kv.conf' --port $port --master-port $mport --state-file $state" 2>@1} out
        assert_match "*Failover: state-file $state: its directory $dir/var/lib/skv does not exist: create it (writable by the user Nic-KV runs as), or set state-file to a file in an existing directory (a relative path is from the working directory); with failover yes Nic-KV does not start without it\n*" "$out\n"
        # It exited (timeout says 124 when it had to stop it).
        assert_equal 1 [lindex $::errorCode 2]
        assert {![file exists $dir/var]}
    }

    test {Nic-KV: with failover no, a state file in a missing directory is said and Nic-KV runs} {
        set dir [file normalize [tmpdir nickv-sample]]
        set nk [nickv_start $mport --failover no --state-file $dir/missing/nic-kv.state]
        set pong [nickv_cmd $nk ping]
        catch {exec grep "state-file $dir/missing/nic-kv.state" [dict get $nk log]} line
        nickv_stop $nk
        assert_equal PONG $pong
        assert_match "*its directory $dir/missing does not exist: create it*working directory)" $line
    }
}
