# Nic-KV's failover in the cases an adversarial review found: a master
# restarted empty before the failover, a replica that acknowledged writes
# but cannot be heard, one that cannot be promoted but holds more, a
# failover turned off midway, a state file that cannot be written, and
# Nic-KV's own link listed as a replica.

source tests/skv/helpers.tcl

# Stop the direct replica r (pid) and cut its link on the master m: it
# misses what comes next, even what the kernel would have buffered for it.
proc fe_stop_and_cut {m r pid} {
    regexp {laddr=([0-9.]+:[0-9]+)} [$r client list type master] -> addr
    exec kill -STOP $pid
    $m client kill addr $addr
}

# Wait until Nic-KV holds node addr invalid.
proc fe_wait_invalid {nk addr} {
    # On addr's own line: a glob's * would run on into another node's.
    set re [string map {. \\.} "node\[0-9\]+:addr=$addr,\[^\r\n\]*flags=invalid"]
    wait_for_condition 50 100 {
        [regexp $re [nickv_cmd $nk info failover]]
    } else {
        fail "$addr is not invalid: [nickv_cmd $nk info failover]"
    }
}

# How many of Nic-KV's probes node addr answered; -1 when Nic-KV has no line for it.
proc fe_answers {nk addr} {
    if {![regexp {,answers=(\d+),} [nickv_probe_node $nk $addr] -> n]} { return -1 }
    return $n
}

# The master is dead and R1 (pid1), which holds the write only-on-r1, is
# stopped: the failover waits to hear from it, promotes nobody meanwhile,
# and promotes R1 once it answers.
proc fe_waits_for_r1 {nk r1 p1 pid1} {
    wait_for_condition 50 100 {
        [string match "*waiting to hear from 127.0.0.1:$p1*" [nickv_info $nk failover_blocked]]
    } else {
        exec kill -CONT $pid1
        fail "not waiting for R1: [nickv_cmd $nk info failover]"
    }
    if {[catch {assert_stays 0.5 {[nickv_info $nk failovers] == 0} "a promotion before R1 answered"} e]} {
        exec kill -CONT $pid1
        error $e $::errorInfo
    }
    exec kill -CONT $pid1
    wait_for_condition 100 100 {
        [nickv_info $nk failovers] == 1
    } else {
        fail "no failover once R1 answers: [nickv_cmd $nk info failover]"
    }
    assert_equal "127.0.0.1 $p1" [nickv_master_addr $nk]
    nickv_wait_served $r1
    assert_equal yes [$r1 get only-on-r1]
}

set fe_conf [nickv_failover_overrides]

nickv_topology [list overrides $fe_conf replicas 2 \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1]] {
    nickv_wait_failover_view $nk 2

    test {Nic-KV failover: a master restarted empty at once on its port is not granted: it wipes no replica} {
        set m [srv -2 client]
        for {set i 0} {$i < 100} {incr i} { $m set k$i $i }
        assert {[$m wait 2 2000] >= 1}
        exec kill -9 [srv -2 pid]
        # Back on the same port, empty, before the promotion: before,
        # Nic-KV called the failover off, granted it, and both replicas
        # full-synced from it.
        restart_server -2 true false
        wait_for_condition 100 100 {
            [nickv_info $nk failovers] == 1 && [nickv_info $nk repoint_pending] == 0
        } else {
            fail "no failover: [nickv_cmd $nk info failover]\n[exec tail -n 20 [dict get $nk log]]"
        }
        assert_match {*restarted*} [exec cat [dict get $nk log]]
        lassign [nickv_master_addr $nk] host nport
        assert {$nport != $master_port}
        set nm [redis 127.0.0.1 $nport]
        $nm select 9
        assert_equal 100 [$nm dbsize]
        wait_for_condition 100 100 {
            [nickv_node_status $master_port master_port] == $nport
        } else {
            fail "the restarted master did not become a replica"
        }
        $nm close
    }
}

nickv_topology [list overrides $fe_conf replicas {{} {nickv-offload no}} \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1]] {
    lassign $replicas r1 r2
    lassign $replica_ports p1 p2
    lassign $replica_pids pid1 pid2
    nickv_wait_failover_view $nk 2

    test {Nic-KV failover: waits to hear from a replica that acknowledged writes, and promotes the one that has them} {
        set m [srv -2 client]
        # R2 (a direct replica: nothing feeds it once the master is
        # gone) falls behind; a write is acknowledged by R1 alone.
        fe_stop_and_cut $m $r2 $pid2
        fe_wait_invalid $nk 127.0.0.1:$p2
        $m set only-on-r1 yes
        assert_equal 1 [$m wait 1 2000]
        # R1 goes silent (alive), the master dies, R2 comes back
        # without the write. Before, R2 was promoted at once: the
        # acknowledged write was lost.
        exec kill -STOP $pid1
        exec kill -9 $master_pid
        exec kill -CONT $pid2
        fe_waits_for_r1 $nk $r1 $p1 $pid1
        wait_for_condition 100 100 {
            [status $r2 master_port] == $p1 && [status $r2 master_link_status] eq {up}
        } else {
            fail "R2 does not follow R1"
        }
        # The link is up once R1 accepted the PSYNC; the bytes after R2's
        # offset come next (read at once, the key was missing in a loaded
        # CI run: R1 had it).
        wait_for_condition 50 20 {
            [$r2 get only-on-r1] eq {yes}
        } else {
            fail "R2 lacks the write R1 acknowledged: [$r2 info replication]"
        }
    }
}

