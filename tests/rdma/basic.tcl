# RDMA transport: clients over RDMA see exactly the server TCP clients see.
# Runs in the Soft-RoCE VM (see tests/rdma/run-in-vm.sh).

source tests/skv/helpers.tcl
if {![rdma_available]} {
    puts "skipping tests/rdma/basic: no RDMA devices (run through utils/rdma-vm.sh)"
    return
}

set port [rdma_port]
start_server [list tags {"rdma"} overrides [rdma_overrides $port]] {
    r select 0   ;# redis-cli and redis-benchmark use db 0
    test {RDMA: redis-cli answers PING and INFO shows the listener} {
        assert_equal PONG [rdma_cli $port ping]
        assert_equal on [rdma_info rdma_listener]
        assert_equal "$::rdma_host:$port" [rdma_info rdma_listen_addresses]
    }

    test {RDMA: every data type through redis-cli} {
        r flushall
        assert_equal OK [rdma_cli $port set s hello]
        assert_equal 3 [rdma_cli $port rpush l a b c]
        assert_equal 2 [rdma_cli $port hset h f1 v1 f2 v2]
        assert_equal 3 [rdma_cli $port sadd st x y z]
        assert_equal 2 [rdma_cli $port zadd z 1 one 2 two]
        assert_match {*-*} [rdma_cli $port xadd x * field value]
        assert_equal 1 [rdma_cli $port pfadd hll a]
        assert_equal 1 [rdma_cli $port geoadd g 13.361389 38.115556 Palermo]
        assert_equal 0 [rdma_cli $port setbit b 7 1]
        # Read back over TCP: the same data.
        assert_equal hello [r get s]
        assert_equal {a b c} [r lrange l 0 -1]
        assert_equal {f1 v1 f2 v2} [r hgetall h]
        assert_equal {x y z} [lsort [r smembers st]]
        assert_equal {one 1 two 2} [r zrange z 0 -1 withscores]
        assert_equal 1 [r xlen x]
        assert_equal 1 [r pfcount hll]
        assert_equal 1 [r exists g]
        assert_equal 1 [r getbit b 7]
        # And over RDMA.
        assert_equal "a\nb\nc" [rdma_cli $port lrange l 0 -1]
        assert_equal "one\n1\ntwo\n2" [rdma_cli $port zrange z 0 -1 withscores]
        assert_equal 1 [rdma_cli $port pfcount hll]
        assert_equal string [rdma_cli $port type s]
        assert_equal stream [rdma_cli $port type x]
    }

    test {RDMA: MULTI/EXEC, Lua and errors keep their replies} {
        set out [rdma_cli $port eval {redis.call('set',KEYS[1],ARGV[1]); return redis.call('incr',KEYS[1])} 1 luakey 41]
        assert_equal 42 $out
        assert_match {*ERR unknown command*} [rdma_cli $port nosuchcommand]
        assert_match {*WRONGTYPE*} [rdma_cli $port lpush s x]
    }

    test {RDMA: values from 1 byte to 4x rdma-rx-size, both ways} {
        set rx [lindex [r config get rdma-rx-size] 1]
        foreach size [list 1 1000 [expr {$rx - 1}] $rx [expr {$rx + 1}] [expr {4 * $rx}]] {
            set f [tmpfile value]
            set fd [open $f w]
            fconfigure $fd -translation binary
            puts -nonewline $fd [string repeat [format %c [expr {65 + $size % 26}]] $size]
            close $fd
            catch {exec src/redis-cli --rdma -h $::rdma_host -p $port -x set v$size < $f 2>@1} out
            assert_equal OK $out
            assert_equal $size [r strlen v$size]
            # GET over RDMA returns the same bytes. (A failed redis-cli is
            # an assertion with its message, not an exception that ends
            # the whole run.)
            assert_equal "(integer) $size" [rdma_cli $port --no-raw strlen v$size]
            set val [rdma_cli $port get v$size]
            if {$val ne [string repeat [format %c [expr {65 + $size % 26}]] $size]} {
                fail "GET v$size over RDMA: [string length $val] bytes: [string range $val 0 200]"
            }
        }
    }

    test {RDMA: INFO rdma counts bytes and work requests, CONFIG RESETSTAT clears them} {
        set before [rdma_info rdma_bytes_received]
        rdma_cli $port set counterkey [string repeat x 1000]
        assert {[rdma_info rdma_bytes_received] >= $before + 1000}
        assert {[rdma_info rdma_writes_posted] > 0}
        assert {[rdma_info rdma_connections_accepted] > 0}
        r config resetstat
        assert_equal 0 [rdma_info rdma_bytes_received]
        assert_equal 0 [rdma_info rdma_connections_accepted]
    }

    test {RDMA: CLIENT LIST shows the RDMA client's real address} {
        set out [rdma_cli $port client list]
        assert_match "*addr=$::rdma_host:*laddr=$::rdma_host:$port*cmd=client|list*" $out
    }

    test {RDMA: the async hiredis API (ae adapter) works over RDMA} {
        set out [rdma_tool async $::rdma_host $port 2000]
        assert_match "*async ok 2001*" $out
        assert_equal 2000 [r get asynccounter]
        assert_equal [expr {3 * 1024 * 1024 + 17}] [r strlen asyncbig]
    }

    test {RDMA: CONFIG SET rdma-port moves the listener} {
        set newport [rdma_port]
        r config set rdma-port $newport
        assert_equal PONG [rdma_cli $newport ping]
        assert_match {*refused*} [rdma_cli $port ping]
        assert_match "*$newport*" [rdma_info rdma_listen_addresses]
        r config set rdma-port $port
        assert_equal PONG [rdma_cli $port ping]
    }

    test {RDMA: CONFIG SET rdma-bind to an address with no device is refused, listener kept} {
        catch {r config set rdma-bind 192.0.2.1} e
        assert_match {*Unable to listen on the RDMA port*} $e
        assert_equal PONG [rdma_cli $port ping]
    }
}

