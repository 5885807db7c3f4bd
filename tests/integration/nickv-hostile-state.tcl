# Nic-KV's failover against what it finds on its own host, and what a
# failing peer makes it do: a state file cut short, changed, or written by
# an older Nic-KV; a symbolic link planted where it writes its temporary
# file; a fence-command that leaves processes behind; and log lines a
# blocked failover or a full disk repeats on every tick.

source tests/skv/helpers.tcl

set hs_conf [nickv_failover_overrides]

# Run nic-kv with state file path (it exits at once when it refuses it;
# killed after 5 s if it does not): what it printed.
proc hs_run {mport path} {
    set port [find_available_port [expr {$::baseport + 250}] 200]
    catch {exec timeout 5 [nickv_binary] --port $port --master-port $mport --failover yes \
               --node 127.0.0.1:$mport --state-file $path 2>@1} out
    return $out
}

# The processes whose command line has marker in it (zombies have none).
proc hs_procs {marker} {
    if {[catch {exec pgrep -f $marker} pids]} { return {} }
    return $pids
}

# Lines of Nic-KV's log matching pattern (a Tcl regexp), from line from
# (0: the first; hs_log_lines: the first one not written yet) on.
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

set dir [file normalize [tmpdir nickv-state]]
set state $dir/nickv.state
nickv_topology [list overrides $hs_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --state-file $state]] {
    set r [lindex $replicas 0]
    nickv_wait_failover_view $nk 1
    # Its replica in the state file too (knownTick: within a second).
    wait_for_condition 50 100 {
        [string match "*replica *" [exec cat $state]]
    } else {
        fail "the state file does not list the replica: [exec cat $state]"
    }
    nickv_stop $nk
    set fd [open $state rb]
    set good [read $fd]
    close $fd

    test {Nic-KV state file: it names its format and writer, and ends with a checksum} {
        assert_match "*\nversion 1 nic-kv * skv *\n*" $good
        assert {[regexp "\nend \[0-9a-f\]{64}\n$" $good]}
    }

    # A damaged file: Nic-KV exits at start, says so and what to do,
    # and leaves the file as it was.
    proc hs_assert_refused {mport state text what} {
        set fd [open $state wb]
        puts -nonewline $fd $text
        close $fd
        set out [hs_run $mport $state]
        assert_match "*the state file $state is damaged ($what)*does not start with it*Check which node is the master*remove $state*" $out
        set fd [open $state rb]
        set now [read $fd]
        close $fd
        assert_equal $text $now
    }

    test {Nic-KV state file: cut short anywhere, it stops Nic-KV at start} {
        # Right after the master line, and within its port (the issue's
        # 'master "127.0.0.1" 262': Nic-KV followed that port).
        set m [string first "\nmaster \"127.0.0.1\" $master_port\n" $good]
        assert {$m > 0}
        set after_master [expr {$m + [string length "\nmaster \"127.0.0.1\" $master_port\n"]}]
        set cuts [list $after_master [expr {$after_master - 3}] 10 \
                      [expr {[string length $good] / 2}] \
                      [expr {[string length $good] - 1}] \
                      [expr {[string length $good] - 20}]]
        foreach cut $cuts {
            set text [string range $good 0 [expr {$cut - 1}]]
            hs_assert_refused $master_port $state $text {it has no "end" line: it was cut short*}
        }
        hs_assert_refused $master_port $state {} {it is empty}
    }

    test {Nic-KV state file: a changed byte or a missing end line stops Nic-KV at start} {
        # The epoch line, one digit flipped: still a well-formed line.
        set i [string first "\nepoch " $good]
        set text [string replace $good [expr {$i + 7}] [expr {$i + 7}] 7]
        hs_assert_refused $master_port $state $text "its checksum does not match its text: it was changed or cut"
        regsub "end \[0-9a-f\]+\n$" $good {} text
        hs_assert_refused $master_port $state $text {it has no "end" line: *}
    }

    test {Nic-KV state file: one written by an older Nic-KV (no version, no end line) stops it at start} {
        # What the previous Nic-KV wrote: the same lines without the
        # second comment, the version and the end line.
        set old {}
        foreach l [split [string trimright $good "\n"] "\n"] {
            if {[string match "# Do not edit*" $l] || [string match "version *" $l] ||
                [string match "end *" $l]} continue
            append old "$l\n"
        }
        hs_assert_refused $master_port $state $old \
            "it has no \"end\" line: it was cut short, or written by a Nic-KV older than state file format 1, which had none"
    }

    test {Nic-KV state file: a format from a newer Nic-KV stops it at start} {
        # A well-formed file of format 3 (the checksum recomputed).
        regsub "end \[0-9a-f\]+\n$" $good {} body
        regsub {\nversion 1 } $body "\nversion 3 " body
        set fd [open $dir/body wb]
        puts -nonewline $fd $body
        close $fd
        set sum [lindex [exec sha256sum $dir/body] 0]
        hs_assert_refused $master_port $state "${body}end $sum\n" \
            "it is of format 3, written by a newer Nic-KV; this one reads formats 1 to 2"
    }

    test {Nic-KV state file: a good one is read at start, and written back the same way} {
        set fd [open $state wb]
        puts -nonewline $fd $good
        close $fd
        set nk [nickv_start $master_port {*}[nickv_user_args] --failover yes --state-file $state]
        wait_for_condition 50 100 {
            ![catch {exec grep -q "state file $state read: epoch" [dict get $nk log]}]
        } else {
            fail "the state file was not read: [exec tail -n 5 [dict get $nk log]]"
        }
        nickv_wait_failover_view $nk 1
        nickv_stop $nk
        set fd [open $state rb]
        set now [read $fd]
        close $fd
        assert {[regexp "\nend \[0-9a-f\]{64}\n$" $now]}
        assert_match "*\nmaster \"127.0.0.1\" $master_port\n*" $now
    }

    test {Nic-KV state file: a symbolic link planted at its temporary file is not written through} {
        set victim $dir/victim
        set fd [open $victim w]
        puts $fd precious
        close $fd
        file delete $state
        file link -symbolic $state.tmp $victim
        set nk [nickv_start $master_port {*}[nickv_user_args] --failover yes --state-file $state]
        wait_for_condition 50 100 {
            [file exists $state]
        } else {
            fail "no state file"
        }
        nickv_wait_failover_view $nk 1
        nickv_stop $nk
        assert_equal precious [exec cat $victim]
        assert_equal file [file type $state]
        assert {[regexp "\nend \[0-9a-f\]{64}\n$" [exec cat $state]\n]}
        assert {![file exists $state.tmp]}
    }
}

