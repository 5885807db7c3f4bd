# A busy master is not a dead one: its watch thread (src/nickv_watch.c)
# answers Nic-KV while the main thread runs a long command, and Nic-KV
# (nic-kv/nickv_busy.c) fails it over only past busy-limit; a stopped
# master (SIGSTOP: every thread) is failed over within waiting-time, as
# before. The watch port trusts only the grantor's token.

source tests/skv/helpers.tcl

set fo_conf [nickv_failover_overrides enable-debug-command yes]

# The fields of Nic-KV's INFO failover, polled while the master sleeps.
proc busy_wait_verdict {nk verdict} {
    wait_for_condition 100 20 {
        [nickv_info $nk master_verdict] eq $verdict
    } else {
        fail "Nic-KV's verdict is not $verdict: [nickv_cmd $nk info failover]"
    }
}

# No lease runs on master m any more (another instance may then grant).
proc busy_wait_lease_out {m} {
    wait_for_condition 100 100 {
        [nickv_status $m nickv_lease] eq {expired}
    } else {
        fail "the lease does not run out"
    }
}

nickv_topology [list overrides $fo_conf replicas 2 nickv [list {*}[nickv_user_args] --failover yes \
        --min-slaves 1 --waiting-time 300 --busy-limit 2500]] {
    set m $master
    set ports $replica_ports
    wait_for_condition 100 100 {
        [nickv_info $nk valid_replicas] == 2 && [nickv_info $nk master_lease] eq {on} &&
        [nickv_info $nk watch] eq {connected}
    } else {
        fail "Nic-KV does not see the topology and the watch: [nickv_cmd $nk info failover]"
    }

    test {Nic-KV busy: the master's watch thread listens where its lease answers say} {
        set wport [nickv_status $m nickv_watch_port]
        assert {$wport > 0}
        assert_equal $wport [nickv_info $nk watch_port]
        wait_for_condition 50 100 {
            [nickv_status $m nickv_lease_watch_grants] > 0
        } else {
            fail "the watch prolongs no lease: [$m info nickv]"
        }
        assert_equal answers [nickv_info $nk master_verdict]
    }

    test {Nic-KV busy: a master busy for 1.5 s (DEBUG SLEEP, waiting-time 300) is not failed over} {
        set before [nickv_info $nk busy_verdicts]
        set d [redis_deferring_client -2]
        $d debug sleep 1.5
        busy_wait_verdict $nk busy
        assert_equal debug [nickv_info $nk watch_busy_in]
        assert {[nickv_info $nk watch_busy_ms] > 0}
        assert_equal {} [nickv_info $nk failover_blocked]
        assert_equal OK [$d read]
        $d close
        # Its lease ran on meanwhile (the watch's grants): it serves at
        # once, and no failover happened.
        assert_equal OK [$m set after-sleep 1]
        assert_equal 0 [nickv_info $nk failovers]
        assert_equal "127.0.0.1:$master_port" [nickv_info $nk master]
        assert_equal [expr {$before + 1}] [nickv_info $nk busy_verdicts]
        busy_wait_verdict $nk answers
        assert_match "*does not answer for * but it is busy (* in debug), not dead*" [exec cat [dict get $nk log]]
    }

    test {Nic-KV busy: a KEYS over three million keys is busy, not dead} {
        # The populate is a busy spell of its own, seconds long on a
        # loaded machine: not this test's subject.
        assert_equal OK [nickv_cmd $nk config set busy-limit 60000]
        $m debug populate 3000000 busykey 1
        # (The populate itself may have been a busy spell: over first.
        # Past 2 s the replicas left Nic-KV for the master, and count
        # again once it sent them back.)
        busy_wait_verdict $nk answers
        wait_for_condition 300 100 {
            [nickv_status $m nickv_valid_replicas] == 2
        } else {
            fail "the replicas do not count again after the populate: [$m info nickv]"
        }
        $m config resetstat
        set d [redis_deferring_client -2]
        set t0 [clock milliseconds]
        # A pattern that costs time on every key (about 1 s here).
        $d keys *y*y*y*y*y*z
        # What Nic-KV sees while it runs.
        set seen {}
        while {[clock milliseconds] - $t0 < 3000} {
            if {[nickv_info $nk master_verdict] eq {busy}} {
                set seen [nickv_info $nk watch_busy_in]
                break
            }
            after 20
        }
        assert_equal {} [$d read]
        $d close
        assert_equal 0 [nickv_info $nk failovers]
        if {[catch {$m set after-keys 1} e]} {
            fail "$e\n[$m info nickv]\n[nickv_cmd $nk info failover]"
        }
        # How long it took decides what Nic-KV had to see: past
        # waiting-time (300 ms) and a probe round, the busy verdict.
        regexp {cmdstat_keys:calls=1,usec=([0-9]+)} [$m info commandstats] -> usec
        if {$usec > 600000} { assert_equal keys $seen }
        puts "    (KEYS took [expr {$usec / 1000}] ms; Nic-KV saw: [expr {$seen eq {} ? {answers} : {busy in keys}}])"
        $m flushall
        busy_wait_verdict $nk answers
        assert_equal OK [nickv_cmd $nk config set busy-limit 2500]
    }

    test {Nic-KV busy: busy longer than busy-limit is failed over; the old master refuses when it wakes} {
        set d [redis_deferring_client -2]
        $d debug sleep 4
        wait_for_condition 100 100 {
            [nickv_info $nk failovers] >= 1
        } else {
            fail "no failover of a master busy past busy-limit: [nickv_cmd $nk info failover]"
        }
        assert_match "*busy for * ms in debug: more than busy-limit (2500 ms)*" [exec cat [dict get $nk log]]
        lassign [split [nickv_info $nk master] :] host new
        assert {[lsearch -exact $ports $new] >= 0}
        assert_equal OK [$d read]
        # It woke without a lease (the watch never starts one, and no
        # grant came once it was given up): it takes no write, the one
        # its client sends as it wakes included.
        $d set late 1
        catch {$d read} e
        $d close
        assert {[regexp {^(READONLY|NOREPLICAS) } $e]}
        # (A new client: the demotion kills the old master's clients.)
        wait_for_condition 100 100 {
            [catch {status [set m2 [redis 127.0.0.1 $master_port]] role} r] == 0 && $r eq {slave}
        } else {
            fail "the old master was not made a replica"
        }
        nickv_assert_no_bug $nk
    }
}

