# Nic-KV watched by Prometheus: Debian's redis_exporter (1.45, package
# prometheus-redis-exporter), unmodified, scrapes Nic-KV and the master as
# NIC-KV.md's "Monitoring" recipe says. Nic-KV's INFO speaks Redis's
# dialect, so the stock exporter graphs its replicas, their offsets and lag,
# its link to the master (down when the master dies) and its version; the
# master's Nic-KV fields come out through utils/prometheus/nickv-master.lua;
# and every metric the alert rules (utils/prometheus/nickv-alerts.yml) name
# is one the exporter really produces.

source tests/skv/helpers.tcl
package require http

set ::exporter_bin /usr/bin/prometheus-redis-exporter
if {[info exists ::env(SKV_REDIS_EXPORTER)]} { set ::exporter_bin $::env(SKV_REDIS_EXPORTER) }
# Exporters a failed earlier run of this file left (as helpers.tcl does
# with nic-kv).
if {![info exists ::exporter_pids]} { set ::exporter_pids {} }
foreach pid $::exporter_pids { catch {exec kill -9 $pid} }
set ::exporter_pids {}

# CI installs the exporter (utils/setup-deps.sh test): there it must run.
proc exporter_required {} {
    expr {([info exists ::env(CI)] && $::env(CI) ne "") ||
          ([info exists ::env(SKV_REQUIRE_RDMA_VM)] && $::env(SKV_REQUIRE_RDMA_VM) eq "1")}
}

# An exporter for the node on 127.0.0.1:$port, listening on a port of the
# test's range; extra exporter flags in args. Returns its /metrics URL once
# it answers.
proc exporter_start {port args} {
    set listen [find_available_port [expr {$::baseport + 450}] 10]
    set dir [file normalize [tmpdir exporter]]
    set pid [exec $::exporter_bin --redis.addr redis://127.0.0.1:$port \
                 --web.listen-address 127.0.0.1:$listen {*}$args >>& $dir/exporter.log &]
    lappend ::exporter_pids $pid
    set url http://127.0.0.1:$listen/metrics
    wait_for_condition 100 50 {
        [catch {exporter_scrape $url}] == 0
    } else {
        catch {exec tail -n 20 $dir/exporter.log} tail
        fail "the exporter for port $port did not answer on $url: $tail"
    }
    return $url
}

# The text of one scrape.
proc exporter_scrape {url} {
    set tok [::http::geturl $url -timeout 5000]
    set status [::http::ncode $tok]
    set body [::http::data $tok]
    ::http::cleanup $tok
    if {$status != 200} { error "HTTP $status from $url: $body" }
    return $body
}

# The value of one series, written as the exporter writes it (its labels in
# its order), or "" when the scrape has no such series.
proc exporter_value {text series} {
    foreach line [split $text "\n"] {
        if {[string first "$series " $line] == 0} {
            return [string range $line [expr {[string length $series] + 1}] end]
        }
    }
    return ""
}

# A redis_sentinel_master_* series of master mymaster at 127.0.0.1:port
# (with its master_status label, for the status).
proc sentinel_series {metric port {status ""}} {
    set labels [format {master_address="127.0.0.1:%s",master_name="mymaster"} $port]
    if {$status ne ""} { append labels [format {,master_status="%s"} $status] }
    return "redis_sentinel_master_$metric\{$labels\}"
}

# The lines of a scrape that hold pattern (for failure messages).
proc exporter_grep {text pattern} {
    join [lsearch -all -inline [split $text "\n"] "*$pattern*"] "\n"
}

# Nic-KV's status keys (nickv_status.c) the exporter reads, as NIC-KV.md's
# "Monitoring" recipe gives them.
set ::nickv_status_keys nickv:epoch,nickv:failover_state,nickv:master_lease,nickv:failover_blocked,nickv:valid_replicas

# A redis_key_* series of status key name (db 0), with its value label.
proc status_series {metric key {val ""}} {
    set labels [format {db="db0",key="nickv:%s"} $key]
    if {$metric eq "value_as_string"} { append labels [format {,val="%s"} $val] }
    return "redis_key_$metric\{$labels\}"
}

# Does Nic-KV's SENTINEL REPLICAS list the replica on port as the master's,
# its link up?
proc fo_replica_link_ok {nk port} {
    foreach r [nickv_cmd $nk sentinel replicas mymaster] {
        if {[dict get $r port] == $port} {
            return [expr {[dict get $r master-link-status] eq {ok} && [dict get $r flags] eq {slave}}]
        }
    }
    return 0
}

