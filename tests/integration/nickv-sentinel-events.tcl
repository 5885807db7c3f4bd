# Nic-KV's Sentinel events beside a real redis-sentinel's on the same fault
# (issue 33): two twin topologies, a master and two replicas each, one
# watched by redis-sentinel (quorum 1), one by Nic-KV; the master of each
# killed with -9; each one's events read from a PSUBSCRIBE * while it fails
# over. Addresses become roles (the old master, the new one, the other
# replica), Sentinel's events are kept to the kinds Nic-KV sends (Nic-KV
# has no election and no per-step states), and the two sequences must be
# the same: what a tool that watches Sentinel's channels sees, in order.
# So must SENTINEL REPLICAS' list after it, with its flags.

source tests/skv/helpers.tcl

# A connection to 127.0.0.1:$port subscribed to every channel.
proc sev_subscribe {port} {
    set fd [socket 127.0.0.1 $port]
    fconfigure $fd -translation binary -blocking 0
    puts -nonewline $fd "*2\r\n\$10\r\nPSUBSCRIBE\r\n\$1\r\n*\r\n"
    flush $fd
    return $fd
}

# The {channel message} pairs in buf, in order.
proc sev_parse {buf} {
    set lines [lsearch -all -inline -not -exact [split $buf "\r\n"] {}]
    set out {}
    for {set i 0} {$i < [llength $lines]} {incr i} {
        # *4 $8 pmessage $1 * $n <channel> $n <message>
        if {[lindex $lines $i] eq {pmessage}} {
            lappend out [list [lindex $lines [expr {$i + 4}]] [lindex $lines [expr {$i + 6}]]]
            incr i 6
        }
    }
    return $out
}

# What came on fd: {channel message} pairs, in order. Reads until an event
# on channel $channel whose message starts with $prefix came and $after ms
# more went by, or $ms ms in all.
proc sev_collect {fd channel prefix after ms} {
    set buf ""
    set deadline [expr {[clock milliseconds] + $ms}]
    set stop 0
    while {[clock milliseconds] < $deadline && ($stop == 0 || [clock milliseconds] < $stop)} {
        append buf [read $fd]
        if {$stop == 0} {
            foreach e [sev_parse $buf] {
                if {[lindex $e 0] eq $channel && [string first $prefix [lindex $e 1]] == 0} {
                    set stop [expr {[clock milliseconds] + $after}]
                }
            }
        }
        after 20
    }
    close $fd
    return [sev_parse $buf]
}

# The events of the kinds Nic-KV sends, "<channel> <message>", with each
# address (ip:port or ip port) as its role: roles is {port role ...}. The
# +slave announcements that follow a +switch-master come in no set order
# from Sentinel: a run of them is sorted.
proc sev_normal {events roles} {
    set kinds {+sdown -sdown +odown -odown +try-failover +failover-end +switch-master +slave}
    set out {}
    foreach e $events {
        lassign $e channel msg
        if {[lsearch -exact $kinds $channel] < 0} continue
        foreach {port role} $roles {
            set msg [string map [list "127.0.0.1:$port" $role "127.0.0.1 $port" $role] $msg]
        }
        lappend out "$channel $msg"
    }
    set sorted {}
    set run {}
    foreach e $out {
        if {[string match {+slave *} $e]} { lappend run $e; continue }
        lappend sorted {*}[lsort $run]
        set run {}
        lappend sorted $e
    }
    lappend sorted {*}[lsort $run]
    return $sorted
}

# SENTINEL REPLICAS' answer as {role flags} pairs, sorted: roles is
# {port role ...}.
proc sev_replicas {reply roles} {
    set out {}
    foreach r $reply { lappend out [list [dict get $roles [dict get $r port]] [dict get $r flags]] }
    return [lsort -index 0 $out]
}

proc sev_sentinel_start {mport} {
    set dir [file normalize [tmpdir sentinel]]
    set port [find_available_port [expr {$::baseport + 460}] 20]
    set fd [open $dir/sentinel.conf w]
    puts $fd "port $port\nbind 127.0.0.1\ndir $dir\nlogfile $dir/sentinel.log"
    puts $fd "sentinel monitor mymaster 127.0.0.1 $mport 1"
    puts $fd "sentinel down-after-milliseconds mymaster 1000"
    close $fd
    set pid [exec src/redis-sentinel $dir/sentinel.conf &]
    wait_for_condition 100 50 {
        ![catch {redis 127.0.0.1 $port} c] && [llength [$c sentinel replicas mymaster]] == 2
    } else {
        fail "redis-sentinel on $port did not find the two replicas"
    }
    $c close
    return [list $port $pid]
}

