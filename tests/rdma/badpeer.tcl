# RDMA transport: nothing a peer sends or fails to send crashes the server.
# Each bad peer loses its own connection, with a log line and a counter in
# INFO rdma; TCP clients and other RDMA clients go on.

source tests/skv/helpers.tcl
if {![rdma_available]} {
    puts "skipping tests/rdma/badpeer: no RDMA devices (run through utils/rdma-vm.sh)"
    return
}

proc log_lines {} {
    lindex [exec wc -l [srv 0 stdout]] 0
}

# Lines of file after line $from that contain $pattern (a plain string).
proc count_message_lines_from {file pattern from} {
    set n 0
    set fd [open $file]
    set i 0
    while {[gets $fd line] >= 0} {
        if {[incr i] > $from && [string first $pattern $line] >= 0} { incr n }
    }
    close $fd
    return $n
}

# The server and a second, well-behaved RDMA client are both fine.
proc assert_others_unaffected {port} {
    assert_equal PONG [r ping]
    assert_equal PONG [rdma_cli $port ping]
    assert_equal bar [rdma_cli $port get foo]
}

set ::rdma_error_counters {rdma_errors_protocol rdma_errors_bad_imm rdma_errors_bad_buffer
    rdma_errors_completion rdma_errors_async rdma_errors_register rdma_errors_pinned_limit
    rdma_errors_unauth_limit rdma_errors_handshake rdma_errors_connect}

