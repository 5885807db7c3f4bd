# RDMA transport: redis-benchmark --rdma, which drives many non-blocking
# hiredis contexts from an ae loop (the path with no "writable" readiness).

source tests/skv/helpers.tcl
if {![rdma_available]} {
    puts "skipping tests/rdma/benchmark: no RDMA devices (run through utils/rdma-vm.sh)"
    return
}

# Run redis-benchmark --rdma; returns {exit-status output}.
proc rdma_bench {port args} {
    set status [catch {
        exec src/redis-benchmark --rdma -h $::rdma_host -p $port -q {*}$args 2>@1
    } out]
    # -q prints progress lines with \r: keep the final ones.
    set lines {}
    foreach l [split [string map {"\r" "\n"} $out] "\n"] {
        if {[string match "*requests per second*" $l] || [string match "*rror*" $l]} { lappend lines $l }
    }
    list $status [join $lines "\n"]
}

set port [rdma_port]
start_server [list tags {"rdma"} overrides [rdma_overrides $port]] {
    r select 0   ;# redis-cli and redis-benchmark use db 0
    test {RDMA benchmark: SET, GET, LPUSH, LRANGE with 4 clients} {
        lassign [rdma_bench $port -n 2000 -c 4 -t set,get,lpush,lrange_100] status out
        assert_equal 0 $status
        foreach t {SET GET LPUSH LRANGE_100} {
            assert_match "*$t* requests per second*" $out
        }
        assert_equal 1 [r exists key:__rand_int__]
        assert {[r llen mylist] >= 2000}
    }

    test {RDMA benchmark: --threads 2 runs test after test (each makes its loops again)} {
        # redis-benchmark makes its threads' event loops again for every
        # test; a new loop where a freed one was must not keep the old
        # loop's RDMA adapter (its clients then stalled from the 2nd test).
        set status [catch {
            exec timeout 60 src/redis-benchmark --rdma -h $::rdma_host -p $port -q \
                --threads 2 -n 2000 -c 4 -t set,get,incr,lpush 2>@1
        } out]
        assert_equal 0 $status
        foreach t {SET GET INCR LPUSH} {
            assert_match "*$t: * requests per second*" [string map {"\r" "\n"} $out]
        }
    }

    test {RDMA benchmark: pipelining (-P 16)} {
        r flushall
        lassign [rdma_bench $port -n 5000 -c 8 -P 16 -t set,get] status out
        assert_equal 0 $status
        assert_match "*SET: * requests per second*GET: * requests per second*" $out
        assert_equal 1 [r dbsize]
    }

    test {RDMA benchmark: 50 clients at once} {
        set before [rdma_info rdma_connections_accepted]
        lassign [rdma_bench $port -n 2000 -c 50 -t ping_mbulk,incr] status out
        assert_equal 0 $status
        assert_match "*INCR: * requests per second*" $out
        assert {[rdma_info rdma_connections_accepted] >= $before + 50}
        assert_equal 2000 [r get counter:__rand_int__]
    }

    test {RDMA benchmark: values from 1 byte to 4x rdma-rx-size} {
        set rx [lindex [r config get rdma-rx-size] 1]
        foreach size [list 1 4096 $rx [expr {4 * $rx}]] {
            r del key:__rand_int__
            lassign [rdma_bench $port -n 20 -c 2 -d $size -t set,get] status out
            assert_equal 0 $status
            assert_match "*GET: * requests per second*" $out
            assert_equal $size [r strlen key:__rand_int__]
        }
    }

    test {RDMA benchmark: the server is clean afterwards} {
        wait_for_condition 100 100 {
            [rdma_info rdma_connections] == 0
        } else {
            fail "benchmark connections left behind"
        }
        assert_equal 0 [rdma_info rdma_errors_protocol]
        assert_equal 0 [rdma_info rdma_errors_bad_imm]
        assert_equal PONG [rdma_cli $port ping]
    }
}