tags {"nickv repl external:skip"} {

# Sentinel's side: a master with nickv-lease no, two replicas. The
# reference must be one clean failover: on a loaded machine Sentinel (down
# after 1 s) may take the promoted replica, slow to answer for a moment,
# for down and fail it over again; such a run is done again, up to three
# times.
set sentinel_events {}
for {set sev_try 0} {$sev_try < 3} {incr sev_try} {
    start_server {overrides {save ""}} {
        set mport [srv 0 port]
        set mpid [srv 0 pid]
        start_server {overrides {save ""}} {
        start_server {overrides {save ""}} {
            set ports [list [srv -1 port] [srv 0 port]]
            foreach r [list [srv -1 client] [srv 0 client]] { $r replicaof 127.0.0.1 $mport }
            foreach r [list [srv -1 client] [srv 0 client]] { wait_for_sync $r }
            lassign [sev_sentinel_start $mport] sport spid
            set fd [sev_subscribe $sport]
            after 200
            read $fd
            exec kill -9 $mpid
            set events [sev_collect $fd +sdown "slave 127.0.0.1:$mport " 500 20000]
            set s [redis 127.0.0.1 $sport]
            set new [lindex [$s sentinel get-master-addr-by-name mymaster] 1]
            set other [lindex [lsearch -all -inline -not -exact $ports $new] 0]
            set sentinel_replicas [sev_replicas [$s sentinel replicas mymaster] [list $mport OLD $new NEW $other OTHER]]
            $s close
            exec kill -9 $spid
            set other [lindex [lsearch -all -inline -not -exact $ports $new] 0]
            set sentinel_events [sev_normal $events [list $mport OLD $new NEW $other OTHER]]
            set sentinel_roles [list $mport OLD $new NEW $other OTHER]
        }
        }
    }
    if {[llength [lsearch -all $sentinel_events {+switch-master *}]] == 1 &&
        [lsearch $sentinel_events {+try-failover master mymaster NEW}] < 0} break
    puts "    (redis-sentinel failed over more than once: run again)"
}

# Nic-KV's side: the same topology, fenced.
set fo_conf [nickv_failover_overrides]
start_server [list overrides $fo_conf] {
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides $fo_conf] {
    start_server [list overrides $fo_conf] {
        set ports [list [srv -1 port] [srv 0 port]]
        foreach r [list [srv -1 client] [srv 0 client]] { $r replicaof 127.0.0.1 $mport }
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes]

        test {Sentinel events: Nic-KV sends redis-sentinel's, in its order, through a kill -9 failover} {
            wait_for_condition 100 100 {
                [nickv_info $nk valid_replicas] == 2 && [nickv_info $nk master_lease] eq {on}
            } else {
                fail "no healthy topology: [nickv_cmd $nk info failover]"
            }
            set fd [sev_subscribe [dict get $nk port]]
            after 200
            read $fd
            exec kill -9 $mpid
            set events [sev_collect $fd +sdown "slave 127.0.0.1:$mport " 500 20000]
            set new [lindex [split [nickv_info $nk master] :] end]
            set other [lindex [lsearch -all -inline -not -exact $ports $new] 0]
            set nickv_events [sev_normal $events [list $mport OLD $new NEW $other OTHER]]
            # What Sentinel said is the reference: the test is only as good
            # as it is whole.
            assert {[lsearch $sentinel_events "+switch-master mymaster OLD NEW"] >= 0}
            assert {[lsearch $sentinel_events "+slave slave OLD OLD @ mymaster NEW"] >= 0}
            if {$nickv_events ne $sentinel_events} {
                fail "Nic-KV's events differ from redis-sentinel's:\nsentinel:\n  [join $sentinel_events "\n  "]\nnic-kv:\n  [join $nickv_events "\n  "]"
            }
            # SENTINEL REPLICAS: the dead old master listed, s_down, as
            # Sentinel lists it, and the other replica once the new master
            # lists it (Sentinel's list was read after its reconfiguration
            # ended; Nic-KV's repointed replica is listed when its link is
            # up).
            assert_equal {{OLD s_down,slave,disconnected} {OTHER slave}} $sentinel_replicas
            set roles [list $mport OLD $new NEW $other OTHER]
            wait_for_condition 50 100 {
                [sev_replicas [nickv_cmd $nk sentinel replicas mymaster] $roles] eq $sentinel_replicas
            } else {
                fail "SENTINEL REPLICAS: [sev_replicas [nickv_cmd $nk sentinel replicas mymaster] $roles], Sentinel's $sentinel_replicas"
            }
        }

        test {Sentinel events: SENTINEL REPLICAS leaves out a replica that left its master and answers (it may be a master of its own now)} {
            set r [redis 127.0.0.1 $other]
            # (A master now: with nickv-lease yes it takes no write without
            # Nic-KV's lease, but one without the option would.)
            $r replicaof no one
            assert_equal master [lindex [$r role] 0]
            $r close
            wait_for_condition 100 100 {
                [llength [nickv_cmd $nk sentinel replicas mymaster]] == 1
            } else {
                fail "SENTINEL REPLICAS still lists 127.0.0.1:$other: [nickv_cmd $nk sentinel replicas mymaster]"
            }
            set c [redis 127.0.0.1 [dict get $nk port]]
            assert_equal {{OLD s_down,slave,disconnected}} \
                [sev_replicas [$c sentinel replicas mymaster] [list $mport OLD $new NEW $other OTHER]]
            $c close
        }
        nickv_stop $nk
    }
    }
}

}

