# Nic-KV's failover against what it finds on its own host, and what a
# failing peer makes it do: a state file cut short, changed, or written by
# an older Nic-KV; a symbolic link planted where it writes its temporary
# file; a fence-command that leaves processes behind; and log lines a
# blocked failover or a full disk repeats on every tick.

source tests/skv/helpers.tcl

set hs_conf {save "" nickv-lease yes}

# Run nic-kv with state file path (it exits at once when it refuses it;
# killed after 5 s if it does not): what it printed.
proc hs_run {mport path} {
    set port [find_available_port [expr {$::baseport + 250}] 200]
    catch {exec timeout 5 [nickv_binary] --port $port --master-port $mport --failover yes \
               --state-file $path 2>@1} out
    return $out
}

# The processes whose command line has marker in it (zombies have none).
proc hs_procs {marker} {
    if {[catch {exec pgrep -f $marker} pids]} { return {} }
    return $pids
}

# Lines of Nic-KV's log matching pattern (grep -E) from line from on.
proc hs_count {nk from pattern} {
    set n 0
    set lines [split [exec cat [dict get $nk log]] "\n"]
    foreach l [lrange $lines $from end] {
        if {[regexp -- $pattern $l]} { incr n }
    }
    return $n
}

proc hs_log_lines {nk} {
    llength [split [exec cat [dict get $nk log]] "\n"]
}

# A failover that cannot happen (the only replica has replica-priority 0)
# is tried again on every tick: it says why once, then how many more.
start_server [list tags {"nickv repl external:skip"} overrides $hs_conf] {
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides [concat $hs_conf {replica-priority 0}]] {
        set r [srv 0 client]
        $r replicaof 127.0.0.1 $mport
        set nk [nickv_start $mport --failover yes]
        wait_for_sync $r
        nickv_wait_failover_view $nk 1

        test {Nic-KV log: a blocked failover says why once, not on every attempt} {
            set from [hs_log_lines $nk]
            exec kill -9 $mpid
            wait_for_condition 50 100 {
                [string match "*no replica can be promoted*" [nickv_info $nk last_failover]]
            } else {
                fail "not called off: [nickv_cmd $nk info failover]"
            }
            after 3000
            set attempts [nickv_info $nk failovers_aborted]
            # Tried many times, said a few times.
            assert {$attempts >= 5}
            set said [hs_count $nk $from {Failover: }]
            assert {$said <= 6}
            assert_equal 1 [hs_count $nk $from {is no candidate: replica-priority 0}]
            assert_equal 1 [hs_count $nk $from {called off \(no replica can be promoted\)}]
            assert_equal {called off: no replica can be promoted} [nickv_info $nk last_failover]
            assert_equal 0 [nickv_info $nk failovers]
        }

        test {Nic-KV log: the count of lines not logged comes once the window ends} {
            # NK_LOG_REPEAT_MS is 10 s: by 12 s after the first attempt.
            wait_for_condition 100 100 {
                [hs_count $nk 0 {called off \(no replica can be promoted\).* \([0-9]+ more in the last 1[01] s\)}] >= 1
            } else {
                fail "no count: [exec tail -n 20 [dict get $nk log]]"
            }
            assert_equal 0 [nickv_info $nk failovers]
        }
        nickv_stop $nk
    }
}

# A state file that can no longer be written (its directory gone: as a full
# disk, every save fails) while Nic-KV saves on every grant (a lease-time
# raised at run time is granted only once the state file records it).
start_server [list tags {"nickv repl external:skip"} overrides $hs_conf] {
    set mport [srv 0 port]
    start_server [list overrides $hs_conf] {
        set r [srv 0 client]
        $r replicaof 127.0.0.1 $mport
        set dir [file normalize [tmpdir nickv-gone]]
        file mkdir $dir/sub
        set nk [nickv_start $mport --failover yes --state-file $dir/sub/nickv.state]
        wait_for_sync $r
        nickv_wait_failover_view $nk 1

        test {Nic-KV log: a state file that cannot be kept is said once, not on every grant} {
            set from [hs_log_lines $nk]
            file delete -force $dir/sub
            assert_equal OK [nickv_cmd $nk config set lease-time 1000]
            wait_for_condition 50 100 {
                [string match "*sub/nickv.state.tmp*" [nickv_info $nk state_file_error]]
            } else {
                fail "no error: [nickv_cmd $nk info failover]"
            }
            after 3000
            assert_equal 1 [hs_count $nk $from {cannot keep the state file}]
            file mkdir $dir/sub
            wait_for_condition 50 100 {
                [nickv_info $nk state_file_error] eq {}
            } else {
                fail "not written again: [nickv_cmd $nk info failover]"
            }
        }
        nickv_stop $nk
    }
}