# A stopped master (every thread stopped) is dead to Nic-KV within
# waiting-time, watch or not.
nickv_topology [list overrides $fo_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --waiting-time 300 --busy-limit 5000]] {
    wait_for_condition 100 100 {
        [nickv_info $nk valid_replicas] == 1 && [nickv_info $nk master_lease] eq {on} &&
        [nickv_info $nk watch] eq {connected}
    } else {
        fail "Nic-KV does not see the topology and the watch: [nickv_cmd $nk info failover]"
    }

    test {Nic-KV busy: a master stopped (SIGSTOP) is failed over within waiting-time, not busy-limit} {
        set t0 [clock milliseconds]
        exec kill -STOP $master_pid
        wait_for_condition 100 50 {
            [nickv_info $nk failovers] >= 1
        } else {
            exec kill -CONT $master_pid
            fail "no failover of a stopped master: [nickv_cmd $nk info failover]"
        }
        set took [expr {[clock milliseconds] - $t0}]
        exec kill -CONT $master_pid
        # waiting-time (300) + the lease (500) + a promotion: far below
        # busy-limit (5000).
        assert {$took < 4000}
        assert_equal 0 [nickv_info $nk busy_verdicts]
        assert_match "*no answer for *" [nickv_info $nk last_failover][exec cat [dict get $nk log]]
    }
}