nickv_topology [list overrides $fe_conf replicas {{} {nickv-offload no}} \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1]] {
    lassign $replicas r1 r2
    lassign $replica_ports p1 p2
    lassign $replica_pids pid1 pid2
    nickv_wait_failover_view $nk 2

    test {Nic-KV failover: a replica that acknowledged writes is still waited for when no candidate appears for a while} {
        set m [srv -2 client]
        fe_stop_and_cut $m $r2 $pid2
        fe_wait_invalid $nk 127.0.0.1:$p2
        $m set only-on-r1 yes
        assert_equal 1 [$m wait 1 2000]
        # R1 goes silent and is held invalid, then the master dies: no
        # replica can be promoted, for longer than the window in which
        # a replica named valid counts (2 s + 2 x lease-time + 1 s).
        # Before, that window was counted back from now, not from the
        # master's last lease: R1 was forgotten, and R2, back without
        # the write, was promoted.
        exec kill -STOP $pid1
        fe_wait_invalid $nk 127.0.0.1:$p1
        exec kill -9 $master_pid
        after 6000 ;# longer than that window
        exec kill -CONT $pid2
        fe_waits_for_r1 $nk $r1 $p1 $pid1
    }
}

# A replica that acknowledged writes, then went silent with its port open
# (a hung process; a fake that stops answering): once a candidate that
# answered holds all it may have acknowledged (what of it the master
# counted went through Nic-KV), it blocks the failover no longer. It used
# to be waited for as long as its port stayed open (issue 30: 40 s, while
# the live replicas held more than it had acknowledged).
nickv_topology [list overrides $fe_conf replicas 2 \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1] serves 2] {
    lassign $replicas r1 r2
    lassign $replica_ports p1 p2
    set pid1 [lindex $replica_pids 0]
    nickv_wait_failover_view $nk 2

    test {Nic-KV failover: a silent replica whose acknowledged writes a candidate holds does not block it} {
        set m [srv -2 client]
        $m select 9
        for {set i 0} {$i < 100} {incr i} { $m set k$i $i }
        assert_equal 2 [$m wait 2 2000]
        exec kill -STOP $pid1
        $m set after-stop yes
        assert_equal 1 [$m wait 1 2000]
        exec kill -9 $master_pid
        set status [catch {
            wait_for_condition 50 100 {
                [nickv_info $nk failovers] == 1
            } else {
                fail "not failed over: [nickv_cmd $nk info failover]"
            }
        } e]
        exec kill -CONT $pid1
        if {$status} { error $e $::errorInfo }
        assert_equal "127.0.0.1 $p2" [nickv_master_addr $nk]
        assert_match "*not waiting for 127.0.0.1:$p1, which does not answer: 127.0.0.1:$p2 holds*" \
            [exec cat [dict get $nk log]]
        nickv_wait_served $r2
        $r2 select 9
        assert_equal yes [$r2 get after-stop]
        # The silent one, back, follows the new master: the same data.
        fo_wait_replica_of $p1 $p2
        nickv_assert_digests $r2 [list $r1]
    }
}

nickv_topology [list overrides $fe_conf replicas {{} {nickv-offload no}} \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1]] {
    lassign $replicas r1 r2
    set p2 [lindex $replica_ports 1]
    set pid2 [lindex $replica_pids 1]
    nickv_wait_failover_view $nk 2

    test {Nic-KV failover: called off when a replica that cannot be promoted holds more than every candidate} {
        set m [srv -2 client]
        # R1 cannot be promoted; R2, a direct replica, falls behind.
        $r1 config set replica-priority 0
        fe_stop_and_cut $m $r2 $pid2
        fe_wait_invalid $nk 127.0.0.1:$p2
        $m set only-on-r1 yes
        assert_equal 1 [$m wait 1 2000]
        exec kill -9 $master_pid
        exec kill -CONT $pid2
        wait_for_condition 50 100 {
            [string match "*could lose acknowledged writes*" [nickv_info $nk last_failover]]
        } else {
            fail "not called off: [nickv_cmd $nk info failover]"
        }
        assert_equal 0 [nickv_info $nk failovers]
        assert_equal slave [lindex [$r2 role] 0]
        # The operator's way out: R1 may be promoted after all.
        $r1 config set replica-priority 100
        wait_for_condition 100 100 {
            [nickv_info $nk failovers] == 1
        } else {
            fail "no failover: [nickv_cmd $nk info failover]"
        }
        nickv_wait_served $r1
        assert_equal yes [$r1 get only-on-r1]
    }
}

