# The failover checker, in the manner of Jepsen's list-append: three
# clients append to lists of their own, each append followed by WAIT 1
# (Nic-KV's min-slaves is 1), through whatever master Nic-KV names, while
# 20 faults are injected one after another: the master killed (-9) or
# stopped past waiting-time, Nic-KV killed, a replica killed. After each,
# the writers go on until the topology is whole again (every node back,
# Nic-KV granting the master a lease, nothing left to repoint). At the end
# every acknowledged append must be on the final master, in order, and
# every node must have the same data.

source tests/skv/helpers.tcl

# The writer's state: a connection, and per client its next value and what
# was acknowledged.
proc ff_connect {nk} {
    global ff
    catch {$ff(r) close}
    set ff(r) {}
    set deadline [expr {[clock milliseconds] + 15000}]
    while {[clock milliseconds] < $deadline} {
        if {![catch {redis {*}[nickv_master_addr $nk]} r]} {
            if {![catch {$r select 9}]} {
                set ff(r) $r
                return
            }
            catch {$r close}
        }
        after 50
    }
    fail "no master to connect to: [nickv_cmd $nk info failover]"
}

# One append by each client, round robin.
proc ff_append_round {nk} {
    global ff
    for {set c 0} {$c < 3} {incr c} {
        set v $ff(next,$c)
        incr ff(next,$c)
        incr ff(attempted)
        if {$ff(r) eq {}} { ff_connect $nk }
        set pushed [expr {[catch {$ff(r) rpush list:$c $v} e] == 0}]
        if {$pushed && $ff(r) eq $ff(stopped) && [nickv_master_addr $nk] ne $ff(stopped_master)} {
            # The stopped master took a write after another was promoted:
            # two masters (its queued writes must be refused).
            lappend ff(split) "list:$c $v"
        }
        if {$pushed && [catch {$ff(r) wait 1 1000} w] == 0 && $w >= 1} {
            lappend ff(acked,$c) $v
            lappend ff(ackinfo,$c) $ff(fault)
            incr ff(acknowledged)
        } elseif {!$ff(nickv_down) && ([fo_refused_here $e] || [catch {$ff(r) ping}])} {
            # Refused as a master that may have been replaced, or gone:
            # ask Nic-KV again, as a Sentinel client does. (While Nic-KV is
            # down nobody names a master: the writer stays where it is; the
            # master refuses once its lease is out.)
            ff_connect $nk
        } else {
            after 10
        }
    }
}

# Is the topology whole: Nic-KV sees the master (with our lease) and all
# three replicas, a failover is not under way, nothing is left to repoint,
# and its link streams from the master?
proc ff_whole {nk} {
    set info [nickv_info_all $nk]
    foreach {field want} {valid_replicas 3 repoint_pending 0 failover_state watching
                          master_lease on master_link_status up} {
        if {![regexp "\r\n$field:(\[^\r\n\]*)" "\r\n$info" -> v] || $v ne $want} { return 0 }
    }
    return 1
}

# Append until the topology is whole again (and at least a few rounds).
proc ff_until_whole {nk what} {
    set deadline [expr {[clock milliseconds] + 30000}]
    set rounds 0
    while {$rounds < 10 || ![ff_whole $nk]} {
        ff_append_round $nk
        incr rounds
        if {[clock milliseconds] > $deadline} {
            fail "not whole again after $what: [nickv_cmd $nk info failover]\n[exec tail -n 30 [dict get $nk log]]"
        }
    }
}

# The harness level of the node listening on port.
proc ff_level {port} {
    for {set l -3} {$l <= 0} {incr l} {
        if {[srv $l port] == $port} { return $l }
    }
    fail "no node on port $port"
}

set ff_conf [nickv_failover_overrides appendonly no]

nickv_topology [list overrides $ff_conf replicas {{} {} {nickv-offload no}} \
        nickv [list {*}[nickv_user_args] --failover yes --min-slaves 1]] {
    set ports [concat $master_port $replica_ports]

    test {Nic-KV failover checker: 20 faults, every acknowledged append kept, in order} {
        global ff
        array unset ff
        set ff(r) {}
        set ff(stopped) {}
        set ff(stopped_master) {}
        set ff(changes) 0
        set ff(split) {}
        set ff(nickv_down) 0
        set ff(attempted) 0
        set ff(acknowledged) 0
        set ff(fault) start
        for {set c 0} {$c < 3} {incr c} {
            set ff(next,$c) 0
            set ff(acked,$c) {}
            set ff(ackinfo,$c) {}
        }
        ff_until_whole $nk "the start"
        set faults {master-kill master-stop nickv-kill replica-kill}
        set injected {}
        for {set i 0} {$i < 20} {incr i} {
            set fault [lindex $faults [expr {$i % 4}]]
            lassign [nickv_master_addr $nk] host port
            set victim [expr {$fault eq {replica-kill} ?
                [lindex [lsearch -all -inline -not $ports $port] [expr {$i % 3}]] : $port}]
            set level [ff_level $victim]
            set ff(fault) "$i:$fault:$victim"
            switch $fault {
                master-kill - replica-kill {
                    exec kill -9 [srv $level pid]
                    for {set k 0} {$k < 5} {incr k} { ff_append_round $nk }
                    restart_server $level true false
                }
                master-stop {
                    # Writes go on against the stopped master and queue
                    # there; it resumes 1.5 s later, past the promotion.
                    set pid [srv $level pid]
                    if {$ff(r) eq {}} { ff_connect $nk }
                    set ff(stopped) $ff(r)
                    set ff(stopped_master) [nickv_master_addr $nk]
                    exec kill -STOP $pid
                    exec sh -c "sleep 1.5; kill -CONT $pid" &
                    for {set k 0} {$k < 5} {incr k} { ff_append_round $nk }
                }
                nickv-kill {
                    nickv_stop $nk KILL
                    set ff(nickv_down) 1
                    for {set k 0} {$k < 3} {incr k} { ff_append_round $nk }
                    set ff(nickv_down) 0
                    set nk [nickv_restart $nk]
                }
            }
            lappend injected "$fault:$victim"
            ff_until_whole $nk "$fault of $victim"
            # A master change is counted by address: the epoch also goes
            # up when a promotion is rolled back (promoteUndo).
            if {[nickv_master_addr $nk] ne "$host $port"} { incr ff(changes) }
            set ff(stopped) {}
        }
        catch {$ff(r) close}

        # The final master has every acknowledged append, in order.
        lassign [nickv_master_addr $nk] host port
        set m [redis 127.0.0.1 $port]
        $m select 9
        nickv_wait_served $m
        set lost [fo_count_lost $m ff 3]
        # Every node has the same data.
        set others {}
        foreach p $ports {
            if {$p == $port} continue
            set r [redis 127.0.0.1 $p]
            $r select 9
            lappend others $r
        }
        nickv_assert_digests $m $others
        foreach r $others { $r close }
        $m close
        puts "    (faults: [join $injected {, }])"
        puts "    ($ff(attempted) appends attempted, $ff(acknowledged) acknowledged, $lost lost, [llength $ff(split)] taken by a replaced master; $ff(changes) master changes, epoch [nickv_info $nk epoch])"
        if {$lost} { fail "$lost acknowledged appends lost:\n$::fo_lost_detail" }
        assert_equal {} $ff(split)
        # Every master fault made a failover.
        assert {$ff(changes) >= 10}
        nickv_stop $nk
    }
}