# A fence-command that blocks, after starting a process of its own in the
# background: at its timeout the whole group is killed, the attempt is
# called off and tried again; a Nic-KV that shuts down kills the one
# running then.
start_server [list tags {"nickv repl external:skip"} overrides $hs_conf] {
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides $hs_conf] {
        set r [srv 0 client]
        $r replicaof 127.0.0.1 $mport
        set dir [file normalize [tmpdir nickv-fence]]
        # A marker no other process has: a sleep of an unlikely length.
        set marker "sleep 7$mport"
        set script $dir/fence.sh
        set fd [open $script w]
        puts $fd "#!/bin/sh\n$marker &\n$marker\n"
        close $fd
        file attributes $script -permissions 0755
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes --fence-command $script]
        wait_for_sync $r
        nickv_wait_failover_view $nk 1

        test {Nic-KV fence-command: at its timeout, what it started is killed with it} {
            exec kill -9 $mpid
            wait_for_condition 50 100 {
                [llength [hs_procs $marker]] == 2
            } else {
                fail "the fence-command did not start: [nickv_cmd $nk info failover]"
            }
            wait_for_condition 100 100 {
                [string match "*fence-command did not finish in 5000 ms (killed)*" [nickv_info $nk last_failover]]
            } else {
                fail "not called off: [nickv_cmd $nk info failover]"
            }
            # Both sleeps of that run are gone (the next run starts a second later).
            wait_for_condition 10 50 {
                [llength [hs_procs $marker]] == 0
            } else {
                fail "left running: [exec ps -o pid,pgid,args -p [join [hs_procs $marker] ,]]"
            }
            # Tried again, as before.
            wait_for_condition 50 100 {
                [llength [hs_procs $marker]] == 2
            } else {
                fail "the fence-command was not run again: [nickv_cmd $nk info failover]"
            }
            assert_equal 0 [nickv_info $nk failovers]
            assert_equal slave [lindex [$r role] 0]
        }

        test {Nic-KV fence-command: Nic-KV shutting down kills the one running, with what it started} {
            assert_equal 2 [llength [hs_procs $marker]]
            nickv_stop $nk
            wait_for_condition 10 50 {
                [llength [hs_procs $marker]] == 0
            } else {
                fail "left running: [exec ps -o pid,pgid,args -p [join [hs_procs $marker] ,]]"
            }
            assert_match "*killing the fence-command*shutting down*" [exec cat [dict get $nk log]]
        }
    }
}

# A failover that cannot happen (the only replica has replica-priority 0)
# is tried again on every tick: it says why once, then how many more.
start_server [list tags {"nickv repl external:skip"} overrides $hs_conf] {
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides [concat $hs_conf {replica-priority 0}]] {
        set r [srv 0 client]
        $r replicaof 127.0.0.1 $mport
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes]
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
            assert_stays 3 {[nickv_info $nk failovers] == 0 &&
                            [hs_count $nk $from {called off \(no replica can be promoted\)}] <= 1} \
                "a failover, or its calling off said twice"
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
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes --state-file $dir/sub/nickv.state]
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
            assert_stays 3 {[hs_count $nk $from {cannot keep the state file}] <= 1} \
                "the state file's error said again"
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
