# Nic-KV and its peers: what a replica or a master sends Nic-KV is checked
# as strictly as Redis checks it, and what Nic-KV sends them is built as
# argument vectors, whatever bytes a name or a password holds.

source tests/skv/helpers.tcl

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]
    set nk [nickv_start $mport]
    wait_for_condition 100 100 {
        [nickv_info $nk master_link_status] eq {up}
    } else {
        fail "Nic-KV did not join the master"
    }

    test {Nic-KV: a replica's malformed or excessive ACKs do not count in WAIT} {
        set fd [nickv_fake_replica $nk $master]
        nickv_wait_replicas $nk 1
        wait_for_condition 100 100 {
            [nickv_master_replica_offset $master 1] ne {}
        } else {
            fail "the master does not know the hand-written replica: [$master info replication]"
        }
        $master set liar 1
        set o1 [status $master master_repl_offset]
        wait_for_condition 100 50 {
            [nickv_replica_sent $nk 1] == $o1
        } else {
            fail "Nic-KV did not send the write to the hand-written replica"
        }
        read $fd
        # An offset that overflows, one with trailing garbage, one far
        # beyond the stream (but a valid number), then the truth, last:
        # once the master has that, Nic-KV has read every lie before it.
        puts -nonewline $fd [join [list \
            [nickv_resp REPLCONF ACK 99999999999999999999] \
            [nickv_resp REPLCONF ACK 12abc] \
            [nickv_resp REPLCONF ACK [expr {$o1 + 1}]abc] \
            [nickv_resp REPLCONF ACK 4611686018427387904] \
            "REPLCONF ACK 99999999999999999999\r\n" \
            [nickv_resp REPLCONF ACK $o1]] ""]
        wait_for_condition 100 50 {
            [nickv_master_replica_offset $master 1] >= $o1
        } else {
            fail "the master did not get the replica's ACK"
        }
        $master set liar 2
        assert_equal 0 [$master wait 1 500]
        assert {[nickv_master_replica_offset $master 1] <= [status $master master_repl_offset]}
        assert {[nickv_master_replica_offset $master 1] == $o1}
        # The liar was not worth more than ignoring; Nic-KV is fine.
        assert_equal PONG [nickv_cmd $nk ping]
    }

    start_server {overrides {save ""}} {
        set r [srv 0 client]
        test {Nic-KV: a real replica still counts in WAIT next to the liar} {
            $r replicaof $mhost $mport
            wait_for_sync $r
            nickv_wait_replicas $nk 2
            $master set liar 3
            assert_equal 1 [$master wait 1 2000]
            assert_equal 1 [$master wait 2 500]
            wait_for_ofs_sync $master $r
            assert_equal 3 [$r get liar]
            assert {[nickv_master_replica_offset $master 1] <= [status $master master_repl_offset]}
        }
    }
    catch {close $fd}
    nickv_stop $nk
}