nickv_topology [list master {nickv-offload no} overrides $fe_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --lease-time 3000]] {
    set r [lindex $replicas 0]
    nickv_wait_failover_view $nk 1

    test {Nic-KV does not probe itself when the master lists its link as a replica} {
        # nickv-offload no: Nic-KV's link is an ordinary replica there.
        wait_for_condition 50 100 {
            [string match "*port=[dict get $nk port],*" [[srv -1 client] info replication]]
        } else {
            fail "the master does not list Nic-KV's link"
        }
        assert_stays 1.2 {[nickv_probe_node $nk 127.0.0.1:[dict get $nk port]] eq {}} \
            "Nic-KV probes its own link"
    }

    test {Nic-KV's link (nickv-offload no) never counts for WAIT, whatever other clients say} {
        # Its hello is refused and it streams as an ordinary replica, but
        # Nic-KV's backlog is no node a failover could promote. Before, its
        # ACK counted once confirmed: WAIT 2 answered 2 with one replica.
        # Hellos refused to other clients (not the nickv-user) do not make
        # the master forget which connection is the link: a ring of the
        # last 16 refused ones did.
        set m [srv -1 client]
        wait_for_condition 50 100 {
            [string match "*port=[dict get $nk port],*" [$m info replication]]
        } else {
            fail "the master does not list Nic-KV's link"
        }
        assert_equal OK [nickv_write_when_good $nk $m set linked 1]
        assert_equal 1 [$m wait 2 1000]
        for {set i 0} {$i < 20} {incr i} {
            set c [redis 127.0.0.1 [srv -1 port]]
            catch {$c replconf nickv "hello"}
            $c close
        }
        $m set linked 2
        assert_equal 1 [$m wait 2 1000]
    }

    test {Nic-KV failover: CONFIG SET failover no calls off an attempt under way} {
        exec kill -9 $master_pid
        wait_for_condition 50 100 {
            [nickv_info $nk failover_state] eq {fencing}
        } else {
            fail "not fencing: [nickv_cmd $nk info failover]"
        }
        assert_equal OK [nickv_cmd $nk config set failover no]
        wait_for_condition 50 100 {
            [string match "*failover was turned off*" [nickv_info $nk last_failover]]
        } else {
            fail "not called off: [nickv_cmd $nk info failover]"
        }
        assert_stays 3.5 {[nickv_info $nk failovers] == 0 && [lindex [$r role] 0] eq {slave}} \
            "a failover after it was turned off"
    }
    nickv_stop $nk

    test {Nic-KV with failover yes does not start without a state file it can write} {
        # Its temporary file cannot be replaced: a directory has its
        # name (root writes anywhere; a missing directory is said
        # otherwise: nickv-sample-conf.tcl).
        set dir [tmpdir nickv-ro]
        file mkdir $dir/nickv.state.tmp
        set port [find_available_port [expr {$::baseport + 250}] 200]
        catch {exec [nickv_binary] --port $port --master-port $master_port --failover yes \
                   --node 127.0.0.1:$master_port --state-file $dir/nickv.state 2>@1} out
        assert_match {*cannot write the state file*Is a directory*does not start without it*} $out
    }
}

# A Nic-KV that starts while the master is dead still knows what to do:
# the state file remembers the master's nickv-lease and its replicas.
nickv_topology [list overrides $fe_conf replicas 2 \
        nickv [list {*}[nickv_user_args] --failover yes]] {
    lassign $replicas r1 r2
    set ports $replica_ports
    nickv_wait_failover_view $nk 2

    test {Nic-KV failover: a Nic-KV restarted while the master is dead fails it over (state file)} {
        [srv -2 client] set before 1
        # Acknowledged by both: only then is it promised to survive.
        assert_equal 2 [[srv -2 client] wait 2 5000]
        wait_for_condition 50 100 {
            [string match "*master-lease 1*replica *replica *" [exec cat [file dirname [dict get $nk log]]/nickv.state]]
        } else {
            fail "the state file does not remember the replicas: [exec cat [file dirname [dict get $nk log]]/nickv.state]"
        }
        nickv_stop $nk KILL
        exec kill -9 $master_pid
        set nk [nickv_restart $nk]
        wait_for_condition 100 100 {
            [nickv_info $nk failovers] == 1
        } else {
            fail "no failover: [nickv_cmd $nk info failover]\n[exec tail -n 20 [dict get $nk log]]"
        }
        lassign [nickv_master_addr $nk] host nport
        assert {[lsearch $ports $nport] >= 0}
        set nm [redis 127.0.0.1 $nport]
        $nm select 9
        nickv_wait_served $nm
        assert_equal 1 [$nm get before]
        $nm close
    }
}

