# RDMA transport: what a connection may cost, and what happens at each
# limit. A connection the server accepts can be served; one it cannot
# serve is refused at connect time, with the reason in the reject; the
# memory of connections that never authenticate is bounded; a listener
# that could not start comes back on its own, or on CONFIG SET.

source tests/skv/helpers.tcl
if {![rdma_available]} {
    puts "skipping tests/rdma/limits: no RDMA devices (run through utils/rdma-vm.sh)"
    return
}

# skv-rdma-tool conns: "accepted A refused R replied P failed F", then
# "reason: ..." lines. Returns a dict of the four numbers and the reasons.
proc conns_result {out} {
    if {![regexp {accepted (\d+) refused (\d+) replied (\d+) failed (\d+)} $out -> a r p f]} {
        fail "skv-rdma-tool conns said: $out"
    }
    set reasons {}
    foreach line [split $out "\n"] {
        if {[string match "reason: *" $line]} { lappend reasons [string range $line 8 end] }
    }
    dict create accepted $a refused $r replied $p failed $f reasons $reasons
}

# Start skv-rdma-tool conns in the background, holding what it opened for
# $secs seconds; once it has opened them and sent its PINGs, returns its
# pid and conns_result.
proc conns_hold {port count secs args} {
    set out [tmpfile conns]
    set pid [exec src/skv-rdma-tool conns $::rdma_host $port $count $secs {*}$args > $out 2>@1 &]
    wait_for_condition 600 100 {
        [string match "*accepted*" [exec cat $out]]
    } else {
        catch {exec kill $pid}
        fail "skv-rdma-tool conns did not finish connecting: [exec cat $out]"
    }
    list $pid [conns_result [exec cat $out]]
}

# The most refusal lines the rate limit lets through (RDMA.md: 20 per 10
# seconds) while refusals went on from $t0 to now: one burst per window
# begun in that time (a slow VM spreads them over several).
proc refusal_lines_allowed {t0} {
    expr {20 * (([clock seconds] - $t0) / 10 + 2)}
}

proc server_rss_kb {} {
    set fd [open /proc/[srv 0 pid]/status]
    set status [read $fd]
    close $fd
    regexp {VmRSS:\s+(\d+) kB} $status -> kb
    return $kb
}

set port [rdma_port]
# At loglevel notice (the harness's servers log at verbose, where every line
# is kept): refusals are rate limited.
start_server [list tags {"rdma"} overrides [concat [rdma_overrides $port] loglevel notice]] {
    # (Each server's log is its own: the refusals counted are this test's.)
    test {RDMA: at the pinned-memory cap, every accepted connection is served and the rest are refused at connect} {
        set refusals [rdma_info rdma_errors_pinned_limit]
        set t0 [clock seconds]
        # Room for about 25 connections' pre-auth buffers.
        r config set rdma-max-pinned-memory [expr {[rdma_info rdma_pinned_bytes] + 3 * 1024 * 1024}]
        set res [conns_result [rdma_tool conns $::rdma_host $port 60 0]]
        r config set rdma-max-pinned-memory 1gb
        assert {[dict get $res accepted] >= 10}
        assert {[dict get $res refused] >= 10}
        # What was accepted answered: its staging ring was reserved with
        # the rest at accept time, not refused at its first reply.
        assert_equal 0 [dict get $res failed] "failures: [dict get $res reasons]"
        assert_equal [dict get $res accepted] [dict get $res replied]
        assert {![string match "*reply:*" [dict get $res reasons]]}
        assert_match "*connection refused by *pinned-memory limit*" [dict get $res reasons]
        # One count per refused connection; a grant the cap cannot give in
        # full (the staging ring stays small) is no refusal.
        assert_equal [dict get $res refused] [expr {[rdma_info rdma_errors_pinned_limit] - $refusals}]
        # Refusals are a peer's doing: their log lines are rate limited.
        wait_for_condition 50 100 {
            [rdma_info rdma_connections] == 0
        } else {
            fail "the connections did not go away"
        }
        set lines [count_log_message 0 "RDMA: refusing connection"]
        assert {$lines >= 1 && $lines <= [refusal_lines_allowed $t0]}
        assert_equal PONG [rdma_cli $port ping]
    }
}

