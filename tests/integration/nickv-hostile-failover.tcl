# A failover trusts only what it can check. A process that holds what a
# replica holds (it can PSYNC from the master) can answer Nic-KV's INFO
# with anything; it must never be promoted on its word, and never wipe the
# real replicas' data.

source tests/skv/helpers.tcl

set hf_conf [nickv_failover_overrides]

# tests/fake-peer.tcl replica: PSYNCs from the master on mport, announces a
# port of its own, claims slave_repl_offset:$claim with replica-priority
# $priority; with rotate 1, its run id changes once the master is gone.
# Returns {pid port out}.
proc hf_fake_replica {mport claim priority rotate} {
    set lport [find_available_port [expr {$::baseport + 520}] 40]
    set out [file normalize [tmpdir fake-replica]]/out
    set pid [exec tclsh tests/skv/fake-peer.tcl replica $mport $lport $claim $priority $rotate > $out 2>@1 &]
    wait_for_condition 100 50 {
        ![catch {exec grep -q "fake-replica: replicating" $out}]
    } else {
        catch {exec kill $pid}
        fail "the hostile replica did not start: [exec cat $out]"
    }
    list $pid $lport $out
}

# claim: the text the hostile replica gives as its offset ("": a
# well-formed number a billion bytes past the master's stream;
# "master+N": N bytes past the master's offset). outcome: "promote", a
# real replica is promoted while the hostile one runs (its claim cannot be
# true: it is distrusted); "ignore", its claim may be true (a direct
# replica can be ahead of what Nic-KV knows of the stream, or a replica
# restarted by then), so it is no candidate; and since the master counts
# no direct replica's ACK past what Nic-KV knows (the ack bound, NIC-KV.md
# "Fencing"), the bytes it may hold past the real replicas were never
# acknowledged: the failover is not called off, a real replica is
# promoted while it runs. (It used to be called off until the hostile
# replica was gone: a replica's word blocked every failover.) With
# replica-priority 0 its offset used to outrank every real replica's and
# call each failover off; "new process": another process answers at its
# address once the master is gone.
foreach {case claim priority rotate outcome why} {
    overflow      99999999999999999999 100 0 promote {its INFO field slave_repl_offset does not parse}
    beyond        {}                   100 0 promote {it claims offset * beyond the * bytes the master's stream is known to hold*}
    "priority 0"  {}                   0   0 promote {it claims offset * beyond the * bytes the master's stream is known to hold*}
    plausible     master+500000        1   0 ignore  {it claims offset *, past the * bytes the master's stream is known to hold: it cannot be checked}
    "new process" master+100           1   1 ignore  {another process (run id eeee*) than the replica the master listed there: its data cannot be checked}
} {
start_server [list tags {"nickv repl external:skip"} overrides $hf_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides $hf_conf] {
    start_server [list overrides $hf_conf] {
        set replicas [list [srv -1 client] [srv 0 client]]
        set ports [list [srv -1 port] [srv 0 port]]
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes --min-slaves 1]
        foreach r $replicas { $r replicaof 127.0.0.1 $mport }

        test "Nic-KV failover: a hostile replica ($case) is not promoted, and wipes nothing" {
            nickv_wait_lease $m
            foreach r $replicas { wait_for_sync $r }
            nickv_wait_replicas $nk 2
            $m select 9
            for {set i 0} {$i < 200} {incr i} { $m set key:$i $i }
            assert_equal 2 [$m wait 2 5000]
            if {$claim eq {}} { set claim [expr {[status $m master_repl_offset] + 1000000000}] }
            lassign [hf_fake_replica $mport $claim $priority $rotate] fpid lport fout
            # A member: what is checked here is a member that lies (a node
            # taken over, or restarted with other data). A node that is no
            # member is never asked anything (nickv-hostile-identity.tcl).
            nickv_add_member $nk 127.0.0.1:$lport
            # The master lists it as a replica, Nic-KV's probes find it alive.
            wait_for_condition 100 100 {
                [string match "*flags=ok*" [nickv_probe_node $nk 127.0.0.1:$lport]]
            } else {
                catch {exec kill $fpid}
                fail "Nic-KV does not probe the hostile replica: [nickv_cmd $nk info failover]"
            }
            nickv_wait_failover_view $nk 3
            exec kill -9 $mpid
            if {$outcome eq "ignore"} {
                # A real replica promoted while it runs, not called off;
                # Nic-KV said why it was no candidate.
                set status [catch {
                    fo_wait_failovers $nk 1
                    assert_equal 0 [nickv_info $nk failovers_aborted]
                    assert_match "*127.0.0.1:$lport is no candidate: $why*" [exec cat [dict get $nk log]]
                } e]
                catch {exec kill $fpid}
                if {$status} { error $e $::errorInfo }
            } else {
                set status [catch {fo_wait_failovers $nk 1} e]
                catch {exec kill $fpid}
                if {$status} { error $e $::errorInfo }
                # Nic-KV said why, once.
                set lines [exec grep -c "127.0.0.1:$lport is not trusted" [dict get $nk log]]
                assert_equal 1 $lines
                assert_match "*is not trusted: $why*" [exec grep "127.0.0.1:$lport is not trusted" [dict get $nk log]]
                assert {[nickv_info $nk candidates_distrusted] >= 1}
            }
            lassign [nickv_master_addr $nk] nhost nport
            # A real replica was promoted; the hostile one was never told to.
            assert {[lsearch $ports $nport] >= 0}
            assert {![string match -nocase "*REPLICAOF NO ONE*" [exec cat $fout]]}
            # Both real replicas keep every key, the same data.
            set nm [redis 127.0.0.1 $nport]
            set others {}
            foreach r $replicas p $ports {
                if {$p != $nport} { lappend others $r; fo_wait_replica_of $p $nport }
            }
            $nm select 9
            assert_equal 201 [$nm dbsize]  ;# key:0..199 and k
            nickv_assert_digests $nm $others
            $nm close
        }
        nickv_stop $nk
    }}}
}

# ------------------------------------------------------- Who grants ---
# Leases, verdicts and the daemon role come from one Nic-KV: another
# client, even one of the nickv-user, is refused while it holds them.

nickv_topology [list overrides $hf_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1] nickv_first yes] {
    set m $master
    set r [lindex $replicas 0]
    set rport [lindex $replica_ports 0]
    set rogue_inst [string repeat 5 40]

    test {Nic-KV lease: another client of the nickv-user cannot grant a lease, report health or take the daemon role} {
        nickv_wait_lease $m
        wait_for_sync $r
        nickv_wait_replicas $nk 1
        nickv_wait_failover_view $nk 1
        set c [nickv_user_client $master_port]
        set refused [nickv_status $m nickv_others_refused]
        # A query for the master's clock, then a 60 s grant from it.
        catch {$c replconf nickv "lease 0 0 $rogue_inst [string repeat f 40]"} e
        assert_match {NICKV refused: another Nic-KV (client id *) grants this master's lease} $e
        catch {$c replconf nickv "lease 1 60000 $rogue_inst [string repeat f 40]"} e
        assert_match {NICKV refused: another Nic-KV (client id *) grants this master's lease} $e
        # Verdicts that would stop every write, or count nobody.
        catch {$c replconf nickv "health 9 0"} e
        assert_equal {NICKV refused: only the connection that grants this master's lease (or the daemon's link) may report replicas' health} $e
        catch {$c replconf nickv "hello 127.0.0.1 1 0 $rogue_inst [string repeat f 40] 0"} e
        assert_equal {NICKV refused: another Nic-KV grants this master's lease} $e
        # Nic-KV's own instance id (no secret: it is in its INFO) without
        # its key is another Nic-KV, not an earlier connection of this one.
        set nk_inst [nickv_info $nk run_id]
        assert_equal 40 [string length $nk_inst]
        catch {$c replconf nickv "lease 1 60000 $nk_inst [string repeat f 40]"} e
        assert_match {NICKV refused: another Nic-KV (client id *) grants this master's lease} $e
        assert_equal [expr {$refused + 5}] [nickv_status $m nickv_others_refused]
        assert_equal 1 [nickv_status $m nickv_min_slaves]
        assert_equal OK [$m set after-rogue 1]
        assert_equal "127.0.0.1:[dict get $nk port]" [nickv_status $m nickv_daemon_addr]
        assert {[nickv_status $m nickv_lease_left_ms] <= 1000}
        $c close
    }

    test {Nic-KV lease: a master stopped with a write queued answers it -READONLY after the failover (no rogue lease)} {
        set c [nickv_user_client $master_port]
        catch {$c replconf nickv "lease 1 60000 $rogue_inst [string repeat f 40]"}
        $c close
        set w [redis 127.0.0.1 $master_port 1]
        $w select 9
        $w read
        exec kill -STOP $master_pid
        $w set queued-during-stop 1
        fo_wait_failovers $nk 1
        assert_equal $rport [lindex [nickv_master_addr $nk] 1]
        exec kill -CONT $master_pid
        catch {$w read} e
        assert_match {READONLY You can't write against a master that holds no lease from Nic-KV*} $e
        $w close
    }
}

# A second Nic-KV for the same master is refused, loudly; the first keeps
# the lease and the daemon role.
nickv_topology [list overrides $hf_conf replicas 1 nickv [list {*}[nickv_user_args] --failover yes] \
        nickv_first yes] {
    set m $master
    set r [lindex $replicas 0]
    test {Nic-KV lease: a second Nic-KV for the same master is refused loudly} {
        nickv_wait_lease $m
        wait_for_sync $r
        wait_for_condition 100 100 {
            [nickv_info $nk valid_replicas] == 1 && [nickv_info $nk master_lease] eq {on}
        } else {
            fail "Nic-KV does not see the topology: [nickv_cmd $nk info failover]\n[$m client list]\n[exec tail -n 20 [dict get $nk log]]"
        }
        # The nickv-user's password is Nic-KV's own: it opens nothing on
        # Nic-KV (whose clients' password, requirepass, is unset here).
        set c [redis 127.0.0.1 [dict get $nk port]]
        catch {$c auth $::nickv_test_user $::nickv_test_pass} e
        assert_match {ERR AUTH <password> called without any password configured*} $e
        $c close
        set refused [nickv_status $m nickv_others_refused]
        set nk2 [nickv_start $master_port {*}[nickv_user_args] --failover yes]
        # (Stopped whatever happens: it would go on grabbing the lease of
        # whichever master gets this port next.)
        set status [catch {
            wait_for_condition 100 100 {
                [nickv_info $nk2 master_lease] eq {refused}
            } else {
                fail "the second Nic-KV's lease was not refused: [nickv_cmd $nk2 info failover]"
            }
            assert {[nickv_status $m nickv_others_refused] > $refused}
            verify_log_message -1 "*Nic-KV: refused *: another Nic-KV*grants this master's lease*" 0
            assert_equal "127.0.0.1:[dict get $nk port]" [nickv_status $m nickv_daemon_addr]
            assert_equal on [nickv_info $nk master_lease]
        } e]
        nickv_stop $nk2
        if {$status} { error $e $::errorInfo }
        # The first one's grants go on.
        set g [nickv_status $m nickv_lease_grants]
        wait_for_condition 6 50 {
            [nickv_status $m nickv_lease_grants] > $g
        } else {
            fail "no grant from the first Nic-KV within 300 ms: [$m info nickv]"
        }
    }
}

# nickv-lease yes needs a user of Nic-KV's own: the default user is every
# client's, a nopass user anybody's.
start_server {tags {"nickv external:skip"} overrides {save ""}} {
    set m [srv 0 client]
    test {Nic-KV lease: nickv-lease yes with nickv-user default is refused, at start-up and by CONFIG SET} {
        catch {$m config set nickv-lease yes} e
        assert_equal {ERR CONFIG SET failed (possibly related to argument 'nickv-lease') - nickv-lease yes needs a dedicated nickv-user (not 'default', which every client can use to grant leases): create an ACL user for Nic-KV and name it in nickv-user} $e
        assert_equal {nickv-lease no} [$m config get nickv-lease]
        $m acl setuser nk on >pw ~* &* +@all
        $m config set nickv-user nk
        assert_equal OK [$m config set nickv-lease yes]
        catch {$m config set nickv-user default} e
        assert_match {ERR CONFIG SET failed (possibly related to argument 'nickv-user') - nickv-lease yes needs a dedicated nickv-user*} $e
        assert_equal {nickv-user nk} [$m config get nickv-user]
        $m config set nickv-lease no
        $m config set nickv-user default
        set port [find_available_port [expr {$::baseport + 560}] 20]
        catch {exec src/redis-server --port $port --save "" --nickv-lease yes} out
        assert_match {*Fatal config error: nickv-lease yes needs a dedicated nickv-user*} $out
    }
}

start_server [list tags {"nickv repl external:skip"} overrides $hf_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    set nk [nickv_start $mport {*}[nickv_user_args]]
    test {Nic-KV lease: a nickv-user with nopass grants nothing} {
        nickv_wait_lease $m
        $m acl setuser $::nickv_test_user nopass
        wait_for_condition 100 100 {
            [nickv_status $m nickv_lease] eq {expired}
        } else {
            fail "the lease goes on: [$m info nickv]"
        }
        set c [nickv_user_client $mport]
        catch {$c replconf nickv "lease 0 0 [string repeat 6 40] [string repeat f 40]"} e
        assert_equal {NICKV refused: the nickv-user has nopass, so any client can use it: give it a password} $e
        $c close
        catch {$m set k v} e
        assert_match {READONLY*no lease*} $e
        $m acl setuser $::nickv_test_user resetpass >$::nickv_test_pass
        wait_for_condition 100 100 {
            [catch {$m set k v}] == 0
        } else {
            fail "no lease after the password came back: [$m info nickv]"
        }
    }
    nickv_stop $nk
}

# A replica takes no lease and binds no grantor: a claim made there must
# not survive its promotion; the first Nic-KV to grant the new master has it.
# (Its master without the lease: it serves a PSYNC without Nic-KV.)
start_server [list tags {"nickv repl external:skip"} overrides [concat {save ""} [nickv_user_overrides]]] {
    set mport [srv 0 port]
    start_server [list overrides $hf_conf] {
        set r [srv 0 client]
        set rport [srv 0 port]
        test {Nic-KV lease: a claim made on a replica does not survive its promotion} {
            $r replicaof 127.0.0.1 $mport
            wait_for_sync $r
            set rogue [nickv_user_client $rport]
            assert_match {LEASE *} [$rogue replconf nickv "lease 0 0 [string repeat 7 40] [string repeat f 40]"]
            # The replica forgets what it had as a master (its cron), too.
            after 200
            $r replicaof no one
            set nk [nickv_user_client $rport]
            set inst [string repeat 8 40]
            set t [lindex [$nk replconf nickv "lease 0 0 $inst [string repeat f 40]"] 1]
            assert_match {LEASE *} [$nk replconf nickv "lease $t 1000 $inst [string repeat f 40]"]
            assert_equal held [nickv_status $r nickv_lease]
            catch {$rogue replconf nickv "lease $t 60000 [string repeat 7 40] [string repeat f 40]"} e
            assert_match {NICKV refused: another Nic-KV (client id *) grants this master's lease} $e
            assert {[nickv_status $r nickv_lease_left_ms] <= 1000}
            $rogue close
            $nk close
        }
    }
}

# A Nic-KV whose lease the master refuses (another one grants it) never
# fails that master over: it cannot know when the other one's lease ends.
start_server [list tags {"nickv repl external:skip"} overrides $hf_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides $hf_conf] {
        set r [srv 0 client]
        test {Nic-KV failover: a Nic-KV whose lease the master refuses does not fail it over} {
            # N1 learns the topology (its state file remembers the replica),
            # then N2 takes the master while N1 is away; N1 comes back.
            set n1 [nickv_start $mport {*}[nickv_user_args] --failover yes]
            $r replicaof 127.0.0.1 $mport
            wait_for_sync $r
            nickv_wait_failover_view $n1 1
            set n1state [file dirname [dict get $n1 log]]/nickv.state
            wait_for_condition 50 100 {
                [string match "*replica *" [exec cat $n1state]]
            } else {
                fail "N1's state file does not list the replica: [exec cat $n1state]"
            }
            nickv_stop $n1
            set n2 [nickv_start $mport {*}[nickv_user_args] --failover yes --lease-time 5000]
            set status [catch {
                nickv_wait_failover_view $n2 1
                set n1 [nickv_restart $n1]
                wait_for_condition 100 100 {
                    [nickv_info $n1 master_lease] eq {refused}
                } else {
                    fail "N1's lease is not refused: [nickv_cmd $n1 info failover]"
                }
                exec kill -STOP $mpid
                wait_for_condition 30 100 {
                    [string match "*the master refused our lease*not ours to fail over*" [nickv_info $n1 failover_blocked]]
                } else {
                    fail "N1 is not blocked: [nickv_cmd $n1 info failover]"
                }
                # The master stays stopped 1.5 s more: N1, blocked, must not act.
                assert_stays 1.5 {[nickv_info $n1 failovers] == 0} "N1 failed over a master it holds no lease of"
                exec kill -CONT $mpid
                assert_equal 0 [nickv_info $n1 failovers]
                assert {![string match "*promoting*" [exec cat [dict get $n1 log]]]}
            } e]
            catch {exec kill -CONT $mpid}
            nickv_stop $n1
            nickv_stop $n2
            if {$status} { error $e $::errorInfo }
        }
    }
}

start_server {tags {"nickv external:skip"} overrides {save ""}} {
    set m [srv 0 client]
    set mport [srv 0 port]
    test {Nic-KV lease: a nickv-user with an empty password grants nothing} {
        $m acl setuser nk-empty on > ~* &* +@all
        $m config set nickv-user nk-empty
        $m config set nickv-lease yes
        set c [redis 127.0.0.1 $mport]
        $c auth nk-empty ""
        catch {$c replconf nickv "lease 0 0 [string repeat 9 40] [string repeat f 40]"} e
        assert_equal {NICKV refused: the nickv-user's password is empty, so any client can use it: give it a real one} $e
        $c close
        $m config set nickv-lease no
        $m config set nickv-user default
    }
    test {Nic-KV: with a masteruser, its password is never the replicas' or the admin's} {
        set port [find_available_port [expr {$::baseport + 580}] 20]
        catch {exec [nickv_binary] --port $port --master-port $mport --masteruser nickv --masterauth pw \
                   --requirepass pw --logfile /dev/null} out
        assert_match {*with a masteruser, masterauth (the nickv-user's password, which grants the master its lease) must differ from requirepass and adminpass*} $out
        set nk [nickv_start $mport --masteruser nickv --masterauth pw --requirepass rp]
        catch {nickv_cmd $nk config set requirepass pw} e
        assert_match {*must differ from requirepass and adminpass*} $e
        nickv_stop $nk
    }
}