# The exporter prints large numbers as Go's %g does (1.34217728e+08).
proc exporter_int {v} {
    if {$v eq ""} { return "" }
    return [expr {wide(double($v))}]
}

tags {"nickv repl external:skip"} {
if {![file executable $::exporter_bin]} {
    if {[exporter_required]} {
        test {Nic-KV exporter: the exporter is installed} {
            fail "$::exporter_bin is not installed (utils/setup-deps.sh test installs prometheus-redis-exporter)"
        }
    } else {
        puts "skipping tests/integration/nickv-exporter: $::exporter_bin is not installed\
              (utils/setup-deps.sh test installs Debian's prometheus-redis-exporter)"
    }
} else {

start_server {overrides {save ""}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    # failover yes against a master without nickv-lease: the master's
    # death is seen, and Nic-KV says it will not replace it.
    set nk [nickv_start $mport --failover yes]

    start_server {overrides {save ""}} {
    start_server {overrides {save ""}} {
        set p1 [srv -1 port]
        set p2 [srv 0 port]
        nickv_add_members $nk
        foreach r [list [srv -1 client] [srv 0 client]] { $r replicaof 127.0.0.1 $mport }
        foreach r [list [srv -1 client] [srv 0 client]] { wait_for_sync $r }
        nickv_wait_replicas $nk 2

        set nkurl [exporter_start [dict get $nk port] --redis-only-metrics --check-single-keys $::nickv_status_keys]
        set murl [exporter_start $mport --redis-only-metrics \
                      --script $::skv_root/utils/prometheus/nickv-master.lua]

        test {Nic-KV exporter: Nic-KV is up, with its version and role} {
            set m [exporter_scrape $nkurl]
            assert_equal 1 [exporter_value $m redis_up]
            assert_equal 0 [exporter_value $m {redis_exporter_last_scrape_error{err=""}}]
            # The Redis version of the SKV build Nic-KV belongs to: the
            # master's, as the same build's server says it.
            set version [status $master redis_version]
            assert_match "7.*" $version
            set info [nickv_cmd $nk info server]
            assert_match "*\r\nredis_version:$version\r\n*" "\r\n$info"
            assert_match "*\r\nnickv_version:*" $info
            set pid [dict get $nk pid]
            set nkport [dict get $nk port]
            set runid [nickv_info $nk run_id]
            # The failover state through the status keys: numbers as
            # values, words as labels, nothing blocked.
            assert_equal [nickv_info $nk epoch] [exporter_value $m [status_series value epoch]]
            assert_equal 2 [exporter_int [exporter_value $m [status_series value valid_replicas]]]
            assert_equal 1 [exporter_value $m [status_series value_as_string failover_state watching]]
            assert_equal 0 [exporter_value $m [status_series size failover_blocked]]
            # SENTINEL CKQUORUM answers +OK (this Nic-KV fails the master
            # over): the exporter's quorum status is 1, not an alert.
            set ck [lsearch -inline [split $m "\n"] {redis_sentinel_master_ckquorum_status\{*}]
            assert_match {*master_name="mymaster"*} $ck
            assert_equal 1 [lindex $ck end]
            assert_match "*redis_instance_info{*,process_id=\"$pid\",*redis_mode=\"nickv\",redis_version=\"$version\",role=\"nickv\",run_id=\"$runid\",tcp_port=\"$nkport\"} 1*" $m
        }

        test {Nic-KV exporter: both replicas behind Nic-KV, their acknowledged offsets and lag} {
            for {set i 0} {$i < 100} {incr i} { $master set k$i $i }
            # The offsets move with every write and the master's pings:
            # a scrape that matches the master's offset for both replicas.
            wait_for_condition 100 100 {
                [set m [exporter_scrape $nkurl]] ne "" &&
                [set off [status $master master_repl_offset]] > 0 &&
                [exporter_value $m "redis_connected_slave_offset_bytes{slave_ip=\"127.0.0.1\",slave_port=\"$p1\",slave_state=\"online\"}"] == $off &&
                [exporter_value $m "redis_connected_slave_offset_bytes{slave_ip=\"127.0.0.1\",slave_port=\"$p2\",slave_state=\"online\"}"] == $off
            } else {
                fail "the exporter does not show both replicas at the master's offset [status $master master_repl_offset]:\n[exporter_grep $m connected_slave]"
            }
            assert_equal 2 [exporter_value $m redis_connected_slaves]
            foreach p [list $p1 $p2] {
                set lag [exporter_value $m "redis_connected_slave_lag_seconds{slave_ip=\"127.0.0.1\",slave_port=\"$p\",slave_state=\"online\"}"]
                assert_match {[0-9]*} $lag
                assert {$lag >= 0 && $lag <= 5}
            }
            # Redis's fields beside Nic-KV's own: the same replicas.
            assert_equal 2 [nickv_info $nk connected_slaves]
            assert_equal 2 [nickv_info $nk connected_replicas]
            assert_match "ip=127.0.0.1,port=*,state=online,offset=*,lag=*" [nickv_info $nk slave0]
        }

        test {Nic-KV exporter: the link to the master, its offset, memory with the backlog ring} {
            set m [exporter_scrape $nkurl]
            set link "{master_host=\"127.0.0.1\",master_port=\"$mport\"}"
            assert_equal 1 [exporter_value $m redis_master_link_up$link]
            assert_equal 0 [exporter_value $m redis_master_sync_in_progress$link]
            assert_match {[0-9]*} [exporter_value $m redis_master_last_io_seconds_ago$link]
            assert {[exporter_int [exporter_value $m redis_slave_repl_offset$link]] > 0}
            assert_equal 1 [exporter_value $m redis_repl_backlog_is_active]
            set ring [nickv_info $nk backlog_size]
            assert_equal $ring [exporter_int [exporter_value $m redis_replication_backlog_bytes]]
            # used_memory counts the ring (mapped, outside the heap).
            set used [exporter_int [exporter_value $m redis_memory_used_bytes]]
            assert {$used > $ring}
            assert {[nickv_info $nk used_memory] >= $ring + [nickv_info $nk used_memory_heap]}
            # Nic-KV holds no keys: its INFO claims no keyspace.
            assert_no_match "*# Keyspace*" [nickv_cmd $nk info all]
            assert_no_match "*\r\ndb0:*" [nickv_cmd $nk info all]
        }

        test {Nic-KV exporter: the master Nic-KV follows, as a Sentinel's (INFO sentinel): ok, two replicas} {
            wait_for_condition 50 100 {
                [exporter_value [set m [exporter_scrape $nkurl]] [sentinel_series status $mport ok]] == 1
            } else {
                fail "the exporter does not show the master ok:\n[exporter_grep $m sentinel]"
            }
            assert_equal 2 [exporter_value $m [sentinel_series slaves $mport]]
            assert_equal 1 [exporter_value $m [sentinel_series sentinels $mport]]
            assert_equal 1 [exporter_value $m redis_sentinel_masters]
            assert_equal 0 [exporter_value $m redis_sentinel_tilt]
            # One status series only: the others would be stale lines.
            assert_equal 1 [llength [regexp -all -inline -line {^redis_sentinel_master_status\{.*$} $m]]
            assert_equal "name=mymaster,status=ok,address=127.0.0.1:$mport,slaves=2,sentinels=1" \
                [nickv_info $nk master0]
        }

        test {Nic-KV exporter: the master's Nic-KV fields through nickv-master.lua} {
            wait_for_condition 50 100 {
                [exporter_value [set m [exporter_scrape $murl]] {redis_script_values{key="nickv_daemon_healthy"}}] == 1
            } else {
                fail "the master's exporter does not show a healthy daemon:\n[exporter_grep $m script_values]"
            }
            assert_equal 1 [exporter_value $m redis_up]
            assert_equal [nickv_status $master nickv_replicas] [exporter_value $m {redis_script_values{key="nickv_replicas"}}]
            assert_equal 2 [exporter_value $m {redis_script_values{key="nickv_replicas"}}]
            assert_equal [nickv_status $master nickv_min_slaves] [exporter_value $m {redis_script_values{key="nickv_min_slaves"}}]
            assert_equal 1 [exporter_value $m {redis_script_values{key="nickv_offload"}}]
            # Strings are not numbers: left out, or the scrape would fail.
            assert_equal "" [exporter_value $m {redis_script_values{key="nickv_daemon_addr"}}]
            assert_equal 0 [exporter_value $m {redis_exporter_last_scrape_error{err=""}}]
        }

        test {Nic-KV exporter: every metric the alert rules name is one the exporter produces} {
            set rules $::skv_root/utils/prometheus/nickv-alerts.yml
            set fd [open $rules]
            set yaml [read $fd]
            close $fd
            set scraped "[exporter_scrape $nkurl]\n[exporter_scrape $murl]"
            set exprs [join [regexp -all -inline -line {^\s*expr:.*$} $yaml] "\n"]
            set names [lsort -unique [regexp -all -inline {redis_[a-z_]+} $exprs]]
            assert {[llength $names] >= 4}
            foreach name $names {
                if {![regexp "(^|\n)$name\[\{ \]" $scraped]} {
                    fail "$rules names $name, which the exporter does not produce"
                }
            }
            foreach key [lsort -unique [regexp -all -inline {key="nickv:[a-z_]+"} $exprs]] {
                if {[string first $key $scraped] < 0} {
                    fail "$rules names $key, a status key the exporter was not given or Nic-KV does not have"
                }
            }
            foreach key [lsort -unique [regexp -all -inline {key="[a-z_]+"} $exprs]] {
                if {[string first "redis_script_values\{$key\}" $scraped] < 0} {
                    fail "$rules names redis_script_values{$key}, which nickv-master.lua does not return"
                }
            }
        }

        test {Nic-KV exporter: the master killed, Nic-KV's link is down: redis_master_link_up 0} {
            exec kill -9 $mpid
            set link "{master_host=\"127.0.0.1\",master_port=\"$mport\"}"
            wait_for_condition 100 100 {
                [exporter_value [set m [exporter_scrape $nkurl]] redis_master_link_up$link] == 0
            } else {
                fail "the exporter does not show the link down:\n[exporter_grep $m master_]"
            }
            # Nic-KV itself still answers; the master does not.
            assert_equal 1 [exporter_value $m redis_up]
            assert_equal down [nickv_info $nk master_link_status]
            # The master ran with nickv-lease no: Nic-KV will not replace
            # it, and says so as the master's status.
            wait_for_condition 100 100 {
                [exporter_value [set m [exporter_scrape $nkurl]] [sentinel_series status $mport blocked]] eq "0"
            } else {
                fail "the exporter does not show the failover blocked:\n[exporter_grep $m sentinel]"
            }
            assert_match "*nickv-lease no*" [nickv_info $nk failover_blocked]
            # Why, through the status keys: the reason as a label, its
            # length as a number (0 while nothing blocks).
            set why [nickv_info $nk failover_blocked]
            wait_for_condition 50 100 {
                [exporter_value [set m [exporter_scrape $nkurl]] [status_series value_as_string failover_blocked $why]] == 1
            } else {
                fail "the exporter does not show why the failover is blocked ($why):\n[exporter_grep $m nickv:]"
            }
            assert_equal [string length $why] [exporter_value $m [status_series size failover_blocked]]
            assert_equal off [nickv_info $nk master_lease]
            assert_equal 1 [exporter_value $m [status_series value_as_string master_lease off]]
            wait_for_condition 50 100 {
                [exporter_value [exporter_scrape $murl] redis_up] == 0
            } else {
                fail "the master's exporter still says redis_up 1"
            }
        }
    }
    }
    foreach pid $::exporter_pids { catch {exec kill $pid} }
    set ::exporter_pids {}
    nickv_stop $nk
}

# A master with nickv-lease yes serves no script without a lease: the
# master's exporter says why its scrape failed (the SKVLeaseLost rule), and
# still has the master's INFO fields (which tell SKVMasterDown it is up).
start_server [list overrides [nickv_failover_overrides]] {
    set master [srv 0 client]
    set mport [srv 0 port]
    set murl [exporter_start $mport --redis-only-metrics \
                  --script $::skv_root/utils/prometheus/nickv-master.lua]
    set masterdown {redis_exporter_last_scrape_error{err="MASTERDOWN This master holds no lease from Nic-KV (nickv-lease yes): it may have been replaced"}}

    test {Nic-KV exporter: a master without its lease: the scrape fails with MASTERDOWN, INFO fields still come} {
        assert_equal expired [nickv_status $master nickv_lease]
        set m [exporter_scrape $murl]
        assert_equal 0 [exporter_value $m redis_up]
        assert_equal 1 [exporter_value $m $masterdown]
        assert_match {[0-9]*} [exporter_value $m redis_uptime_in_seconds]
    }

    test {Nic-KV exporter: the lease granted, the script runs; Nic-KV killed, the lease lapses and it fails again} {
        set nk [nickv_start $mport {*}[nickv_user_args]]
        wait_for_condition 100 100 {
            [exporter_value [set m [exporter_scrape $murl]] redis_up] == 1
        } else {
            fail "the master's exporter does not see the lease: [nickv_status $master nickv_lease]\n[exporter_grep $m scrape_error]"
        }
        assert_equal held [nickv_status $master nickv_lease]
        assert_equal 0 [exporter_value $m {redis_exporter_last_scrape_error{err=""}}]
        assert {[exporter_value $m {redis_script_values{key="nickv_lease_grants"}}] > 0}
        nickv_stop $nk KILL
        wait_for_condition 100 100 {
            [exporter_value [set m [exporter_scrape $murl]] $masterdown] == 1
        } else {
            fail "the master's exporter does not see the lease lost:\n[exporter_grep $m scrape_error]"
        }
        assert_equal 0 [exporter_value $m redis_up]
    }
    foreach pid $::exporter_pids { catch {exec kill $pid} }
    set ::exporter_pids {}
}

# A failover seen through the exporter: the master's status goes from ok
# (old address) through odown to ok at the promoted replica's address.
set fo_conf [nickv_failover_overrides]
start_server [list overrides $fo_conf] {
    set mport [srv 0 port]
    set mpid [srv 0 pid]
    start_server [list overrides $fo_conf] {
    start_server [list overrides $fo_conf] {
        set ports [list [srv -1 port] [srv 0 port]]
        foreach r [list [srv -1 client] [srv 0 client]] { $r replicaof 127.0.0.1 $mport }
        set nk [nickv_start $mport {*}[nickv_user_args] --failover yes]
        set nkurl [exporter_start [dict get $nk port] --redis-only-metrics --check-single-keys $::nickv_status_keys]

        test {Nic-KV exporter: a failover: the master's status and address follow it} {
            wait_for_condition 100 100 {
                [nickv_info $nk valid_replicas] == 2 && [nickv_info $nk master_lease] eq {on} &&
                [exporter_value [set m [exporter_scrape $nkurl]] [sentinel_series status $mport ok]] == 1
            } else {
                fail "no healthy topology in the exporter:\n[exporter_grep $m sentinel]\n[nickv_cmd $nk info failover]"
            }
            set epoch [nickv_info $nk epoch]
            assert_equal $epoch [exporter_value $m [status_series value epoch]]
            assert_equal 1 [exporter_value $m [status_series value_as_string master_lease on]]
            exec kill -9 $mpid
            wait_for_condition 100 100 {
                [nickv_info $nk failovers] >= 1 && [nickv_info $nk failover_state] eq {watching}
            } else {
                fail "no failover: [nickv_cmd $nk info failover]"
            }
            set new [lindex [split [nickv_info $nk master] :] end]
            assert {[lsearch -exact $ports $new] >= 0}
            wait_for_condition 100 100 {
                [exporter_value [set m [exporter_scrape $nkurl]] [sentinel_series status $new ok]] == 1
            } else {
                fail "the exporter does not show the new master ok:\n[exporter_grep $m sentinel]"
            }
            # The old address is gone as the master's, and the other replica
            # follows the new master. The new master's replicas count the
            # dead old master too, as redis-sentinel counts it (listed
            # s_down in SENTINEL REPLICAS).
            assert_equal 1 [llength [regexp -all -inline -line {^redis_sentinel_master_status\{.*$} $m]]
            set other [lindex [lsearch -all -inline -not -exact $ports $new] 0]
            wait_for_condition 100 100 {
                [exporter_value [set m [exporter_scrape $nkurl]] [sentinel_series slaves $new]] == 2 &&
                [fo_replica_link_ok $nk $other]
            } else {
                fail "the new master's replicas are not counted:\n[exporter_grep $m sentinel]\n[nickv_cmd $nk sentinel replicas mymaster]"
            }
            # The epoch the failover moved to, as INFO says it.
            set now [nickv_info $nk epoch]
            assert {$now > $epoch}
            wait_for_condition 50 100 {
                [exporter_value [set m [exporter_scrape $nkurl]] [status_series value epoch]] == $now
            } else {
                fail "the exporter does not show epoch $now:\n[exporter_grep $m nickv:]"
            }
        }
        foreach pid $::exporter_pids { catch {exec kill $pid} }
        set ::exporter_pids {}
        nickv_stop $nk
    }
    }
}
}
}