# busy-limit longer than the 2 s after which replicas behind a silent
# Nic-KV go back to the master (and wait there, unlisted): they are still
# the candidates when busy-limit runs out (min-slaves 0: no other list).
nickv_topology [list overrides $fo_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --waiting-time 300 --busy-limit 3000]] {
    set r [lindex $replicas 0]
    set rport [lindex $replica_ports 0]
    wait_for_condition 100 100 {
        [nickv_info $nk valid_replicas] == 1 && [nickv_info $nk master_lease] eq {on} &&
        [nickv_info $nk watch] eq {connected} && [nickv_info $nk connected_slaves] == 1
    } else {
        fail "Nic-KV does not see the topology and the watch: [nickv_cmd $nk info failover]"
    }

    test {Nic-KV busy: busy past a busy-limit longer than the replicas wait for Nic-KV: still failed over} {
        set d [redis_deferring_client -1]
        $d debug sleep 6
        wait_for_condition 120 100 {
            [nickv_info $nk failovers] >= 1
        } else {
            fail "no failover: [nickv_cmd $nk info failover]"
        }
        assert_equal "127.0.0.1:$rport" [nickv_info $nk master]
        assert_match "*busy for * ms in debug: more than busy-limit (3000 ms)*" [exec cat [dict get $nk log]]
        catch {$d read}
        $d close
    }
}

