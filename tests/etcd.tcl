# etcd.tcl -- a real etcd cluster for SKV's tests (sourced by a test file).
#
# Debian's etcd-server (3.4) members on 127.0.0.1, each with its client and
# peer port from find_available_port, its data directory and its log under
# tests/tmp (kept after the run). --heartbeat-interval 50 and
# --election-timeout 500 make a lost leader be replaced in well under a
# second and let leases as short as 1 s be granted (etcd's minimum TTL is
# 1.5 election timeouts, rounded up to a second).
#
#   etcd_cluster_start ?n? ?opts?
#                            start n members (3), wait until all are healthy
#                            (starting again on other ports when a member
#                            lost its port to another process); returns the
#                            cluster (a dict: members, urls).
#                            opts (a dict, empty by default) may hold flags:
#                            more etcd flags for every member (with
#                            --cert-file the client URLs are https), and
#                            etcdctl: flags for every etcdctl the helpers run
#                            (--cacert, --cert/--key, --user), and host: the
#                            address the members serve clients on
#                            (127.0.0.1; their peers always talk there)
#   etcd_cluster_urls        "etcd://h:p,h:p,h:p" (etcds:// with TLS), in the
#                            members' order
#   etcd_ctl args...         etcdctl on the running members, with the
#                            cluster's etcdctl flags
#   etcd_ctl_flags_add f..   more etcdctl flags from now on (--user after
#                            "auth enable")
#   etcd_member_kill i       SIGKILL member i (0-based), wait until it is gone
#   etcd_member_start i      restart member i on its data directory
#                            (--initial-cluster-state existing), wait until
#                            it is healthy
#   etcd_member_stop_all     kill every member, keep the cluster's files
#   etcd_cluster_stop        the same, and forget the cluster
#
# The cluster is in ::etcd_cluster: dir, initial (the --initial-cluster
# string), flags, ctl (the etcdctl flags), scheme (http or https) and members, a list of dicts with name, client (port), peer
# (port), url, data, log and pid (0 while it is not running).

# Members a previous test file left running (it failed before its
# etcd_cluster_stop) are killed here, as helpers.tcl does with nic-kv.
if {![info exists ::etcd_pids]} { set ::etcd_pids {} }
foreach pid $::etcd_pids { catch {exec kill -9 $pid} }
set ::etcd_pids {}

proc etcd_available {} {
    expr {[auto_execok etcd] ne {} && [auto_execok etcdctl] ne {}}
}

proc etcd_member_args {m initial state} {
    set name [dict get $m name]
    list --name $name --data-dir [dict get $m data] \
        --listen-client-urls [dict get $m url] --advertise-client-urls [dict get $m url] \
        --listen-peer-urls http://127.0.0.1:[dict get $m peer] \
        --initial-advertise-peer-urls http://127.0.0.1:[dict get $m peer] \
        --initial-cluster $initial --initial-cluster-state $state \
        --initial-cluster-token skv-test \
        --heartbeat-interval 50 --election-timeout 500 {*}[dict get $::etcd_cluster flags]
}

proc etcd_member_spawn {i state} {
    set m [lindex [dict get $::etcd_cluster members] $i]
    set args [etcd_member_args $m [dict get $::etcd_cluster initial] $state]
    set pid [exec etcd {*}$args >>& [dict get $m log] &]
    lappend ::etcd_pids $pid
    dict set m pid $pid
    set members [dict get $::etcd_cluster members]
    lset members $i $m
    dict set ::etcd_cluster members $members
    return $pid
}

proc etcd_pid_alive {pid} {
    expr {$pid != 0 && [file exists /proc/$pid] && ![catch {exec kill -0 $pid}] &&
          ![string match {*State:*Z*} [etcd_proc_state $pid]]}
}

proc etcd_port_refuses {host port} {
    if {[catch {socket $host $port} fd]} { return 1 }
    close $fd
    return 0
}

proc etcd_proc_state {pid} {
    if {[catch {set fd [open /proc/$pid/status]}]} { return {} }
    set text [read $fd]
    close $fd
    regexp -line {^State:.*$} $text line
    return $line
}

# Is every url in the list healthy (etcdctl endpoint health: a quorum read)?
proc etcd_healthy {urls} {
    expr {![catch {exec etcdctl --endpoints=[join $urls ,] {*}[dict get $::etcd_cluster ctl] \
                   --command-timeout=2s endpoint health 2>@1} out]}
}

proc etcd_ctl {args} {
    exec etcdctl --endpoints=[join [etcd_running_urls] ,] {*}[dict get $::etcd_cluster ctl] {*}$args
}

proc etcd_ctl_flags_add {args} {
    dict lappend ::etcd_cluster ctl {*}$args
}

proc etcd_member_url {i} {
    dict get [lindex [dict get $::etcd_cluster members] $i] url
}