# Passwords and user names that a command line formatted with quotes and
# split again would mangle. (A user name cannot hold a space: ACL SETUSER
# refuses it.)
set nasty_passwords [list {a"b} {C:\tmp} "sp ace \"quoted\" back\\\\slash \\\" \u00e9\u4e2d\x01"]
set nasty_password [lindex $nasty_passwords end]
set nasty_user "nk\"us\\er\u00e9"

# Every Nic-KV started below, stopped at the end even if a test failed.
set ::peers_nks {}
proc peers_nickv_start {args} {
    set nk [nickv_start {*}$args]
    lappend ::peers_nks $nk
    return $nk
}
proc peers_nickv_stop_all {} {
    foreach nk $::peers_nks { catch {nickv_stop $nk} }
    set ::peers_nks {}
}

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]

    test {Nic-KV: authenticates with a masterauth holding quotes, backslashes, spaces, non-ASCII} {
        foreach pw $nasty_passwords {
            $master config set requirepass [nickv_arg_bytes $pw]
            set nk [peers_nickv_start $mport --masterauth $pw]
            dict set nk auth [nickv_arg_bytes $pw]
            nickv_wait_link_up $nk
            nickv_stop $nk
        }
    }

    start_server {overrides {save ""}} {
        set r [srv 0 client]
        test {Nic-KV: a replica behind Nic-KV gets the data with such a masterauth} {
            set nk [peers_nickv_start $mport --masterauth $nasty_password]
            dict set nk auth [nickv_arg_bytes $nasty_password]
            nickv_wait_link_up $nk
            $r config set masterauth [nickv_arg_bytes $nasty_password]
            $r replicaof $mhost $mport
            wait_for_sync $r
            nickv_wait_replicas $nk 1
            nickv_mixed_load $master 50
            nickv_assert_digests $master [list $r]
        } {} {needs:debug}

        test {Nic-KV: a proxied full sync with such a masterauth} {
            # Configured with Nic-KV as its master: its full sync goes
            # through Nic-KV's own connection to the master, which sends
            # AUTH <masterauth>.
            nickv_check_proxied_full_sync $master $nk
        } {} {needs:debug}
    }
    peers_nickv_stop_all
    $master config set requirepass ""
}

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]
    set user [nickv_arg_bytes $nasty_user]
    set pass [nickv_arg_bytes $nasty_password]
    $master acl setuser $user on >$pass +psync +replconf +ping
    # That user is Nic-KV's: the master gives the daemon role to it alone.
    $master config set nickv-user $user

    start_server {overrides {save ""}} {
        set r [srv 0 client]
        test {Nic-KV: masteruser and masterauth with quotes, backslashes, non-ASCII: link and replica} {
            # With a masteruser, masterauth is Nic-KV's own: the replica
            # gives the master's default user's password, nasty too, which
            # Nic-KV asks of its clients (requirepass).
            set rpw [lindex $nasty_passwords 0]
            $master config set requirepass [nickv_arg_bytes $rpw]
            set nk [peers_nickv_start $mport --masteruser $nasty_user --masterauth $nasty_password \
                        --requirepass $rpw]
            dict set nk auth [nickv_arg_bytes $rpw]
            nickv_wait_link_up $nk
            $r config set masterauth [nickv_arg_bytes $rpw]
            $r replicaof $mhost $mport
            wait_for_sync $r
            nickv_wait_replicas $nk 1
            nickv_mixed_load $master 50
            nickv_assert_digests $master [list $r]
        } {} {needs:debug}

        test {Nic-KV: a proxied full sync with such a masteruser and masterauth} {
            # Nic-KV's own connection to the master sends AUTH <user> <pass>.
            nickv_check_proxied_full_sync $master $nk
        } {} {needs:debug}
    }
    peers_nickv_stop_all
    $master config set requirepass ""
}

# Numbers a replica or a master gives Nic-KV are read whole and in range
# (string2ll, as Redis reads them; nickv_info.c's readers): a malformed one
# gets an error, or ends the one link it came on, and Nic-KV goes on.
start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    set nk [nickv_start $mport]

    test {Nic-KV: REPLCONF listening-port must be a port (the whole word, 0-65535)} {
        foreach bad [list 65536 -1 12abc {} { 80} 80x 99999999999999999999 0x50 "80\x00"] {
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd [nickv_resp REPLCONF listening-port $bad]
            assert_equal {-ERR REPLCONF listening-port must be a port number (0-65535)} [nickv_raw_line $fd]
            # Only that command is refused: the connection goes on.
            puts -nonewline $fd [nickv_resp PING]
            assert_equal {+PONG} [nickv_raw_line $fd]
            close $fd
        }
        # 0 ("not said": the source port stands in) and 1 (the tests' fake
        # replicas) to 65535 are taken.
        foreach good {0 1 6379 65535} {
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd [nickv_resp REPLCONF listening-port $good capa eof]
            assert_equal {+OK} [nickv_raw_line $fd]
            close $fd
        }
        assert_equal PONG [nickv_cmd $nk ping]
        nickv_assert_no_bug $nk
    }
    nickv_stop $nk
}