# Nic-KV and the master restart together (a host power-cycle), the master
# empty: the state file remembers the master's run id and our stream, so
# the new process is vetted, not granted, and the replicas keep their data.
nickv_topology [list overrides $fe_conf replicas 2 \
        nickv [list {*}[nickv_user_args] --failover yes]] {
    lassign $replicas r1 r2
    nickv_wait_failover_view $nk 2

    test {Nic-KV failover: Nic-KV and the master restart together, the master empty: it is not granted} {
        set m [srv -2 client]
        for {set i 0} {$i < 50} {incr i} { $m set k$i $i }
        # Acknowledged by both: only then are they promised to survive.
        assert_equal 2 [$m wait 2 5000]
        set state [file dirname [dict get $nk log]]/nickv.state
        wait_for_condition 50 100 {
            [string match "*master-runid *stream *replica *replica *" [exec cat $state]]
        } else {
            fail "the state file does not remember the master: [exec cat $state]"
        }
        nickv_stop $nk KILL
        exec kill -9 [srv -2 pid]
        restart_server -2 true false
        set nk [nickv_restart $nk]
        wait_for_condition 100 100 {
            [nickv_info $nk failovers] == 1
        } else {
            fail "no failover: [nickv_cmd $nk info failover]\n[exec tail -n 20 [dict get $nk log]]"
        }
        assert_match {*restarted*} [exec cat [dict get $nk log]]
        lassign [nickv_master_addr $nk] host nport
        set nm [redis 127.0.0.1 $nport]
        $nm select 9
        nickv_wait_served $nm
        assert_equal 50 [$nm dbsize]
        $nm close
    }
}

# A master restarted with no replica to promote waits for the operator:
# CONFIG SET nickv-lease no on it makes Nic-KV take it as it is.
start_server [list tags {"nickv repl external:skip"} overrides $fe_conf] {
    set mport [srv 0 port]
    set nk [nickv_start $mport {*}[nickv_user_args] --failover yes]
    wait_for_condition 100 100 {
        [nickv_info $nk master_lease] eq {on} && [catch {[srv 0 client] set a 1}] == 0
    } else {
        fail "no lease: [nickv_cmd $nk info failover]"
    }
    # Nic-KV's stream holds the write: the master, restarted from the RDB
    # of Nic-KV's full sync (our history, but older), is not ours.
    set moff [status [srv 0 client] master_repl_offset]
    wait_for_condition 100 50 {
        [nickv_info $nk master_repl_offset] >= $moff
    } else {
        fail "Nic-KV does not stream the write: [nickv_info $nk master_repl_offset] < $moff"
    }

    test {Nic-KV: a restarted master with nobody to promote serves once the operator accepts it} {
        exec kill -9 [srv 0 pid]
        restart_server 0 true false
        set m [srv 0 client]
        wait_for_condition 50 100 {
            [string match "*restarted*" [nickv_probe_node $nk 127.0.0.1:$mport]] ||
            [string match "*no replica to promote*" [nickv_info $nk failover_blocked]]
        } else {
            fail "the restart is not seen: [nickv_cmd $nk info failover]"
        }
        assert_stays 0.5 {[catch {$m set b 1} e] && [string match {READONLY*no lease*} $e]} \
            "a write on the restarted master: [nickv_cmd $nk info failover]"
        catch {$m set b 1} e
        if {![string match {READONLY*no lease*} $e]} {
            fail "a write on the restarted master: $e\n[nickv_cmd $nk info failover]\n[$m info nickv]"
        }
        $m config set nickv-lease no
        wait_for_condition 50 100 {
            [string match {*flags=ok*} [nickv_probe_node $nk 127.0.0.1:$mport]]
        } else {
            fail "not taken as it is: [nickv_cmd $nk info failover]"
        }
        $m config set nickv-lease yes
        wait_for_condition 50 100 {
            [catch {$m set c 1}] == 0
        } else {
            fail "not granted again: [$m info nickv]"
        }
    }
    nickv_stop $nk
}