set port [rdma_port]
start_server [list tags {"rdma"} overrides [list rdma-port $port rdma-bind $::rdma_host requirepass s3cret loglevel notice]] {
    r auth s3cret
    test {RDMA: connections that never authenticate are capped (rdma-max-unauthenticated), their memory bounded} {
        assert_equal {rdma-max-unauthenticated 128} [r config get rdma-max-unauthenticated]
        set rss0 [server_rss_kb]
        set t0 [clock seconds]
        lassign [conns_hold $port 300 30] pid res
        set rss1 [server_rss_kb]
        # Read while the connections are held: they close as the holder dies.
        set conns [rdma_info rdma_connections]
        set unauth [rdma_info rdma_connections_unauthenticated]
        catch {exec kill $pid}
        puts "    300 idle unauthenticated RDMA connections: [dict get $res accepted] accepted,\
              [dict get $res refused] refused; server RSS +[expr {$rss1 - $rss0}] KiB\
              ([expr {($rss1 - $rss0) / max(1, $conns)}] KiB per connection)"
        assert_equal 128 [dict get $res accepted]
        assert_equal 172 [dict get $res refused]
        assert_equal 172 [rdma_info rdma_errors_unauth_limit]
        assert_match "*connection refused by *not authenticated yet (rdma-max-unauthenticated 128)*" \
            [dict get $res reasons]
        # Each accepted one got its reply (NOAUTH), and is still held.
        assert_equal 128 [dict get $res replied]
        assert_match "*reply: -NOAUTH*" [dict get $res reasons]
        assert_equal 128 $conns
        assert_equal 128 $unauth
        # The documented bound (RDMA.md, "Memory"): 2 MiB per connection
        # not authenticated yet, whatever the number that try.
        assert {$rss1 - $rss0 < 128 * 2048}
        set lines [count_log_message 0 "RDMA: refusing connection"]
        assert {$lines < 172 && $lines <= [refusal_lines_allowed $t0]}
        wait_for_condition 100 100 {
            [rdma_info rdma_connections] == 0
        } else {
            fail "the connections did not go away"
        }
        # Once they are gone, new clients are accepted again.
        assert_equal PONG [rdma_cli $port -a s3cret --no-auth-warning ping]
    }

    test {RDMA: an authenticated connection no longer counts against rdma-max-unauthenticated} {
        r config set rdma-max-unauthenticated 20
        set rss0 [server_rss_kb]
        lassign [conns_hold $port 60 60 s3cret] pid res
        set rss1 [server_rss_kb]
        set conns [rdma_info rdma_connections]
        puts "    20 idle authenticated RDMA connections: server RSS +[expr {$rss1 - $rss0}] KiB\
              ([expr {($rss1 - $rss0) / max(1, $conns)}] KiB per connection)"
        # They are opened one after another, and authenticate only after
        # all of them were opened: 20 get in, then the cap refuses.
        assert_equal 20 [dict get $res accepted]
        assert_equal 40 [dict get $res refused]
        assert_equal 20 [dict get $res replied]
        assert {![string match "*reply:*" [dict get $res reasons]]}
        # Those 20 authenticated: held still, they no longer count.
        assert_equal 20 $conns
        assert_equal 0 [rdma_info rdma_connections_unauthenticated]
        assert_equal PONG [rdma_cli $port -a s3cret --no-auth-warning ping]
        set res2 [conns_result [rdma_tool conns $::rdma_host $port 20 0 s3cret]]
        assert_equal 20 [dict get $res2 accepted]
        assert_equal 20 [dict get $res2 replied]
        assert {![string match "*reply:*" [dict get $res2 reasons]]}
        # The first 20 are still held.
        wait_for_condition 50 100 {
            [rdma_info rdma_connections] == 20
        } else {
            fail "[rdma_info rdma_connections] RDMA connections, not the 20 still held"
        }
        catch {exec kill $pid}
        r config set rdma-max-unauthenticated 128
    }
}

# Without a password a client needs no AUTH: its connection stops counting
# against rdma-max-unauthenticated once its handshake is done. Handshakes
# in progress still count; the server finishes those it can before it takes
# new connect requests, so that a client pool that keeps connects in
# progress (16 at a time here) is not refused because of handshakes the
# server itself had not finished.
set port [rdma_port]
start_server [list tags {"rdma"} overrides [concat [rdma_overrides $port] rdma-max-unauthenticated 32]] {
    test {RDMA: a server without a password refuses no client because of handshakes it has not finished} {
        set out [tmpfile pipelined]
        catch {exec env SKV_TOOL_INFLIGHT=16 src/skv-rdma-tool conns $::rdma_host $port 300 0 > $out 2>@1}
        set res [conns_result [exec cat $out]]
        assert_equal 0 [rdma_info rdma_errors_unauth_limit] "[dict get $res reasons]"
        assert_equal 300 [dict get $res accepted] "[dict get $res reasons]"
        assert_equal 300 [dict get $res replied]
        assert_equal 0 [dict get $res failed]
        assert_equal 0 [count_log_message 0 "RDMA: refusing connection"]
        wait_for_condition 100 100 {
            [rdma_info rdma_connections] == 0
        } else {
            fail "the connections did not go away"
        }
        assert_equal 0 [rdma_info rdma_connections_unauthenticated]
    }
}