set port [rdma_port]
start_server [list tags {"rdma"} overrides [list rdma-port $port rdma-bind $::rdma_host requirepass s3cret]] {
    test {RDMA: AUTH applies to RDMA clients as to TCP clients} {
        assert_match {*NOAUTH*} [rdma_cli $port get foo]
        assert_equal PONG [rdma_cli $port -a s3cret --no-auth-warning ping]
        r auth s3cret
        r select 0
        r acl setuser limited on >lim ~* +get -set
        assert_match {*NOPERM*} [rdma_cli $port --user limited --pass lim --no-auth-warning set a b]
        assert_equal {} [rdma_cli $port --user limited --pass lim --no-auth-warning get nothing]
    }

    test {RDMA: an unauthenticated connection pins only the small pre-auth buffers} {
        # Ten idle connections that never authenticate.
        set pids {}
        for {set i 0} {$i < 10} {incr i} {
            lappend pids [exec src/skv-rdma-tool hold $::rdma_host $port 20 > /dev/null 2>@1 &]
        }
        wait_for_condition 100 100 {
            [rdma_info rdma_connections] == 10
        } else {
            fail "the ten connections did not arrive"
        }
        set preauth [rdma_info rdma_pinned_bytes]
        # Control slots, 64 KiB receive and 16 KiB staging per connection.
        assert {$preauth <= 10 * 160 * 1024}
        foreach pid $pids { catch {exec kill $pid} }
        wait_for_condition 100 100 {
            [rdma_info rdma_connections] == 0
        } else {
            fail "the connections did not go away"
        }
        assert_equal 0 [rdma_info rdma_pinned_bytes]
    }

    test {RDMA: an authenticated client gets the full rdma-rx-size buffer} {
        # A 3 MB value makes the buffer turn over, which is when it grows.
        set f [tmpfile value]
        set fd [open $f w]
        puts -nonewline $fd [string repeat z 3000000]
        close $fd
        catch {exec src/redis-cli --rdma -h $::rdma_host -p $port -a s3cret --no-auth-warning -x set big < $f} out
        assert_equal OK $out
        assert_equal 3000000 [r strlen big]
    }
}

set port [rdma_port]
start_server [list tags {"rdma"} overrides [list rdma-port $port rdma-bind $::rdma_host]] {
    r select 0   ;# redis-cli and redis-benchmark use db 0
    test {RDMA: protected mode refuses RDMA clients as it refuses remote TCP clients} {
        # No password, protected-mode yes: only loopback may talk, and RDMA
        # never comes from loopback.
        assert_match {*DENIED*protected mode*} [rdma_cli $port ping]
        assert_equal PONG [r ping]
    }
}

set port [rdma_port]
start_server [list tags {"rdma"} overrides [concat [rdma_overrides $port] maxclients 3]] {
    r select 0   ;# redis-cli and redis-benchmark use db 0
    test {RDMA: RDMA clients count in maxclients} {
        set pids {}
        for {set i 0} {$i < 2} {incr i} {
            lappend pids [exec src/skv-rdma-tool hold $::rdma_host $port 10 > /dev/null 2>@1 &]
        }
        wait_for_condition 100 100 {
            [s connected_clients] == 3
        } else {
            fail "the RDMA clients were not counted"
        }
        assert_match {*max number of clients reached*} [rdma_cli $port ping]
        foreach pid $pids { catch {exec kill $pid} }
    }
}