# Nic-KV's link down (a resync, a refused hello) while its probes still
# grant the lease: its verdicts must go on counting. Before, the master
# dropped them with the link, and WAIT counted a replica Nic-KV held
# invalid: a write it acknowledged could be missing from the replica a
# failover then promoted (that one was never named, so never waited for).
# The master serves PSYNC once Nic-KV grants it a lease.
nickv_topology [list overrides $fe_conf replicas {{nickv-offload no}} \
        nickv [list {*}[nickv_user_args] --failover no --min-slaves 1]] {
    set m $master
    set r [lindex $replicas 0]
    set rport [lindex $replica_ports 0]
    nickv_wait_failover_view $nk 1

    test {Nic-KV verdicts count while its link is down and its probes grant the lease} {
        wait_for_condition 50 100 {
            [catch {$m set before 1}] == 0
        } else {
            fail "no write with one valid replica: [nickv_cmd $nk info failover]"
        }
        # The replica announces a port nobody listens on: Nic-KV's probes
        # find it invalid, yet it streams from the master and acknowledges.
        set closed [find_available_port [expr {$rport + 100}] 100]
        $r config set replica-announce-port $closed
        $r client kill type master
        fe_wait_invalid $nk 127.0.0.1:$closed
        wait_for_condition 50 100 {
            [catch {$m set invalid 1} e] == 1 && [string match {NOREPLICAS*} $e]
        } else {
            fail "a write with no valid replica: [nickv_cmd $nk info failover]"
        }
        # Nic-KV's link goes, and cannot come back; the probes stay.
        $m config set nickv-offload no
        $m client kill type replica
        wait_for_condition 50 100 {
            [nickv_status $m nickv_daemon] eq {none}
        } else {
            fail "Nic-KV's link is still up: [$m info nickv]"
        }
        wait_for_condition 50 100 {
            [string match {*slave0:*state=online*} [$m info replication]]
        } else {
            fail "the replica is not back: [$m info replication]"
        }
        # Past the time the verdicts would lapse without the lease.
        assert_stays 2.5 {[nickv_status $m nickv_lease] eq {held}} "the lease lapsed with the verdicts"
        catch {$m set linkdown 1} e
        assert_match {NOREPLICAS*} $e
        assert_equal 0 [$m exists linkdown]
        # ... and they follow the probes: the replica, reachable again,
        # counts at once, with the link still down.
        $r config set replica-announce-port $rport
        $r client kill type master
        wait_for_condition 50 100 {
            [catch {$m set valid 1}] == 0
        } else {
            fail "the replica does not count again: [nickv_cmd $nk info failover]\n[$m info nickv]"
        }
        assert_equal 1 [$m wait 1 2000]
        # Nic-KV streams meanwhile as a plain replica: not the daemon.
        assert_equal none [nickv_status $m nickv_daemon]
        $m config set nickv-offload yes
    }
}

# A replica's process is learnt (its run id) while the master lists it; one
# restarted while it was not listed answered with its new run id at the
# moment it could not be taken, and kept the old one for ever: it was "not
# the replica the master listed", and with no other candidate the failover
# was called off for good (found by utils/failover-bench.py, whose killed
# masters come back as replicas).
nickv_topology [list overrides $fe_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1]] {
    set rport [lindex $replica_ports 0]
    nickv_wait_failover_view $nk 1

    test {Nic-KV failover: a replica restarted while unlisted is a candidate once listed again} {
        [srv 0 client] replicaof no one
        wait_for_condition 50 100 {
            [string match "*addr=127.0.0.1:$rport,*unlisted*" [nickv_cmd $nk info failover]]
        } else {
            fail "the replica is still listed: [nickv_cmd $nk info failover]"
        }
        restart_server 0 true false
        # Its new process answers Nic-KV's probes while still unlisted.
        set answers [fe_answers $nk 127.0.0.1:$rport]
        wait_for_condition 50 100 {
            [fe_answers $nk 127.0.0.1:$rport] > $answers
        } else {
            fail "the restarted replica does not answer Nic-KV: [nickv_probe_node $nk 127.0.0.1:$rport]"
        }
        [srv 0 client] replicaof 127.0.0.1 $master_port
        wait_for_sync [srv 0 client]
        nickv_wait_failover_view $nk 1
        set m [srv -1 client]
        nickv_write_when_good $nk $m set k v
        assert {[$m wait 1 2000] >= 1}
        exec kill -9 [srv -1 pid]
        wait_for_condition 100 100 {
            [nickv_info $nk failovers] == 1
        } else {
            fail "no failover: [nickv_cmd $nk info failover]\n[exec tail -n 20 [dict get $nk log]]"
        }
        assert_equal [list 127.0.0.1 $rport] [nickv_master_addr $nk]
        set r [redis 127.0.0.1 $rport]
        $r select 9
        nickv_wait_served $r
        assert_equal v [$r get k]
        $r close
    }
}

# A WAIT that a master blocked while it held its lease must not be answered
# by acknowledgements that arrive after the lease ran out: by then another
# node may have been promoted without the write (a replica Nic-KV did not
# count). Seen as a possibility while hunting a loss in the failover
# checker; here made certain with a stopped replica and a killed Nic-KV.
nickv_topology [list master {nickv-offload no} overrides $fe_conf replicas 1 \
        nickv [list {*}[nickv_user_args] --failover no]] {
    set m $master
    set r [lindex $replicas 0]

    test {Nic-KV lease: a WAIT blocked when the lease runs out counts no acknowledgement after it} {
        wait_for_condition 100 100 {
            [nickv_status $m nickv_lease] eq {held}
        } else {
            fail "the master holds no lease: [$m info nickv]"
        }
        exec kill -STOP [srv 0 pid]
        assert_equal OK [$m set waited 1]
        set rd [redis_deferring_client -1]
        $rd wait 1 4000
        wait_for_blocked_clients_count 1 100 20 -1
        nickv_stop $nk KILL
        wait_for_condition 100 50 {
            [nickv_status $m nickv_lease] ne {held}
        } else {
            fail "the lease did not run out"
        }
        exec kill -CONT [srv 0 pid]
        # The replica's acknowledgement comes (it has the write), but
        # the master may have been replaced: WAIT says 0.
        assert_equal 0 [$rd read]
        wait_for_ofs_sync $m $r
        $rd close
    }
}