# The watch port, from a client that is not Nic-KV.
start_server [list tags {"nickv repl external:skip"} overrides $fo_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    set c [nickv_user_client $mport]
    set inst [string repeat c 40]

    # One request line to the watch, its answer line ("" when it closed).
    proc watch_ask {s line} {
        puts -nonewline $s "$line\r\n"
        flush $s
        if {[catch {gets $s} r] || [eof $s]} { return "" }
        return [string trimright $r "\r"]
    }
    proc watch_open {port} {
        set s [socket 127.0.0.1 $port]
        fconfigure $s -translation binary -buffering none -blocking 1
        return $s
    }

    test {Nic-KV busy: the grantor's lease answer names the watch port and a token; others get none} {
        set a [$c replconf nickv "lease 0 0 $inst [string repeat f 40]"]
        assert_equal 6 [llength $a]
        lassign $a word now runid offset wport token
        assert_equal LEASE $word
        assert_equal $wport [nickv_status $m nickv_watch_port]
        assert_match {[0-9a-f]*} $token
        assert_equal 40 [string length $token]
        set ::wport $wport
        set ::token $token
    }

    test {Nic-KV busy: the watch wants the token, and closes on anything else} {
        set s [watch_open $::wport]
        assert_match {-NOAUTH*} [watch_ask $s "WATCH 0 0 $inst"]
        assert_equal "" [watch_ask $s PING]
        close $s
        set s [watch_open $::wport]
        assert_match {-ERR invalid token} [watch_ask $s "AUTH [string repeat 0 40]"]
        close $s
        set s [watch_open $::wport]
        assert_match {-ERR request too long} [watch_ask $s [string repeat x 1000]]
        close $s
        set s [watch_open $::wport]
        assert_equal {+OK} [watch_ask $s "AUTH $::token"]
        assert_match {-ERR malformed watch*} [watch_ask $s "WATCH 1 2"]
        close $s
        set s [watch_open $::wport]
        assert_equal {+OK} [watch_ask $s "AUTH $::token"]
        assert_match {-ERR not the Nic-KV that grants*} [watch_ask $s "WATCH 0 0 [string repeat d 40]"]
        close $s
        # More connections than it keeps: the extra ones are closed.
        set many {}
        for {set i 0} {$i < 12} {incr i} { lappend many [watch_open $::wport] }
        set answered 0
        foreach s $many {
            if {[watch_ask $s "AUTH $::token"] eq {+OK}} { incr answered }
            close $s
        }
        assert {$answered >= 1 && $answered <= 8}
        # The server and the watch are still there.
        assert_match "*redis_version*" [$m info server]
        set s [watch_open $::wport]
        assert_equal {+OK} [watch_ask $s "AUTH $::token"]
        assert_match {+WATCH * 0 - 0} [watch_ask $s "WATCH 0 0 $inst"]
        close $s
    }

    test {Nic-KV busy: the watch prolongs a lease that runs, never starts one} {
        set s [watch_open $::wport]
        assert_equal {+OK} [watch_ask $s "AUTH $::token"]
        set now [lindex [watch_ask $s "WATCH 0 0 $inst"] 1]
        # No lease: a grant on the watch is not one.
        assert_match {+WATCH *} [watch_ask $s "WATCH $now 10000 $inst"]
        assert_equal expired [nickv_status $m nickv_lease]
        catch {$m set k v} e
        assert_match {READONLY*no lease*} $e
        # A time it never sent (in its future) is refused.
        assert_match {-ERR malformed watch*} [watch_ask $s "WATCH 99999999999999 100 $inst"]
        # A lease from the main thread (3 s); a second later the watch
        # prolongs it by as much again (no more: see below).
        set s2 [lindex [$c replconf nickv "lease 0 0 $inst [string repeat f 40]"] 1]
        $c replconf nickv "lease $s2 3000 $inst [string repeat f 40]"
        assert_equal held [nickv_status $m nickv_lease]
        assert_stays 1 {[nickv_status $m nickv_lease] eq {held}} "the 3 s lease ran out within a second"
        set s [watch_open $::wport]
        assert_equal {+OK} [watch_ask $s "AUTH $::token"]
        set now [lindex [watch_ask $s "WATCH 0 0 $inst"] 1]
        set r [watch_ask $s "WATCH $now 3000 $inst"]
        assert {[lindex $r 4] > 2500}
        assert {[nickv_status $m nickv_lease_left_ms] > 2500}
        assert_equal OK [$m set k v]
        close $s
    }

    test {Nic-KV busy: another grantor gets another token; the old one's watch is cut off} {
        # The first grantor's connection goes; its lease runs out; another
        # Nic-KV instance grants: a new token.
        $c close
        set c [nickv_user_client $mport]
        busy_wait_lease_out $m
        set other [string repeat e 40]
        set a [$c replconf nickv "lease 0 0 $other [string repeat f 40]"]
        assert_equal 6 [llength $a]
        set token2 [lindex $a 5]
        assert {$token2 ne $::token}
        set s [watch_open $::wport]
        assert_match {-ERR invalid token} [watch_ask $s "AUTH $::token"]
        close $s
        set s [watch_open $::wport]
        assert_equal {+OK} [watch_ask $s "AUTH $token2"]
        assert_match {-ERR not the Nic-KV that grants*} [watch_ask $s "WATCH 0 0 $inst"]
        close $s
        $c close
    }

    test {Nic-KV busy: a watch that gave an earlier token cannot speak for the grantor after it} {
        set inst3 [string repeat f 40]
        set inst4 [string repeat 1 40]
        # inst3 grants; an intruder keeps a watch open with inst3's token.
        busy_wait_lease_out $m
        set c3 [nickv_user_client $mport]
        set token3 [lindex [$c3 replconf nickv "lease 0 0 $inst3 [string repeat f 40]"] 5]
        set old [watch_open $::wport]
        assert_equal {+OK} [watch_ask $old "AUTH $token3"]
        $c3 close
        busy_wait_lease_out $m
        # inst4 becomes the grantor and takes a lease.
        set c4 [nickv_user_client $mport]
        set now [lindex [$c4 replconf nickv "lease 0 0 $inst4 [string repeat f 40]"] 1]
        $c4 replconf nickv "lease $now 5000 $inst4 [string repeat f 40]"
        assert_equal held [nickv_status $m nickv_lease]
        # The intruder's watch, naming the new grantor (its instance id is
        # no secret), prolongs nothing and is cut off.
        assert_match {-ERR not the Nic-KV that grants*} [watch_ask $old "WATCH 0 0 $inst4"]
        close $old
        # The new grantor's own watch: a t it was never sent is refused.
        set now [lindex [$c4 replconf nickv "lease 0 0 $inst4 [string repeat f 40]"] 1]
        set token4 [lindex [$c4 replconf nickv "lease $now 5000 $inst4 [string repeat f 40]"] 5]
        set w [watch_open $::wport]
        assert_equal {+OK} [watch_ask $w "AUTH $token4"]
        set wnow [lindex [watch_ask $w "WATCH 0 0 $inst4"] 1]
        assert_match {-ERR t is not a time this connection was sent} [watch_ask $w "WATCH [expr {$wnow - 1}] 5000 $inst4"]
        close $w
        set w [watch_open $::wport]
        assert_equal {+OK} [watch_ask $w "AUTH $token4"]
        set wnow [lindex [watch_ask $w "WATCH 0 0 $inst4"] 1]
        assert_match {+WATCH *} [watch_ask $w "WATCH $wnow 5000 $inst4"]
        assert {[nickv_status $m nickv_lease_left_ms] > 3000}
        close $w
        $c4 close
    }

    test {Nic-KV busy: a token is good for one bind: the same Nic-KV, bound again, gets a new one} {
        # A token seen once (by a connection that took the grantor's place
        # with Nic-KV's instance id) used to stay good for the life of that
        # Nic-KV process: issue 30.
        set inst5 [string repeat 2 40]
        set key5 [string repeat 3 40]
        busy_wait_lease_out $m
        set c5 [nickv_user_client $mport]
        set token5 [lindex [$c5 replconf nickv "lease 0 0 $inst5 $key5"] 5]
        assert_equal 40 [string length $token5]
        $c5 close
        # The same Nic-KV's next connection takes the place once the
        # master has seen the first one go.
        for {set i 0} {$i < 50} {incr i} {
            set c6 [nickv_user_client $mport]
            if {![catch {$c6 replconf nickv "lease 0 0 $inst5 $key5"} a]} break
            $c6 close
            after 100
        }
        assert_equal LEASE [lindex $a 0]
        set token6 [lindex $a 5]
        assert_equal 40 [string length $token6]
        assert {$token6 ne $token5}
        set s [watch_open $::wport]
        assert_match {-ERR invalid token} [watch_ask $s "AUTH $token5"]
        close $s
        $c6 close
    }

    test {Nic-KV busy: a WATCH prolongs no further than the grantor's last grant} {
        busy_wait_lease_out $m
        set inst7 [string repeat 4 40]
        set key7 [string repeat 5 40]
        set c7 [nickv_user_client $mport]
        set now [lindex [$c7 replconf nickv "lease 0 0 $inst7 $key7"] 1]
        set token7 [lindex [$c7 replconf nickv "lease $now 1000 $inst7 $key7"] 5]
        set w [watch_open $::wport]
        assert_equal {+OK} [watch_ask $w "AUTH $token7"]
        set wnow [lindex [watch_ask $w "WATCH 0 0 $inst7"] 1]
        # A thief with the token (issue 30) asked 60 s and got them.
        assert_match {+WATCH *} [watch_ask $w "WATCH $wnow 60000 $inst7"]
        assert {[nickv_status $m nickv_lease_left_ms] <= 1000}
        # After a query (a failover began), nothing.
        $c7 replconf nickv "lease 0 0 $inst7 $key7"
        set wnow [lindex [watch_ask $w "WATCH 0 0 $inst7"] 1]
        after 20
        set before [nickv_status $m nickv_lease_left_ms]
        assert_match {+WATCH *} [watch_ask $w "WATCH $wnow 1000 $inst7"]
        assert {[nickv_status $m nickv_lease_left_ms] <= $before}
        close $w
        $c7 close
    }
}