# At loglevel verbose every refusal is logged (RDMA.md, "INFO rdma"): the
# rate limit is for notice and warning.
set port [rdma_port]
start_server [list tags {"rdma"} overrides [list rdma-port $port rdma-bind $::rdma_host requirepass s3cret \
                                                rdma-max-unauthenticated 5 loglevel verbose]] {
    r auth s3cret
    test {RDMA: at loglevel verbose every refused connection is logged} {
        set res [conns_result [rdma_tool conns $::rdma_host $port 40 0]]
        assert_equal 5 [dict get $res accepted]
        assert_equal 35 [dict get $res refused]
        assert_equal 35 [rdma_info rdma_errors_unauth_limit]
        assert_equal 35 [count_log_message 0 "RDMA: refusing connection"]
        assert_equal 0 [count_log_message 0 "lines about failed or refused connections were left out"]
        # Back to notice: limited again.
        r config set loglevel notice
        set res [conns_result [rdma_tool conns $::rdma_host $port 40 0]]
        assert_equal 35 [dict get $res refused]
        assert {[count_log_message 0 "RDMA: refusing connection"] <= 35 + 20}
    }
}

# A CONFIG SET rdma-port that cannot listen keeps the listener it had (and
# its live connections): upstream's restore of the old value then has
# nothing to redo, and logs no "Failed applying restored" line.
set port [rdma_port]
start_server [list tags {"rdma"} overrides [rdma_overrides $port]] {
    set busy [rdma_port]
    start_server [list tags {"rdma"} overrides [rdma_overrides $busy]] {
        test {RDMA: CONFIG SET rdma-port to a port in use fails and keeps the old listener} {
            # A live connection through the old listener meanwhile.
            set holder [exec src/skv-rdma-tool hold $::rdma_host $port 4 > [tmpfile hold] 2>@1 &]
            wait_for_condition 50 100 {
                [rdma_info rdma_connections -1] == 1
            } else {
                fail "the holder did not connect"
            }
            catch {r -1 config set rdma-port $busy} e
            assert_match "*Unable to listen on the RDMA port: *Address already in use*" $e
            assert_equal [list rdma-port $port] [r -1 config get rdma-port]
            assert_equal on [rdma_info rdma_listener -1]
            assert_equal PONG [rdma_cli $port ping]
            assert_equal 0 [count_log_message -1 "Failed applying restored"]
            # The live connection was not disturbed.
            wait_for_condition 100 100 {
                [catch {exec kill -0 $holder}] == 1
            } else {
                fail "the holder did not finish"
            }
            assert_equal 0 [rdma_info rdma_errors_async -1]
            # The other server still has its own.
            assert_equal PONG [rdma_cli $busy ping]
        }
    }
}

test {RDMA: a listener that could not start is retried every second, and by CONFIG SET rdma-port} {
    set port [rdma_port]
    set tport [find_available_port [expr {$::baseport + 420}] 100]
    set dir [file normalize [tmpdir retry]]
    set log $dir/server.log
    set pid [rdma_start_low_memlock $tport $port $dir]
    assert_match "*rdma_listener:error: *RLIMIT_MEMLOCK*" [exec src/redis-cli -p $tport info rdma]
    # CONFIG SET of the same port retries, and says why it still fails.
    catch {exec src/redis-cli -p $tport config set rdma-port $port} out
    assert_match "*Unable to listen on the RDMA port: *RLIMIT_MEMLOCK*" $out
    # The retries do not count as refused connections.
    after 2500
    assert_match "*rdma_errors_pinned_limit:0*" [exec src/redis-cli -p $tport info rdma]
    # Raised under the running server: within a few seconds it listens.
    exec prlimit --pid $pid --memlock=unlimited:unlimited
    wait_for_condition 50 100 {
        [string match "*rdma_listener:on*" [exec src/redis-cli -p $tport info rdma]]
    } else {
        catch {exec kill $pid}
        fail "the listener did not come back: [exec src/redis-cli -p $tport info rdma]"
    }
    assert_equal PONG [rdma_cli $port ping]
    # Now up: the same CONFIG SET leaves it alone.
    assert_equal OK [exec src/redis-cli -p $tport config set rdma-port $port]
    assert_equal PONG [rdma_cli $port ping]
    assert_equal 1 [llength [split [exec grep "RDMA: listening on" $log] "\n"]]
    exec kill $pid
} {} {rdma}

