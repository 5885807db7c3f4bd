# helpers.tcl -- shared by SKV's own tests (sourced by each test file).
#
# SKV's tests run in upstream's harness from the patched tree (build/redis),
# where run-tests.sh links this directory as tests/skv.

# The SKV repository's top directory.
set ::skv_root [file dirname [file readlink tests/skv]]

# Every nic-kv this test client started. A test file that fails outside a
# test (a setup step) skips its nickv_stop; the Nic-KV it leaves running
# (with failover on, it promotes and repoints) must not act on the servers
# that the next file starts on the same ports: each file, sourcing this,
# kills what the previous ones left.
if {![info exists ::nickv_pids]} { set ::nickv_pids {} }
foreach pid $::nickv_pids { catch {exec kill -9 $pid} }
set ::nickv_pids {}

# The SKV version compiled in (src/skv_version.h).
proc skv_source_version {} {
    set fd [open $::skv_root/src/skv_version.h]
    set text [read $fd]
    close $fd
    if {![regexp {#define SKV_VERSION "([^"]+)"} $text -> v]} {
        error "no SKV_VERSION in src/skv_version.h"
    }
    return $v
}

# A value from deps/redis/pin (NAME=value lines).
proc skv_pin {name} {
    set fd [open $::skv_root/deps/redis/pin]
    set text [read $fd]
    close $fd
    if {![regexp -line "^$name=\"?(\[^\"\n\]*)\"?$" $text -> v]} {
        error "no $name in deps/redis/pin"
    }
    return $v
}

# ------------------------------------------------------------------ RDMA ---
# The RDMA tests (tests/rdma/) run inside the Soft-RoCE VM that
# utils/rdma-vm.sh boots; tests/rdma/run-in-vm.sh makes two rxe devices on a
# veth pair: the server side listens on 10.77.0.1, the other end is 10.77.0.2.
set ::rdma_host 10.77.0.1
set ::rdma_host2 10.77.0.2
# (run-in-vm.sh gives each test file its own range: SKV_RDMA_PORT_BASE.)
if {![info exists ::rdma_next_port]} {
    set ::rdma_next_port 27000
    if {[info exists ::env(SKV_RDMA_PORT_BASE)]} { set ::rdma_next_port $::env(SKV_RDMA_PORT_BASE) }
}

proc rdma_available {} {
    expr {[file exists /sys/class/infiniband/rxe0] && [file exists /sys/class/infiniband/rxe1]}
}

# A fresh RDMA port for each server (rdma_cm's port space is not TCP's).
proc rdma_port {} {
    incr ::rdma_next_port
}

# Server overrides for an RDMA server on $host:$port.
proc rdma_overrides {port {host {}}} {
    if {$host eq {}} { set host $::rdma_host }
    list rdma-port $port rdma-bind $host protected-mode no
}

# Nic-KV probes every node over TCP at the address it knows it by, which
# for an RDMA peer is its RDMA address: a test server (bound to 127.0.0.1,
# where the harness reaches it) then listens on every address.
proc nickv_listen_everywhere {r} {
    assert_equal OK [$r config set bind "* -::*"]
}

# redis-cli over RDMA; returns its output (stdout + stderr).
proc rdma_cli {port args} {
    rdma_cli_to $::rdma_host $port {*}$args
}

proc rdma_cli_to {host port args} {
    catch {exec src/redis-cli --rdma -h $host -p $port {*}$args 2>@1} out
    return $out
}

proc rdma_tool {args} {
    catch {exec src/skv-rdma-tool {*}$args 2>@1} out
    return $out
}

# Start redis-server as an unprivileged user (root's CAP_IPC_LOCK would
# lift the limit) with RLIMIT_MEMLOCK at 64 KiB, too little for an RDMA
# connection, TCP on 127.0.0.1:$tport and RDMA asked for on $port. Waits
# until it answers on TCP; returns its pid. The log is $dir/server.log.
proc rdma_start_low_memlock {tport port dir} {
    exec chmod 777 $dir
    set log $dir/server.log
    set pid [exec sh -c "ulimit -l 64; exec setpriv --reuid=65534 --regid=65534 --clear-groups \
        src/redis-server --port $tport --bind 127.0.0.1 --dir $dir --logfile $log \
        --rdma-port $port --rdma-bind $::rdma_host --protected-mode no --save ''" &]
    wait_for_condition 100 100 {
        [catch {exec src/redis-cli -p $tport ping} out] == 0 && $out eq "PONG"
    } else {
        catch {exec kill $pid}
        set why {}
        catch {set why [exec tail -n 20 $log]}
        fail "the server did not start: $why"
    }
    return $pid
}

# A field of INFO rdma of server level $level (0 = the innermost).
proc rdma_info {field {level 0}} {
    set info [[srv $level client] info rdma]
    if {[regexp "\r\n$field:(\[^\r\n\]*)" "\r\n$info" -> v]} { return $v }
    return ""
}

# A hardware counter of the RDMA devices (Soft-RoCE's rcvd_rnr_err, ...),
# summed over every device and port; "" when no device has it.
proc rdma_hw_counter {name} {
    set files [glob -nocomplain /sys/class/infiniband/*/ports/*/hw_counters/$name]
    if {![llength $files]} { return "" }
    set sum 0
    foreach f $files {
        set fd [open $f]
        incr sum [string trim [read $fd]]
        close $fd
    }
    return $sum
}

# Is the RDMA device Soft-RoCE (rdma_rxe)? It reads a retry count of 7 as
# "for ever" (RDMA.md, "Robustness").
proc rdma_soft_roce {} {
    expr {[llength [glob -nocomplain /sys/class/infiniband/rxe*]] > 0}
}

# ----------------------------------------------------------------- Nic-KV ---
# The daemon's binary: src/nic-kv, or $SKV_NICKV (src/nic-kv-debug: the
# build whose invariants abort, "make nic-kv-debug").
proc nickv_binary {} {
    if {[info exists ::env(SKV_NICKV)] && $::env(SKV_NICKV) ne ""} { return $::env(SKV_NICKV) }
    return src/nic-kv
}

# Nic-KV's own ACL user, for tests whose nodes run nickv-lease yes (a lease
# needs a user of Nic-KV's own: NIC-KV.md, "Security model"). Every node
# defines it (a replica promoted takes leases); only Nic-KV uses it: the
# replicas replicate as the default user, as clients do.
set ::nickv_test_user nickv
set ::nickv_test_pass nickv-test-secret
proc nickv_user_overrides {} {
    list nickv-user $::nickv_test_user user "$::nickv_test_user on >$::nickv_test_pass ~* &* +@all"
}

# The overrides of a node in a failover test: no RDB saves, leases on, and
# Nic-KV's own user; args are extra options of the file's own (appendonly
# no, enable-debug-command yes), a list of name value pairs.
proc nickv_failover_overrides {args} {
    concat {save "" nickv-lease yes} $args [nickv_user_overrides]
}

# ... and Nic-KV's options to authenticate as that user.
proc nickv_user_args {} {
    list --masteruser $::nickv_test_user --masterauth $::nickv_test_pass
}

# A client of the master on 127.0.0.1:$port, authenticated as Nic-KV's own
# user: what a process holding that password can do.
proc nickv_user_client {port} {
    set c [redis 127.0.0.1 $port]
    $c auth $::nickv_test_user $::nickv_test_pass
    return $c
}

# Wait until master m (nickv-lease yes) holds a lease: it takes a write
# (the key k).
proc nickv_wait_lease {m} {
    wait_for_condition 100 100 {
        [catch {$m set k v}] == 0
    } else {
        fail "no lease: [$m info nickv]"
    }
}

# Assert that condition (an expr, evaluated in the caller's scope) holds
# for the next $seconds seconds: "nothing happens", checked all along rather
# than only at the end. It is evaluated at once, every 50 ms, and at the
# end; the first time it is false the test fails there and then, with msg
# and how long into the wait that was. Takes $seconds when it holds.
proc assert_stays {seconds condition {msg {}}} {
    set start [clock milliseconds]
    set end [expr {$start + round($seconds * 1000)}]
    while 1 {
        if {![uplevel 1 [list expr $condition]]} {
            set at [expr {[clock milliseconds] - $start}]
            if {$msg ne {}} { set msg "$msg: " }
            fail "${msg}false after $at ms of ${seconds} s: $condition"
        }
        set now [clock milliseconds]
        if {$now >= $end} break
        after [expr {min(50, $end - $now)}]
    }
}

# ------------------------------------------------------------- Topology ---
# nickv_topology opts body: a master, its replicas and, when asked, their
# Nic-KV, built as the hand-nested start_server blocks of the tests were.
# opts is a dict:
#   tags         the outer start_server's tags ({"nickv repl external:skip"})
#   overrides    every node's overrides ({save ""}; a failover test gives
#                [nickv_failover_overrides])
#   master       the master's overrides beyond those ({})
#   replicas     how many replicas (0), or a list of their overrides beyond
#                those, one per replica: {{} {nickv-offload no}}
#   nickv        when present, Nic-KV's options (a list, may be empty): it
#                starts after every node, so all of them are its members
#   nickv_first  yes: Nic-KV starts before the replicas' REPLICAOF, so the
#                master hands each over at once; no (the default): after,
#                so each may sync directly first and be handed over then
#   serves       wait until Nic-KV streams to this many replicas (no wait)
# The master is srv -N and the last replica srv 0, as before, so a body's
# [srv -2 pid] and restart_server -2 still name the same node. Once every
# replica has synced, body runs in the caller's scope with master,
# master_port, master_pid, replicas, replica_ports, replica_pids (lists, in
# the order of opts' replicas) and nk (the Nic-KV dict, {} without one).
# After body, also when it fails, the Nic-KV in nk is stopped: the one nk
# names then, which the body may have restarted.
proc nickv_topology {opts body} {
    set o [dict merge {tags {"nickv repl external:skip"} overrides {save ""} master {}
                       replicas 0 nickv_first no} $opts]
    set specs [dict get $o replicas]
    if {[string is integer -strict $specs]} { set specs [lrepeat $specs {}] }
    dict set o replicas $specs
    set caller [expr {[info level] - 1}]
    set script [list nickv_topology_run $caller $o $body]
    for {set i [expr {[llength $specs] - 1}]} {$i >= 0} {incr i -1} {
        set script [list start_server \
            [list overrides [concat [dict get $o overrides] [lindex $specs $i]]] $script]
    }
    start_server [list tags [dict get $o tags] \
        overrides [concat [dict get $o overrides] [dict get $o master]]] $script
}

# The innermost part of nickv_topology, run inside every node's start_server.
proc nickv_topology_run {caller o body} {
    set n [llength [dict get $o replicas]]
    set mport [srv -$n port]
    set clients {}
    set ports {}
    set pids {}
    for {set level [expr {-$n + 1}]} {$level <= 0} {incr level} {
        lappend clients [srv $level client]
        lappend ports [srv $level port]
        lappend pids [srv $level pid]
    }
    set nk {}
    set with_nickv [dict exists $o nickv]
    if {$with_nickv && [dict get $o nickv_first]} { set nk [nickv_start $mport {*}[dict get $o nickv]] }
    foreach r $clients { $r replicaof 127.0.0.1 $mport }
    if {$with_nickv && ![dict get $o nickv_first]} { set nk [nickv_start $mport {*}[dict get $o nickv]] }
    # Longer than wait_for_sync's 5 s: with nickv-lease yes the master
    # serves PSYNC only once Nic-KV grants it a lease.
    foreach r $clients port $ports {
        wait_for_condition 200 100 {
            [status $r master_link_status] eq {up}
        } else {
            fail "the replica on port $port did not sync: [$r info replication]"
        }
    }
    if {[dict exists $o serves]} { nickv_wait_replicas $nk [dict get $o serves] }

    foreach {name value} [list master [srv -$n client] master_port $mport master_pid [srv -$n pid] \
                              replicas $clients replica_ports $ports replica_pids $pids nk $nk] {
        upvar #$caller $name var
        set var $value
    }
    set code [catch {uplevel #$caller $body} result options]
    upvar #$caller nk now
    if {$with_nickv && [info exists now] && $now ne {}} {
        # A body that failed outside a test keeps its error, not this one's.
        if {$code} { catch {nickv_stop $now} } else { nickv_stop $now }
    }
    return -options $options $result
}

# --node for every server the harness runs now: the members, as an operator
# names every SKV node (NIC-KV.md, "Members"). nickv_start adds them unless
# the test gives --node itself (a test of what a member is).
proc nickv_node_args {} {
    set args {}
    foreach srv $::servers {
        lappend args --node [dict get $srv host]:[dict get $srv port]
    }
    return $args
}

# Make addr (ip:port) a member of a running Nic-KV too (CONFIG SET node).
proc nickv_add_member {nk addr} {
    set nodes [lindex [nickv_cmd $nk config get node] 1]
    assert_equal OK [nickv_cmd $nk config set node "$nodes $addr"]
}

# ... and every server the harness runs now (those started after Nic-KV).
proc nickv_add_members {nk} {
    set nodes [lindex [nickv_cmd $nk config get node] 1]
    foreach {- addr} [nickv_node_args] {
        if {[lsearch -exact $nodes $addr] < 0} { lappend nodes $addr }
    }
    assert_equal OK [nickv_cmd $nk config set node [join $nodes " "]]
}

# A Nic-KV daemon for a master on 127.0.0.1:$master_port. Returns a dict
# with its port, pid and log; extra arguments are nic-kv options
# (--thread-num 2 ...); --node lines for the harness's servers unless
# --node is among them.
proc nickv_start {master_port args} {
    nickv_start_under {} $master_port {*}$args
}

# The same, the command run under $prefix (a list: {prlimit --nofile=128:128}).
proc nickv_start_under {prefix master_port args} {
    if {[lsearch -exact $args --node] < 0} { set args [concat [nickv_node_args] $args] }
    # The port is free when picked, but the harness's servers take ports
    # from the same range (find_available_port's cursor is shared): one may
    # take it before nic-kv binds it. Then nic-kv exits ("Cannot listen"),
    # and a PING on the port would reach that server instead: wait for
    # nic-kv's own "listening on port" line, and pick another port if it
    # could not bind.
    set given $args
    for {set attempt 0} {$attempt < 5} {incr attempt} {
        set port [find_available_port [expr {$::baseport + 250}] 200]
        set dir [file normalize [tmpdir nickv]]
        # Its failover state goes next to its log, never into the harness's
        # working directory, where another test's Nic-KV would read it. (In
        # this attempt's directory: a retry's state file went to the first
        # attempt's, and a test reading it next to the log found none.)
        set args $given
        if {[lsearch -exact $args --state-file] < 0} { lappend args --state-file $dir/nickv.state }
        set log $dir/nickv.log
        # Its stdout and stderr go to a file: a nic-kv left running by a
        # failed test must not hold the harness's output open.
        set pid [exec {*}$prefix [nickv_binary] --port $port --master-port $master_port --logfile $log \
                     {*}$args >>& $dir/nickv.out &]
        wait_for_condition 100 50 {
            ([file exists $log] && ![catch {exec grep -q "listening on port $port," $log}]) ||
            [catch {exec kill -0 $pid}]
        } else {
            catch {exec tail -n 20 $log} tail
            fail "nic-kv did not start: $tail"
        }
        if {![catch {exec kill -0 $pid}]} break
        if {![file exists $log] || [catch {exec grep -q "Cannot listen" $log}]} {
            catch {exec tail -n 20 $log} tail
            fail "nic-kv exited at start: $tail"
        }
    }
    lappend ::nickv_pids $pid
    set nk [dict create port $port pid $pid log $log args $args master $master_port]
    set i [lsearch -exact $args --bind]
    if {$i >= 0} { dict set nk host [lindex [lindex $args [expr {$i + 1}]] 0] }
    # The password its clients give: requirepass, else masterauth (unless
    # masteruser makes that Nic-KV's own); the admin's, adminpass, when
    # set (it may run every command).
    set opts {--requirepass --adminpass}
    if {[lsearch -exact $args --masteruser] < 0} { set opts [linsert $opts 0 --masterauth] }
    foreach opt $opts {
        set i [lsearch -exact $args $opt]
        if {$i >= 0} { dict set nk auth [lindex $args [expr {$i + 1}]] }
    }
    wait_for_condition 100 50 {
        [catch {nickv_cmd $nk ping} r] == 0 && ($r eq "PONG" || [string match "*NOAUTH*" $r])
    } else {
        catch {exec tail -n 20 $log} tail
        fail "nic-kv did not start: $tail"
    }
    return $nk
}

# Start it again on the same port, with the same options (and, as members,
# the servers the harness runs now, as nickv_add_members made them).
proc nickv_restart {nk} {
    set log [dict get $nk log]
    set args [dict get $nk args]
    if {[lsearch -exact $args --node] >= 0} {
        foreach {- addr} [nickv_node_args] {
            if {[lsearch -exact $args $addr] < 0} { lappend args --node $addr }
        }
    }
    set pid [exec [nickv_binary] --port [dict get $nk port] --master-port [dict get $nk master] \
                 --logfile $log {*}$args >>& [file dirname $log]/nickv.out &]
    dict set nk pid $pid
    lappend ::nickv_pids $pid
    wait_for_condition 100 50 {
        [catch {nickv_cmd $nk ping} r] == 0 && ($r eq "PONG" || [string match "*NOAUTH*" $r])
    } else {
        fail "nic-kv did not restart: [exec tail -n 20 $log]"
    }
    return $nk
}

proc nickv_stop {nk {signal TERM}} {
    catch {exec kill -$signal [dict get $nk pid]}
    wait_for_condition 100 50 {
        [catch {exec kill -0 [dict get $nk pid]}] == 1
    } else {
        fail "nic-kv did not stop"
    }
    nickv_assert_no_bug $nk
}

# Nic-KV logs "BUG: ..." when one of its own invariants breaks (a client
# state move not in its table, ...): no test may leave one in its log.
proc nickv_assert_no_bug {nk} {
    if {[catch {exec grep "BUG:" [dict get $nk log]} bugs] == 0} {
        fail "Nic-KV broke an invariant: $bugs"
    }
}

# The address a Nic-KV listens on: 127.0.0.1 unless started with --bind
# (the first address given).
proc nickv_host {nk} {
    if {[dict exists $nk host]} { return [dict get $nk host] }
    return 127.0.0.1
}

# A command to Nic-KV (a fresh connection each time); the reply.
proc nickv_cmd {nk args} {
    set c [redis [nickv_host $nk] [dict get $nk port]]
    if {[dict exists $nk auth]} { catch {$c auth [dict get $nk auth]} }
    catch {$c {*}$args} r
    catch {$c close}
    return $r
}

# INFO all of Nic-KV, on a connection kept per Nic-KV address (it counts
# as one of Nic-KV's clients while it lasts). The fault checkers poll
# thousands of times a run: a connection each left some 15000 sockets in
# TIME_WAIT per run, and two runs at once ran loopback out of ephemeral
# ports (connect: "address already in use"). A connection that fails
# (Nic-KV restarted) is dropped and opened again once.
proc nickv_info_all {nk} {
    global nickv_info_conns
    set key "[nickv_host $nk]:[dict get $nk port]"
    if {[info exists nickv_info_conns($key)]} {
        if {![catch {$nickv_info_conns($key) info all} r]} { return $r }
        catch {$nickv_info_conns($key) close}
        unset nickv_info_conns($key)
    }
    set c [redis [nickv_host $nk] [dict get $nk port]]
    if {[dict exists $nk auth]} { catch {$c auth [dict get $nk auth]} }
    if {[catch {$c info all} r]} {
        catch {$c close}
        return $r
    }
    set nickv_info_conns($key) $c
    return $r
}

proc nickv_info {nk field} {
    set info [nickv_cmd $nk info all]
    if {[regexp "\r\n$field:(\[^\r\n\]*)" "\r\n$info" -> v]} { return $v }
    return ""
}

# Wait until Nic-KV streams to n replicas (tries x 100 ms).
proc nickv_wait_replicas {nk n {tries 200}} {
    wait_for_condition $tries 100 {
        [nickv_info $nk connected_replicas] == $n
    } else {
        # What the master saw of the hand-overs says why (a replica bounced
        # into nickv-hold, a daemon timed out, ...); the tail of Nic-KV's log.
        set why {}
        catch {
            set m [redis 127.0.0.1 [dict get $nk master]]
            if {[dict exists $nk auth]} { catch {$m auth [dict get $nk auth]} }
            set why [$m info nickv]
            $m close
        }
        catch {append why [exec tail -n 15 [dict get $nk log]]}
        append why [nickv_servers_said 4]
        fail "Nic-KV serves [nickv_info $nk connected_replicas] replicas, not $n\n$why"
    }
}

# Each running server's last n lines about Nic-KV (a redirect, a hold, a
# bounce, an ask), for a failure's message.
proc nickv_servers_said {n} {
    set said {}
    foreach s $::servers {
        if {[catch {
            set lines [exec grep -a "Nic-KV" [dict get $s stdout] | tail -n $n]
            append said "\n--- server [dict get $s port]:\n$lines"
        } e]} { append said "\n(err: $e)" }
    }
    return $said
}

# Where a replica streams from, in a few words.
proc nickv_replica_state {r} {
    set fields {}
    foreach f {nickv_link_via nickv_via_timeouts nickv_via_waits} {
        lappend fields "[string range $f 6 end]=[nickv_status $r $f]"
    }
    return "link=[status $r master_link_status] [join $fields { }]"
}

# Writes of every kind the stream carries.
proc nickv_mixed_load {r n} {
    for {set i 0} {$i < $n} {incr i} {
        $r set key:$i $i
        $r incr counter
        $r multi
        $r lpush list $i
        $r hset hash f$i $i
        $r exec
        $r eval {redis.call('sadd', KEYS[1], ARGV[1]); return 1} 1 set $i
        $r setex volatile:$i 1000 $i
        $r set short:$i x px 1
        $r zadd zset $i m$i
    }
    $r select 3
    $r set in-db3 x
    $r select 7
    $r set in-db7 y
    $r select 9
    $r set big [string repeat b 1048576]
    # Let the short-lived keys expire now, by touching them (each DEL goes
    # down the stream), so that no expiry races the digests that follow.
    after 5
    for {set i 0} {$i < $n} {incr i} { $r exists short:$i }
}

# A field of INFO nickv on an SKV server (not a default INFO section).
proc nickv_status {r field} {
    if {[regexp "\r\n$field:(\[^\r\n\]*)" "\r\n[$r info nickv]" -> v]} { return $v }
    return ""
}

proc nickv_assert_digests {master replicas} {
    foreach r $replicas { wait_for_ofs_sync $master $r }
    set d [$master debug digest]
    foreach r $replicas { assert_equal $d [$r debug digest] }
}

# The innermost server (a replica behind Nic-KV) restarts with its data and
# replication id: it must resync partially from Nic-KV, and the master see
# no sync at all. Returns its new client.
proc nickv_check_restart_resyncs_from_nickv {master nk} {
    set full [status $master sync_full]
    set partial [status $master sync_partial_ok]
    set nk_partial [nickv_info $nk sync_partial_ok]
    # Its replicaof and a save point go into its config file, so that it
    # comes back as a replica with its data and replication id.
    set r [srv 0 client]
    $r config set save "900 1"
    $r config rewrite
    restart_server 0 true false
    set r [srv 0 client]
    wait_for_condition 300 100 {
        [nickv_info $nk sync_partial_ok] > $nk_partial &&
        [status $r master_link_status] eq {up}
    } else {
        fail "the restarted replica did not resync from Nic-KV"
    }
    nickv_wait_replicas $nk 3
    assert_equal $full [status $master sync_full]
    assert_equal $partial [status $master sync_partial_ok]
    return $r
}

# Nic-KV is killed while a write load runs (the three innermost servers are
# its replicas): the replicas fall back to the master with partial resyncs;
# Nic-KV returns under the load and they move back, although their offsets
# are always ahead of the backlog range it last reported to the master.
# Nothing is lost. Returns the restarted Nic-KV.
proc nickv_check_kill_under_load {master mhost mport nk replicas} {
    set load [start_write_load $mhost $mport 60]
    after 1000
    nickv_stop $nk KILL
    foreach r $replicas {
        wait_for_condition 300 100 {
            [status $r master_link_status] eq {up} && [nickv_status $r nickv_link_via] eq {}
        } else {
            fail "a replica did not fall back to the master"
        }
    }
    set nk [nickv_restart $nk]
    nickv_wait_replicas $nk 3
    stop_write_load $load
    wait_load_handlers_disconnected -3
    $master incr counter
    nickv_assert_digests $master $replicas
    return $nk
}

# ------------------------------------------------------- Raw connections ---
# A socket to Nic-KV that the test drives byte by byte (a client that never
# reads, or never authenticates).
proc nickv_raw_connect {nk} {
    set fd [socket 127.0.0.1 [dict get $nk port]]
    fconfigure $fd -blocking 0 -translation binary -buffering none
    return $fd
}

# The first line Nic-KV sends on $fd (without CRLF), "EOF" if it closed the
# connection first, "TIMEOUT" if nothing came within $ms milliseconds.
proc nickv_raw_line {fd {ms 3000}} {
    set deadline [expr {[clock milliseconds] + $ms}]
    set buf ""
    while {[clock milliseconds] < $deadline} {
        if {[catch {read $fd} data]} { return "EOF" }
        append buf $data
        set nl [string first "\r\n" $buf]
        if {$nl >= 0} { return [string range $buf 0 [expr {$nl - 1}]] }
        if {[eof $fd]} { return "EOF" }
        after 20
    }
    return "TIMEOUT"
}

# Whether Nic-KV closed $fd within $ms milliseconds (what it sent is dropped).
proc nickv_raw_closed {fd {ms 3000}} {
    set deadline [expr {[clock milliseconds] + $ms}]
    while {[clock milliseconds] < $deadline} {
        if {[catch {read $fd}] || [eof $fd]} { return 1 }
        after 20
    }
    return 0
}

# CPU time of process $pid so far, in clock ticks (user + system).
proc nickv_cpu_ticks {pid} {
    set fd [open /proc/$pid/stat]
    set stat [read $fd]
    close $fd
    set fields [split [string trim [string range $stat [expr {[string last ")" $stat] + 2}] end]]]
    expr {[lindex $fields 11] + [lindex $fields 12]}
}

# ------------------------------------------------- Hand-written replicas ---

# A command as RESP (an argv: *N, then $len and the bytes of each argument).
proc nickv_resp {args} {
    set out "*[llength $args]\r\n"
    foreach a $args { append out "\$[string length $a]\r\n$a\r\n" }
    return $out
}

# A replica written by hand: a raw socket to Nic-KV that joins the stream at
# the master's current offset (REPLCONF listening-port and capa, PSYNC,
# +CONTINUE) and then sends only what the test makes it send. Its listening
# port (it listens on none) names it in INFO. Returns the socket (binary,
# non-blocking reads: the test drains the stream with [read $fd]).
proc nickv_fake_replica {nk master {listening_port 1}} {
    set fd [socket 127.0.0.1 [dict get $nk port]]
    fconfigure $fd -translation binary -buffering none
    if {[dict exists $nk auth]} {
        puts -nonewline $fd [nickv_resp AUTH [dict get $nk auth]]
        assert_match {+OK*} [gets $fd]
    }
    puts -nonewline $fd [nickv_resp REPLCONF listening-port $listening_port]
    assert_match {+OK*} [gets $fd]
    puts -nonewline $fd [nickv_resp REPLCONF capa eof capa psync2]
    assert_match {+OK*} [gets $fd]
    set replid [status $master master_replid]
    set offset [expr {[status $master master_repl_offset] + 1}]
    puts -nonewline $fd [nickv_resp PSYNC $replid $offset]
    assert_match "+CONTINUE $replid*" [gets $fd]
    fconfigure $fd -blocking 0
    return $fd
}

# The offset the master holds for a replica behind Nic-KV, by its listening
# port; "" if it has none.
proc nickv_master_replica_offset {master port} {
    set re "slave\\d+:ip=\[^,\]*,port=$port,state=\[a-z\]+,offset=(-?\\d+),\[^\r\n\]*via=nickv"
    if {[regexp $re [$master info replication] -> off]} { return $off }
    return ""
}

# What Nic-KV has sent the replica with this listening port ("" if none).
proc nickv_replica_sent {nk port} {
    set re "replica\\d+:id=\\d+,ip=\[^,\]*,port=$port,\[^\r\n\]*,sent=(-?\\d+)"
    if {[regexp $re [nickv_cmd $nk info all] -> sent]} { return $sent }
    return ""
}

# The bytes a string becomes on a command line (exec converts arguments to
# the system encoding): what a test's client must send to mean the same
# password as a program that got it as an argument.
proc nickv_arg_bytes {s} {
    encoding convertto [encoding system] $s
}

proc nickv_wait_link_up {nk} {
    wait_for_condition 100 100 {
        [nickv_info $nk master_link_status] eq {up}
    } else {
        fail "Nic-KV's link to the master did not come up: [exec tail -n 5 [dict get $nk log]]"
    }
}

# SKV's server side of Nic-KV logs "BUG: ..." when one of its own
# invariants breaks (a replica path move not in its diagram): none may
# appear in the log of server level $level.
proc nickv_assert_no_server_bug {level} {
    if {[catch {exec grep "BUG:" [srv $level stdout]} bugs] == 0} {
        fail "the server at level $level broke an invariant: $bugs"
    }
}

# The innermost server, configured with Nic-KV as its master, gets a full
# sync through Nic-KV (Nic-KV's own connection to the master asks for it),
# then the stream: the data is the master's.
# What a stalled full sync through Nic-KV looks like from each side: the
# replica's transfer counters, Nic-KV's clients and log, the master's log.
proc nickv_sync_diag {nk replica master_log} {
    set s "--- the replica:\n"
    catch {
        foreach line [split [$replica info replication] "\n"] {
            if {[string match {master_*} $line]} { append s "$line\n" }
        }
    }
    append s "--- Nic-KV:\n"
    catch {append s [nickv_cmd $nk info replicas]}
    catch {append s [exec tail -n 20 [dict get $nk log]]}
    append s "\n--- the master:\n"
    catch {append s [exec tail -n 20 $master_log]}
    return $s
}

proc nickv_check_proxied_full_sync {master nk} {
    set r [srv 0 client]
    set proxied [nickv_info $nk sync_full_proxied]
    $r replicaof no one
    $r replicaof 127.0.0.1 [dict get $nk port]
    wait_for_condition 200 100 {
        [status $r master_link_status] eq {up}
    } else {
        fail "the replica did not sync through Nic-KV: [nickv_sync_diag $nk $r [srv -1 stdout]]"
    }
    assert_equal [expr {$proxied + 1}] [nickv_info $nk sync_full_proxied]
    nickv_mixed_load $master 50
    nickv_assert_digests $master [list $r]
}

# A stand-in daemon (tests/fake-peer.tcl nickv) in $mode for the master
# $master on port $mport; returns its pid once the master has it healthy.
proc fake_nickv_start {master mport mode} {
    set fport [find_available_port [expr {$::baseport + 480}] 20]
    set out [file normalize [tmpdir fake-nickv]]/out
    set pid [exec tclsh tests/skv/fake-peer.tcl nickv $mport $fport $mode > $out 2>@1 &]
    wait_for_condition 100 100 {
        [nickv_status $master nickv_daemon] eq {healthy}
    } else {
        catch {exec kill $pid}
        fail "the stand-in daemon did not join"
    }
    return $pid
}

# redis-py, pinned, in build/pyclients (5.0, RESP2) or build/pyclients8
# (8.x, which opens its connections with HELLO 3): utils/setup-deps.sh test
# installs both. The Python interpreter of release $version (5 or 8).
proc skv_redis_py_bin {version} {
    set venv [dict get {5 pyclients 8 pyclients8} $version]
    set py [file normalize ../$venv/bin/python3]
    if {![file executable $py]} {
        fail "no redis-py in build/$venv: run utils/setup-deps.sh test"
    }
    return $py
}

# The Python code in $script run with redis-py $version: its output.
proc skv_redis_py {script {version 5}} {
    set py [skv_redis_py_bin $version]
    set f [file normalize [tmpfile py]].py
    set fd [open $f w]
    puts $fd $script
    close $fd
    exec $py $f 2>@1
}

# The same in the background, its output (stdout and stderr) to the file
# $out: returns its pid.
proc skv_redis_py_bg {script out {version 5}} {
    set py [skv_redis_py_bin $version]
    set f [file normalize [tmpfile py]].py
    set fd [open $f w]
    puts $fd $script
    close $fd
    exec $py -u $f >& $out &
}

# ------------------------------------------------------------- Failover ---

# The fields of a node line in Nic-KV's INFO failover, by address ("" if
# it lists no such node).
proc nickv_probe_node {nk addr} {
    foreach line [split [nickv_cmd $nk info failover] "\r\n"] {
        if {[regexp "^node\\d+:addr=$addr,(.*)$" $line -> rest]} { return $rest }
    }
    return ""
}

# The master as Nic-KV names it to clients (SENTINEL): {host port}.
proc nickv_master_addr {nk} {
    nickv_cmd $nk sentinel get-master-addr-by-name mymaster
}

# A field of INFO replication of the node at port, on a fresh connection
# (a demoted master's clients are killed), "" if it does not answer.
proc nickv_node_status {port field} {
    set v {}
    catch {
        set c [redis 127.0.0.1 $port]
        set v [status $c $field]
        $c close
    }
    return $v
}

# Wait until Nic-KV sees n valid replicas and the master takes its lease.
proc nickv_wait_failover_view {nk n} {
    wait_for_condition 100 100 {
        [nickv_info $nk valid_replicas] == $n && [nickv_info $nk master_lease] eq {on}
    } else {
        fail "Nic-KV does not see the topology: [nickv_cmd $nk info failover]"
    }
}

# ------------------------------------------------ Failover checkers ---
# Used by tests/integration/nickv-failover.tcl (and meant for a failover test over RDMA).

# A client to the master Nic-KV names, retried for up to 10 s (a failover
# may be under way).
proc fo_connect {nk} {
    set deadline [expr {[clock milliseconds] + 10000}]
    while {[clock milliseconds] < $deadline} {
        if {![catch {redis {*}[nickv_master_addr $nk]} r]} {
            if {![catch {$r select 9}]} { return $r }
            catch {$r close}
        }
        after 50
    }
    fail "no master to connect to: [nickv_cmd $nk info failover]"
}

# Was err a master's refusal that says it may have been replaced (its
# lease lapsed: -READONLY or -MASTERDOWN "... no lease from Nic-KV", or a
# replica's -READONLY)? A Sentinel client asks for the master again then:
# such a master still answers PING (a liveness check must not call it
# dead), so PING failing is not the only sign.
proc fo_refused_here {err} {
    expr {[string match {READONLY*} $err] || [string match {MASTERDOWN*} $err]}
}

# The list-append writer: appends 0..n-1 to key, each followed by WAIT 1,
# through whatever master Nic-KV names; at i == at, runs fault. A value
# whose RPUSH and WAIT both succeeded, with WAIT counting a replica, is
# acknowledged. Returns {acknowledged attempted}.
proc fo_append {nk key n at fault} {
    set r [fo_connect $nk]
    set acked {}
    for {set i 0} {$i < $n} {incr i} {
        if {$i == $at} { uplevel 1 $fault }
        if {[catch {$r rpush $key $i} e] == 0 && [catch {$r wait 1 2000} w] == 0 && $w >= 1} {
            lappend acked $i
        } elseif {[fo_refused_here $e] || [catch {$r ping}]} {
            catch {$r close}
            set r [fo_connect $nk]
        } else {
            # A refusal (no lease yet, -NOREPLICAS): a moment before the next.
            after 20
        }
    }
    $r close
    list $acked $n
}

# Every acknowledged value is in the list, in order (the list may also hold
# values that were not acknowledged, never one that was not written).
proc fo_assert_acked {acked got n} {
    set pos 0
    foreach v $acked {
        set i [lsearch -exact -start $pos $got $v]
        if {$i < 0} { fail "acknowledged append $v is missing (or out of order) in: $got" }
        set pos [expr {$i + 1}]
    }
    foreach v $got {
        if {![string is integer -strict $v] || $v < 0 || $v >= $n} { fail "a value never written: $v" }
    }
}

# The list-append checkers' verdict on the final master m (db 9): how many
# acknowledged appends are missing (or out of order) from list:0..n-1;
# acked(c) and next(c) are client c's acknowledged values and the next value
# it would have written, in the caller's array arr. A value never written
# fails the test at once.
proc fo_count_lost {m arr n} {
    upvar 1 $arr a
    set lost 0
    set ::fo_lost_detail {}
    for {set c 0} {$c < $n} {incr c} {
        set got [$m lrange list:$c 0 -1]
        set pos 0
        set k 0
        array unset byfault
        set missing {}
        foreach v $a(acked,$c) {
            set i [lsearch -exact -start $pos $got $v]
            if {$i < 0} {
                incr lost
                # What was going on when it was acknowledged (a(ackinfo,c),
                # when the checker keeps it), and whether it is there at
                # all (out of order) or not.
                set when [expr {[info exists a(ackinfo,$c)] ? [lindex $a(ackinfo,$c) $k] : "?"}]
                incr byfault($when)
                if {[llength $missing] < 5} {
                    lappend missing "$v ([expr {[lsearch -exact $got $v] < 0 ? "absent" : "out of order"}])"
                }
            } else {
                set pos [expr {$i + 1}]
            }
            incr k
        }
        if {[llength $missing]} {
            append ::fo_lost_detail "list:$c ([llength $got] items): lost [join $missing {, }]...;\
                acknowledged during: [array get byfault]\n"
        }
        foreach v $got {
            if {![string is integer -strict $v] || $v < 0 || $v >= $a(next,$c)} {
                fail "list:$c holds a value never written: $v"
            }
        }
    }
    return $lost
}

# Wait until the node at port is a replica of the master at mport, its link up.
proc fo_wait_replica_of {port mport} {
    wait_for_condition 100 100 {
        [nickv_node_status $port master_port] == $mport && [nickv_node_status $port master_link_status] eq {up}
    } else {
        fail "$port is not a replica of $mport: [nickv_node_status $port role]"
    }
}

proc fo_wait_failovers {nk n} {
    wait_for_condition 100 100 {
        [nickv_info $nk failovers] == $n && [nickv_info $nk failover_state] eq {watching}
    } else {
        fail "Nic-KV made [nickv_info $nk failovers] failovers, not $n: [nickv_cmd $nk info failover]\n[exec tail -n 20 [dict get $nk log]]"
    }
}

# Run a write on $c, a master with min-replicas-to-write through Nic-KV
# $nk: retried while it answers NOREPLICAS (right after a failover, until
# the replicas that followed it count as good), then must succeed.
proc nickv_write_when_good {nk c args} {
    wait_for_condition 100 100 {
        [set status [catch {$c {*}$args} e]] == 0 || ![string match "NOREPLICAS*" $e]
    } else {
        fail "the master takes no write: $e\n[nickv_cmd $nk info failover]"
    }
    if {$status != 0} { fail "the write failed: $e" }
    return $e
}

# Wait until the node behind client c serves data: a master Nic-KV just
# promoted does once the probe has granted it a lease, a round trip later
# (a read needs the lease; PING and SELECT do not).
proc nickv_wait_served {c} {
    wait_for_condition 100 20 {
        [catch {$c exists nickv-wait-served} e] == 0
    } else {
        fail "it serves nothing: $e"
    }
}
