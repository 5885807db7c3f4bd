# A Java Sentinel client: Jedis' JedisSentinelPool (tests/jedisclient, built
# by utils/setup-deps.sh test into build/jedisclient) finds the master
# through Nic-KV and follows Nic-KV's failover of a master killed -9: it
# subscribes to +switch-master on Nic-KV and hands out connections to the
# new master. Each append is followed by WAIT 1, as an application that
# wants its writes on a replica does; every append WAIT acknowledged must
# be on the new master.

source tests/skv/helpers.tcl

# CI runs utils/setup-deps.sh test, which builds the client: there a
# missing client is a failure, not a skip (as for the exporter).
proc jedis_required {} {
    expr {([info exists ::env(CI)] && $::env(CI) ne "") ||
          ([info exists ::env(SKV_REQUIRE_RDMA_VM)] && $::env(SKV_REQUIRE_RDMA_VM) eq "1")}
}

# The java command line that runs the client, {} when it is not built.
proc jedis_cmd {} {
    set dir [file normalize ../jedisclient]
    if {![file exists $dir/classes/Main.class] || [auto_execok java] eq {}} { return {} }
    return [list java -cp $dir/classes:$dir/lib/* Main]
}

# The values of "acked <i> <port>" lines that went to port.
proc jedis_acked_on {out port} {
    regexp -all -line "^acked \[0-9\]+ $port\$" [exec cat $out]
}

tags {"nickv repl external:skip"} {
if {[jedis_cmd] eq {}} {
    if {[jedis_required]} {
        test {Jedis: the client is built} {
            fail "no Jedis client in build/jedisclient: run utils/setup-deps.sh test"
        }
    } else {
        puts "skipping tests/integration/nickv-jedis: no Jedis client in build/jedisclient\
              (utils/setup-deps.sh test fetches Jedis and compiles it with javac)"
    }
} else {

nickv_topology [list overrides [nickv_failover_overrides] replicas 2 \
                    nickv [list {*}[nickv_user_args] --failover yes]] {
    test {Jedis' JedisSentinelPool through Nic-KV follows a kill -9 failover: writes resume, nothing acknowledged lost} {
        nickv_wait_failover_view $nk 2
        set out [file normalize [tmpfile jedis]]
        set stop [file normalize [tmpfile jedisstop]]
        # 60 s: the client exits by itself if this test fails before the
        # stop file.
        set pid [exec {*}[jedis_cmd] [dict get $nk port] jlist $stop 60 >& $out &]
        # The JVM takes a second or so to start.
        wait_for_condition 200 50 {
            [jedis_acked_on $out $master_port] >= 1
        } else {
            catch {exec kill $pid}
            fail "Jedis writes nothing through Nic-KV: [exec tail -n 20 $out]"
        }
        exec kill -9 $master_pid
        fo_wait_failovers $nk 1
        set new [lindex [nickv_master_addr $nk] 1]
        assert {$new in $replica_ports}
        # Acknowledged appends on the new master: the pool moved there.
        wait_for_condition 200 50 {
            [jedis_acked_on $out $new] >= 20
        } else {
            catch {exec kill $pid}
            fail "Jedis' writes do not resume on $new: [exec tail -n 20 $out]"
        }
        close [open $stop w]
        wait_for_condition 100 50 {
            [string match "*done*" [exec cat $out]]
        } else {
            catch {exec kill $pid}
            fail "the Jedis client does not stop: [exec tail -n 5 $out]"
        }
        # Its acknowledged appends went to the old master, then only to the
        # new one.
        set seen_new 0
        foreach {-> port} [regexp -all -line -inline {^acked [0-9]+ ([0-9]+)$} [exec cat $out]] {
            if {$port == $new} {
                set seen_new 1
            } else {
                assert_equal 0 $seen_new
                assert_equal $master_port $port
            }
        }
        regexp -line {^done([0-9 ]*)$} [exec cat $out] -> acked
        set r [redis 127.0.0.1 $new]
        set got [$r lrange jlist 0 -1]
        $r close
        set lost 0
        foreach v $acked { if {[lsearch -exact $got $v] < 0} { incr lost } }
        puts "    ([llength $acked] appends acknowledged to Jedis, $lost lost)"
        assert_equal 0 $lost
        nickv_assert_no_bug $nk
    }
}

}
}