# A Sentinel client through a kill -9 failover (issue 33): redis-py 8's
# Sentinel (HELLO 3, RESP3) writes through the master Nic-KV names, an
# append followed by WAIT 1 each, retrying through Nic-KV on any error as
# its connection pool does; the master is killed -9 under it. Its writes
# resume on the new master, and every append it saw acknowledged is there.
tags {"nickv repl external:skip"} {
nickv_topology [list overrides [nickv_failover_overrides] replicas 2 \
                    nickv [list {*}[nickv_user_args] --failover yes]] {
    test {redis-py 8 through Nic-KV follows a kill -9 failover: writes resume, nothing acknowledged lost} {
        nickv_wait_failover_view $nk 2
        # Both replicas behind Nic-KV first. Killed sooner, the master may
        # have sent its direct replicas a REPLCONF GETACK that Nic-KV's
        # link, still syncing, never got: both then claim more than the
        # stream Nic-KV knows, and the failover is called off (NIC-KV.md,
        # Limits: a Nic-KV started just before its master dies). Seen once
        # in skv-debug.
        nickv_wait_replicas $nk 2
        set out [file normalize [tmpfile pywriter]]
        set nkport [dict get $nk port]
        set stop [file normalize [tmpfile pystop]]
        set pid [skv_redis_py_bg [string map [list @PORT@ $nkport @STOP@ $stop] {
import os, time
from redis.sentinel import Sentinel
import redis
s = Sentinel([('127.0.0.1', @PORT@)], socket_timeout=0.5, protocol=3)
m = s.master_for('mymaster', socket_timeout=0.5, protocol=3)
i, acked = 0, []
while not os.path.exists('@STOP@'):
    try:
        m.rpush('pylist', i)
        if m.execute_command('WAIT', 1, 1000) >= 1:
            acked.append(i)
            print('acked', i, s.discover_master('mymaster')[1], flush=True)
    except (redis.RedisError, OSError):
        time.sleep(0.01)
    i += 1
print('done', ' '.join(map(str, acked)), flush=True)
}] $out 8]
        wait_for_condition 100 50 {
            [file exists $out] && [string match "*acked*" [exec cat $out]]
        } else {
            fail "redis-py writes nothing: [exec cat $out]"
        }
        exec kill -9 $master_pid
        fo_wait_failovers $nk 1
        set new [lindex [nickv_master_addr $nk] 1]
        # Acknowledged appends on the new master, through redis-py's own
        # discovery.
        wait_for_condition 200 50 {
            [regexp -all "acked \[0-9\]+ $new\n" [exec cat $out]] >= 20
        } else {
            fail "redis-py's writes do not resume on $new: [exec tail -n 5 $out]"
        }
        close [open $stop w]
        wait_for_condition 100 50 {
            [string match "*done*" [exec cat $out]]
        } else {
            fail "the writer does not stop: [exec tail -n 5 $out]"
        }
        regexp {done ([0-9 ]*)} [exec cat $out] -> acked
        set r [redis 127.0.0.1 $new]
        set got [$r lrange pylist 0 -1]
        $r close
        set lost 0
        foreach v $acked { if {[lsearch -exact $got $v] < 0} { incr lost } }
        puts "    ([llength $acked] appends acknowledged to redis-py, $lost lost)"
        assert_equal 0 $lost
    }
}
}
