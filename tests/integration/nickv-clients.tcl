# Nic-KV's client commands: HELLO and RESP3 (what redis-py 8 speaks), and
# what operators type: CLIENT, ECHO, TIME, ACL WHOAMI, COMMAND, SLOWLOG,
# LATENCY, MEMORY STATS; the error for a command Nic-KV does not serve;
# who may run which (NIC-KV.md, "Who may run what"); redis-cli against it.

source tests/skv/helpers.tcl

# A raw connection to Nic-KV that sends $cmds (RESP, already framed):
# returns the socket.
proc clients_raw {nk cmds} {
    set fd [nickv_raw_connect $nk]
    puts -nonewline $fd $cmds
    flush $fd
    return $fd
}

# What Nic-KV sends on $fd until it has sent $n bytes, or until $ms ms went
# by: the bytes as they came.
proc clients_read {fd n {ms 1000}} {
    set deadline [expr {[clock milliseconds] + $ms}]
    set buf ""
    while {[string length $buf] < $n && [clock milliseconds] < $deadline} {
        if {[catch {read $fd} data]} break
        append buf $data
        if {[eof $fd]} break
        after 10
    }
    # Anything more that is already on its way.
    after 50
    catch {append buf [read $fd]}
    return $buf
}

# Send $cmds on a fresh raw connection, authenticated with $auth first (the
# +OK is dropped), and expect exactly $want back.
proc clients_assert_bytes {nk auth cmds want} {
    set fd [clients_raw $nk "[nickv_resp AUTH $auth]$cmds"]
    set got [clients_read $fd [expr {[string length $want] + 5}]]
    close $fd
    assert_equal "+OK\r\n$want" $got
}

# A command on a connection of its own, authenticated with $pass (none if
# ""): {0 reply} or {1 error}.
proc clients_call {nk pass args} {
    set c [redis 127.0.0.1 [dict get $nk port]]
    if {$pass ne ""} { $c auth $pass }
    set rc [catch {$c {*}$args} r]
    catch {$c close}
    list $rc $r
}