# nickv-watch-port -1: no thread; the lease answers name none, and Nic-KV
# judges by the main thread alone.
start_server [list tags {"nickv repl external:skip"} overrides [concat $fo_conf {nickv-watch-port -1}]] {
    set m [srv 0 client]
    set mport [srv 0 port]
    test {Nic-KV busy: nickv-watch-port -1: no watch thread, the lease answer as before} {
        set c [nickv_user_client $mport]
        assert_equal 4 [llength [$c replconf nickv "lease 0 0 [string repeat c 40] [string repeat f 40]"]]
        assert_equal 0 [nickv_status $m nickv_watch_port]
        $c close
    }
}

# The watch's push (src/nickv_lease.c, nickvLeaseWant), with this test in
# Nic-KV's place: a WAIT that a direct replica's ACK would end, were the
# offset confirmed, has the thread push "+WANT <now> <offset>" to the
# grantor's watch; a grant echoing <now> confirms it and ends the WAIT.
start_server [list tags {"nickv repl external:skip"} overrides $fo_conf] {
start_server [list overrides $fo_conf] {
    set m [srv -1 client]
    set mport [srv -1 port]
    set r [srv 0 client]
    set c [nickv_user_client $mport]
    set inst [string repeat a 40]
    set key [string repeat b 40]
    lassign [$c replconf nickv "lease 0 0 $inst $key"] - first - - wport token
    $c replconf nickv "lease $first 60000 $inst $key"
    $r replicaof 127.0.0.1 $mport
    wait_for_condition 100 100 {
        [status $r master_link_status] eq {up}
    } else {
        fail "the replica did not sync: [$r info replication]"
    }

    # The next line from the watch within ms ("" if none).
    proc watch_line {s ms} {
        fconfigure $s -blocking 0
        set deadline [expr {[clock milliseconds] + $ms}]
        while {[clock milliseconds] < $deadline} {
            if {[gets $s line] >= 0} { return [string trimright $line "\r"] }
            if {[eof $s]} break
            after 10
        }
        return ""
    }

    test {Nic-KV busy: a WAIT on a direct replica has the watch push the offset to the grantor; the grant echoing it ends the WAIT} {
        set s [watch_open $wport]
        assert_equal {+OK} [watch_ask $s "AUTH $token"]
        set stranger [watch_open $wport]
        set w [redis_deferring_client -1]
        $w set wk 1
        assert_equal OK [$w read]
        set off [status $m master_repl_offset]
        $w wait 1 10000
        set push [watch_line $s 3000]
        assert_match {+WANT * *} $push
        lassign $push - clock poff
        assert {$clock > $first && $poff >= $off}
        # Not to a connection that gave no token.
        assert_equal "" [watch_line $stranger 300]
        # Unconfirmed, the ACK does not count: a grant echoing the first
        # answer (before the write) does not end the WAIT.
        $c replconf nickv "lease $first 60000 $inst $key"
        after 200
        assert_equal 1 [s -1 blocked_clients]
        assert_equal 0 [nickv_status $m nickv_wait_pushes_confirmed]
        # Unanswered, the push is sent again (every 50 ms): the latest one
        # is echoed.
        while {[set more [watch_line $s 100]] ne ""} { set push $more }
        assert {[nickv_status $m nickv_wait_pushes] >= 2}
        lassign $push - clock poff
        # The grant may echo the offset read with the clock too: one never
        # sent with that clock confirms nothing.
        $c replconf nickv "lease $clock 60000 $inst $key [expr {$poff + 1}]"
        after 100
        assert_equal 1 [s -1 blocked_clients]
        $c replconf nickv "lease $clock 60000 $inst $key $poff"
        assert_equal 1 [$w read]
        assert_equal 1 [nickv_status $m nickv_wait_pushes_confirmed]
        $w close
        close $s
        close $stranger
    }
}
}