# Replicas a little past what Nic-KV knows of the master's stream: the
# master wrote to its direct replicas after Nic-KV last saw its offset (its
# link down, its last INFO older), then stopped. Such a claim cannot be
# checked alone, and the failover is called off while the master stays
# stopped. With confirm-claims yes, two vetted replicas at two addresses
# that both hold the bytes confirm each other and one is promoted; two at
# one address (one process could have connected twice) confirm nothing.

# A replica's offset, asked as Nic-KV's user (a replica may require a
# password).
proc fe_offset {port} {
    set host 127.0.0.1
    if {[info exists ::fe_host($port)]} { set host $::fe_host($port) }
    set c [redis $host $port]
    $c auth $::nickv_test_user $::nickv_test_pass
    set v [status $c slave_repl_offset]
    $c close
    return $v
}

# Whether node addr answered none of Nic-KV's probes for 0.3 s (three
# probe intervals).
proc fe_quiet {nk addr} {
    set n [fe_answers $nk $addr]
    after 300
    expr {[fe_answers $nk $addr] == $n}
}

# Cut Nic-KV's link on the master m and keep it down, write, have both
# direct replicas receive it, stop the master: retried until Nic-KV's
# stream bound is below what the replicas hold (a lease answer may carry
# the master's offset after the write). Returns the value written.
proc fe_stop_past_bound {nk m mpid ports} {
    set user $::nickv_test_user
    for {set attempt 0} {$attempt < 10} {incr attempt} {
        wait_for_condition 100 100 {
            [nickv_info $nk master_link_status] eq {up}
        } else {
            fail "Nic-KV's link is not up: [nickv_cmd $nk info upstream]"
        }
        $m acl setuser $user -psync -sync
        regexp "id=(\[0-9\]+) \[^\n\]* user=$user " [$m client list type replica] -> id
        $m client kill id $id
        wait_for_condition 100 20 {
            [nickv_info $nk master_link_status] ne {up}
        } else {
            fail "Nic-KV's link is still up"
        }
        set v "[clock milliseconds]-$attempt"
        assert_equal OK [nickv_write_when_good $nk $m set past-bound $v]
        # Both replicas have it (no WAIT: with Nic-KV's link down, the
        # master counts their ACKs only once a lease answer told Nic-KV
        # its offset, and then the bound is past the write).
        set moff [status $m master_repl_offset]
        wait_for_condition 100 20 {
            [fe_offset [lindex $ports 0]] >= $moff && [fe_offset [lindex $ports 1]] >= $moff
        } else {
            fail "the replicas did not get the write"
        }
        exec kill -STOP $mpid
        set offsets {}
        foreach p $ports { lappend offsets [fe_offset $p] }
        set bound [nickv_info $nk stream_bound]
        if {$bound < [lindex $offsets 0] && [lindex $offsets 0] == [lindex $offsets 1]} { return $v }
        # Nic-KV saw the master's offset after the write: not the case.
        exec kill -CONT $mpid
        $m acl setuser $user +psync +sync
    }
    fail "the master's offset reached Nic-KV every time: $bound, $offsets"
}