# A master that answers Nic-KV's link (and its lease) as given
# (tests/fake-peer.tcl psyncer): {pid port out}.
proc peers_psyncer {hello psync {lease {}} {info {}}} {
    set port [find_available_port [expr {$::baseport + 480}] 20]
    set out [file normalize [tmpdir psyncer]]/out
    set pid [exec tclsh tests/skv/fake-peer.tcl psyncer $port $hello $psync $lease $info > $out 2>@1 &]
    wait_for_condition 50 100 {
        [file exists $out] && ![catch {exec grep -q "psyncer: listening" $out}]
    } else {
        catch {exec kill $pid}
        fail "the stand-in master did not start"
    }
    list $pid $port $out
}

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set id [string repeat a 40]

    test {Nic-KV: a hello reply whose offset is not a whole number is no SKV master's} {
        lassign [peers_psyncer "+$id 5x" "+FULLRESYNC $id 0"] pid port out
        set nk [nickv_start $port --loglevel verbose]
        wait_for_condition 100 100 {
            ![catch {exec grep -q "psync: 1" $out}]
        } else {
            fail "no PSYNC came: [exec cat $out]"
        }
        # Read as before with sscanf, "5x" was offset 5 of an SKV master.
        assert_equal 0 [nickv_info $nk master_is_skv]
        assert_equal 1 [exec grep -c "The master does not know Nic-KV (+$id 5x)" [dict get $nk log]]
        assert_equal PONG [nickv_cmd $nk ping]
        nickv_assert_no_bug $nk
        nickv_stop $nk
        exec kill $pid
    }

    test {Nic-KV: a +FULLRESYNC whose offset is not a whole number ends the link, and only the link} {
        foreach bad [list "+FULLRESYNC $id 12x" "+FULLRESYNC $id -5" "+FULLRESYNC [string repeat g 40] 12" \
                         "+FULLRESYNC $id  12" "+FULLRESYNC $id 99999999999999999999"] {
            lassign [peers_psyncer "+$id 0" $bad] pid port out
            set nk [nickv_start $port --loglevel verbose]
            # Read as before with sscanf, "12x" was offset 12: Nic-KV waited
            # for an RDB on that link.
            wait_for_condition 100 100 {
                ![catch {exec grep -q "closed: 1" $out}]
            } else {
                fail "Nic-KV kept the link after '$bad': [exec cat $out]"
            }
            wait_for_condition 50 100 {
                ![catch {exec grep -q {bad +FULLRESYNC reply} [dict get $nk log]}]
            } else {
                fail "no 'bad +FULLRESYNC reply' in the log after '$bad'"
            }
            assert_equal PONG [nickv_cmd $nk ping]
            nickv_assert_no_bug $nk
            nickv_stop $nk
            exec kill $pid
        }
    }

    # Whether a refused lease is another Nic-KV's (then the master is never
    # failed over: nkProbeLeaseForeign) is read from the master's exact
    # words, "-NICKV refused: <reason>", not from words found anywhere in
    # an error.
    test {Nic-KV: a lease refusal counts as its own Nic-KV's only in the master's exact words} {
        set runid [string repeat b 40]
        foreach {reply blocked} [list \
            "-ERR x an earlier connection of this Nic-KV (client id 1) grants this master's lease" {*not ours to fail over} \
            "-ERR granted runs for 100 ms more" {*not ours to fail over} \
            "-NICKV refused: the lease another Nic-KV granted runs for 100x ms more" {*not ours to fail over} \
            "-NICKV refused: an earlier connection of this Nic-KV (client id 1) grants this master's lease" {no replica to promote*} \
            "-NICKV refused: the lease another Nic-KV granted runs for 100 ms more" {no replica to promote*}] {
            lassign [peers_psyncer "+$id 0" "+FULLRESYNC $id 0" $reply "nickv_lease:on|run_id:$runid"] pid port out
            set nk [nickv_start $port --failover yes --node 127.0.0.1:$port]
            wait_for_condition 100 50 {
                ![catch {exec grep -q "the master refuses the lease we grant" [dict get $nk log]}]
            } else {
                fail "no lease refused for '$reply'"
            }
            # ... and its INFO read since (nickv_lease:on: a master it
            # could fail over).
            wait_for_condition 100 50 {
                ![catch {exec grep -q "info: 3" $out}]
            } else {
                fail "Nic-KV did not read the master's INFO: [exec cat $out]"
            }
            # The master gone: is it Nic-KV's to replace?
            exec kill $pid
            wait_for_condition 100 100 {
                [string match $blocked [nickv_info $nk failover_blocked]]
            } else {
                fail "after '$reply': failover_blocked is '[nickv_info $nk failover_blocked]', not '$blocked'"
            }
            assert_equal PONG [nickv_cmd $nk ping]
            nickv_assert_no_bug $nk
            nickv_stop $nk
        }
    }
}
