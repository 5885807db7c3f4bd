# Identity: what proves a peer is Nic-KV, or a node Nic-KV may trust with
# its credentials (NIC-KV.md, "Security model"). Each test here is an
# attack that worked before the rule it checks (issue 30): an impostor that
# holds the nickv-user's password and reads Nic-KV's public instance id.

source tests/skv/helpers.tcl

set id_conf [nickv_failover_overrides]

# A key that is not Nic-KV's (its own never leaves it).
set ::id_wrong_key [string repeat 9 40]

nickv_topology [list overrides $id_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1] nickv_first yes] {
    set m $master
    set r [lindex $replicas 0]
    set rport [lindex $replica_ports 0]

    test {Identity: Nic-KV's public instance id without its key takes no daemon role} {
        nickv_wait_lease $m
        wait_for_sync $r
        nickv_wait_replicas $nk 1
        nickv_wait_failover_view $nk 1
        set inst [nickv_info $nk run_id]
        set c [nickv_user_client $master_port]
        # Nic-KV's connections closed, then its hello with its run id:
        # the master used to take it for Nic-KV on the first try.
        $c client kill user $::nickv_test_user skipme yes
        catch {$c replconf nickv "hello 127.0.0.1 [dict get $nk port] 0 $inst $::id_wrong_key 0"} e
        assert_match {NICKV refused: another Nic-KV grants this master's lease} $e
        # ... so what a daemon says (a replica it serves, its ACK) is not taken.
        catch {$c replconf nickv "add 1 127.0.0.1 $rport"} e
        assert_match {*come from the Nic-KV daemon only*} $e
        $c close
        # Nic-KV comes back as the daemon and the grantor.
        wait_for_condition 100 100 {
            [nickv_status $m nickv_daemon_addr] eq "127.0.0.1:[dict get $nk port]" &&
            [nickv_info $nk master_lease] eq {on}
        } else {
            fail "Nic-KV did not come back: [$m info nickv]"
        }
    }

    test {Identity: leases sent with Nic-KV's instance id but not its key are never counted as Nic-KV's} {
        # The impostor closes Nic-KV's connections and grants 60 s leases
        # in its name, every 100 ms, for a second and a half.
        set out [file normalize [tmpdir impostor]]/out
        set ipid [exec tclsh tests/skv/fake-peer.tcl impostor $master_port $::nickv_test_user $::nickv_test_pass \
                      [nickv_info $nk run_id] $::id_wrong_key 60000 > $out 2>@1 &]
        after 1500
        exec kill $ipid
        set replies [exec grep -c lease-reply: $out]
        assert {$replies >= 5}
        # A write queued on the master while it is stopped is answered
        # after the failover: it must be refused, or no failover came
        # (Nic-KV waits out a lease it cannot account for). It used to
        # be +OK on a deposed master: the impostor's 60 s grants were
        # counted as Nic-KV's own 250 ms ones.
        nickv_wait_lease $m
        set w [redis 127.0.0.1 $master_port 1]
        $w select 9
        $w read
        exec kill -STOP $master_pid
        $w set queued-during-stop 1
        set moved [expr {![catch {
            wait_for_condition 60 100 {
                [lindex [nickv_master_addr $nk] 1] == $rport
            } else { error "no failover" }
        }]}]
        exec kill -CONT $master_pid
        catch {$w read} reply
        $w close
        if {$moved} {
            assert_match {READONLY You can't write against a master that holds no lease from Nic-KV*} $reply
        } else {
            assert_match {*lease*} [nickv_info $nk failover_blocked]
        }
        assert_equal 0 [llength [lsearch -all -inline [exec grep lease-reply: $out] {*LEASE*60000*}]]
    }
}

# The key goes only where Nic-KV sends its messages: a slow log shows the
# message redacted, as it does AUTH's password.
start_server [list tags {"nickv repl external:skip"} overrides $id_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    test {Identity: the slow log shows Nic-KV's hello and lease messages redacted} {
        $m config set slowlog-log-slower-than 0
        $m slowlog reset
        set nk [nickv_start $mport {*}[nickv_user_args]]
        nickv_wait_lease $m
        wait_for_condition 100 50 {
            [nickv_status $m nickv_daemon_addr] eq "127.0.0.1:[dict get $nk port]"
        } else {
            fail "no daemon: [$m info nickv]"
        }
        $m config set slowlog-log-slower-than 10000
        set redacted 0
        foreach entry [$m slowlog get 1000] {
            set argv [lindex $entry 3]
            if {[string tolower [lindex $argv 0]] ne "replconf" || [lindex $argv 1] ne "nickv"} continue
            # (health and backlog reports carry nothing secret.)
            assert_no_match {hello *} [lindex $argv 2]
            assert_no_match {lease *} [lindex $argv 2]
            if {[lindex $argv 2] eq {(redacted)}} { incr redacted }
        }
        assert {$redacted >= 2}
        nickv_stop $nk
    }
}

# Members: Nic-KV sends its credentials to, names valid, promotes and
# repoints only the nodes its node lines name (and the configured master).
# A process with the replicas' password that PSYNCs and announces its own
# address used to be asked with AUTH <nickv-user> <password> at the first
# failover: it now gets PING and INFO server, no credential, no command.
nickv_topology [list overrides $id_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1] nickv_first yes] {
    set m $master
    set r [lindex $replicas 0]
    set rport [lindex $replica_ports 0]

    test {Identity: a replica no node line names is served, but never sent a credential, counted or promoted} {
        nickv_wait_lease $m
        wait_for_sync $r
        nickv_wait_failover_view $nk 1
        # A plausible claim (a little past the master's offset) and the
        # highest priority: before members, it was asked first.
        set lport [find_available_port [expr {$::baseport + 530}] 40]
        set fout [file normalize [tmpdir fake-candidate]]/out
        set fpid [exec tclsh tests/skv/fake-peer.tcl replica $master_port $lport master+100 1 0 > $fout 2>@1 &]
        set status [catch {
            wait_for_condition 100 50 {
                [string match "*flags=ok,member=no*" [nickv_probe_node $nk 127.0.0.1:$lport]]
            } else {
                fail "Nic-KV does not see the fake replica: [nickv_cmd $nk info failover]"
            }
            # Not named valid: the master counts it for neither WAIT nor
            # min-replicas-to-write.
            wait_for_condition 50 100 {
                [nickv_status $m nickv_valid_replicas] == 1
            } else {
                fail "the master counts the non-member: [$m info nickv]"
            }
            # An operator's FAILOVER TO it says why not.
            assert_match "*127.0.0.1:$lport is not a valid replica of the master*127.0.0.1:$lport not a member*" \
                [nickv_cmd $nk failover to 127.0.0.1 $lport]
            exec kill -9 $master_pid
            fo_wait_failovers $nk 1
            assert_equal $rport [lindex [nickv_master_addr $nk] 1]
            assert_stays 0.5 {![regexp {AUTH|REPLICAOF|CONFIG} [exec cat $fout]]} \
                "Nic-KV sent the non-member a command"
            set sent [exec cat $fout]
            assert_no_match "*AUTH*" $sent
            assert_no_match "*REPLICAOF*" $sent
            assert_no_match "*CONFIG*" $sent
            # Said once, with what to do.
            assert_equal 1 [exec grep -c "replica 127.0.0.1:$lport is not a member" [dict get $nk log]]
        } e]
        catch {exec kill $fpid}
        if {$status} { error $e $::errorInfo }
    }
}

test {Identity: failover yes or min-slaves without a node line is refused at start and by CONFIG SET} {
    set port [find_available_port [expr {$::baseport + 570}] 20]
    catch {exec [nickv_binary] --port $port --master-port 1 --failover yes --state-file "" 2>@1} out
    assert_match {*failover yes needs the nodes it may promote and repoint: a 'node <ip>:<port>' line*} $out
    catch {exec [nickv_binary] --port $port --master-port 1 --min-slaves 1 2>@1} out
    assert_match {*min-slaves counts members only*} $out
    catch {exec [nickv_binary] --port $port --master-port 1 --node db1.example:6379 2>@1} out
    assert_match {*a node's address must be numeric*} $out
    set nk [nickv_start 1 --node 127.0.0.1:1 --state-file ""]
    assert_equal {node 127.0.0.1:1} [nickv_cmd $nk config get node]
    assert_equal OK [nickv_cmd $nk config set node "127.0.0.1:2 \[::1\]:3"]
    assert_equal {node {127.0.0.1:2 [::1]:3}} [nickv_cmd $nk config get node]
    catch {nickv_cmd $nk config set node ""} e
    assert_equal OK $e
    assert_match {*failover yes needs the nodes*} [nickv_cmd $nk config set failover yes]
    assert_match {*min-slaves counts members only*} [nickv_cmd $nk config set min-slaves 2]
    assert_equal {failover no} [nickv_cmd $nk config get failover]
    nickv_stop $nk
}

# nickv-lease and nickv-user are protected configs: turning the fencing off
# takes the config file (or enable-protected-configs), not a password. The
# replicas replicate as a user that can do nothing else (the recipe of
# make run, redis.conf and NIC-KV.md). With the old recipe the replicas'
# password was the default user's: CONFIG SET nickv-lease no, then
# REPLICAOF NO ONE on a replica, made two masters that acknowledged writes.
start_server [list tags {"nickv external:skip"} overrides [concat $id_conf {enable-protected-configs no}]] {
    set m [srv 0 client]
    test {Identity: CONFIG SET nickv-lease and nickv-user are refused as protected; the replicas' user runs neither} {
        catch {$m config set nickv-lease no} e
        assert_equal {ERR CONFIG SET failed (possibly related to argument 'nickv-lease') - can't set protected config} $e
        catch {$m config set nickv-user default} e
        assert_equal {ERR CONFIG SET failed (possibly related to argument 'nickv-user') - can't set protected config} $e
        assert_equal {nickv-lease yes} [$m config get nickv-lease]
        # The replicas' user, as the recipe defines it.
        $m acl setuser replica on >repl-secret +psync +replconf +ping
        set r [redis 127.0.0.1 [srv 0 port]]
        assert_equal OK [$r auth replica repl-secret]
        foreach cmd {{config set nickv-lease no} {replicaof no one} {acl setuser x on} {client kill type normal}} {
            catch {$r {*}$cmd} e
            assert_match {NOPERM*} $e
        }
        $r close
    }
}

# The daemon is the Nic-KV that grants. A process with the nickv-user's
# password that says hello while no Nic-KV grants (a master just promoted
# or restarted, before its first grant) used to keep the daemon role after
# Nic-KV took the grantor's place: Nic-KV's own hello was refused ("another
# Nic-KV serves this master") for as long as the stand-in sent heartbeats,
# and the ACKs it relayed for any replica it "added" counted for WAIT.
start_server [list tags {"nickv repl external:skip"} overrides $id_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    start_server [list overrides $id_conf] {
        set r [srv 0 client]
        $r replicaof 127.0.0.1 $mport
        test {Identity: a stand-in daemon that joined while no Nic-KV granted goes when Nic-KV grants} {
            # The stand-in grants itself a lease first (no Nic-KV grants
            # yet): the master serves its PSYNC. (Its id and key are
            # fake-peer.tcl's.)
            set c [nickv_user_client $mport]
            set sid "[string repeat b 40] [string repeat f 40]"
            set now [lindex [$c replconf nickv "lease 0 0 $sid"] 1]
            $c replconf nickv "lease $now 3000 $sid"
            set fport [find_available_port [expr {$::baseport + 480}] 20]
            set out [file normalize [tmpdir fake-nickv]]/out
            set fpid [exec tclsh tests/skv/fake-peer.tcl nickv $mport $fport bounce $::nickv_test_user \
                          $::nickv_test_pass > $out 2>@1 &]
            set nk {}
            set status [catch {
                wait_for_condition 100 100 {
                    [nickv_status $m nickv_daemon_addr] eq "127.0.0.1:$fport"
                } else {
                    fail "the stand-in did not join: [exec cat $out]"
                }
                $c close
                set nk [nickv_start $mport {*}[nickv_user_args] --failover yes --min-slaves 1]
                wait_for_condition 100 100 {
                    [nickv_status $m nickv_daemon_addr] eq "127.0.0.1:[dict get $nk port]"
                } else {
                    fail "Nic-KV did not take the daemon role: [$m info nickv]\n[exec tail -n 5 [dict get $nk log]]"
                }
                # The stand-in's link was closed.
                wait_for_condition 50 100 {
                    [catch {exec kill -0 $fpid}]
                } else {
                    fail "the stand-in still streams"
                }
                verify_log_message -1 "*is not the Nic-KV that grants this master's lease*" 0
            } e]
            catch {exec kill $fpid}
            if {$nk ne {}} { nickv_stop $nk }
            if {$status} { error $e $::errorInfo }
        }
    }
}

# With min-slaves, the master counts for WAIT only the replicas Nic-KV names
# valid, at the address Nic-KV probed. A replica that announces another
# address than the one it connects from (REPLCONF ip-address) used to
# count as the member it named: anything with the replicas' password could
# acknowledge writes in a member's name, with the member not replicating.
# (protected-mode no: the member connects from 127.0.0.2.)
start_server [list tags {"nickv repl external:skip"} overrides [concat $id_conf {protected-mode no}]] {
    set m [srv 0 client]
    set mport [srv 0 port]
    start_server [list overrides [concat $id_conf {nickv-offload no}]] {
        set r [srv 0 client]
        set rport [srv 0 port]
        $r config set bind "127.0.0.1 127.0.0.2"
        $r config set bind-source-addr 127.0.0.2
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes --min-slaves 1 --node 127.0.0.2:$rport \
                    --node 127.0.0.1:$rport]
        test {Identity: a replica announcing a member's address from elsewhere is not counted for WAIT} {
            # The member (it connects from 127.0.0.2, as the master lists it)
            # answers Nic-KV's probes, named valid; then it stops replicating.
            $r replicaof 127.0.0.1 $mport
            wait_for_sync $r
            wait_for_condition 100 100 {
                [nickv_status $m nickv_valid_replicas] == 1
            } else {
                fail "the member is not counted: [$m info nickv]\n[nickv_cmd $nk info failover]"
            }
            $m select 9
            assert_equal OK [$m set before 1]
            assert_equal 1 [$m wait 1 2000]
            $r replicaof 127.0.0.1 1
            set out [file normalize [tmpdir acker]]/out
            set apid [exec tclsh tests/skv/fake-peer.tcl acker $mport "" 127.0.0.2 $rport > $out 2>@1 &]
            set status [catch {
                wait_for_condition 100 50 {
                    ![catch {exec grep -q "acker: replicating" $out}]
                } else {
                    fail "the acker did not start: [exec cat $out]"
                }
                wait_for_condition 100 100 {
                    [string match "*ip=127.0.0.2,port=$rport,state=online*" [$m info replication]]
                } else {
                    fail "the acker is not online: [$m info replication]"
                }
                # Nic-KV still names 127.0.0.2:<port> valid (the member answers).
                assert_match "*addr=127.0.0.2:$rport,*flags=*member=yes*" [nickv_cmd $nk info failover]
                # The master counts nobody, and goes on counting nobody over a
                # second of Nic-KV's reports (ten probe intervals).
                wait_for_condition 50 100 {
                    [nickv_status $m nickv_valid_replicas] == 0
                } else {
                    fail "the acker is counted in the member's name: [$m info nickv]"
                }
                assert_stays 1 {[nickv_status $m nickv_valid_replicas] == 0} "the acker counted in the member's name"
                catch {$m set unacked 1} e
                # Either refused (min-slaves counts nobody) or not acknowledged:
                # never acknowledged in the member's name.
                if {$e eq {OK}} { assert_equal 0 [$m wait 1 500] }
                assert_equal 0 [nickv_status $m nickv_valid_replicas]
            } e]
            catch {exec kill $apid}
            if {$status} { error $e $::errorInfo }
        }
        nickv_stop $nk
    }
}

# REPLCONF nickv messages that do not parse (src/nickv_msg.c): the exact
# error, on that client alone, before anything is bound; the master goes on.
start_server [list tags {"nickv repl external:skip"} overrides $id_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]

    test {Identity: malformed REPLCONF nickv messages get their exact error, and change nothing} {
        set a [string repeat a 40]
        set b [string repeat b 40]
        set hello_err {ERR malformed hello: expected hello <host> <port> <rdma-port> <instance> <key> <tls-port>}
        set c [nickv_user_client $mport]
        foreach {msg err} [list \
            {} {ERR empty REPLCONF nickv message} \
            {"unbalanced} {ERR empty REPLCONF nickv message} \
            "hello ? 65536 0 $a $b 0" $hello_err \
            "hello ? 1 -1 $a $b 0" $hello_err \
            "hello ? 12x 0 $a $b 0" $hello_err \
            "hello ? 1 0 $a $b 99999999999999999999" $hello_err \
            "hello ? 1 0 $a $b" $hello_err \
            "hello ? 1 0 $a $b 0 extra" $hello_err \
            "hello ? 1 0 xyz $b 0" $hello_err \
            "lease 0 0 $a" {ERR malformed lease: expected lease <t> <ms> <instance> <key> [<offset>]} \
            "lease 0 0 $a short" {ERR malformed lease: expected lease <t> <ms> <instance> <key> [<offset>]} \
            "lease 0 0 $a $b -1" {ERR malformed lease: expected lease <t> <ms> <instance> <key> [<offset>]} \
            "lease 0 0 $a $b 12x" {ERR malformed lease: expected lease <t> <ms> <instance> <key> [<offset>]} \
            "lease 0 0 $a $b 1 extra" {ERR malformed lease: expected lease <t> <ms> <instance> <key> [<offset>]} \
            "add 1 127.0.0.1 1" {ERR REPLCONF nickv messages come from the Nic-KV daemon only} \
            "ack 1 12x" {ERR REPLCONF nickv messages come from the Nic-KV daemon only} \
            "nosuchverb 1" {ERR REPLCONF nickv messages come from the Nic-KV daemon only}] {
            catch {$c replconf nickv $msg} e
            assert_equal $err $e
        }
        # The connection goes on (CLIENT: served without a lease too).
        assert {[$c client id] > 0}
        $c close
        assert_equal 0 [nickv_status $m nickv_daemon_joins]
        assert_equal 0 [nickv_status $m nickv_daemons_refused]
    }
}