start_server [list tags {"nickv repl external:skip"} overrides $fe_conf] {
    set m [srv 0 client]
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides [concat $fe_conf {nickv-offload no}]] {
    start_server [list overrides [concat $fe_conf {nickv-offload no}]] {
        set r1 [srv -1 client]
        set r2 [srv 0 client]
        set ports [list [srv -1 port] [srv 0 port]]
        foreach r [list $r1 $r2] { $r replicaof 127.0.0.1 $mport }
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes --confirm-claims yes]
        # The other addresses the replicas take below are members too.
        nickv_add_member $nk 127.0.0.2:[srv 0 port]
        nickv_add_member $nk 127.0.0.3:[srv -1 port]
        foreach r [list $r1 $r2] { wait_for_sync $r }
        nickv_wait_failover_view $nk 2
        $m select 9

        # Nic-KV lists the replica at addr as valid, its run_id matching
        # runid_re, and its link is up.
        proc fe_wait_node {nk addr runid_re what} {
            wait_for_condition 100 100 {
                [regexp "node\[0-9\]+:addr=$addr,\[^\r\]*flags=ok\[^\r\]*run_id=$runid_re" \
                     [nickv_cmd $nk info failover]] &&
                [nickv_info $nk master_link_status] eq {up}
            } else {
                fail "$addr: $what: [nickv_cmd $nk info failover]"
            }
        }

        # Both replicas' processes known (vetted), at addr1 and addr2.
        proc fe_wait_vetted {nk addrs} {
            foreach a $addrs {
                fe_wait_node $nk $a {[0-9a-f]{40}} "Nic-KV does not know its process"
            }
            nickv_wait_failover_view $nk 2
        }

        # The master stopped past the bound: the failover must be called
        # off (twice), and nothing promoted; then the master resumes.
        proc fe_called_off {nk m mpid ports} {
            set before [nickv_info $nk failovers_aborted]
            fe_stop_past_bound $nk $m $mpid $ports
            set err {}
            wait_for_condition 100 100 {
                [nickv_info $nk failovers_aborted] >= $before + 2
            } else {
                # (The else script's result is run: it must be empty.)
                set err "no failover attempt called off: [nickv_cmd $nk info failover]"
                concat
            }
            set failovers [nickv_info $nk failovers]
            set info [nickv_cmd $nk info failover]
            exec kill -CONT $mpid
            if {$err ne {}} { fail $err }
            assert_equal 0 $failovers
            assert_match {*candidates_corroborated:0*} $info
            assert_match {*past the * bytes the master's stream is known to hold: it cannot be checked*} \
                [exec cat [dict get $nk log]]
            $m acl setuser $::nickv_test_user +psync +sync
            nickv_wait_failover_view $nk 2
        }

        test {Nic-KV failover: replicas past the stream Nic-KV knows, at one address, do not confirm each other} {
            fe_wait_vetted $nk [list 127.0.0.1:[srv -1 port] 127.0.0.1:[srv 0 port]]
            fe_called_off $nk $m $mpid $ports
        }

        test {Nic-KV failover: replicas past the stream Nic-KV knows are not taken with confirm-claims no} {
            # r2 now at another address (as the master lists it): 127.0.0.2.
            $r2 config set bind "127.0.0.1 127.0.0.2"
            $r2 config set replica-announce-ip 127.0.0.2
            $r2 client kill type master
            fe_wait_vetted $nk [list 127.0.0.1:[srv -1 port] 127.0.0.2:[srv 0 port]]
            assert_equal OK [nickv_cmd $nk config set confirm-claims no]
            fe_called_off $nk $m $mpid $ports
        }

        test {Nic-KV failover: a replica whose process the probes could not learn confirms nothing} {
            # r1 requires a password (the probes ask without one) and
            # moves to 127.0.0.3: Nic-KV never learns its run id there.
            # The failover asks it with Nic-KV's password: it answers,
            # but is not vetted. It stops listening at 127.0.0.1: there
            # the probes knew its process, and a replica unlisted less
            # than a second before the master's last answer is still a
            # candidate (collectCandidates), so on a loaded machine the
            # old address was vetted and confirmed r2 (CI, twice). A
            # rebind closes no connection: Nic-KV's probe connection to
            # the old address is killed too, or it goes on answering
            # (and the failover asks through it).
            assert_equal OK [nickv_cmd $nk config set confirm-claims yes]
            $r1 config set requirepass fe-secret
            $r1 config set bind "127.0.0.3"
            set ::fe_host([srv -1 port]) 127.0.0.3
            $r1 config set replica-announce-ip 127.0.0.3
            $r1 client kill type master
            $r1 client kill laddr 127.0.0.1:[srv -1 port] skipme yes
            set r1addr 127.0.0.3:[srv -1 port]
            fe_wait_node $nk $r1addr "(\r|,)" "not listed without a run id"
            # The old address answers no probe any more.
            set old 127.0.0.1:[srv -1 port]
            wait_for_condition 20 100 {
                [fe_quiet $nk $old]
            } else {
                fail "$old still answers probes: [nickv_probe_node $nk $old]"
            }
            fe_wait_vetted $nk [list 127.0.0.2:[srv 0 port]]
            fe_called_off $nk $m $mpid $ports
            # r1 back at 127.0.0.1, without a password.
            $r1 config set bind "127.0.0.1 127.0.0.3"
            unset ::fe_host([srv -1 port])
            $r1 config set requirepass ""
            $r1 config set replica-announce-ip ""
            $r1 client kill type master
        }

        test {Nic-KV failover: replicas past the stream Nic-KV knows, at two addresses, confirm each other and one is promoted} {
            assert_equal OK [nickv_cmd $nk config set confirm-claims yes]
            fe_wait_vetted $nk [list 127.0.0.1:[srv -1 port] 127.0.0.2:[srv 0 port]]
            set v [fe_stop_past_bound $nk $m $mpid $ports]
            if {[catch {fo_wait_failovers $nk 1} e]} {
                exec kill -CONT $mpid
                fail $e
            }
            assert_equal 1 [nickv_info $nk candidates_corroborated]
            assert_equal 0 [nickv_info $nk candidates_distrusted]
            exec kill -CONT $mpid
            lassign [nickv_master_addr $nk] nhost nport
            set nm [redis 127.0.0.1 $nport]
            $nm select 9
            nickv_wait_served $nm
            assert_equal $v [$nm get past-bound]
            fo_wait_replica_of $mport $nport
            set others {}
            foreach p [list $mport {*}$ports] {
                if {$p == $nport} continue
                fo_wait_replica_of $p $nport
                set c [redis 127.0.0.1 $p]
                $c select 9
                lappend others $c
            }
            # (The old master's clients were killed as it was demoted.)
            set om [redis 127.0.0.1 $mport]
            $om acl setuser $::nickv_test_user +psync +sync
            $om close
            nickv_assert_digests $nm $others
            foreach c $others { $c close }
            $nm close
        }
        nickv_stop $nk
    }
    }
}

