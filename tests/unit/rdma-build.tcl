# A build without RDMA (make BUILD_RDMA=no, RDMA.md "Building without RDMA"):
# the RDMA options still parse, and everything that would start RDMA
# refuses with one clear reason. In a build with RDMA, the same calls never
# give that reason (this machine may have no RDMA device: they may fail for
# another one).

source tests/skv/helpers.tcl

set ::rdma_not_built "*RDMA support was not built*"

start_server {tags {"skv rdma-build"}} {
    set built [rdma_info rdma_built]

    test {INFO rdma says whether RDMA was built} {
        assert {$built in {yes no}}
    }

    test {The RDMA options parse in every build} {
        r config set rdma-rx-size 2mb
        assert_equal [lindex [r config get rdma-rx-size] 1] [expr {2*1024*1024}]
        r config set rdma-bind "127.0.0.1"
        r config set rdma-max-pinned-memory 512mb
        r config set rdma-max-unauthenticated 64
        assert_equal {rdma-max-unauthenticated 64} [r config get rdma-max-unauthenticated]
        r config set rdma-max-unauthenticated 128
        r config set rdma-rx-size 1mb
        r config set rdma-bind ""
    }

    test {CONFIG SET rdma-port names the reason when RDMA was not built} {
        catch {r config set rdma-port [rdma_port]} err
        if {$built eq "no"} {
            assert_match "*Unable to listen on the RDMA port: RDMA support was not built (SKV was built with BUILD_RDMA=no)*" $err
            # The failed CONFIG SET put rdma-port back to 0: no listener.
            assert_equal 0 [lindex [r config get rdma-port] 1]
            assert_equal off [rdma_info rdma_listener]
        } else {
            assert ![string match $::rdma_not_built $err]
            # Whatever happened (no device here, or a listener), leave it off.
            catch {r config set rdma-port 0}
        }
        r ping
    } {PONG}

    test {redis-cli --rdma and redis-benchmark --rdma name it too} {
        set cli [rdma_cli_to 127.0.0.1 [rdma_port] ping]
        catch {exec src/redis-benchmark --rdma -h 127.0.0.1 -p [rdma_port] -n 1 -t ping 2>@1} bench
        if {$built eq "no"} {
            assert_match $::rdma_not_built $cli
            assert_match $::rdma_not_built $bench
        } else {
            assert ![string match $::rdma_not_built $cli]
            assert ![string match $::rdma_not_built $bench]
        }
    }
}

# A config file written for an RDMA build starts a server without RDMA:
# TCP serves, and INFO and the log say why RDMA does not.
start_server [list tags {"skv rdma-build"} overrides [list rdma-port [rdma_port]]] {
    if {[rdma_info rdma_built] eq "no"} {
        test {rdma-port in the config file: TCP serves, the log says why RDMA does not} {
            assert_equal PONG [r ping]
            assert_match "error: RDMA support was not built*" [rdma_info rdma_listener]
            verify_log_message 0 "*RDMA: not listening on port*RDMA support was not built*TCP keeps serving*" 0
        }

        test {Nic-KV with an RDMA port serves TCP and says why not RDMA} {
            # Not nickv_start: its port range is the one the Nic-KV suites
            # restart their daemons in, and a port taken meanwhile would
            # make one of their restarts fail.
            set port [find_available_port [expr {$::baseport + 520}] 20]
            set dir [file normalize [tmpdir nickv]]
            set pid [exec src/nic-kv --port $port --master-port [srv 0 port] \
                         --rdma-port [rdma_port] --logfile $dir/nickv.log >>& $dir/nickv.out &]
            set nk [dict create port $port pid $pid log $dir/nickv.log]
            wait_for_condition 100 50 {
                [catch {nickv_cmd $nk ping} r] == 0 && $r eq "PONG"
            } else {
                fail "nic-kv did not start"
            }
            assert_match "error: RDMA support was not built*" [nickv_info $nk rdma_listener]
            set log [exec cat $dir/nickv.log]
            assert_match "*RDMA: RDMA support was not built*" $log
            nickv_stop $nk
        }
    } else {
        puts "skipping the BUILD_RDMA=no start-up tests: this build has RDMA"
    }
}
