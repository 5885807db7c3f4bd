# Nic-KV under hostile or careless clients: file descriptors run out, bad
# configuration values, clients that never read or never authenticate. The
# daemon keeps serving, answers what redis-server would, and its CPU and
# memory stay bounded.

source tests/skv/helpers.tcl

# Whether this process may raise its hard NOFILE limit above 128 (root with
# CAP_SYS_RESOURCE outside a container may): Nic-KV then raises it.
proc nickv_can_raise_nofile {} {
    expr {[catch {exec prlimit --nofile=128:128 sh -c {ulimit -Hn 256}}] == 0}
}

start_server {tags {"nickv external:skip"}} {
    set mport [srv 0 port]

    test {Nic-KV: out of file descriptors, it refuses clients past maxclients and does not spin} {
        set extra {}
        # Where the limit can be raised, maxclients decides alone.
        if {[nickv_can_raise_nofile]} { set extra {--maxclients 96} }
        set nk [nickv_start_under {prlimit --nofile=128:128} $mport {*}$extra]
        # maxclients, lowered to what 128 descriptors allow (before it
        # existed: fill every descriptor there is).
        set max [lindex [nickv_cmd $nk config get maxclients] 1]
        if {$max eq {}} { set max 100 } else { assert {$max < 128} }
        set idle {}
        for {set i 0} {$i < $max + 30} {incr i} {
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd "PING\r\n"
            lappend idle $fd
        }
        # The first $max are served; the rest were told why and closed.
        assert_equal {+PONG} [nickv_raw_line [lindex $idle 0]]
        assert_equal {+PONG} [nickv_raw_line [lindex $idle [expr {$max - 1}]]]
        assert_equal {-ERR max number of clients reached} [nickv_raw_line [lindex $idle end]]
        set fd [nickv_raw_connect $nk]
        puts -nonewline $fd "PING\r\n"
        assert_equal {-ERR max number of clients reached} [nickv_raw_line $fd]
        assert_equal 1 [nickv_raw_closed $fd]
        close $fd
        # With the limit hit, it idles.
        set t0 [nickv_cpu_ticks [dict get $nk pid]]
        after 2000 ;# its CPU time over 2 s, without our polling in it
        set used [expr {[nickv_cpu_ticks [dict get $nk pid]] - $t0}]
        assert {$used < 20}
        # Room again: it serves.
        foreach fd [lrange $idle 0 29] { close $fd }
        set idle [lrange $idle 30 end]
        wait_for_condition 50 100 {
            [nickv_cmd $nk ping] eq {PONG}
        } else {
            fail "Nic-KV does not answer once clients left"
        }
        foreach fd $idle { close $fd }
        nickv_stop $nk
    }

    test {Nic-KV: --maxclients, and the slots it reports free} {
        set nk [nickv_start $mport --maxclients 5]
        assert_equal {maxclients 5} [nickv_cmd $nk config get maxclients]
        set idle {}
        for {set i 0} {$i < 5} {incr i} { lappend idle [nickv_raw_connect $nk] }
        set fd [nickv_raw_connect $nk]
        assert_equal {-ERR max number of clients reached} [nickv_raw_line $fd]
        close $fd
        # The master hears that Nic-KV is full, and sends it no replica: a
        # new SKV replica stays with the master.
        set master [srv 0 client]
        wait_for_condition 50 100 {
            [nickv_status $master nickv_daemon_free_slots] == 0
        } else {
            fail "the master does not know that Nic-KV is full"
        }
        set redirects [nickv_status $master nickv_redirects]
        start_server {overrides {save ""}} {
            set r [srv 0 client]
            $r replicaof [srv -1 host] $mport
            wait_for_sync $r
            assert_stays 1.5 {[nickv_status $r nickv_link_via] eq {} &&
                              [nickv_status $r nickv_redirects_followed] == 0 &&
                              [nickv_status $master nickv_redirects] == $redirects} \
                "a replica sent to a Nic-KV that should get none"
            assert_equal {} [nickv_status $r nickv_link_via]
            assert_equal 0 [nickv_status $r nickv_redirects_followed]
            assert_equal $redirects [nickv_status $master nickv_redirects]
            assert_equal 0 [nickv_status $master nickv_handoffs]
        }
        close [lindex $idle 0]
        wait_for_condition 50 100 {
            [nickv_info $nk connected_clients] == 5
        } else {
            fail "Nic-KV did not see a client leave"
        }
        foreach fd $idle { catch {close $fd} }
        nickv_stop $nk
    }

    test {Nic-KV: CONFIG SET parses and range-checks numbers as redis-server does} {
        set nk [nickv_start $mport]
        set err {ERR CONFIG SET failed (possibly related to argument}
        assert_equal "$err 'backlog-size') - argument must be a memory value" \
            [nickv_cmd $nk config set backlog-size 17179869185gb]
        assert_equal "$err 'backlog-size') - argument must be a memory value" \
            [nickv_cmd $nk config set backlog-size 99999999999999999999999999]
        assert_equal {backlog-size 134217728} [nickv_cmd $nk config get backlog-size]
        assert_equal "$err 'repl-timeout') - argument must be between 1 and 2147483647 inclusive" \
            [nickv_cmd $nk config set repl-timeout 4294967297]
        foreach bad {1.5 5abc {} -} {
            assert_equal "$err 'repl-timeout') - argument couldn't be parsed into an integer" \
                [nickv_cmd $nk config set repl-timeout $bad]
        }
        assert_equal {repl-timeout 60} [nickv_cmd $nk config get repl-timeout]
        assert_equal "$err 'protected-mode') - argument must be 'yes' or 'no'" \
            [nickv_cmd $nk config set protected-mode maybe]
        assert_equal "$err 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning" \
            [nickv_cmd $nk config set loglevel loud]
        assert_equal {ERR Unknown option or number of arguments for CONFIG SET - 'no-such-option'} \
            [nickv_cmd $nk config set no-such-option 1]
        assert_equal "$err 'port') - can't set immutable config" \
            [nickv_cmd $nk config set port 1234]
        # Options are C strings: a NUL would cut a password short, silently.
        set before [nickv_cmd $nk config get masterauth]
        assert_equal "$err 'masterauth') - the value contains a NUL byte" \
            [nickv_cmd $nk config set masterauth "sec\0ret"]
        assert_equal $before [nickv_cmd $nk config get masterauth]
        # ... nor may a NUL cut an option's name short.
        assert_equal {ERR Unknown option or number of arguments for CONFIG SET - 'masterauth\x00junk'} \
            [nickv_cmd $nk config set "masterauth\0junk" x]
        assert_equal $before [nickv_cmd $nk config get masterauth]
        nickv_stop $nk
    }

    test {Nic-KV: a master whose reply line never ends is dropped, not buffered without end} {
        # A "master" that answers the first command with "+" and then 4 MB
        # with no newline, and keeps the connection open.
        set fport [find_available_port [expr {$::baseport + 450}] 100]
        set script [tmpfile fake-endless-master.tcl]
        set f [open $script w]
        puts $f [string map [list @PORT@ $fport] {
            proc serve {fd addr port} {
                fconfigure $fd -translation binary -blocking 1
                catch {
                    gets $fd
                    puts -nonewline $fd "+[string repeat a [expr {4*1024*1024}]]"
                    flush $fd
                }
            }
            socket -server serve @PORT@
            vwait forever
        }]
        close $f
        set fake [exec tclsh $script &]
        # Until it listens (a connection closed at once is sent nothing).
        wait_for_condition 100 20 {
            [catch {close [socket 127.0.0.1 $fport]}] == 0
        } else {
            fail "the fake master does not listen"
        }
        set nk [nickv_start $fport]
        wait_for_condition 100 100 {
            [catch {exec grep -c "longer than 64 KB" [dict get $nk log]} n] == 0 && $n >= 1
        } else {
            exec kill $fake
            nickv_stop $nk
            fail "the endless reply line was not refused: [exec tail -n 3 [dict get $nk log]]"
        }
        exec kill $fake
        nickv_stop $nk
    }

    test {Nic-KV: AUTH compares every byte: a NUL does not end the password} {
        set nk [nickv_start $mport --requirepass pw]
        set c [redis 127.0.0.1 [dict get $nk port]]
        catch {$c auth "pw\0anything"} e
        assert_match {WRONGPASS*} $e
        catch {$c auth default "pw\0anything"} e
        assert_match {WRONGPASS*} $e
        catch {$c auth "default\0x" pw} e
        assert_match {WRONGPASS*} $e
        assert_equal OK [$c auth pw]
        $c close
        nickv_stop $nk
    }

    test {Nic-KV: CONFIG SET takes several pairs, all or nothing} {
        set nk [nickv_start $mport]
        assert_equal OK [nickv_cmd $nk config set loglevel warning repl-timeout 7]
        assert_equal {loglevel warning} [nickv_cmd $nk config get loglevel]
        assert_equal {repl-timeout 7} [nickv_cmd $nk config get repl-timeout]
        # One bad value: nothing changes.
        assert_equal {ERR CONFIG SET failed (possibly related to argument 'backlog-size') - argument must be a memory value} \
            [nickv_cmd $nk config set repl-timeout 9 backlog-size lots]
        assert_equal {repl-timeout 7} [nickv_cmd $nk config get repl-timeout]
        assert_equal {ERR CONFIG SET failed (possibly related to argument 'repl-timeout') - duplicate parameter} \
            [nickv_cmd $nk config set repl-timeout 9 repl-timeout 10]
        assert_equal {ERR syntax error} [nickv_cmd $nk config set repl-timeout 9 loglevel]
        assert_equal {repl-timeout 7} [nickv_cmd $nk config get repl-timeout]
        nickv_stop $nk
    }

    test {Nic-KV: INFO with several sections, the sections tools ask for, redis-cli habits, as redis-server 7.0} {
        set nk [nickv_start $mport]
        set info [nickv_cmd $nk info server cpu]
        assert_match "*# Server*nickv_version:*# CPU*used_cpu_user:*" $info
        assert_no_match "*# Backlog*" $info
        assert_match "*# Memory*used_memory:*" [nickv_cmd $nk info memory]
        # Sections Nic-KV does not have answer empty, as redis-server's do;
        # those tools ask for by name answer what applies (issue 33).
        assert_equal {} [nickv_cmd $nk info a b]
        assert_equal "# Keyspace" [string trim [nickv_cmd $nk info keyspace]]
        assert_equal "# Errorstats" [string trim [nickv_cmd $nk info errorstats]]
        assert_match "*# Persistence*loading:0*" [nickv_cmd $nk info persistence]
        set c [redis [nickv_host $nk] [dict get $nk port]]
        assert_equal OK [$c config resetstat]
        $c ping
        $c ping
        assert_match "*cmdstat_ping:calls=2,usec=*,usec_per_call=*,rejected_calls=0,failed_calls=0*" \
            [$c info commandstats]
        assert_equal OK [$c config resetstat]
        assert_no_match "*cmdstat_ping*" [$c info commandstats]
        assert_match "*cmdstat_config:calls=1,*" [$c info commandstats]
        assert_equal {} [$c latency histogram]
        # A subscriber shows upstream's P among CLIENT LIST's flags.
        $c subscribe +switch-master
        set l [nickv_cmd $nk client list]
        assert_match "*flags=P *sub=1*" $l
        $c close
        assert_match "*cluster_enabled:0*" [nickv_cmd $nk info cluster]
        nickv_stop $nk
    }

    test {Nic-KV: INFO failover's and coordinator's fields as read-only keys nickv:<field>, as the exporter reads keys} {
        set nk [nickv_start $mport --failover yes]
        set c [redis [nickv_host $nk] [dict get $nk port]]
        assert_equal OK [$c select 0]
        assert_error {ERR DB index is out of range} {$c select 1}
        assert_error {ERR value is not an integer*} {$c select x}
        # Each key is its field, as INFO says it at the time of the read.
        assert_equal string [$c type nickv:epoch]
        assert_equal [nickv_info $nk epoch] [$c get nickv:epoch]
        assert_equal [nickv_info $nk failover_state] [$c get nickv:failover_state]
        assert_equal [nickv_info $nk master] [$c get nickv:master]
        assert_equal off [$c get nickv:coordinator_role]
        assert_equal [nickv_info $nk min_slaves] [$c get nickv:min_slaves]
        assert_equal 127.0.0.1:$mport [$c get nickv:master]
        assert_equal [string length 127.0.0.1:$mport] [$c strlen nickv:master]
        # An empty field is an empty string, not a missing key.
        assert_equal {} [$c get nickv:state_file_error]
        assert_equal 1 [$c exists nickv:state_file_error]
        # A name in nickv: that is not a field, or that would reach into a
        # line, does not exist (a coordinator's field without one).
        foreach key {nickv:leader nickv:nosuchfield nickv:epoch:1 "nickv:epoch\r\n" nickv:#} {
            assert_equal none [$c type $key]
            assert_equal {} [$c get $key]
            assert_equal 0 [$c strlen $key]
        }
        assert_equal 2 [$c exists nickv:epoch nickv:nosuchfield nickv:epoch]
        assert_equal 0 [$c pfcount nickv:nosuchfield]
        assert_error {WRONGTYPE*} {$c pfcount nickv:epoch}
        assert_equal {} [$c memory usage nickv:epoch]
        # Outside nickv: a key is an error, not nil: an application sent
        # here by mistake must not read "no such key" for its data.
        set nodata {ERR Nic-KV holds no data: 'foo' is not one of its status keys (nickv:<field of INFO failover or INFO coordinator>); send data commands to the master}
        foreach cmd {{get foo} {type foo} {strlen foo} {exists nickv:epoch foo} {pfcount foo} {memory usage foo}} {
            catch {$c {*}$cmd} e
            assert_equal $nodata $e
        }
        foreach key {nickv: "# Failover state"} {
            assert_error {ERR Nic-KV holds no data*} {$c get $key}
        }
        catch {$c get "a\nb"} e
        assert_match {ERR Nic-KV holds no data: 'a?b' is not*} $e
        # SCAN lists every field once, in one answer.
        lassign [$c scan 0 match nickv:failover* count 10] cursor keys
        assert_equal 0 $cursor
        assert_equal {nickv:failover nickv:failover_blocked nickv:failover_state nickv:failovers nickv:failovers_aborted} [lsort $keys]
        lassign [$c scan 0] cursor all
        assert {[lsearch $all nickv:epoch] >= 0 && [lsearch $all nickv:coordinator_role] >= 0}
        assert {[lsearch $all nickv:valid_replicas] >= 0 && [lsearch $all nickv:node0] >= 0}
        assert_equal [llength $all] [llength [lsort -unique $all]]
        assert_equal {0 {}} [$c scan 0 type list]
        assert_error {ERR invalid cursor} {$c scan 7}
        assert_error {ERR syntax error} {$c scan 0 match}
        assert_error {ERR value is not an integer*} {$c scan 0 count 0}
        # Read only: Nic-KV still takes no writes.
        assert_error {ERR unknown command*} {$c set nickv:epoch 9}
        assert_equal [nickv_info $nk epoch] [$c get nickv:epoch]
        # RESP3's null for a key that does not exist.
        $c hello 3
        assert_equal {} [$c get nickv:nosuchfield]
        $c close
        nickv_stop $nk
    }

    test {Nic-KV: an unwritable logfile stops it at start, with a message} {
        set port [find_available_port [expr {$::baseport + 250}] 200]
        set rc [catch {exec timeout 5 [nickv_binary] --port $port --master-port $mport \
                           --logfile /nonexistent/dir/x.log 2>@1} out]
        assert_equal 1 $rc
        assert_equal 1 [lindex $::errorCode 2]
        assert_match "*Can't open the log file*/nonexistent/dir/x.log*No such file or directory*" $out
    }

    test {Nic-KV: a bad value in the config file or on the command line stops it at start} {
        set port [find_available_port [expr {$::baseport + 250}] 200]
        catch {exec timeout 5 [nickv_binary] --port $port --repl-timeout 5abc 2>@1} out
        assert_match "*repl-timeout*argument couldn't be parsed into an integer*" $out
        catch {exec timeout 5 [nickv_binary] --port $port --no-such-option 1 2>@1} out
        assert_match "*no-such-option*Bad directive or wrong number of arguments*" $out
        set conf [tmpfile nickv-nul.conf]
        set f [open $conf w]
        puts $f "port $port\nmasterauth \"sec\\x00ret\""
        close $f
        catch {exec timeout 5 [nickv_binary] $conf 2>@1} out
        assert_match "*masterauth*the value contains a NUL byte*" $out
        # A raw NUL byte in the file, not escaped: refused as well, not the
        # password cut short there and the lines after it never read.
        set f [open $conf w]
        fconfigure $f -translation binary
        puts -nonewline $f "port $port\nmasterauth sec\0ret\nrequirepass other\n"
        close $f
        set rc [catch {exec timeout 5 [nickv_binary] $conf 2>@1} out]
        assert_equal 1 $rc
        assert_match "*line 2*the value contains a NUL byte*" $out
    }
}

start_server {tags {"nickv external:skip"} overrides {rdbcompression no}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    # An RDB far larger than what the sockets' buffers hold.
    $master debug populate 300000 key 100

    test {Nic-KV: a proxied full sync that is never read is dropped after the soft limit} {
        set nk [nickv_start $mport --client-output-buffer-limit "replica 0 1mb 2"]
        wait_for_condition 100 100 {
            [nickv_info $nk master_link_status] eq {up}
        } else {
            fail "Nic-KV did not join its master"
        }
        set before [nickv_info $nk used_memory]
        set fd [nickv_raw_connect $nk]
        puts -nonewline $fd "PSYNC ? -1\r\n"
        # It queues the RDB up to its pause...
        wait_for_condition 100 100 {
            [nickv_info $nk used_memory] > $before + 2*1024*1024
        } else {
            fail "Nic-KV queued no RDB for the client"
        }
        # ... then drops the client that does not read it, 2 s later.
        wait_for_condition 100 100 {
            [nickv_info $nk used_memory] < $before + 1024*1024
        } else {
            fail "Nic-KV keeps [nickv_info $nk used_memory] bytes for a client that never reads"
        }
        assert_match "*output buffer limits*" [exec cat [dict get $nk log]]
        assert_equal 1 [nickv_raw_closed $fd 5000]
        close $fd
        assert_equal {client-output-buffer-limit {replica 0 1048576 2}} \
            [nickv_cmd $nk config get client-output-buffer-limit]
        nickv_stop $nk
    } {} {needs:debug}
}

start_server {tags {"nickv external:skip"}} {
    set mport [srv 0 port]

    test {Nic-KV: a client that does not authenticate in time is closed} {
        set nk [nickv_start $mport --requirepass s3cret --auth-timeout 1]
        set fd [nickv_raw_connect $nk]
        set authed [nickv_raw_connect $nk]
        puts -nonewline $authed "AUTH s3cret\r\n"
        assert_equal {+OK} [nickv_raw_line $authed]
        assert_equal 1 [nickv_raw_closed $fd 4000]
        close $fd
        # An authenticated client stays.
        puts -nonewline $authed "PING\r\n"
        assert_equal {+PONG} [nickv_raw_line $authed]
        close $authed
        nickv_stop $nk
    }

    test {Nic-KV: failed AUTHs are logged a few lines at a time, not one each} {
        set nk [nickv_start $mport --requirepass s3cret]
        set c [redis 127.0.0.1 [dict get $nk port]]
        for {set i 0} {$i < 200} {incr i} {
            catch {$c auth wrong} e
        }
        assert_match {WRONGPASS*} $e
        $c close
        assert_equal 200 [nickv_info $nk auth_failures]
        assert_stays 1.2 {[exec grep -c "AUTH" [dict get $nk log]] <= 4} "a line per failed AUTH"
        set lines [exec grep -c "AUTH" [dict get $nk log]]
        assert {$lines >= 1 && $lines <= 4}
        nickv_stop $nk
    }
}

start_server {tags {"nickv external:skip"}} {
    set mport [srv 0 port]

    test {Nic-KV: request lengths are parsed strictly, as redis-server does} {
        set nk [nickv_start $mport]
        foreach {req reply} {
            "*1abc\r\n\$4\r\nPING\r\n" {-ERR Protocol error: invalid multibulk length}
            "*1\r\n\$4x\r\nPING\r\n"   {-ERR Protocol error: invalid bulk length}
            "*99999999999999999999\r\n" {-ERR Protocol error: invalid multibulk length}
        } {
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd $req
            assert_equal $reply [nickv_raw_line $fd]
            assert_equal 1 [nickv_raw_closed $fd]
            close $fd
        }
        assert_equal PONG [nickv_cmd $nk ping]
        nickv_stop $nk
    }
}

# A master given by name: Nic-KV resolves it in a thread of its own
# (nic-kv/nickv_resolve.c). tests/gated-dns.c, preloaded, is a DNS that
# answers "*.gate.test" only once its gate file exists.
start_server {tags {"nickv external:skip"}} {
    set mport [srv 0 port]

    test {Nic-KV: a master given by name is resolved off the event loop: a DNS that does not answer stops nothing} {
        set dir [file normalize [tmpdir gated-dns]]
        exec cc -shared -fPIC -o $dir/gated-dns.so tests/skv/gated-dns.c -ldl
        set gate $dir/gate
        set port [find_available_port [expr {$::baseport + 250}] 200]
        set log $dir/nickv.log
        set pid [exec env LD_PRELOAD=$dir/gated-dns.so SKV_TEST_DNS_GATE=$gate SKV_TEST_DNS_MAX=300 \
                     [nickv_binary] --port $port --master-host master.gate.test --master-port $mport \
                     --logfile $log --state-file $dir/nickv.state >>& $dir/nickv.out &]
        lappend ::nickv_pids $pid
        set nk [dict create port $port pid $pid log $log args {} master $mport]
        wait_for_condition 100 50 {
            [file exists $gate.log] && [string match "*ask master.gate.test*" [exec cat $gate.log]]
        } else {
            catch {exec tail -n 20 $log} tail
            fail "nic-kv did not ask for the master's name: $tail"
        }
        # The DNS does not answer: Nic-KV still serves its clients (before,
        # its loop waited in getaddrinfo and answered nothing) ...
        foreach _ {1 2 3 4 5} {
            set fd [nickv_raw_connect $nk]
            puts -nonewline $fd "PING\r\n"
            assert_equal {+PONG} [nickv_raw_line $fd 10000]
            close $fd
            after 100
        }
        # ... and says why it has no link.
        assert_equal down [nickv_info $nk master_link_status]
        assert_equal 1 [nickv_info $nk resolve_pending]
        assert_equal 0 [nickv_info $nk resolutions]
        wait_for_condition 50 100 {
            ![catch {exec grep -q "Cannot connect to the master master.gate.test:$mport: resolving 'master.gate.test'" $log}]
        } else {
            fail "no line says why the link is not up: [exec tail -n 20 $log]"
        }
        # The DNS answers: the link comes up, to the address found.
        close [open $gate w]
        wait_for_condition 100 100 {
            [nickv_info $nk master_link_status] eq {up}
        } else {
            fail "the link did not come up: [exec tail -n 20 $log]"
        }
        assert_equal 0 [nickv_info $nk resolve_pending]
        assert_equal 0 [nickv_info $nk resolve_failures]
        assert {[nickv_info $nk resolutions] >= 1}

        # The DNS stops answering again. Once the address is stale (10 s),
        # a link that drops is made again at once, to the address it had,
        # while the name is looked up anew.
        file delete $gate
        after 10500
        set connects [nickv_info $nk master_link_connects]
        r client kill type replica
        wait_for_condition 100 100 {
            [nickv_info $nk master_link_connects] > $connects &&
            [nickv_info $nk master_link_status] eq {up}
        } else {
            fail "the link did not come back: [exec tail -n 20 $log]"
        }
        assert_equal 1 [nickv_info $nk resolve_pending]
        set fd [nickv_raw_connect $nk]
        puts -nonewline $fd "PING\r\n"
        assert_equal {+PONG} [nickv_raw_line $fd 10000]
        close $fd
        close [open $gate w]
        wait_for_condition 100 100 {
            [nickv_info $nk resolve_pending] == 0
        } else {
            fail "the second resolution did not end"
        }
        nickv_stop $nk
    }
}