# A direct replica ahead of Nic-KV: Nic-KV is stopped while the master
# still holds its lease and writes, the direct replica acknowledges what
# Nic-KV never gets, the master is killed. Nic-KV's failover distrusts the
# direct replica's claim (more than the stream it knows of) and promotes
# the replica behind it: so nothing the direct replica alone holds may
# have been acknowledged (nickvDirectAckCounts, src/nickv_server.c).
# Before that rule WAIT acknowledged all of it, and all of it was lost.
start_server [list tags {"nickv repl external:skip"} overrides $fe_conf] {
start_server [list overrides $fe_conf] {
start_server [list overrides [concat $fe_conf {nickv-offload no}]] {
    set mport [srv -2 port]
    set mpid [srv -2 pid]
    set a [srv -1 client]
    set d [srv 0 client]
    $a replicaof 127.0.0.1 $mport
    $d replicaof 127.0.0.1 $mport
    set nk [nickv_start $mport {*}[nickv_user_args] --failover yes --min-slaves 1]

    test {Nic-KV: a direct replica ahead of Nic-KV when the master dies holds no acknowledged write} {
        nickv_wait_failover_view $nk 2
        wait_for_condition 100 100 {
            [nickv_info $nk connected_slaves] == 1
        } else {
            fail "the replica did not move behind Nic-KV: [nickv_cmd $nk info replication]"
        }
        set m [redis 127.0.0.1 $mport]
        $m select 9
        # While Nic-KV holds the stream, the direct replica's ACK counts.
        $m set before 1
        assert_equal 2 [$m wait 2 5000]
        set nkpid [dict get $nk pid]
        exec kill -STOP $nkpid
        # Every thread stopped before the writes (kill only sends the
        # signal): a fan-out thread still running would relay them to the
        # replica behind Nic-KV, as far as the direct one then.
        wait_for_condition 50 20 {
            [regexp -all -line {^\s*T} [exec ps -L -o stat= -p $nkpid]] ==
            [llength [split [string trim [exec ps -L -o stat= -p $nkpid]] "\n"]]
        } else {
            fail "Nic-KV did not stop: [exec ps -L -o stat= -p $nkpid]"
        }
        set big [string repeat x 262144]
        set acked {}
        set written 0
        for {set i 0} {$i < 40} {incr i} {
            if {[catch {$m set k$i $big}]} break
            incr written
            if {[catch {$m wait 1 100} w] == 0 && $w >= 1} { lappend acked $i }
        }
        set doffset [status $d slave_repl_offset]
        exec kill -9 $mpid
        exec kill -CONT $nkpid
        # The direct replica got what the master wrote meanwhile; WAIT
        # acknowledged none of it.
        assert {$written >= 1}
        assert_equal {} $acked
        wait_for_condition 100 100 {
            [nickv_info $nk failovers] == 1 && [nickv_info $nk failover_state] eq {watching}
        } else {
            fail "no failover: [nickv_cmd $nk info failover]"
        }
        lassign [nickv_master_addr $nk] nhost nport
        assert_equal [srv -1 port] $nport
        # Its claim is past the stream Nic-KV knows (plausible or not): no
        # candidate, and, holding nothing acknowledged past what Nic-KV
        # told the master it holds, no reason to call the failover off.
        assert_match "*it claims offset $doffset, *the master's stream is known to hold*" \
            [exec cat [dict get $nk log]]
        assert_equal 0 [nickv_info $nk failovers_aborted]
        set nm [redis 127.0.0.1 $nport]
        $nm select 9
        nickv_wait_served $nm
        assert_equal 1 [$nm get before]
        # The direct replica follows the new master: its extra bytes go.
        fo_wait_replica_of [srv 0 port] $nport
        $d select 9
        nickv_assert_digests $nm [list $d]
        $nm close
        $m close
        nickv_stop $nk
    }
}
}
}