set port [rdma_port]
start_server [list tags {"rdma"} overrides [rdma_overrides $port]] {
    r select 0   ;# redis-cli and redis-benchmark use db 0
    r set foo bar

    # Each failure counts once, under its cause (RDMA.md, "INFO rdma"):
    # a bad message during the handshake is a protocol error, not also a
    # failed handshake.
    foreach {case counter logpat} {
        short-ctrl    rdma_errors_protocol   "control message of 16 bytes (must be 32)"
        long-ctrl     rdma_errors_protocol   "a message no control slot could take (*): control messages are 32 bytes"
        bad-opcode    rdma_errors_protocol   "unknown control message opcode 77"
        hs-bad-opcode rdma_errors_protocol   "unknown control message opcode 77"
        feature       rdma_errors_protocol   "peer asked for features 0x1; none are supported"
        xfer-zero     rdma_errors_bad_buffer "peer announced a 0 byte buffer*"
        xfer-huge     rdma_errors_bad_buffer "peer announced a 4294967295 byte buffer*"
        imm-overflow  rdma_errors_bad_imm    "peer wrote * bytes past our buffer*"
        imm-past-end  rdma_errors_bad_imm    "peer wrote * bytes past our buffer*"
        rdma-read     rdma_errors_completion "the queue pair failed with no completion saying why*"
        atomic        rdma_errors_completion "the queue pair failed with no completion saying why*"
        bad-rkey      rdma_errors_protocol   "the peer's write was refused by our NIC (remote access error)*"
    } {
        test "RDMA bad peer: $case closes only that connection" {
            set from [log_lines]
            set before [rdma_info $counter]
            set errors_before {}
            foreach c $::rdma_error_counters { dict set errors_before $c [rdma_info $c] }
            # A good client is connected the whole time.
            set holder [exec src/skv-rdma-tool hold $::rdma_host $port 3 > [tmpfile hold] 2>@1 &]
            set out [rdma_tool bad $::rdma_host $port $case]
            assert_match "*closed by server*" $out
            # The server may learn of it after the peer did.
            wait_for_condition 50 100 {
                [rdma_info $counter] == $before + 1
            } else {
                fail "$counter went from $before to [rdma_info $counter]"
            }
            set pats [list "*RDMA: * failed: $logpat*"]
            # What a SEND too long for a control slot fails with depends on
            # the NIC: a length error names the size of control messages;
            # Soft-RoCE's status may be another.
            if {$case eq "long-ctrl"} { lappend pats "*RDMA: * failed: a receive failed on what the peer sent (*): a message longer than our 32-byte control slots*" }
            set found [wait_for_log_messages 0 $pats $from 50 100]
            if {$case eq "long-ctrl"} { puts "    long-ctrl: [lindex $found 0]" }
            assert_others_unaffected $port
            wait_for_condition 100 100 {
                [catch {exec kill -0 $holder}] == 1
            } else {
                fail "the good client did not finish"
            }
            # No other error counter moved.
            foreach c $::rdma_error_counters {
                if {$c ne $counter} { assert_equal [dict get $errors_before $c] [rdma_info $c] "$c" }
            }
            # The size of control messages is named only for a size problem.
            if {$case ne "long-ctrl" && $case ne "short-ctrl"} {
                assert_equal 0 [count_message_lines_from [srv 0 stdout] "control messages are" $from]
            }
        }
    }

    test {RDMA bad peer: peers that leave while the server accepts them count as failed handshakes} {
        set errors_before {}
        foreach c $::rdma_error_counters { dict set errors_before $c [rdma_info $c] }
        set accepted [rdma_info rdma_connections_accepted]
        set out [rdma_tool churn $::rdma_host $port 200]
        assert_match "churned *" $out
        # Each one's handshake ends when its departure is seen, or at the
        # handshake timeout.
        wait_for_condition 150 100 {
            [rdma_info rdma_connections_unauthenticated] == 0
        } else {
            fail "[rdma_info rdma_connections_unauthenticated] handshakes still in progress"
        }
        set handshakes [expr {[rdma_info rdma_errors_handshake] - [dict get $errors_before rdma_errors_handshake]}]
        assert {$handshakes > 0}
        # None of them is a failure to get the NIC's resources.
        foreach c $::rdma_error_counters {
            if {$c ne "rdma_errors_handshake"} { assert_equal [dict get $errors_before $c] [rdma_info $c] "$c" }
        }
        assert_equal $accepted [rdma_info rdma_connections_accepted]
        assert_others_unaffected $port
    }

    test {RDMA bad peer: a connection that never finishes its handshake is closed} {
        set from [log_lines]
        set before [rdma_info rdma_errors_handshake]
        set out [rdma_tool bad $::rdma_host $port no-handshake]
        assert_match "*closed by server*" $out
        assert {[rdma_info rdma_errors_handshake] > $before}
        verify_log_message 0 "*no handshake within*" $from
        assert_others_unaffected $port
    }

    test {RDMA bad peer: a client that never reads hits the output buffer limit} {
        set from [log_lines]
        r config set client-output-buffer-limit "normal 2mb 2mb 0"
        r set bigkey1 [string repeat x 100000]
        set out [rdma_tool bad $::rdma_host $port no-read]
        assert_match "*closed by server*" $out
        verify_log_message 0 "*closed ASAP for overcoming of output buffer limits*" $from
        r config set client-output-buffer-limit "normal 0 0 0"
        assert_others_unaffected $port
    }

    test {RDMA bad peer: a client killed in the middle of a command} {
        set clients [s connected_clients]
        set out [rdma_tool bad $::rdma_host $port kill-mid]
        assert_match "*killed mid-transfer*" $out
        wait_for_condition 100 100 {
            [s connected_clients] == $clients
        } else {
            fail "the dead client was not cleaned up"
        }
        assert_equal 0 [r exists halfkey]
        assert_others_unaffected $port
    }

    test {RDMA bad peer: redis-benchmark killed mid-transfer with large values} {
        set clients [s connected_clients]
        set bench [exec src/redis-benchmark --rdma -h $::rdma_host -p $port -n 100000 -c 8 -d 300000 -t set -q > /dev/null 2>@1 &]
        wait_for_condition 100 100 {
            [s connected_clients] > $clients
        } else {
            fail "benchmark did not connect"
        }
        after 500
        exec kill -9 $bench
        wait_for_condition 100 100 {
            [s connected_clients] == $clients && [rdma_info rdma_connections] == 0
        } else {
            fail "connections of the killed benchmark were not cleaned up"
        }
        assert_others_unaffected $port
    }

    test {RDMA bad peer: clients that send at once after connecting are each accepted once} {
        # Their keepalives can reach the server before its ESTABLISHED
        # event, in one batch of events with it. A completion event of that
        # batch for a channel the batch had already accepted was handled as
        # if still handshaking: a second accept (two clients on one
        # connection) and the listener's list of handshakes lost.
        set accepted [rdma_info rdma_connections_accepted]
        set clients [s connected_clients]
        set pids {}
        set files {}
        for {set i 0} {$i < 30} {incr i} {
            lappend files [tmpfile burst]
            lappend pids [exec src/skv-rdma-tool bad $::rdma_host $port early-burst > [lindex $files end] 2>@1 &]
        }
        foreach pid $pids {
            wait_for_condition 200 100 {
                [catch {exec kill -0 $pid}] == 1
            } else {
                fail "an early-burst client hangs"
            }
        }
        set pongs 0
        foreach f $files {
            set fd [open $f]; set out [read $fd]; close $fd
            if {[string match "*pong*" $out]} { incr pongs }
        }
        assert_equal 30 $pongs
        assert_equal [expr {$accepted + 30}] [rdma_info rdma_connections_accepted]
        wait_for_condition 100 100 {
            [s connected_clients] == $clients && [rdma_info rdma_connections] == 0
        } else {
            fail "the early-burst clients were not cleaned up"
        }
        assert_others_unaffected $port
    }

    # The server's queue pair takes its retry count from the client's
    # connect: 7 (what RDMA clients ask, SKV's included) is "for ever" on
    # Soft-RoCE, which leaves it to SKV's watchdog; with 6 the transport
    # times the peer out by itself, as it does on a real NIC with 7, and the
    # watchdog stays off (so that a busy peer is not taken for a dead one:
    # tests/rdma/replication.tcl).
    set watchdog {"SKV's watchdog" 1 "*RDMA: closing connection with *acknowledged nothing for 10 seconds*"}
    set transport {"the transport's retries" 0 "*RDMA: closing connection with *transport retry counter exceeded*"}
    foreach {retry how watched pattern} [concat 7 [expr {[rdma_soft_roce] ? $watchdog : $transport}] 6 $transport] {
        test "RDMA bad peer: a peer that went silent is noticed by $how (retry count $retry)" {
            set from [log_lines]
            set before [rdma_info rdma_errors_completion]
            # The peer's queue pair stops answering and no disconnect is
            # sent, as when its host loses power.
            set silent [exec env SKV_TOOL_RETRY_COUNT=$retry src/skv-rdma-tool bad $::rdma_host $port go-silent > /dev/null 2>@1 &]
            wait_for_condition 100 100 {
                [rdma_info rdma_connections] == 1
            } else {
                fail "the peer did not connect"
            }
            assert_equal $watched [rdma_info rdma_connections_watchdog]
            wait_for_condition 450 100 {
                [rdma_info rdma_connections] == 0
            } else {
                catch {exec kill $silent}
                fail "the silent peer was never noticed"
            }
            # Noticed, not told: the tool is still there, its id open.
            assert {[catch {exec kill -0 $silent}] == 0}
            catch {exec kill $silent}
            assert {[rdma_info rdma_keepalives_sent] > 0}
            assert_equal [expr {$before + 1}] [rdma_info rdma_errors_completion]
            assert_equal 0 [rdma_info rdma_connections_watchdog]
            verify_log_message 0 $pattern $from
            assert_others_unaffected $port
        }
    }
}

test {RDMA: a low RLIMIT_MEMLOCK gives one clear error at start, and TCP keeps serving} {
    set port [rdma_port]
    set tport [find_available_port [expr {$::baseport + 400}] 100]
    set dir [file normalize [tmpdir memlock]]
    set log $dir/server.log
    set pid [rdma_start_low_memlock $tport $port $dir]
    set lines [exec grep "RDMA" $log]
    assert_equal 1 [llength [split $lines "\n"]]
    assert_match "*RDMA: not listening on port $port: registering * KiB would pass RLIMIT_MEMLOCK (64 KiB,*raise it*TCP keeps serving*" $lines
    assert_match "*rdma_listener:error: *RLIMIT_MEMLOCK*" [exec src/redis-cli -p $tport info rdma]
    assert_equal OK [exec src/redis-cli -p $tport set k v]
    assert_match {*refused*} [rdma_cli $port ping]
    exec kill $pid
} {} {rdma}