start_server {tags {"nickv external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    # The replicas' password (rp) grants replication and discovery; the
    # admin's (ap), every command.
    set nk [nickv_start $mport --requirepass rp --adminpass ap]
    set nkport [dict get $nk port]
    set version [nickv_info $nk nickv_version]
    wait_for_condition 100 100 {
        [lindex [nickv_cmd $nk sentinel get-master-addr-by-name mymaster] 1] == $mport
    } else {
        fail "Nic-KV does not name its master: [nickv_cmd $nk sentinel get-master-addr-by-name mymaster]"
    }

    test {HELLO 3 with AUTH: RESP3's map of what Nic-KV is, byte for byte; the client speaks RESP3 after it} {
        set fd [clients_raw $nk "[nickv_resp HELLO 3 AUTH default rp][nickv_resp CLIENT ID]"]
        set hello [clients_read $fd 200]
        close $fd
        # Its id, from CLIENT ID's reply at the end.
        assert_match "*:*\r\n" $hello
        regexp {:(\d+)\r\n$} $hello -> id
        set want "%7\r\n\$6\r\nserver\r\n\$6\r\nnic-kv\r\n\$7\r\nversion\r\n\$[string length $version]\r\n$version\r\n"
        append want "\$5\r\nproto\r\n:3\r\n\$2\r\nid\r\n:$id\r\n\$4\r\nmode\r\n\$8\r\nsentinel\r\n"
        append want "\$4\r\nrole\r\n\$5\r\nnickv\r\n\$7\r\nmodules\r\n*0\r\n:$id\r\n"
        assert_equal $want $hello
        # HELLO 2: the same, as an array of its keys and values.
        set fd [clients_raw $nk "[nickv_resp AUTH rp][nickv_resp HELLO 2]"]
        set got [clients_read $fd 200]
        close $fd
        assert_match "+OK\r\n*14\r\n\$6\r\nserver\r\n\$6\r\nnic-kv\r\n*\$5\r\nproto\r\n:2\r\n*" $got
    }

    test {HELLO: a wrong password, no password, a protocol other than 2 or 3, a bad option: upstream's errors} {
        assert_equal {1 {WRONGPASS invalid username-password pair or user is disabled.}} \
            [clients_call $nk "" hello 3 auth default wrong]
        assert_equal {1 {WRONGPASS invalid username-password pair or user is disabled.}} \
            [clients_call $nk "" hello 3 auth nosuchuser rp]
        assert_equal {1 {NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time}} \
            [clients_call $nk "" hello 3]
        assert_equal {1 {NOPROTO unsupported protocol version}} [clients_call $nk rp hello 4]
        assert_equal {1 {NOPROTO unsupported protocol version}} [clients_call $nk rp hello 1]
        assert_equal {1 {ERR Protocol version is not an integer or out of range}} [clients_call $nk rp hello 3x]
        assert_equal {1 {ERR Syntax error in HELLO option "foo"}} [clients_call $nk rp hello 3 foo]
        assert_equal {1 {ERR Client names cannot contain spaces, newlines or special characters.}} \
            [clients_call $nk rp hello 3 setname "a b"]
        # A failed HELLO changes nothing: the client still needs AUTH.
        set fd [clients_raw $nk "[nickv_resp HELLO 3 AUTH default wrong][nickv_resp PING]"]
        set got [clients_read $fd 200]
        close $fd
        assert_equal "-WRONGPASS invalid username-password pair or user is disabled.\r\n-NOAUTH Authentication required.\r\n" $got
    }

    test {HELLO AUTH goes through AUTH's roles: adminpass makes an admin, the replicas' password does not} {
        set c [redis 127.0.0.1 $nkport]
        $c hello 2 auth default rp setname repl-one
        assert_equal repl-one [$c client getname]
        assert_equal default [$c acl whoami]
        catch {$c client list} e
        assert_equal {NOPERM 'client|list' needs the admin password (AUTH <adminpass>); the replicas' password grants replication and discovery only} $e
        $c hello 2 auth admin ap
        assert_equal admin [$c acl whoami]
        assert_match "*name=repl-one *cmd=client user=admin resp=2*" [$c client list]
        $c close
    }

    test {RESP3: SENTINEL replies are maps, an unknown master a null; the same as RESP2 arrays} {
        set name "\$4\r\nname\r\n\$8\r\nmymaster\r\n\$2\r\nip\r\n\$9\r\n127.0.0.1\r\n\$4\r\nport\r\n\$[string length $mport]\r\n$mport\r\n"
        set fd [clients_raw $nk "[nickv_resp HELLO 3 AUTH default rp][nickv_resp SENTINEL MASTER mymaster]"]
        set got [clients_read $fd 2000 1000]
        close $fd
        assert_match "*modules\r\n*0\r\n%20\r\n$name*\$14\r\nparallel-syncs\r\n\$1\r\n1\r\n" $got
        set fd [clients_raw $nk "[nickv_resp AUTH rp][nickv_resp SENTINEL MASTER mymaster]"]
        set got [clients_read $fd 2000 1000]
        close $fd
        assert_match "+OK\r\n*40\r\n$name*\$14\r\nparallel-syncs\r\n\$1\r\n1\r\n" $got
        set fd [clients_raw $nk "[nickv_resp HELLO 3 AUTH default rp][nickv_resp SENTINEL MASTERS][nickv_resp SENTINEL REPLICAS mymaster]"]
        set got [clients_read $fd 2000 1000]
        close $fd
        assert_match "*modules\r\n*0\r\n*1\r\n%20\r\n$name*\r\n*0\r\n" $got
        # Null, SENTINELS (none), GET-MASTER-ADDR-BY-NAME: exact.
        set hello3 [nickv_resp HELLO 3 AUTH default rp]
        set fd [clients_raw $nk "$hello3[nickv_resp SENTINEL GET-MASTER-ADDR-BY-NAME other][nickv_resp SENTINEL SENTINELS mymaster][nickv_resp SENTINEL GET-MASTER-ADDR-BY-NAME mymaster]"]
        set got [clients_read $fd 2000 1000]
        close $fd
        assert_match "*modules\r\n*0\r\n_\r\n*0\r\n*2\r\n\$9\r\n127.0.0.1\r\n\$[string length $mport]\r\n$mport\r\n" $got
        clients_assert_bytes $nk rp [nickv_resp SENTINEL GET-MASTER-ADDR-BY-NAME other] "*-1\r\n"
    }

    test {RESP3: SUBSCRIBE's replies are pushes, a mass UNSUBSCRIBE with nothing names a null, PING is +PONG} {
        set hello3 [nickv_resp HELLO 3 AUTH default rp]
        set fd [clients_raw $nk "$hello3[nickv_resp UNSUBSCRIBE][nickv_resp SUBSCRIBE +switch-master][nickv_resp PING][nickv_resp UNSUBSCRIBE]"]
        set got [clients_read $fd 2000 1000]
        close $fd
        set want ">3\r\n\$11\r\nunsubscribe\r\n_\r\n:0\r\n"
        append want ">3\r\n\$9\r\nsubscribe\r\n\$14\r\n+switch-master\r\n:1\r\n+PONG\r\n"
        append want ">3\r\n\$11\r\nunsubscribe\r\n\$14\r\n+switch-master\r\n:0\r\n"
        assert_match "*modules\r\n\*0\r\n>3\r\n*" $got
        assert_equal $want [string range $got [string first ">3" $got] end]
        # RESP2, as before: arrays, a null bulk, PING as in subscribed mode.
        clients_assert_bytes $nk rp "[nickv_resp UNSUBSCRIBE][nickv_resp SUBSCRIBE x][nickv_resp PING]" \
            "*3\r\n\$11\r\nunsubscribe\r\n\$-1\r\n:0\r\n*3\r\n\$9\r\nsubscribe\r\n\$1\r\nx\r\n:1\r\n*2\r\n\$4\r\npong\r\n\$0\r\n\r\n"
    }

    test {RESP3: INFO is a verbatim string ("txt"), CLIENT GETNAME of an unnamed client a null} {
        set fd [clients_raw $nk "[nickv_resp HELLO 3 AUTH default rp][nickv_resp CLIENT GETNAME][nickv_resp INFO server]"]
        set got [clients_read $fd 4000 1000]
        close $fd
        assert_match "*modules\r\n*0\r\n_\r\n=*\r\ntxt:# Server\r\nredis_version:*\r\nnickv_version:$version\r\n*" $got
        regexp {\r\n=(\d+)\r\n(.*)\r\n$} $got -> len body
        assert_equal $len [string length $body]
        clients_assert_bytes $nk rp [nickv_resp CLIENT GETNAME] "\$-1\r\n"
    }

    test {redis-py 8 (HELLO 3 AUTH) and 5 (AUTH) find the master through a Nic-KV with a password} {
        set script "
from redis.sentinel import Sentinel
s = Sentinel(\[('127.0.0.1', $nkport)\], socket_timeout=2, sentinel_kwargs={'password': 'rp'})
print(s.discover_master('mymaster'))
m = s.master_for('mymaster', socket_timeout=2, db=9)
m.set('through-nickv', 'ok')
print(s.sentinels\[0\].client_info()\['resp'\])
"
        foreach v {5 8} {
            $master del through-nickv
            set out [split [skv_redis_py $script $v] "\n"]
            assert_equal "('127.0.0.1', $mport)" [lindex $out 0]
            assert_equal ok [$master get through-nickv]
            # As Nic-KV saw it: redis-py 8 spoke RESP3, 5 RESP2.
            assert_equal [expr {$v == 8 ? 3 : 2}] [lindex $out 1]
        }
    }

    test {CLIENT ID, SETNAME, GETNAME, INFO; ECHO, TIME, ACL WHOAMI: the replicas' password is enough} {
        set c [redis 127.0.0.1 $nkport]
        $c auth rp
        set id [$c client id]
        assert {[string is integer -strict $id] && $id > 0}
        assert_equal {} [$c client getname]
        assert_equal OK [$c client setname probe-7]
        assert_equal probe-7 [$c client getname]
        catch {$c client setname "probe 7"} e
        assert_equal {ERR Client names cannot contain spaces, newlines or special characters.} $e
        assert_equal probe-7 [$c client getname]
        set info [$c client info]
        assert_match "id=$id addr=127.0.0.1:* name=probe-7 age=* idle=* flags=N db=0 sub=0 psub=0 multi=-1 qbuf=* cmd=client user=default resp=2\n" $info
        # SETNAME "" takes the name away.
        assert_equal OK [$c client setname ""]
        assert_equal {} [$c client getname]
        assert_equal "hello world" [$c echo "hello world"]
        catch {$c echo} e
        assert_equal {ERR wrong number of arguments for 'echo' command} $e
        set t [$c time]
        assert {abs([lindex $t 0] - [clock seconds]) <= 2}
        assert {[lindex $t 1] >= 0 && [lindex $t 1] < 1000000}
        assert_equal default [$c acl whoami]
        catch {$c acl users} e
        assert_equal {ERR Nic-KV has no ACL users: it serves ACL WHOAMI only} $e
        catch {$c client pause 10} e
        assert_equal {ERR unknown subcommand or wrong number of arguments for CLIENT "pause" (Nic-KV serves CLIENT ID, GETNAME, SETNAME, INFO, LIST, KILL)} $e
        $c close
        # Before AUTH: nothing.
        assert_equal {1 {NOAUTH Authentication required.}} [clients_call $nk "" client id]
    }

    test {CLIENT LIST and KILL are the admin's: the replicas' password gets NOPERM} {
        foreach cmd {{client list} {client kill 127.0.0.1:1} {client kill id 1}} {
            set sub [lindex $cmd 1]
            assert_equal [list 1 "NOPERM 'client|$sub' needs the admin password (AUTH <adminpass>); the replicas' password grants replication and discovery only"] \
                [clients_call $nk rp {*}$cmd]
        }
    }

    test {CLIENT LIST shows every client with its name; CLIENT KILL ID and ADDR close the one named} {
        set a [redis 127.0.0.1 $nkport]
        $a auth rp
        $a client setname victim-a
        set aid [$a client id]
        set fd [clients_raw $nk "[nickv_resp AUTH rp][nickv_resp CLIENT SETNAME victim-b][nickv_resp CLIENT INFO]"]
        set binfo [clients_read $fd 500]
        regexp {addr=(\S+) } $binfo -> baddr
        set admin [redis 127.0.0.1 $nkport]
        $admin auth ap
        set list [$admin client list]
        assert_match "*id=$aid addr=* name=victim-a *" $list
        assert_match "* addr=$baddr fd=* name=victim-b *" $list
        assert_match "*name= * cmd=client user=default resp=2*" $list
        # New form: the count; old form: +OK or an error.
        assert_equal 0 [$admin client kill id 999999]
        assert_equal 1 [$admin client kill id $aid]
        catch {$a ping} e
        assert_match {*I/O error*} $e
        assert_equal 0 [nickv_raw_closed $fd 300]
        assert_equal OK [$admin client kill $baddr]
        assert_equal 1 [nickv_raw_closed $fd]
        catch {$admin client kill $baddr} e
        assert_equal {ERR No such client} $e
        catch {$admin client kill id 0} e
        assert_equal {ERR client-id should be greater than 0} $e
        catch {$admin client kill type normal} e
        assert_equal {ERR syntax error (Nic-KV's CLIENT KILL takes ID, ADDR and SKIPME)} $e
        set list [$admin client list]
        assert_no_match "*victim*" $list
        # SKIPME yes (the default) spares the caller; no closes it too.
        set myaddr [lindex [regexp -inline {addr=(\S+) } [$admin client info]] 1]
        assert_equal 0 [$admin client kill addr $myaddr]
        assert_equal 1 [$admin client kill addr $myaddr skipme no]
        catch {$admin ping} e
        assert_match {*I/O error*} $e
        catch {close $fd}
    }

    test {COMMAND, COUNT, INFO, DOCS answer for the commands Nic-KV serves} {
        set c [redis 127.0.0.1 $nkport]
        $c auth rp
        set all [$c command]
        set n [$c command count]
        assert_equal $n [llength $all]
        set names [lsort [lmap e $all {lindex $e 0}]]
        foreach cmd {acl auth client command config echo failover hello info latency memory ping psync quit
                     replconf role sentinel shutdown slowlog subscribe time} {
            assert {[lsearch -exact $names $cmd] >= 0}
        }
        assert_equal {{ping -1 fast 0 0 0 {} {} {} {}} {config -2 admin 0 0 0 {} {} {} {}} {}} \
            [$c command info ping config set]
        assert_equal {sentinel {summary {Find the master, as through Redis Sentinel; FAILOVER, SET, RESET (admin)} since 0.1.0 group sentinel}} \
            [string map [list $version 0.1.0] [$c command docs sentinel]]
        catch {$c command getkeys get x} e
        assert_equal {ERR unknown subcommand or wrong number of arguments for COMMAND "getkeys" (Nic-KV serves COMMAND, COMMAND COUNT, COMMAND INFO, COMMAND DOCS)} $e
        $c close
        # A RESP3 map (of maps), byte for byte, after HELLO's.
        set fd [clients_raw $nk "[nickv_resp HELLO 3 AUTH default rp][nickv_resp COMMAND DOCS ping]"]
        set got [clients_read $fd 400]
        close $fd
        set docs "%1\r\n\$4\r\nping\r\n%3\r\n\$7\r\nsummary\r\n\$11\r\nPing Nic-KV\r\n"
        append docs "\$5\r\nsince\r\n\$[string length $version]\r\n$version\r\n\$5\r\ngroup\r\n\$10\r\nconnection\r\n"
        assert_equal $docs [string range $got [string first "*0\r\n" $got]+4 end]
    }

    test {SLOWLOG and LATENCY answer empty (Nic-KV keeps neither), never an error; MEMORY STATS its allocations} {
        set c [redis 127.0.0.1 $nkport]
        $c auth rp
        assert_equal {} [$c slowlog get]
        assert_equal {} [$c slowlog get 10]
        assert_equal 0 [$c slowlog len]
        assert_equal OK [$c slowlog reset]
        catch {$c slowlog foo} e
        assert_equal {ERR syntax: SLOWLOG GET [count] | LEN | RESET (Nic-KV keeps no slow log)} $e
        assert_equal {} [$c latency latest]
        assert_equal {} [$c latency history command]
        assert_equal 0 [$c latency reset]
        assert_match "Nic-KV measures no latency events: nothing to report.*" [$c latency doctor]
        set stats [$c memory stats]
        assert_equal {total.allocated replication.backlog clients.normal} [dict keys $stats]
        assert {[dict get $stats total.allocated] > 0}
        assert_equal [nickv_info $nk backlog_allocated] [dict get $stats replication.backlog]
        assert {[dict get $stats clients.normal] > 0}
        assert {[dict get $stats clients.normal] < [dict get $stats total.allocated]}
        catch {$c memory doctor} e
        assert_equal {ERR Nic-KV holds no data: it serves MEMORY STATS and USAGE only} $e
        $c close
        # RESP3: MEMORY STATS is a map.
        set fd [clients_raw $nk "[nickv_resp HELLO 3 AUTH default rp][nickv_resp MEMORY STATS]"]
        set got [clients_read $fd 300]
        close $fd
        assert_match "*modules\r\n*0\r\n%3\r\n\$15\r\ntotal.allocated\r\n:*\r\n\$19\r\nreplication.backlog\r\n:*" $got
    }

    test {MONITOR (admin): the commands other clients run, passwords redacted, admin and replication commands left out} {
        set port [dict get $nk port]
        catch {clients_call $nk rp monitor} e
        assert_match {*NOPERM 'monitor' needs the admin password*} $e
        set m [redis 127.0.0.1 $port 1]
        $m auth ap
        assert_equal OK [$m read]
        $m monitor
        assert_equal OK [$m read]
        assert_match "*flags=O *cmd=monitor*" [clients_call $nk ap client list]
        set c [redis 127.0.0.1 $port]
        $c auth rp
        $c ping
        $c echo "a b\n"
        $c hello 3 auth default rp setname mon
        catch {$c config get port}
        $c replconf listening-port 1
        $c get nickv:epoch
        $c close
        set lines {}
        for {set i 0} {$i < 6} {incr i} { lappend lines [$m read] }
        # The CLIENT LIST check above shows as its AUTH only: CLIENT LIST is
        # an admin's subcommand, left out, as CONFIG and REPLCONF are.
        foreach line $lines {
            assert_match {[0-9]*.[0-9]* \[0 127.0.0.1:[0-9]*\] *} $line
        }
        assert_equal [list {"auth" "(redacted)"} {"auth" "(redacted)"} {"ping"} {"echo" "a b\n"} \
                          {"hello" "3" "auth" "(redacted)" "(redacted)" "setname" "mon"} {"get" "nickv:epoch"}] \
            [lmap line $lines {regsub {^[0-9.]+ \[0 [^\]]+\] } $line {}}]
        # Every password HELLO parses is hidden, walked as HELLO walks its
        # options (a client named "auth", a second AUTH pair); ACL's and a
        # SENTINEL subcommand's that is not a read, whatever they are.
        set c [redis 127.0.0.1 $port]
        $c hello 3 setname auth auth default rp
        $c hello 2 auth default rp auth admin ap
        catch {$c hello auth default rp}
        catch {$c acl setuser default >s3cret}
        catch {$c sentinel config set sentinel-pass s3cret}
        $c sentinel get-master-addr-by-name mymaster
        $c close
        set lines {}
        for {set i 0} {$i < 6} {incr i} { lappend lines [regsub {^[0-9.]+ \[0 [^\]]+\] } [$m read] {}] }
        assert_equal [list {"hello" "3" "setname" "auth" "auth" "(redacted)" "(redacted)"} \
                          {"hello" "2" "auth" "(redacted)" "(redacted)" "auth" "(redacted)" "(redacted)"} \
                          {"hello" "auth" "(redacted)" "(redacted)"} \
                          {"acl" "setuser" "(redacted)" "(redacted)"} \
                          {"sentinel" "config" "(redacted)" "(redacted)" "(redacted)"} \
                          {"sentinel" "get-master-addr-by-name" "mymaster"}] $lines
        # A MONITOR that leaves: the others run on.
        $m close
        assert_equal {0 PONG} [clients_call $nk rp ping]
        assert_no_match "*flags=O*" [clients_call $nk ap client list]
    }

    test {MONITOR: one that does not read is closed past the output limit, not grown without bound} {
        set port [dict get $nk port]
        set fd [socket 127.0.0.1 $port]
        fconfigure $fd -translation binary -buffering none
        puts -nonewline $fd [nickv_resp AUTH ap][nickv_resp MONITOR]
        assert_match {+OK*} [gets $fd]
        assert_match {+OK*} [gets $fd]
        # Never read again: 64 KB echoes, shown 4 times larger (\xNN), go
        # past the 8 MB limit after a few dozen.
        set c [redis 127.0.0.1 $port]
        $c auth rp
        set big [string repeat "\x01" 65536]
        set drops [nickv_info $nk client_output_buffer_limit_disconnections]
        wait_for_condition 200 10 {
            [catch {$c echo $big}] == 0 && [nickv_info $nk client_output_buffer_limit_disconnections] > $drops
        } else {
            fail "the MONITOR that does not read was not closed: [nickv_cmd $nk info stats]"
        }
        assert_match "*MONITOR client * does not read: closing it*" [exec cat [dict get $nk log]]
        assert_no_match "*flags=O*" [clients_call $nk ap client list]
        $c close
        close $fd
    }

    test {A command Nic-KV does not serve: an error naming what it serves} {
        assert_equal {1 {ERR unknown command 'SET': Nic-KV serves replication, discovery (SENTINEL, INFO, ROLE...) and admin commands (COMMAND lists them); send data commands to the master}} \
            [clients_call $nk rp SET foo bar]
        # GET answers Nic-KV's status keys (nickv:<field>) only.
        assert_equal {1 {ERR Nic-KV holds no data: 'foo' is not one of its status keys (nickv:<field of INFO failover or INFO coordinator>); send data commands to the master}} \
            [clients_call $nk rp GET foo]
        # Not printable bytes of the name become '?': the error is one line.
        assert_equal {1 {ERR unknown command 'a?b': Nic-KV serves replication, discovery (SENTINEL, INFO, ROLE...) and admin commands (COMMAND lists them); send data commands to the master}} \
            [clients_call $nk rp "a\nb"]
        assert_equal {1 {NOAUTH Authentication required.}} [clients_call $nk "" GET foo]
    }

    test {redis-cli against Nic-KV: PING, INFO (--no-raw), and its help from COMMAND DOCS} {
        set cli [file normalize src/redis-cli]
        assert_equal PONG [exec $cli -p $nkport --user default --pass rp --no-auth-warning ping]
        set info [exec $cli -p $nkport --user default --pass rp --no-auth-warning --no-raw info server]
        assert_match "# Server*nickv_version:$version*" $info
        set info3 [exec $cli -3 -p $nkport --user default --pass rp --no-auth-warning --no-raw info server]
        assert_match "# Server*nickv_version:$version*" $info3
        # Interactive (a terminal, from script(1)): redis-cli reads COMMAND
        # DOCS for its help.
        if {[catch {exec which script}]} {
            puts "skipped: redis-cli's interactive help (no script(1))"
        } else {
            # TERM=dumb: its line editor asks the terminal nothing.
            set out [exec sh -c "printf 'help sentinel\nquit\n' | TERM=dumb timeout 10 script -qc '$cli -p $nkport --user default --pass rp --no-auth-warning' /dev/null"]
            assert_match "*SENTINEL*Find the master, as through Redis Sentinel*group:*sentinel*" $out
        }
    }

    test {redis-cli --stat against Nic-KV: every column a number it counts} {
        set cli [file normalize src/redis-cli]
        set before [nickv_info $nk total_commands_processed]
        # (timeout ends it: the exit status says nothing; stdbuf: its lines
        # reach the pipe before that.)
        set out [exec sh -c "timeout 2 stdbuf -oL '$cli' -p $nkport --user default --pass rp --no-auth-warning --stat -i 0.2 2>&1; true"]
        # Before Nic-KV's INFO had blocked_clients and
        # total_commands_processed, redis-cli printed LONG_MIN for them.
        assert_no_match "*-9223372036854775808*" $out
        assert_match "*keys*mem*clients*blocked*requests*connections*" $out
        assert {[nickv_info $nk total_commands_processed] > $before}
        assert_equal 0 [nickv_info $nk blocked_clients]
    }

    test {CONFIG REWRITE without a config file: refused, saying so} {
        assert_equal {ERR Rewriting config file: The server is running without a config file} [nickv_cmd $nk config rewrite]
    }

    nickv_assert_no_bug $nk
    nickv_stop $nk

    test {CONFIG REWRITE: a CONFIG SET survives a restart; comments, unknown lines kept, a duplicate dropped} {
        set dir [file normalize [tmpdir nickv-rewrite]]
        set conf $dir/nic-kv.conf
        set port [find_available_port [expr {$::baseport + 250}] 200]
        set f [open $conf w]
        puts $f "# Nic-KV for the rewrite test\nmaster-port $mport\n\n  # probes\nprobe-interval 100\nprobe-interval 120"
        puts $f "state-file $dir/nickv.state\nlogfile $dir/nickv.log\n#waiting-time 900"
        close $f
        file attributes $conf -permissions 0640
        proc rewrite_start {conf port dir} {
            set pid [exec [nickv_binary] $conf --port $port >>& $dir/nickv.out &]
            lappend ::nickv_pids $pid
            set nk [dict create port $port pid $pid log $dir/nickv.log args {} master 0]
            # Its own "listening" line: not another process on the port.
            wait_for_condition 100 50 {
                [file exists $dir/nickv.log] &&
                ![catch {exec grep -c "listening on port $port," $dir/nickv.log} n] && $n == $::rewrite_starts + 1 &&
                [catch {nickv_cmd $nk ping} r] == 0 && $r eq "PONG"
            } else {
                fail "nic-kv did not start: [exec cat $dir/nickv.out]"
            }
            incr ::rewrite_starts
            return $nk
        }
        set ::rewrite_starts 0
        set nk [rewrite_start $conf $port $dir]
        assert_equal {probe-interval 120} [nickv_cmd $nk config get probe-interval]
        assert_equal OK [nickv_cmd $nk config set probe-interval 250]
        assert_equal OK [nickv_cmd $nk config set master-name "my-master.1"]
        assert_equal OK [nickv_cmd $nk config rewrite]
        set f [open $conf]
        set text [read $f]
        close $f
        set want "# Nic-KV for the rewrite test\nmaster-port $mport\n\n  # probes\nprobe-interval 250\n"
        append want "state-file $dir/nickv.state\nlogfile $dir/nickv.log\n#waiting-time 900\nport $port\nmaster-name my-master.1\n"
        assert_equal $want $text
        assert_equal 00640 [file attributes $conf -permissions]
        assert_equal {} [glob -nocomplain $conf.rewrite-*]
        nickv_stop $nk
        set nk [rewrite_start $conf $port $dir]
        assert_equal {probe-interval 250} [nickv_cmd $nk config get probe-interval]
        assert_equal {master-name my-master.1} [nickv_cmd $nk config get master-name]
        nickv_assert_no_bug $nk
        nickv_stop $nk
    }
}