proc etcd_running_urls {} {
    set urls {}
    foreach m [dict get $::etcd_cluster members] {
        if {[dict get $m pid] != 0} { lappend urls [dict get $m url] }
    }
    return $urls
}

# Did a member exit because a port was taken? On a busy machine a port that
# find_available_port found free can be taken (another process's outgoing
# connection lands on it) before etcd binds it.
proc etcd_bind_failed {} {
    foreach m [dict get $::etcd_cluster members] {
        if {![etcd_pid_alive [dict get $m pid]] &&
            ![catch {exec grep -q {address already in use} [dict get $m log]}]} { return 1 }
    }
    return 0
}

proc etcd_cluster_start {{n 3} {opts {}}} {
    if {[info exists ::etcd_cluster]} { error "an etcd cluster is already running" }
    set flags [expr {[dict exists $opts flags] ? [dict get $opts flags] : {}}]
    set ctl [expr {[dict exists $opts etcdctl] ? [dict get $opts etcdctl] : {}}]
    set scheme [expr {"--cert-file" in $flags ? "https" : "http"}]
    set host [expr {[dict exists $opts host] ? [dict get $opts host] : "127.0.0.1"}]
    # A start that lost a port to another process is tried again on others.
    for {set attempt 1} {1} {incr attempt} {
        set dir [file normalize [tmpdir etcd]]
        set members {}
        set initial {}
        for {set i 0} {$i < $n} {incr i} {
            set client [find_available_port [expr {$::baseport + 600}] 100]
            set peer [find_available_port [expr {$::baseport + 600}] 100]
            set name m$i
            lappend members [dict create name $name client $client peer $peer \
                host $host url $scheme://$host:$client data $dir/$name.data log $dir/$name.log pid 0]
            lappend initial $name=http://127.0.0.1:$peer
        }
        set ::etcd_cluster [dict create dir $dir initial [join $initial ,] members $members \
            flags $flags ctl $ctl scheme $scheme]
        for {set i 0} {$i < $n} {incr i} { etcd_member_spawn $i new }
        set urls [etcd_running_urls]
        wait_for_condition 100 100 {
            [etcd_healthy $urls] || [etcd_bind_failed]
        } else {
            set why [catch {exec etcdctl --endpoints=[join $urls ,] {*}$ctl endpoint health 2>@1} out]
            etcd_cluster_stop
            fail "etcd cluster not healthy in 10 s (logs in $dir): $out"
        }
        if {![etcd_bind_failed]} break
        etcd_cluster_stop
        if {$attempt == 3} { fail "etcd cluster: a port was taken at each of 3 starts (logs in $dir)" }
        puts "etcd cluster: a port was taken before a member bound it, starting again on others (logs in $dir)"
    }
    return $::etcd_cluster
}

proc etcd_cluster_urls {} {
    set hps {}
    foreach m [dict get $::etcd_cluster members] { lappend hps [dict get $m host]:[dict get $m client] }
    return [expr {[dict get $::etcd_cluster scheme] eq "https" ? "etcds" : "etcd"}]://[join $hps ,]
}

proc etcd_member_kill {i} {
    set m [lindex [dict get $::etcd_cluster members] $i]
    set pid [dict get $m pid]
    if {$pid == 0} return
    catch {exec kill -9 $pid}
    # A Go program's threads die one by one: the leader can be a zombie while
    # another thread still holds the shared file table, and with it the
    # listening sockets (a connect then succeeds and is reset). Dead means
    # both ports refuse.
    wait_for_condition 50 100 {
        ![etcd_pid_alive $pid] && [etcd_port_refuses [dict get $m host] [dict get $m client]] &&
        [etcd_port_refuses 127.0.0.1 [dict get $m peer]]
    } else {
        fail "etcd member $i (pid $pid) did not die"
    }
    # Reap it (exec ... & leaves a zombie until Tcl waits for it).
    catch {exec true}
    dict set m pid 0
    set members [dict get $::etcd_cluster members]
    lset members $i $m
    dict set ::etcd_cluster members $members
}

proc etcd_member_start {i} {
    etcd_member_spawn $i existing
    set url [etcd_member_url $i]
    wait_for_condition 100 100 {
        [etcd_healthy [list $url]]
    } else {
        fail "etcd member $i did not come back healthy (log [dict get [lindex [dict get $::etcd_cluster members] $i] log])"
    }
}

proc etcd_member_stop_all {} {
    if {![info exists ::etcd_cluster]} return
    set n [llength [dict get $::etcd_cluster members]]
    for {set i 0} {$i < $n} {incr i} { etcd_member_kill $i }
}

proc etcd_cluster_stop {} {
    if {![info exists ::etcd_cluster]} return
    etcd_member_stop_all
    unset ::etcd_cluster
}
