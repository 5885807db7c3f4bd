# A Nic-KV on every server, leadership in etcd (NIC-KV.md, "Many Nic-KVs"):
# three SKV nodes, each with "its" Nic-KV (--local-node), all three
# Nic-KVs for one master-name, coordinated through a real 3-member etcd
# cluster (Debian's etcd-server) on loopback. A list-append checker, in the
# manner of nickv-failover-faults.tcl: three clients append, each append
# followed by WAIT 1 (min-slaves 1), through the master the Nic-KVs name
# (asked in turn, as clients ask Sentinels), while whole-server faults are
# injected one after another: a server's node and Nic-KV killed together
# or stopped together, the master's Nic-KV alone killed, the leader cut off
# from etcd, an etcd member killed, etcd's quorum lost and restored, a
# standby killed, the master's process alone killed. After each, the
# writers go on until the topology is whole again. At the end every
# acknowledged append must be on the final master, in order, no replaced
# master may have taken a write, and every node must have the same data.

source tests/skv/helpers.tcl
source tests/skv/etcd.tcl
package require http

# ------------------------------------------------------------ Helpers ---

# The Nic-KVs, by node index (0..2); a killed one is {}.
proc co_nk {i} { return $::co(nk,$i) }

proc co_alive {} {
    set l {}
    for {set i 0} {$i < 3} {incr i} { if {$::co(nk,$i) ne {}} { lappend l $i } }
    return $l
}

# The master as the Nic-KVs name it: the first live one that answers.
proc co_master_addr {} {
    foreach i [co_alive] {
        if {![catch {nickv_cmd $::co(nk,$i) sentinel get-master-addr-by-name mymaster} a] &&
            [llength $a] == 2} {
            return $a
        }
    }
    return {}
}

proc co_role {i} {
    if {$::co(nk,$i) eq {}} { return dead }
    return [nickv_info $::co(nk,$i) coordinator_role]
}

proc co_leaders {} {
    set l {}
    foreach i [co_alive] { if {[co_role $i] eq {leader}} { lappend l $i } }
    return $l
}

# Index of the node on port.
proc co_index {port} {
    for {set i 0} {$i < 3} {incr i} { if {$::co(port,$i) == $port} { return $i } }
    fail "no node on port $port"
}

proc co_level {i} { expr {$i - 2} }

