# Nic-KV fed what it did not expect: empty names in its configuration,
# SENTINEL with empty, long and binary arguments, commands with many
# arguments, and masters that name each other as their master. It refuses
# what it cannot use, with an error that says why, closes at most the one
# connection that broke the protocol, and goes on serving its replicas.

source tests/skv/helpers.tcl

# A command on a connection of its own: {0 reply} or {1 error}.
proc hostile_call {nk args} {
    set c [redis 127.0.0.1 [dict get $nk port]]
    set rc [catch {$c {*}$args} r]
    catch {$c close}
    list $rc $r
}

# Nic-KV, started with these options, must exit at once with a message
# matching $pattern.
proc hostile_assert_refused {pattern args} {
    set port [find_available_port [expr {$::baseport + 250}] 200]
    set rc [catch {exec timeout 5 [nickv_binary] --port $port {*}$args 2>@1} out]
    assert_equal 1 $rc
    # Its own exit status 1, not timeout's 124: it did not start.
    assert_equal 1 [lindex $::errorCode 2]
    assert_match $pattern $out
}

start_server {tags {"nickv external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mport [srv 0 port]

    test {Nic-KV: an empty master-host or master-name is refused at start, from the command line and the file} {
        set state [file normalize [tmpdir nickv-state]]/nickv.state
        hostile_assert_refused {*master-host ""*the value must not be empty*} \
            --master-port $mport --state-file $state --master-host ""
        hostile_assert_refused {*master-name ""*the value must not be empty*} \
            --master-port $mport --state-file $state --master-name ""
        set conf [tmpfile nickv-empty.conf]
        set f [open $conf w]
        puts $f "master-port $mport\nstate-file $state\nmaster-name \"\""
        close $f
        set port [find_available_port [expr {$::baseport + 250}] 200]
        set rc [catch {exec timeout 5 [nickv_binary] $conf --port $port 2>@1} out]
        assert_equal 1 $rc
        assert_equal 1 [lindex $::errorCode 2]
        assert_match "*$conf, line 3*master-name*the value must not be empty*" $out
    }

    # A replica behind Nic-KV: what it must go on receiving.
    start_server {overrides {save ""}} {
        set replica [srv 0 client]
        set nk [nickv_start $mport]
        $replica replicaof 127.0.0.1 $mport
        wait_for_sync $replica
        nickv_wait_replicas $nk 1

        # The master's writes still reach the replica through Nic-KV.
        proc hostile_assert_streams {master replica nk key} {
            assert_equal PONG [nickv_cmd $nk ping]
            $master set $key [clock milliseconds]
            wait_for_condition 100 50 {
                [$replica get $key] eq [$master get $key]
            } else {
                fail "the replica no longer gets the master's writes ($key)"
            }
            assert_equal 1 [nickv_info $nk connected_replicas]
        }

        test {Nic-KV: a master-name that could forge INFO sentinel lines or Pub/Sub words is refused} {
            foreach bad [list "x\r\njunk:1" "x,status=ok" "a=b" "my master" [string repeat n 129]] {
                assert_equal {1 {ERR CONFIG SET failed (possibly related to argument 'master-name') - a name of letters, digits, '.', '_' and '-' only, 128 at most}} \
                    [hostile_call $nk config set master-name $bad]
            }
            assert_match "*master0:name=mymaster,status=*" [nickv_cmd $nk info sentinel]
        }

        test {Nic-KV: CONFIG SET master-name "" is refused; SENTINEL MASTERS still answers} {
            assert_equal {1 {ERR CONFIG SET failed (possibly related to argument 'master-name') - the value must not be empty}} \
                [hostile_call $nk config set master-name ""]
            assert_equal {master-name mymaster} [nickv_cmd $nk config get master-name]
            # All or nothing: the valid pair before it is not applied either.
            assert_equal {1 {ERR CONFIG SET failed (possibly related to argument 'master-name') - the value must not be empty}} \
                [hostile_call $nk config set repl-timeout 33 master-name ""]
            assert_equal {repl-timeout 60} [nickv_cmd $nk config get repl-timeout]
            set state [lindex [nickv_cmd $nk sentinel masters] 0]
            assert_equal mymaster [dict get $state name]
            assert_equal [list 127.0.0.1 $mport] [nickv_cmd $nk sentinel get-master-addr-by-name mymaster]
            # Another name is taken, and used.
            assert_equal OK [nickv_cmd $nk config set master-name other]
            assert_equal other [dict get [lindex [nickv_cmd $nk sentinel masters] 0] name]
            assert_equal OK [nickv_cmd $nk config set master-name mymaster]
            hostile_assert_streams $master $replica $nk after-config
        }

        test {Nic-KV: every SENTINEL subcommand, with empty, long, binary and too many arguments} {
            set long [string repeat x 60000]
            set subs {masters master get-master-addr-by-name replicas slaves sentinels
                      reset set monitor remove failover ckquorum info-cache is-master-down-by-addr
                      MaStErS {} "\x00" "\xff" "masters\x00" "a\r\nb" 1}
            set argsets [list {} {""} [list $long] [list "\x00"] [list "\xff\xfe"] [list "a\r\nb"] \
                             [list "mymaster\x00junk"] [list "mymaster\r\n"] {mymaster} {mymaster extra} \
                             {"" "" ""} [lrepeat 200 mymaster] [list mymaster $long "\x00"]]
            set calls 0
            foreach sub $subs {
                foreach a $argsets {
                    lassign [hostile_call $nk sentinel $sub {*}$a] rc r
                    incr calls
                    if {$rc} {
                        # An error reply, never a closed connection
                        # (CKQUORUM's is Sentinel's NOQUORUM).
                        if {![string match "ERR *" $r] && !($sub eq "ckquorum" && [string match "NOQUORUM *" $r])} {
                            fail "SENTINEL [string range [list $sub {*}$a] 0 80]: $r"
                        }
                    }
                }
            }
            assert_equal [expr {[llength $subs] * [llength $argsets]}] $calls
            # A name is every byte of it.
            assert_equal {1 {ERR No such master with that name}} [hostile_call $nk sentinel master "mymaster\x00junk"]
            assert_equal {1 {ERR No such master with that name}} [hostile_call $nk sentinel replicas ""]
            assert_equal {0 {}} [hostile_call $nk sentinel get-master-addr-by-name "mymaster\x00"]
            assert_equal {0 {}} [hostile_call $nk sentinel get-master-addr-by-name ""]
            lassign [hostile_call $nk sentinel "\x00\xff"] rc r
            assert_equal 1 $rc
            assert_match {ERR unknown SENTINEL subcommand or wrong number of arguments for "\\x00\\xff" (*} $r
            lassign [hostile_call $nk sentinel masters extra] rc r
            assert_equal 1 $rc
            assert_match {ERR unknown SENTINEL subcommand or wrong number of arguments for "masters" (*} $r
            assert_equal {1 {ERR wrong number of arguments for 'sentinel' command}} [hostile_call $nk sentinel]
            # An argument past the 64 KB a Nic-KV argument may have: a
            # protocol error on that connection alone.
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd "*3\r\n\$8\r\nSENTINEL\r\n\$6\r\nmaster\r\n\$100000\r\n"
            assert_equal {-ERR Protocol error: invalid bulk length} [nickv_raw_line $fd]
            assert_equal 1 [nickv_raw_closed $fd]
            close $fd
            hostile_assert_streams $master $replica $nk after-fuzz
            nickv_assert_no_bug $nk
        }

        test {Nic-KV: commands with more than 64 arguments are served, as redis-server serves them} {
            set c [redis 127.0.0.1 [dict get $nk port]]
            # CONFIG GET with 100 patterns.
            catch {$c config get port {*}[lrepeat 98 no-such-option] repl-timeout} reply
            assert_equal [list port [dict get $nk port] repl-timeout 60] $reply
            # CONFIG SET with 32 pairs: an error about the pairs, not about
            # the protocol; the connection goes on.
            set pairs {}
            for {set i 0} {$i < 32} {incr i} { lappend pairs repl-timeout [expr {60 + $i}] }
            catch {$c config set {*}$pairs} e
            assert_equal {ERR CONFIG SET failed (possibly related to argument 'repl-timeout') - duplicate parameter} $e
            catch {$c config set {*}[lrange $pairs 0 61] no-such-option 1} e
            assert_equal {ERR Unknown option or number of arguments for CONFIG SET - 'no-such-option'} $e
            assert_equal PONG [$c ping]
            assert_equal {repl-timeout 60} [$c config get repl-timeout]
            catch {$c close}

            # PSUBSCRIBE with 100 patterns: 100 confirmations; all of them
            # hear of a master change.
            set sub [redis 127.0.0.1 [dict get $nk port] 1]
            set pats {}
            for {set i 0} {$i < 100} {incr i} { lappend pats "+switch-master-$i*" }
            $sub psubscribe {*}$pats
            for {set i 1} {$i <= 100} {incr i} {
                assert_equal [list psubscribe [lindex $pats [expr {$i - 1}]] $i] [$sub read]
            }
            $sub punsubscribe {*}$pats
            for {set i 99} {$i >= 0} {incr i -1} {
                assert_equal [list punsubscribe [lindex $pats [expr {99 - $i}]] $i] [$sub read]
            }
            catch {$sub close}

            # The most arguments redis-server takes, and one more: that
            # one is refused, and only its connection closed.
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd "*1048577\r\n\$4\r\nPING\r\n"
            assert_equal {-ERR Protocol error: invalid multibulk length} [nickv_raw_line $fd]
            assert_equal 1 [nickv_raw_closed $fd]
            close $fd
            # A count of 1048576 is taken, and costs nothing before the
            # arguments come: no vector of a million is allocated ahead.
            set before [nickv_info $nk used_memory]
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd "*1048576\r\n\$4\r\nPING\r\n"
            assert_equal TIMEOUT [nickv_raw_line $fd 500]
            set grew [expr {[nickv_info $nk used_memory] - $before}]
            assert {$grew < 1024 * 1024}
            close $fd
            # An empty command ("*0"), as redis-server: skipped.
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd "*0\r\n*1\r\n\$4\r\nPING\r\n"
            assert_equal {+PONG} [nickv_raw_line $fd]
            close $fd
            hostile_assert_streams $master $replica $nk after-many-args
            nickv_assert_no_bug $nk
        }

        nickv_stop $nk
    }
}

# Two masters that each say they replicate the other (REPLICAOF given both
# ways). Before, Nic-KV's probe followed the loop round for ever, a hop
# every probe interval. It holds now, says so once, and follows the master
# an operator's fix makes, wherever in the loop.
start_server {tags {"nickv external:skip"} overrides {save ""}} {
    set a [srv 0 client]
    set aport [srv 0 port]
    start_server {overrides {save ""}} {
        set b [srv 0 client]
        set bport [srv 0 port]

        test {Nic-KV: a replication loop is detected, logged once and held, and the fix is followed} {
            $a replicaof 127.0.0.1 $bport
            $b replicaof 127.0.0.1 $aport
            set nk [nickv_start $aport]
            set loop_re "replication loop: 127.0.0.1:$aport -> 127.0.0.1:$bport -> 127.0.0.1:$aport"
            wait_for_condition 100 50 {
                [nickv_info $nk replication_loop] eq "127.0.0.1:$aport -> 127.0.0.1:$bport -> 127.0.0.1:$aport"
            } else {
                fail "no loop in INFO: [nickv_info $nk replication_loop], [exec tail -n 5 [dict get $nk log]]"
            }
            set moves [nickv_info $nk probe_master_moves]
            set follows [exec grep -c "is now a replica of .*: following it" [dict get $nk log]]
            # It holds: at most one look round the loop in those 2 s, and
            # not a log line for it.
            assert_stays 2 {[nickv_info $nk probe_master_moves] - $moves <= 1 &&
                            [exec grep -c "is now a replica of .*: following it" [dict get $nk log]] == $follows} \
                "Nic-KV goes round the replication loop"
            set moved [expr {[nickv_info $nk probe_master_moves] - $moves}]
            assert {$moved <= 1}
            assert_equal $follows [exec grep -c "is now a replica of .*: following it" [dict get $nk log]]
            assert_equal 1 [exec grep -c $loop_re [dict get $nk log]]
            assert_equal down [nickv_info $nk master_link_status]
            assert_equal PONG [nickv_cmd $nk ping]

            # The operator's fix, on the node Nic-KV does not hold on: it
            # finds it looking round the loop, and follows it there.
            lassign [nickv_master_addr $nk] - held
            if {$held == $aport} {
                set fixed $b
                set fport $bport
            } else {
                assert_equal $bport $held
                set fixed $a
                set fport $aport
            }
            $fixed replicaof no one
            wait_for_condition 200 50 {
                [nickv_info $nk master_port] == $fport &&
                [nickv_info $nk master_link_status] eq {up} &&
                [nickv_info $nk replication_loop] eq {}
            } else {
                fail "Nic-KV did not follow the fixed master $fport: [nickv_info $nk master_port] [nickv_info $nk master_link_status], [exec tail -n 5 [dict get $nk log]]"
            }
            assert_equal 1 [exec grep -c $loop_re [dict get $nk log]]
            assert_equal 1 [exec grep -c "replication loop .* is over: 127.0.0.1:$fport answers as a master" [dict get $nk log]]
            assert_equal [list 127.0.0.1 $fport] [nickv_master_addr $nk]
            nickv_stop $nk
        }
    }
}