# Upstream restores the old value after a failed apply and applies it
# again: that must not fail a second time (and log "Failed applying
# restored failed CONFIG SET command"). A listener that was up keeps
# listening; one that was down stays down, retried by the cron.
test {RDMA: a CONFIG SET rdma-port that cannot listen leaves the listener as it was, with no failed restore} {
    set port [rdma_port]
    set other [rdma_port]
    set tport [find_available_port [expr {$::baseport + 620}] 100]
    set dir [file normalize [tmpdir restore]]
    set log $dir/server.log
    set pid [rdma_start_low_memlock $tport $port $dir]
    # Down (memlock): the new port fails for the same reason.
    catch {exec src/redis-cli -p $tport config set rdma-port $other} out
    assert_match "*Unable to listen on the RDMA port: *RLIMIT_MEMLOCK*" $out
    assert_equal [list rdma-port $port] [split [exec src/redis-cli -p $tport config get rdma-port] "\n"]
    assert_equal 0 [count_message_lines $log "Failed applying restored"]
    # Up, then the limit lowered under the running listener: a new port
    # fails, the old listener goes on.
    exec prlimit --pid $pid --memlock=unlimited:unlimited
    wait_for_condition 50 100 {
        [string match "*rdma_listener:on*" [exec src/redis-cli -p $tport info rdma]]
    } else {
        catch {exec kill $pid}
        fail "the listener did not come back: [exec src/redis-cli -p $tport info rdma]"
    }
    exec prlimit --pid $pid --memlock=65536:65536
    catch {exec src/redis-cli -p $tport config set rdma-port $other} out
    assert_match "*Unable to listen on the RDMA port: *RLIMIT_MEMLOCK*" $out
    assert_match "*rdma_listener:on*" [exec src/redis-cli -p $tport info rdma]
    assert_equal 0 [count_message_lines $log "Failed applying restored"]
    exec prlimit --pid $pid --memlock=unlimited:unlimited
    assert_equal PONG [rdma_cli $port ping]
    assert_equal 1 [count_message_lines $log "RDMA: listening on"]
    exec kill $pid
} {} {rdma}

test {RDMA: CONFIG SET rdma-port retries a listener that is down} {
    set port [rdma_port]
    set tport [find_available_port [expr {$::baseport + 520}] 100]
    set dir [file normalize [tmpdir retry2]]
    set log $dir/server.log
    set pid [rdma_start_low_memlock $tport $port $dir]
    # Raised and set at once: CONFIG SET answers only once it listens.
    exec prlimit --pid $pid --memlock=unlimited:unlimited
    assert_equal OK [exec src/redis-cli -p $tport config set rdma-port $port]
    assert_match "*rdma_listener:on*" [exec src/redis-cli -p $tport info rdma]
    assert_equal PONG [rdma_cli $port ping]
    exec kill $pid
} {} {rdma}

# Nic-KV shares the library's cap; with a password, its RDMA clients count
# against it until they authenticate (without one, each is granted at once).
start_server [list tags {"rdma nickv"}] {
    test {Nic-KV: RDMA connections that never authenticate are capped (rdma-max-unauthenticated)} {
        set nkrport [rdma_port]
        set nk [nickv_start [srv 0 port] --rdma-port $nkrport --rdma-bind $::rdma_host2 \
                    --requirepass s3cret --rdma-max-unauthenticated 10 --protected-mode no]
        set out [tmpfile nkconns]
        set pid [exec src/skv-rdma-tool conns $::rdma_host2 $nkrport 30 20 > $out 2>@1 &]
        wait_for_condition 600 100 {
            [string match "*accepted*" [exec cat $out]]
        } else {
            catch {exec kill $pid}
            fail "skv-rdma-tool conns did not finish connecting: [exec cat $out]"
        }
        set res [conns_result [exec cat $out]]
        set held [nickv_info $nk rdma_connections_unauthenticated]
        catch {exec kill $pid}
        assert_equal 10 [dict get $res accepted]
        assert_equal 20 [dict get $res refused]
        assert_equal 10 $held
        assert_equal 20 [nickv_info $nk rdma_errors_unauth_limit]
        assert_match "*connection refused by *not authenticated yet (rdma-max-unauthenticated 10)*" \
            [dict get $res reasons]
        # The accepted ones are served: a NOAUTH to their PING.
        assert_equal 10 [dict get $res replied]
        assert_match "*reply: -NOAUTH*" [dict get $res reasons]
        wait_for_condition 100 100 {
            [nickv_info $nk rdma_connections] == 0
        } else {
            fail "the connections did not go away"
        }
        # Room again: an authenticated client is served.
        set out [tmpfile nkconns]
        exec src/skv-rdma-tool conns $::rdma_host2 $nkrport 1 0 s3cret > $out 2>@1
        set res [conns_result [exec cat $out]]
        assert_equal 1 [dict get $res accepted]
        assert_equal 1 [dict get $res replied]
        nickv_stop $nk
    }
}