# A call of etcd's JSON gateway as root (the test's own user), answer's text.
proc co_etcd_post {path body} {
    set hdr {}
    if {$path ne {/v3/auth/authenticate}} {
        if {![info exists ::co_etcd_token]} {
            set a [co_etcd_post /v3/auth/authenticate {{"name":"root","password":"co-root-secret"}}]
            if {![regexp {"token":"([^"]+)"} $a -> ::co_etcd_token]} { fail "no etcd token: $a" }
        }
        set hdr [list Authorization $::co_etcd_token]
    }
    set url [lindex [etcd_running_urls] 0]
    if {![string match http* $url]} { set url http://$url }
    set tok [::http::geturl $url$path -query $body -type application/json -headers $hdr -timeout 3000]
    set data [::http::data $tok]
    ::http::cleanup $tok
    return $data
}

# When etcd's sweep of expired leases (every 500 ms, its lessor's loop)
# last ran: a lease of 2 s left to expire, its TTL read every 5 ms until it
# is gone (the clock's ms, a few late).
proc co_sweep_tick {} {
    if {![regexp {"ID":"([0-9]+)"} [co_etcd_post /v3/lease/grant {{"TTL":"2"}}] -> id]} {
        fail "no lease for the sweep's phase"
    }
    set start [clock milliseconds]
    after 1900
    while {[clock milliseconds] - $start < 5000} {
        set a [co_etcd_post /v3/lease/timetolive "{\"ID\":\"$id\"}"]
        if {[regexp {"TTL":"-1"} $a]} { return [clock milliseconds] }
        after 5
    }
    fail "a lease of 2 s still there after 5 s"
}

# Dead leaders' etcd leases that the standbys (nodes 1 and 2) revoked.
proc co_revoked {} {
    expr {[nickv_info [co_nk 1] leader_leases_revoked] + [nickv_info [co_nk 2] leader_leases_revoked]}
}

# Every node but the master (client mm, on port mport) has its data.
proc co_assert_digests {mm mport} {
    set others {}
    for {set i 0} {$i < 3} {incr i} {
        if {$::co(port,$i) == $mport} continue
        set r [redis 127.0.0.1 $::co(port,$i)]
        $r select 9
        lappend others $r
    }
    nickv_assert_digests $mm $others
    foreach r $others { $r close }
}

# "master", or "slave <its master's port>", of the node on port ({} if it
# does not answer).
proc co_node_role {port} {
    if {[catch {
        set c [redis 127.0.0.1 $port]
        set r [$c role]
        $c close
    }]} { return {} }
    if {[lindex $r 0] eq {slave}} { return "slave [lindex $r 2]" }
    return [lindex $r 0]
}

# Node 0's Nic-KV, leading, killed (-9), at the clock's ms "at" if given;
# once a standby leads: its options, for nickv_restart.
proc co_kill_leading_nickv {{at {}}} {
    wait_for_condition 300 100 {
        [co_leaders] eq {0}
    } else {
        fail "node 0's Nic-KV does not lead: [co_role 0] [co_role 1] [co_role 2]"
    }
    if {$at ne {}} { after [expr {max(0, $at - [clock milliseconds])}] }
    set saved [co_nk 0]
    set ::co(killed_at) [clock milliseconds]
    nickv_stop $saved KILL
    set ::co(nk,0) {}
    wait_for_condition 1000 10 {
        [llength [co_leaders]] == 1
    } else {
        fail "no standby leads: [co_role 1] [co_role 2]"
    }
    set ::co(led_at) [clock milliseconds]
    return $saved
}

# Until the clock reads until_ms, neither standby (nodes 1 and 2) leads;
# if one does, the stopped relays are let go and the test fails with msg.
proc co_standbys_wait {until_ms relay_pids msg} {
    set seconds [expr {max(0, $until_ms - [clock milliseconds]) / 1000.0}]
    if {[catch {assert_stays $seconds {[co_role 1] ne {leader} && [co_role 2] ne {leader}} $msg} e]} {
        foreach p $relay_pids { exec kill -CONT $p }
        error $e $::errorInfo
    }
}

# Start node i's Nic-KV (etcd through urls, as etcd user nickv). It names
# its own node alone: the others are members because their Nic-KVs
# registered them in etcd (NIC-KV.md, "Members").
proc co_nickv_start {i urls} {
    set a [list {*}[nickv_user_args] --failover yes --min-slaves 1 --coordinator $urls \
               --coordinator-user nickv --coordinator-password $::co_etcd_pw \
               --local-node 127.0.0.1:$::co(port,$i) --master-host 127.0.0.1 --node 127.0.0.1:$::co(port,$i)]
    set ::co(nk,$i) [nickv_start $::co(port,0) {*}$a]
}

proc co_connect {} {
    global co
    catch {$co(r) close}
    set co(r) {}
    set deadline [expr {[clock milliseconds] + 20000}]
    while {[clock milliseconds] < $deadline} {
        set a [co_master_addr]
        if {$a ne {} && ![catch {redis {*}$a} r]} {
            if {![catch {$r select 9}]} {
                set co(r) $r
                set co(rport) [lindex $a 1]
                return
            }
            catch {$r close}
        }
        after 50
    }
    fail "no master to connect to: [co_state]"
}

# What each Nic-KV says, for failure messages.
proc co_state {} {
    set s {}
    foreach i [co_alive] {
        append s "\n--- Nic-KV of node $i ($::co(port,$i), [co_role $i]):\n"
        append s [nickv_cmd [co_nk $i] info coordinator]
        append s [nickv_cmd [co_nk $i] info failover]
        append s [exec tail -n 25 [dict get [co_nk $i] log]]
    }
    return $s
}

# One append by each client, round robin; the time of the last
# acknowledged one, for the longest pause.
proc co_round {} {
    global co
    for {set c 0} {$c < 3} {incr c} {
        set v $co(next,$c)
        incr co(next,$c)
        incr co(attempted)
        if {$co(r) eq {}} { co_connect }
        set pushed [expr {[catch {$co(r) rpush list:$c $v} e] == 0}]
        if {$pushed && $co(r) eq $co(stopped)} {
            # The stopped master took a write after it resumed: it must
            # have been refused (its lease ran out).
            lappend co(split) "list:$c $v"
        }
        if {$pushed && [catch {$co(r) wait 1 1000} w] == 0 && $w >= 1} {
            lappend co(acked,$c) $v
            incr co(acknowledged)
            set now [clock milliseconds]
            if {$now - $co(last_ack) > $co(pause)} { set co(pause) [expr {$now - $co(last_ack)}] }
            # Two probe intervals, the wait of a WAIT that only the next
            # lease answers could confirm (issue 32): counted.
            if {$now - $co(last_ack) >= 185 && $now - $co(last_ack) <= 230} { incr co(steps) }
            set co(last_ack) $now
        } elseif {[string match {*READONLY*} $e] || [catch {$co(r) ping}]} {
            # A replica now, or gone: ask the Nic-KVs again.
            co_connect
        } else {
            after 10
        }
    }
}

# Whole: one leader, on the master's server, streaming from it; three
# valid replicas... (two: the master and two replicas); nothing to
# repoint; every live Nic-KV names the same master.
proc co_whole {} {
    set l [co_leaders]
    if {[llength $l] != 1} { return 0 }
    set nk [co_nk [lindex $l 0]]
    set info [nickv_cmd $nk info all]
    foreach {field want} {valid_replicas 2 repoint_pending 0 failover_state watching
                          master_lease on master_link_status up} {
        if {![regexp "\r\n$field:(\[^\r\n\]*)" "\r\n$info" -> v] || $v ne $want} { return 0 }
    }
    set m [nickv_cmd $nk sentinel get-master-addr-by-name mymaster]
    if {[co_index [lindex $m 1]] != [lindex $l 0]} { return 0 }
    foreach i [co_alive] {
        if {[nickv_cmd [co_nk $i] sentinel get-master-addr-by-name mymaster] ne $m} { return 0 }
    }
    return 1
}

proc co_until {cond what {ms 40000}} {
    set deadline [expr {[clock milliseconds] + $ms}]
    set rounds 0
    while {$rounds < 5 || ![uplevel 1 [list expr $cond]]} {
        co_round
        incr rounds
        if {[clock milliseconds] > $deadline} {
            fail "not $what in time: [co_state]"
        }
    }
}

proc co_until_whole {what} {
    co_until {[co_whole]} "whole again after $what" 60000
}

# ------------------------------------------------------------- The test ---

set co_conf [nickv_failover_overrides appendonly no]

start_server [list tags {"nickv repl external:skip"} overrides $co_conf] {
start_server [list overrides $co_conf] {
start_server [list overrides $co_conf] {
    global co
    array unset co
    for {set i 0} {$i < 3} {incr i} { set co(port,$i) [srv [co_level $i] port] }
    for {set i 1} {$i < 3} {incr i} { [srv [co_level $i] client] replicaof 127.0.0.1 $co(port,0) }
    set etcd [etcd_cluster_start 3]
    set urls [etcd_cluster_urls]
    # etcd as it should run: authentication on, Nic-KV's user allowed our
    # prefix only (root for the test's own etcdctl).
    set ::co_etcd_pw "co-etcd-secret"
    etcd_ctl --interactive=false user add root:co-root-secret
    etcd_ctl role add root
    etcd_ctl user grant-role root root
    etcd_ctl role add skv
    etcd_ctl role grant-permission skv --prefix=true readwrite /skv/mymaster/
    etcd_ctl --interactive=false user add nickv:$::co_etcd_pw
    etcd_ctl user grant-role nickv skv
    etcd_ctl auth enable
    etcd_ctl_flags_add --user root:co-root-secret
    # Node 0's Nic-KV reaches etcd through relays the test can cut.
    set relays {}
    set relay_urls {}
    foreach u [split [string map {etcd:// {}} $urls] ,] {
        lassign [split $u :] h p
        # A port another process took between the check and the bind: another.
        for {set attempt 0} {$attempt < 10} {incr attempt} {
            set lp [find_available_port [expr {$::baseport + 300 + 10 * $attempt}] 100]
            set fd [open "|tclsh tests/skv/tcp-proxy.tcl $lp $h $p 2>>[dict get $etcd dir]/relay.log" r]
            if {[gets $fd] eq {ready}} break
            catch {close $fd}
        }
        lappend relays $fd
        lappend relay_urls 127.0.0.1:$lp
    }
    set relay_pids {}
    foreach fd $relays { lappend relay_pids [pid $fd] }
    co_nickv_start 0 etcd://[join $relay_urls ,]
    co_nickv_start 1 $urls
    co_nickv_start 2 $urls

    test {Many Nic-KVs: one leader, the one on the master's server, fans out; every one names the master} {
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead: [co_role 0] [co_role 1] [co_role 2]\n[nickv_cmd [co_nk 0] info coordinator]"
        }
        assert_equal standby [co_role 1]
        assert_equal standby [co_role 2]
        # Each names its own node: the others are members because their
        # Nic-KVs registered them (etcd with authentication).
        set all [lsort [list 127.0.0.1:$co(port,0) 127.0.0.1:$co(port,1) 127.0.0.1:$co(port,2)]]
        foreach i {0 1 2} {
            wait_for_condition 50 100 {
                [lsort [split [nickv_info [co_nk $i] registered_members] ,]] eq $all
            } else {
                fail "node $i's Nic-KV does not see every member: [nickv_info [co_nk $i] registered_members]"
            }
        }
        # The link, and so the fan-out, is the leader's alone.
        wait_for_condition 100 100 {
            [nickv_info [co_nk 0] master_link_status] eq {up}
        } else {
            fail "the leader does not stream: [nickv_cmd [co_nk 0] info upstream]"
        }
        # The record reaches a standby one etcd round of each after the
        # leader wrote it: not necessarily before the link is up.
        wait_for_condition 50 100 {
            [nickv_info [co_nk 1] record_master] eq "127.0.0.1:$co(port,0)"
        } else {
            fail "a standby does not read the leader's record: [nickv_info [co_nk 1] record_master]"
        }
        assert_equal 0 [nickv_info [co_nk 0] records_not_ours]
        for {set i 1} {$i < 3} {incr i} {
            assert {[nickv_info [co_nk $i] master_link_status] ne {up}}
            assert_equal [list 127.0.0.1 $co(port,0)] [nickv_master_addr [co_nk $i]]
        }
        # A standby refuses a planned handover: the leader decides.
        assert_match {*standby*} [nickv_cmd [co_nk 1] failover]
        # A standby's state file records the master's history (from its
        # INFO: a standby holds no link), so that one restarted while the
        # master is dead checks candidates against it. Before, it recorded
        # none, and took a replica of any history.
        set mc [redis 127.0.0.1 $co(port,0)]
        set replid [status $mc master_replid]
        $mc close
        set sf [file dirname [dict get [co_nk 1] log]]/nickv.state
        wait_for_condition 50 100 {
            [string match "*\nstream $replid *" [exec cat $sf]]
        } else {
            fail "the standby's state file has no stream line for $replid:\n[exec cat $sf]"
        }
    }

    test {Many Nic-KVs: etcd without authentication, or with the wrong password, is refused} {
        # No user: Nic-KV does not start (unless coordinator-insecure yes).
        set dir [tmpdir nickv-noauth]
        catch {exec [nickv_binary] --port [find_available_port [expr {$::baseport + 450}] 50] \
                   --master-port $co(port,0) --coordinator $urls --local-node 127.0.0.1:$co(port,1) \
                   --state-file $dir/state --logfile $dir/log} out
        assert_match {*set coordinator-user and coordinator-password*} [exec cat $dir/log]
        # The wrong password: it runs, leads nothing, says why.
        set bad [nickv_start $co(port,0) {*}[nickv_user_args] --coordinator $urls \
                     --coordinator-user nickv --coordinator-password wrong --local-node 127.0.0.1:$co(port,2) \
                     --state-file $dir/state2]
        wait_for_condition 50 100 {
            [string match {*authentication*failed*} [nickv_info $bad etcd_error]]
        } else {
            fail "no authentication error: [nickv_cmd $bad info coordinator]"
        }
        assert_equal standby [nickv_info $bad coordinator_role]
        nickv_stop $bad
    }

    test {Many Nic-KVs: lease-time must fit in leader-ttl} {
        assert_match {*lease-time 2000 is too long for leader-ttl 2*} \
            [nickv_cmd [co_nk 0] config set lease-time 2000]
        assert_equal 250 [lindex [nickv_cmd [co_nk 0] config get lease-time] 1]
    }

    test {Many Nic-KVs: a record the leader did not write is neither followed by it nor kept} {
        set epoch [nickv_info [co_nk 0] record_epoch]
        set bogus [find_available_port [expr {$::baseport + 400}] 100]
        set e [expr {$epoch + 50}]
        etcd_ctl put /skv/mymaster/record "epoch $e master 127.0.0.1 $bogus named 0 successor -"
        wait_for_condition 100 50 {
            [nickv_info [co_nk 0] records_not_ours] >= 1 &&
            [nickv_info [co_nk 1] record_master] eq "127.0.0.1:$co(port,0)" &&
            [nickv_info [co_nk 1] record_epoch] >= $e
        } else {
            fail "the leader did not rewrite the record: [nickv_cmd [co_nk 0] info coordinator]"
        }
        assert_equal [list 127.0.0.1 $co(port,0)] [nickv_master_addr [co_nk 0]]
        wait_for_condition 100 50 {
            [nickv_master_addr [co_nk 1]] eq [list 127.0.0.1 $co(port,0)] &&
            [nickv_master_addr [co_nk 2]] eq [list 127.0.0.1 $co(port,0)]
        } else {
            fail "the standbys do not name the master again"
        }
        # An epoch no failover could reach does not parse: ignored.
        etcd_ctl put /skv/mymaster/record "epoch 9223372036854775807 master 127.0.0.1 $bogus named 0 successor -"
        wait_for_condition 100 50 {
            [nickv_info [co_nk 1] record_master] eq "127.0.0.1:$co(port,0)" &&
            [nickv_info [co_nk 1] record_epoch] >= $e
        } else {
            fail "the record was not rewritten: [nickv_cmd [co_nk 1] info coordinator]"
        }
        assert_equal 0 [nickv_info [co_nk 0] failovers]
        set c [redis 127.0.0.1 $co(port,0)]
        assert_equal OK [nickv_write_when_good [co_nk 0] $c set tamper 1]
        $c close
    }

    test {Many Nic-KVs: a leader key deleted by hand is not taken while its holder's etcd lease lives} {
        # Node 0's Nic-KV leads; it is cut off from etcd (its relays
        # stopped) and its key is deleted by hand. It cannot see that, and
        # may grant the master until its own etcd lease runs out. Before, a
        # standby led at once (and could have promoted after one
        # lease-time): two grantors, two masters after a failover.
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead: [co_role 0] [co_role 1] [co_role 2]"
        }
        foreach p $relay_pids { exec kill -STOP $p }
        etcd_ctl del /skv/mymaster/leader
        set t0 [clock milliseconds]
        wait_for_condition 50 20 {
            [nickv_info [co_nk 1] campaign_held] eq {leader-lease-alive} ||
            [nickv_info [co_nk 2] campaign_held] eq {leader-lease-alive}
        } else {
            foreach p $relay_pids { exec kill -CONT $p }
            fail "no standby holds back: [nickv_cmd [co_nk 1] info coordinator]"
        }
        # Node 0's etcd lease lives on for leader-ttl (2 s) after its last
        # keep-alive: no standby leads for the first second at least.
        co_standbys_wait [expr {$t0 + 1000}] $relay_pids "a standby led while the deleted key's lease lived"
        # Then etcd drops that lease, and a standby leads.
        wait_for_condition 100 100 {
            [llength [co_leaders]] == 1 && [lindex [co_leaders] 0] != 0
        } else {
            foreach p $relay_pids { exec kill -CONT $p }
            fail "no standby leads once the lease expired: [nickv_cmd [co_nk 1] info coordinator]"
        }
        foreach p $relay_pids { exec kill -CONT $p }
        # Leadership goes back to the master's own Nic-KV.
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead again: [co_role 0] [co_role 1] [co_role 2]"
        }
    }

    test {Many Nic-KVs: a successor that dies once named holds the standbys back once, not twice} {
        # As a leader that resigns: node 0's Nic-KV, cut off from etcd
        # (its relays stopped), "names" a successor in the record and its
        # key is freed. The successor is an instance id no standby has seen
        # (a Nic-KV restarted just before it was named), and it never
        # campaigns (killed). The standbys give it NK_COORD_SUCCESSOR_MS
        # (3 s) and say so, then one leads. Before, the main thread held
        # 3 s, then the etcd thread, seeing the name for the first time when
        # it campaigned, 3 s more: 6 s without a leader (issue 32).
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead: [co_role 0] [co_role 1] [co_role 2]"
        }
        set rec [etcd_ctl get --print-value-only /skv/mymaster/record]
        assert_match {epoch * successor -} $rec
        foreach p $relay_pids { exec kill -STOP $p }
        etcd_ctl put /skv/mymaster/record [regsub {successor -$} $rec "successor [string repeat 5a 20]"]
        etcd_ctl del /skv/mymaster/leader
        set t0 [clock milliseconds]
        wait_for_condition 100 20 {
            [nickv_info [co_nk 1] campaign_held] eq {successor-named} ||
            [nickv_info [co_nk 2] campaign_held] eq {successor-named}
        } else {
            foreach p $relay_pids { exec kill -CONT $p }
            fail "no standby holds for the successor: [nickv_cmd [co_nk 1] info coordinator]"
        }
        # Nobody takes the key while the successor may.
        co_standbys_wait [expr {$t0 + 2500}] $relay_pids "a standby led while the named successor had its time"
        wait_for_condition 200 50 {
            [co_role 1] eq {leader} || [co_role 2] eq {leader}
        } else {
            foreach p $relay_pids { exec kill -CONT $p }
            fail "no standby leads after the successor's time: [nickv_cmd [co_nk 1] info coordinator]"
        }
        set took [expr {[clock milliseconds] - $t0}]
        foreach p $relay_pids { exec kill -CONT $p }
        puts "    (a standby led $took ms after the successor was named)"
        # One hold of 3 s and a few etcd rounds; two holds are 6 s.
        assert_lessthan $took 5000
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead again: [co_role 0] [co_role 1] [co_role 2]"
        }
    }

    test {Many Nic-KVs: a leader whose etcd lease is renewed after its own count ran out gives it up} {
        # A change of etcd leader revives every lease, even one past its
        # time that etcd's sweep has not revoked yet, and its holder's next
        # keep-alive succeeds; a standby may by then have revoked that lease
        # on reads that proved it expired (roundKeyExpiring). So a renewal
        # answered after the holder's own count ran out must count for
        # nothing (DESIGN.md, the chain of deadlines, 8.). Node 0's Nic-KV,
        # with leader-ttl 10, is cut off from etcd (its relays stopped) for
        # 9.1 s: past its count (8.99 s after the last keep-alive it sent,
        # at the latest when the relays stopped), short of etcd's expiry
        # (10 s after the last one etcd renewed, 0.1 s before they stopped
        # at the earliest). Let go, its keep-alive renews the lease: it
        # takes a new lease, moves the leader key onto it (still its own)
        # and revokes the old one; it leads on, on the new lease, and no
        # standby campaigns. Before, it led on, on the old lease.
        set saved [co_kill_leading_nickv]
        set args [dict get $saved args]
        set ten $saved
        dict set ten args [concat $args --leader-ttl 10]
        set co(nk,0) [nickv_restart $ten]
        wait_for_condition 300 100 {
            [co_leaders] eq {0} && [nickv_info [co_nk 0] leader_held_ms] > 8000
        } else {
            fail "node 0's Nic-KV (leader-ttl 10) does not lead: [co_state]"
        }
        assert_equal 10 [nickv_info [co_nk 0] etcd_lease_ttl]
        regexp {"lease":([0-9]+)} [etcd_ctl get /skv/mymaster/leader -w json] -> lease
        set revoked [co_revoked]
        set won {}
        foreach i {1 2} { lappend won [nickv_info [co_nk $i] leaderships_won] }
        foreach p $relay_pids { exec kill -STOP $p }
        after 9100
        foreach p $relay_pids { exec kill -CONT $p }
        wait_for_condition 100 50 {
            [nickv_info [co_nk 0] etcd_lease_lapses] == 1
        } else {
            fail "node 0's Nic-KV did not give up a lease renewed too late: [co_state]"
        }
        wait_for_condition 100 50 {
            [co_leaders] eq {0} && [nickv_info [co_nk 0] leader_held_ms] > 8000
        } else {
            fail "node 0's Nic-KV does not lead on a new lease: [co_state]"
        }
        # Nobody leads on that lease: etcd no longer has it.
        assert_match "*already expired*" [etcd_ctl lease timetolive [format %x $lease]]
        regexp {"lease":([0-9]+)} [etcd_ctl get /skv/mymaster/leader -w json] -> now
        assert {$now != $lease}
        # Its holder revoked it: no standby did (it had not expired), and
        # no standby led meanwhile.
        assert_equal $revoked [co_revoked]
        set won2 {}
        foreach i {1 2} { lappend won2 [nickv_info [co_nk $i] leaderships_won] }
        assert_equal $won $won2
        # Node 0's Nic-KV as it was.
        nickv_stop [co_nk 0] KILL
        set co(nk,0) [nickv_restart $saved]
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead again: [co_state]"
        }
    }

    test {Many Nic-KVs: a standby revokes a dead leader's etcd lease once its reads prove it expired} {
        # etcd revokes an expired lease at its sweep, every 500 ms: the
        # leader key of a killed leader goes 0-500 ms after its expiry. A
        # standby that read its TTL 0, then 0 again more than 1.11 s later
        # with no renewal between, revokes it (roundKeyExpiring), 110-210 ms
        # after the expiry, on an idle machine; on a loaded one its reads come
        # later, and the sweep wins most kills (11 of 12 once in CI). So the
        # kill is timed from the sweep's phase: the key expires 20-120 ms
        # after a sweep (the last keep-alive came 0-100 ms before the kill),
        # and the standby has 380 ms before the next. Up to 12 kills.
        # And never early: a standby leads no sooner than the key's TTL
        # after the kill, less the 0.1 s between two keep-alives (a revoke
        # on a run of reads that proves nothing, or without the 1.11 s,
        # lets one lead about a second after the kill).
        set before [co_revoked]
        set revoked 0
        for {set n 0} {$n < 12 && !$revoked} {} {
            incr n
            set tick [co_sweep_tick]
            set at [expr {$tick + 500 * (int(([clock milliseconds] + 2500 - $tick) / 500) + 1) - 1880}]
            set saved [co_kill_leading_nickv $at]
            set revoked [expr {[co_revoked] - $before}]
            assert_morethan_equal [expr {$::co(led_at) - $::co(killed_at)}] 1700
            set co(nk,0) [nickv_restart $saved]
            wait_for_condition 300 100 {
                [co_leaders] eq {0}
            } else {
                fail "node 0's Nic-KV does not lead again: [co_state]"
            }
        }
        if {$revoked != 1} { fail "$revoked revokes in $n kills: [co_state]" }
        puts "    (a standby revoked the lease after $n kill(s))"
        assert_equal 0 [nickv_info [co_nk 0] etcd_lease_lapses]
    }

    test {Many Nic-KVs: a standby that led before and leads again does not hand over to a Nic-KV that is gone} {
        # Standby X leads while node 0's Nic-KV is down, and hands over to
        # it once it is back (X saw its member key then). Node 0's Nic-KV
        # is killed again; X (the other standby stopped) leads again. It
        # must go on leading: before, it read the member key's presence
        # from its last leadership and resigned at once to the dead Nic-KV,
        # and nobody granted the master for seconds.
        set saved [co_kill_leading_nickv]
        set x [lindex [co_leaders] 0]
        set y [expr {3 - $x}]
        set co(nk,0) [nickv_restart $saved]
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "no handover to node 0's Nic-KV: [co_role 0] [co_role 1] [co_role 2]"
        }
        set saved [co_nk 0]
        exec kill -STOP [dict get [co_nk $y] pid]
        nickv_stop $saved KILL
        set co(nk,0) {}
        wait_for_condition 100 50 {
            [co_role $x] eq {leader}
        } else {
            exec kill -CONT [dict get [co_nk $y] pid]
            fail "X does not lead again: [nickv_cmd [co_nk $x] info coordinator]"
        }
        if {[catch {assert_stays 1.5 {[co_role $x] eq {leader}} "X resigned to a Nic-KV that is gone"} e]} {
            exec kill -CONT [dict get [co_nk $y] pid]
            error "$e\n[nickv_cmd [co_nk $x] info coordinator]"
        }
        exec kill -CONT [dict get [co_nk $y] pid]
        set co(nk,0) [nickv_restart $saved]
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead again: [co_role 0] [co_role 1] [co_role 2]"
        }
    }

    test {Many Nic-KVs: a replica back in the record is named to the master only once etcd lists it} {
        # The chain's step 5: the leader names a replica valid (the master
        # counts it for WAIT) only once the record lists it. A replica
        # dropped from the record and back is a new list of the same
        # epoch; the record already written at that epoch once counted as
        # the new one written, and the replica was named while etcd did
        # not list it (a later leader would not hear it before promoting).
        wait_for_condition 300 100 {
            [co_leaders] eq {0} && [nickv_info [co_nk 0] record_named] == 2 && [co_whole]
        } else {
            fail "not whole with both replicas recorded: [co_state]"
        }
        set m [redis 127.0.0.1 $co(port,0)]
        set rpid [srv [co_level 2] pid]
        # Replica 2 stopped until the record drops it.
        exec kill -STOP $rpid
        wait_for_condition 150 100 {
            [nickv_info [co_nk 0] record_named] == 1
        } else {
            exec kill -CONT $rpid
            fail "replica 2 not dropped from the record: [co_state]"
        }
        # The leader cut off from etcd, then replica 2 back: the leader
        # wants it named again, and the record cannot say so.
        foreach p $relay_pids { exec kill -STOP $p }
        exec kill -CONT $rpid
        set most 0
        set deadline [expr {[clock milliseconds] + 1500}]
        while {[clock milliseconds] < $deadline} {
            set v [nickv_status $m nickv_valid_replicas]
            if {$v ne {} && $v > $most} { set most $v }
            after 10
        }
        foreach p $relay_pids { exec kill -CONT $p }
        assert {[nickv_info [co_nk 0] record_named] == 1 || [co_leaders] ne {0}}
        if {$most > 1} { fail "the master counted $most replicas valid while the record listed one" }
        # Back, with both named once the record lists them.
        wait_for_condition 300 100 {
            [llength [co_leaders]] == 1 && [co_whole] &&
            [nickv_info [co_nk [co_leaders]] record_named] == 2 && [nickv_status $m nickv_valid_replicas] == 2
        } else {
            fail "not whole again, both replicas named: [co_state]"
        }
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "node 0's Nic-KV does not lead again: [co_state]"
        }
        $m close
    }

    test {Many Nic-KVs: WAIT on direct replicas, the leader on another server, takes a round trip, not 0.2 s} {
        # Node 0's Nic-KV (the leader, which fans out) killed: a standby
        # leads and grants node 0, whose replicas stream from it directly.
        # Their ACKs count for WAIT only once the leader confirmed the
        # offset (src/nickv_server.c, nickvDirectAckCounts). It used to
        # take a lease answer and the grant after it, two probe intervals:
        # every WAIT took 0.1-0.2 s, for as long as the leader stayed
        # elsewhere (issue 32). Now the master's watch thread pushes the
        # offset to the leader, which grants at once (src/nickv_lease.c,
        # nickvLeaseWant). WAITs of 0.15 s or more are counted: all of them
        # before, a few on a loaded machine now.
        set saved [co_kill_leading_nickv]
        set x [lindex [co_leaders] 0]
        set mc [redis 127.0.0.1 $co(port,0)]
        wait_for_condition 200 50 {
            ![catch {$mc set wk 0}] && [$mc wait 2 1000] == 2
        } else {
            fail "the master does not take writes acknowledged by both replicas: [nickv_cmd [co_nk $x] info failover]"
        }
        assert_equal 0 [nickv_info [co_nk $x] connected_slaves]
        set pushed [nickv_status $mc nickv_wait_pushes_confirmed]
        set grants [nickv_info [co_nk $x] wait_grants]
        set slow {}
        for {set i 1} {$i <= 40} {incr i} {
            set t0 [clock milliseconds]
            $mc set wk $i
            assert_equal 2 [$mc wait 2 2000]
            set took [expr {[clock milliseconds] - $t0}]
            if {$took >= 150} { lappend slow $took }
        }
        set pushed [expr {[nickv_status $mc nickv_wait_pushes_confirmed] - $pushed}]
        set grants [expr {[nickv_info [co_nk $x] wait_grants] - $grants}]
        puts "    (40 WAITs: [llength $slow] of 0.15 s or more ($slow), $pushed pushes confirmed, $grants grants at once)"
        assert_lessthan [llength $slow] 8
        assert_morethan $pushed 19
        assert_morethan $grants 19
        # A grant per WAIT does not keep the leader from its own pace: it
        # still reads the master's INFO (once a second) under 2.5 s of
        # back-to-back WAITs. Before, each such grant counted as the
        # probe's, and the INFO never came due again.
        set infos [nickv_info [co_nk $x] probe_master_infos]
        set until [expr {[clock milliseconds] + 2500}]
        while {[clock milliseconds] < $until} {
            $mc set wk $i
            assert_equal 2 [$mc wait 2 2000]
        }
        assert_morethan [nickv_info [co_nk $x] probe_master_infos] $infos
        # Node 0's Nic-KV back: leadership goes to it. While x hands over
        # it grants no more, but confirms for the master's WAITs ("lease
        # <t> 0"): WAITs go on until its last grant runs out. Before, each
        # one waited out the whole handover (about 0.35 s).
        set confirms [nickv_info [co_nk $x] wait_confirms]
        set co(nk,0) [nickv_restart $saved]
        set until [expr {[clock milliseconds] + 30000}]
        while {[co_leaders] ne {0} && [clock milliseconds] < $until} {
            if {![catch {$mc set wk $i}]} { catch {$mc wait 2 500} }
        }
        assert_equal {0} [co_leaders]
        assert_morethan [nickv_info [co_nk $x] wait_confirms] $confirms
        $mc close
    }

    test {Many Nic-KVs: a master whose lease another, uncoordinated, Nic-KV grants is not failed over} {
        # The leader dies; a Nic-KV started without coordinator (an
        # operator's mistake) takes the grantor's place and keeps granting:
        # the new leader is refused, and must not replace a master that
        # holds a lease it cannot see run out.
        nickv_stop [co_nk 0] KILL
        set saved [co_nk 0]
        set co(nk,0) {}
        set rogue [nickv_start $co(port,0) {*}[nickv_user_args] --failover no]
        wait_for_condition 100 100 {
            [llength [co_leaders]] == 1
        } else {
            fail "no standby leads"
        }
        set l [co_nk [co_leaders]]
        wait_for_condition 100 100 {
            [nickv_info $l master_lease] eq {refused}
        } else {
            fail "the leader is not refused: [nickv_cmd $l info failover]"
        }
        assert_stays 3 {[nickv_info $l failovers] == 0 &&
                        [nickv_master_addr $l] eq [list 127.0.0.1 $co(port,0)]} \
            "the refused leader failed the master over"
        assert_equal 0 [nickv_info $l failovers]
        assert_equal [list 127.0.0.1 $co(port,0)] [nickv_master_addr $l]
        # The mistake undone: the leader grants once the rogue's lease ran out.
        nickv_stop $rogue
        wait_for_condition 100 100 {
            [nickv_info $l master_lease] eq {on}
        } else {
            fail "the leader does not grant after the rogue left: [nickv_cmd $l info failover]"
        }
        assert_equal 0 [nickv_info $l failovers]
        set co(nk,0) [nickv_restart $saved]
        wait_for_condition 300 100 {
            [co_leaders] eq {0}
        } else {
            fail "leadership did not come back to the master's Nic-KV: [co_role 0] [co_role 1] [co_role 2]"
        }
    }

    test {Many Nic-KVs: a checker under whole-server faults keeps every acknowledged append} {
        set co(r) {}
        set co(stopped) {}
        set co(split) {}
        set co(attempted) 0
        set co(acknowledged) 0
        set co(pause) 0
        set co(steps) 0
        set co(last_ack) [clock milliseconds]
        for {set c 0} {$c < 3} {incr c} {
            set co(next,$c) 0
            set co(acked,$c) {}
        }
        co_until_whole "the start"
        set pauses {}
        set faults {nickv-of-master leader-etcd-cut etcd-member whole-server-kill standby-kill
                    whole-server-stop etcd-quorum master-process}
        foreach fault $faults {
            if {$::verbose} { puts "    fault: $fault" }
            set m [co_index [lindex [co_master_addr] 1]]
            set epoch [nickv_info [co_nk $m] record_epoch]
            set co(pause) 0
            set co(last_ack) [clock milliseconds]
            switch $fault {
                nickv-of-master {
                    # The master's DPU reboots: a standby leads, grants, and
                    # the master keeps its role; back, its Nic-KV leads again.
                    nickv_stop [co_nk $m] KILL
                    set saved [co_nk $m]
                    set co(nk,$m) {}
                    co_until {[llength [co_leaders]] == 1} "led by a standby"
                    set co(nk,$m) [nickv_restart $saved]
                }
                leader-etcd-cut {
                    # Node 0's Nic-KV (it leads: the master is node 0) loses
                    # etcd, silently: it stops granting before its key can
                    # expire, a standby takes over.
                    assert_equal 0 $m
                    foreach p $relay_pids { exec kill -STOP $p }
                    if {$::verbose} { puts "    relays [exec ps -o pid=,stat=,args= -p [join $relay_pids ,]]" }
                    co_until {[co_role 0] ne {leader} && [llength [co_leaders]] == 1} "led elsewhere"
                    foreach p $relay_pids { exec kill -CONT $p }
                }
                etcd-member {
                    etcd_member_kill 0
                    for {set k 0} {$k < 20} {incr k} { co_round }
                    etcd_member_start 0
                }
                whole-server-kill {
                    # The master's server loses power: node and Nic-KV at once.
                    exec kill -9 [srv [co_level $m] pid] [dict get [co_nk $m] pid]
                    set saved [co_nk $m]
                    set co(nk,$m) {}
                    co_until {[co_index [lindex [co_master_addr] 1]] != $m} "failed over"
                    # It comes back, empty (no persistence): made a replica.
                    restart_server [co_level $m] true false
                    set co(nk,$m) [nickv_restart $saved]
                }
                standby-kill {
                    set s [expr {($m + 1) % 3}]
                    nickv_stop [co_nk $s] KILL
                    set saved [co_nk $s]
                    set co(nk,$s) {}
                    for {set k 0} {$k < 20} {incr k} { co_round }
                    set co(nk,$s) [nickv_restart $saved]
                }
                whole-server-stop {
                    # Stopped past leader-ttl with writes queued: a standby
                    # promotes; resumed, the old master refuses them and its
                    # Nic-KV does not lead.
                    if {$co(r) eq {}} { co_connect }
                    set co(stopped) $co(r)
                    set pids [list [srv [co_level $m] pid] [dict get [co_nk $m] pid]]
                    exec kill -STOP {*}$pids
                    # Resumed 6 s later, by a process of its own: the
                    # writer blocks on the stopped master meanwhile.
                    exec sh -c "sleep 6; kill -CONT $pids" &
                    set resume [expr {[clock milliseconds] + 6000}]
                    set saved [co_nk $m]
                    set co(nk,$m) {}
                    co_until {[co_index [lindex [co_master_addr] 1]] != $m} "failed over"
                    while {[clock milliseconds] < $resume + 200} { after 100 }
                    set co(nk,$m) $saved
                }
                etcd-quorum {
                    # Two members of three gone: no promotion, and the
                    # master's lease lapses with its leader's; restored,
                    # writes resume, the same master.
                    etcd_member_kill 1
                    etcd_member_kill 2
                    co_until {[llength [co_leaders]] == 0} "without a leader"
                    for {set k 0} {$k < 10} {incr k} { co_round }
                    etcd_member_start 1
                    etcd_member_start 2
                }
                master-process {
                    # The master's process dies, its Nic-KV lives: the fast
                    # path, as without a coordinator.
                    exec kill -9 [srv [co_level $m] pid]
                    co_until {[co_index [lindex [co_master_addr] 1]] != $m} "failed over"
                    restart_server [co_level $m] true false
                }
            }
            co_until_whole $fault
            set co(stopped) {}
            lappend pauses "$fault: [expr {$co(pause)}] ms"
        }
        catch {$co(r) close}

        # The final master has every acknowledged append, in order.
        lassign [co_master_addr] host port
        set mm [redis 127.0.0.1 $port]
        $mm select 9
        nickv_wait_served $mm
        set lost [fo_count_lost $mm co 3]
        co_assert_digests $mm $port
        $mm close
        puts "    (longest pause of acknowledged writes per fault: [join $pauses {, }])"
        puts "    ($co(attempted) appends attempted, $co(acknowledged) acknowledged, $lost lost, [llength $co(split)] taken by a replaced master; $co(steps) gaps of 0.19-0.23 s between acknowledgements)"
        if {$lost} { fail "$lost acknowledged appends lost:\n$::fo_lost_detail" }
        assert_equal {} $co(split)
        assert {$co(acknowledged) > 100}
        # While the leader was on another server than the master (after
        # the master's Nic-KV was killed, after the master's process was),
        # every WAIT took two probe intervals: dozens of such gaps a run.
        # A few are chance on a loaded machine.
        assert_lessthan $co(steps) 10
    }

    test {Many Nic-KVs: a standby that never reached the master does not lead in place of one that did} {
        # Standby u restarts, without its state file, just as the master's
        # server stops: it cannot learn the master's nickv-lease, so it
        # could lead but never fail the master over. Standby k, which knows
        # it, is stopped meanwhile so that u alone could take the expired
        # key. u must hold back; k, resumed, leads and fails over.
        wait_for_condition 300 100 { [co_whole] } else { fail "not whole: [co_state]" }
        set m [co_index [lindex [co_master_addr] 1]]
        set u [expr {($m + 1) % 3}]
        set k [expr {($m + 2) % 3}]
        set saved_u [co_nk $u]
        nickv_stop $saved_u KILL
        set co(nk,$u) {}
        set args [dict get $saved_u args]
        file delete [lindex $args [expr {[lsearch -exact $args --state-file] + 1}]]
        set saved_m [co_nk $m]
        set saved_k [co_nk $k]
        set stopped [list [srv [co_level $m] pid] [dict get $saved_m pid] [dict get $saved_k pid]]
        # Nothing the test asks may reach a stopped process (it would wait
        # for ever), and whatever happens they are resumed.
        set co(nk,$m) {}
        set co(nk,$k) {}
        exec kill -STOP {*}$stopped
        set err {}
        if {[catch {
            set co(nk,$u) [nickv_restart $saved_u]
            # The leader key (leader-ttl 2 s) expires meanwhile.
            assert_stays 5 {[co_role $u] eq {standby} &&
                            [nickv_info [co_nk $u] campaign_held] eq {master-lease-unknown}} \
                "node $u's Nic-KV leads, or holds back for another reason than the master's lease unknown"
            assert_equal 0 [nickv_info [co_nk $u] leaderships_won]
            exec kill -CONT [dict get $saved_k pid]
            set co(nk,$k) $saved_k
            wait_for_condition 200 100 {
                [co_role $k] eq {leader} &&
                [lindex [nickv_cmd $saved_k sentinel get-master-addr-by-name mymaster] 1] != $co(port,$m)
            } else {
                error "node $k's Nic-KV did not fail the stopped master over"
            }
        } e]} { set err $e }
        catch {exec kill -CONT {*}$stopped}
        set co(nk,$k) $saved_k
        set co(nk,$m) $saved_m
        if {$err ne {}} { fail "$err: [co_state]" }
        # The old master, resumed, is made a replica; all whole again.
        wait_for_condition 600 100 { [co_whole] } else { fail "not whole again: [co_state]" }
    }

    test {Many Nic-KVs: a node down while the master moved, back once leadership followed, is made a replica} {
        # The master's process dies, its Nic-KV fails it over, and the node
        # stays down until leadership has followed the new master to its
        # server. The nodes to repoint were the old leader's list: before,
        # no leader made the node a replica (a master without a lease, for
        # ever), and the shard was never whole again (found by
        # failover-bench --scenarios mixed, "server-elsewhere").
        wait_for_condition 300 100 { [co_whole] } else { fail "not whole: [co_state]" }
        set m [co_index [lindex [co_master_addr] 1]]
        set logsize {}
        for {set i 0} {$i < 3} {incr i} { lappend logsize [file size [dict get [co_nk $i] log]] }
        exec kill -9 [srv [co_level $m] pid]
        wait_for_condition 300 100 {
            [set x [co_index [lindex [co_master_addr] 1]]] != $m && [co_leaders] eq $x
        } else {
            fail "leadership did not follow the new master: [co_state]"
        }
        # Not on the new leader's own list (it was the old leader's).
        assert_equal 0 [nickv_info [co_nk $x] repoint_pending]
        # Back as a master (its configuration may name an old master: not
        # any more), empty.
        set conf [srv [co_level $m] config_file]
        set lines [lsearch -all -inline -not -regexp [split [exec cat $conf] "\n"] {^(replicaof|slaveof) }]
        set fd [open $conf w]
        puts $fd [join $lines "\n"]
        close $fd
        restart_server [co_level $m] true false 0
        assert_equal master [co_node_role $co(port,$m)]
        # (Its clients are killed as it is made a replica: a new one each time.)
        wait_for_condition 300 100 {
            [co_node_role $co(port,$m)] eq "slave $co(port,$x)"
        } else {
            fail "node $m is not made a replica of node $x: [co_node_role $co(port,$m)] [co_state]"
        }
        reconnect [co_level $m]
        # That node alone, and by the leader alone.
        for {set i 0} {$i < 3} {incr i} {
            set fd [open [dict get [co_nk $i] log]]
            seek $fd [lindex $logsize $i]
            set said [regexp -all -inline {Failover: [0-9.:]+ (?:is a master|replicates from)[^\n]*} [read $fd]]
            close $fd
            if {$i == $x} {
                assert_equal 1 [llength $said]
                assert_match "*127.0.0.1:$co(port,$m) is a master, not a replica of the master*" [lindex $said 0]
            } else {
                assert_equal {} $said
            }
        }
        wait_for_condition 300 100 { [co_whole] } else { fail "not whole again: [co_state]" }
        set mm [redis 127.0.0.1 $co(port,$x)]
        $mm select 9
        $mm set stray-check 1
        assert_equal 2 [$mm wait 2 5000]
        co_assert_digests $mm $co(port,$x)
        $mm close
    }

    foreach i [co_alive] { nickv_stop [co_nk $i] }
    foreach pid $::nickv_pids { catch {exec kill -9 $pid} }
    foreach p $relay_pids { catch {exec kill -9 $p} }
    etcd_cluster_stop
}
}
}
