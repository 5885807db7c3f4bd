# Who may run what on Nic-KV's port. Every replica holds the replicas'
# password (requirepass, else masterauth): it grants replication and the
# read-only discovery commands, never an admin command (CONFIG, FAILOVER,
# SHUTDOWN), which needs adminpass or, while none is set, a loopback client.
# An option that names a program (fence-command) changes at run time only
# with enable-protected-configs. See NIC-KV.md, "Who may run what".
#
# A client from another address is a host of the test's own: a network
# namespace joined to this one by a veth pair (ip netns, as root), whose
# redis-cli and redis-server reach Nic-KV at our end of the pair. Where
# namespaces cannot be made (not root, no ip), those tests are skipped
# with a message; CI runs as root.

source tests/skv/helpers.tcl

set adm_replpw repl-secret
set adm_adminpw admin-secret

# The NOPERM replies, word for word.
proc adm_noperm_local {cmd} {
    return "NOPERM '$cmd' is served to loopback clients only while no adminpass is set; the replicas' password grants replication and discovery only"
}
proc adm_noperm_pass {cmd} {
    return "NOPERM '$cmd' needs the admin password (AUTH <adminpass>); the replicas' password grants replication and discovery only"
}
proc adm_protected_err {name} {
    return "ERR CONFIG SET failed (possibly related to argument '$name') - can't set protected config"
}

# Whether this process can make network namespaces.
proc adm_netns_possible {} {
    expr {[exec id -u] eq "0" && ![catch {exec which ip}]}
}

# A network namespace and a veth pair, named and numbered after this test
# process (parallel test clients each get their own): ns, the namespace;
# host, our end's address; peer, the namespace's.
proc adm_netns_spec {} {
    set p [pid]
    set a [expr {($p / 64) % 256}]
    set b [expr {($p % 64) * 4}]
    dict create ns skvadm$p veth skva$p host 10.250.$a.[expr {$b + 1}] \
        peer 10.250.$a.[expr {$b + 2}]
}

proc adm_netns_up {net} {
    set ns [dict get $net ns]
    set p [pid]
    # Those a test process that died left behind (its pid is gone), and ours.
    foreach line [split [exec ip netns list] "\n"] {
        if {[regexp {^skvadm([0-9]+)} $line -> old] && [catch {exec kill -0 $old}]} {
            adm_netns_down [dict create ns skvadm$old veth skva$old]
        }
    }
    adm_netns_down $net
    exec ip netns add $ns
    exec ip link add skva$p type veth peer name skvb$p
    exec ip link set skvb$p netns $ns
    exec ip addr add [dict get $net host]/30 dev skva$p
    exec ip link set skva$p up
    exec ip -n $ns addr add [dict get $net peer]/30 dev skvb$p
    exec ip -n $ns link set skvb$p up
    exec ip -n $ns link set lo up
    return $net
}

proc adm_netns_down {net} {
    catch {exec ip link del [dict get $net veth]}
    catch {exec ip netns del [dict get $net ns]}
}

# redis-cli run in the namespace (args: -h ... -p ... [-a ...] command);
# its output, trimmed (an error reply reads "NOPERM ...", "ERR ...").
proc adm_ns_cli {net args} {
    catch {exec ip netns exec [dict get $net ns] src/redis-cli --no-auth-warning {*}$args 2>@1} r
    return [string trim $r]
}

# A command to Nic-KV from the namespace's address.
proc adm_remote {net nk args} {
    adm_ns_cli $net -h [dict get $net host] -p [dict get $nk port] {*}$args
}

# A command to Nic-KV from loopback, on one connection after AUTH pass
# (none: no AUTH); the reply or the error.
proc adm_local {nk pass args} {
    set c [redis 127.0.0.1 [dict get $nk port]]
    if {$pass ne {}} { $c auth $pass }
    catch {$c {*}$args} r
    catch {$c close}
    return $r
}

proc adm_alive {nk} {
    expr {[catch {exec kill -0 [dict get $nk pid]}] == 0}
}

# ------------------------------------------- from another address ---

set adm_net ""
if {[adm_netns_possible]} {
    set adm_net [adm_netns_spec]
    if {[catch {adm_netns_up $adm_net} why]} {
        adm_netns_down $adm_net
        set adm_net ""
        # Root with ip, and still no namespace: that is a failure, not a skip.
        start_server {tags {"nickv external:skip"}} {
            test {Nic-KV access: a network namespace for a remote client} {
                fail "cannot make a network namespace: $why"
            }
        }
    }
}
if {$adm_net eq ""} {
    puts "skipping nickv-hostile-admin's remote tests: no network namespace (needs root and ip)"
} else {
try {

start_server {tags {"nickv repl external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mport [srv 0 port]
    set host [dict get $adm_net host]

    test {Nic-KV access: the replicas' password from another address replicates, and runs no admin command} {
        set nk [nickv_start $mport --requirepass $adm_replpw --bind 127.0.0.1 $host]
        # A replica in the namespace, pointed at Nic-KV with the replicas'
        # password (Nic-KV proxies its full sync, then streams to it).
        set rdir [file normalize [tmpdir adm-replica]]
        set rport 6390
        set rpid [exec ip netns exec [dict get $adm_net ns] src/redis-server --port $rport \
                      --bind 127.0.0.1 [dict get $adm_net peer] --protected-mode no \
                      --save "" --appendonly no --dir $rdir --logfile $rdir/replica.log \
                      --enable-debug-command local --masterauth $adm_replpw \
                      --replicaof $host [dict get $nk port] >>& $rdir/replica.out &]
        try {
            for {set i 0} {$i < 100} {incr i} { $master set k$i v$i }
            wait_for_condition 100 100 {
                [string match "*master_link_status:up*" \
                     [adm_ns_cli $adm_net -p $rport info replication]]
            } else {
                fail "the remote replica does not sync through Nic-KV: [exec tail -n 10 $rdir/replica.log]"
            }
            nickv_wait_replicas $nk 1
            # It is streamed to at the namespace's address: not loopback.
            assert_match "*replica0:*ip=[dict get $adm_net peer],*" [nickv_cmd $nk info replicas]

            # Discovery and replication commands are served to it...
            assert_equal PONG [adm_remote $adm_net $nk -a $adm_replpw ping]
            assert_match "*nickv_version:*" [adm_remote $adm_net $nk -a $adm_replpw info server]
            assert_match "nickv*" [adm_remote $adm_net $nk -a $adm_replpw role]
            assert_equal "127.0.0.1\n$mport" \
                [adm_remote $adm_net $nk -a $adm_replpw sentinel get-master-addr-by-name mymaster]
            assert_equal OK [adm_remote $adm_net $nk -a $adm_replpw replconf listening-port 1]
            # ... admin commands are not, and change nothing.
            assert_equal [adm_noperm_local config] \
                [adm_remote $adm_net $nk -a $adm_replpw config set loglevel debug]
            assert_equal [adm_noperm_local config] \
                [adm_remote $adm_net $nk -a $adm_replpw config set fence-command {touch /tmp/pwned}]
            assert_equal [adm_noperm_local config] \
                [adm_remote $adm_net $nk -a $adm_replpw config get requirepass]
            assert_equal [adm_noperm_local config] \
                [adm_remote $adm_net $nk -a $adm_replpw config resetstat]
            assert_equal [adm_noperm_local failover] [adm_remote $adm_net $nk -a $adm_replpw failover]
            assert_equal [adm_noperm_local shutdown] [adm_remote $adm_net $nk -a $adm_replpw shutdown]
            assert_equal [adm_noperm_local shutdown] [adm_remote $adm_net $nk -a $adm_replpw SHUTDOWN nosave]
            assert_stays 0.3 {[adm_alive $nk]} "Nic-KV shut down for a user without the right"
            assert_equal {loglevel notice} [nickv_cmd $nk config get loglevel]
            assert_equal {fence-command {}} [nickv_cmd $nk config get fence-command]
            # Without the password, not even that.
            assert_match "NOAUTH*" [adm_remote $adm_net $nk ping]

            # The stream still flows to the remote replica, the data equal.
            for {set i 0} {$i < 100} {incr i} { $master incr counter }
            wait_for_condition 100 100 {
                [adm_ns_cli $adm_net -p $rport debug digest] eq [$master debug digest]
            } else {
                fail "the remote replica's data differs: [adm_ns_cli $adm_net -p $rport info replication]"
            }
            assert_equal 100 [adm_ns_cli $adm_net -p $rport -n 9 get counter]
            assert_equal 1 [nickv_info $nk connected_replicas]
        } finally {
            catch {exec kill -9 $rpid}
        }
        nickv_stop $nk
    }

    test {Nic-KV access: adminpass grants admin commands from another address, the replicas' password still does not} {
        set nk [nickv_start $mport --requirepass $adm_replpw --adminpass $adm_adminpw \
                    --bind 127.0.0.1 $host]
        assert_equal [adm_noperm_pass config] \
            [adm_remote $adm_net $nk -a $adm_replpw config set loglevel debug]
        assert_equal [adm_noperm_pass shutdown] [adm_remote $adm_net $nk -a $adm_replpw shutdown]
        # From loopback too, once adminpass is set.
        assert_equal "[adm_noperm_pass failover]" [adm_local $nk $adm_replpw failover]
        # SENTINEL's subcommands that change something are admin ones too.
        foreach sub {failover set reset} {
            assert_equal "[adm_noperm_pass sentinel|$sub]" \
                [adm_local $nk $adm_replpw sentinel $sub mymaster down-after-milliseconds 700]
        }
        assert_match "*mymaster*" [adm_local $nk $adm_replpw sentinel masters]
        # AUTH <adminpass> and AUTH admin <adminpass>.
        assert_equal OK [adm_remote $adm_net $nk -a $adm_adminpw config set loglevel verbose]
        assert_equal "loglevel\nverbose" \
            [adm_remote $adm_net $nk --user admin --pass $adm_adminpw config get loglevel]
        # The admin may do what a replica may.
        assert_equal PONG [adm_remote $adm_net $nk -a $adm_adminpw ping]
        # A wrong admin user or password is a failed AUTH.
        assert_match "*WRONGPASS*" [adm_remote $adm_net $nk --user admin --pass $adm_replpw ping]
        # The admin's password cannot become the replicas'.
        assert_equal "ERR CONFIG SET failed (possibly related to argument 'requirepass') - adminpass must differ from the replicas' password (requirepass, else masterauth without masteruser)" \
            [adm_remote $adm_net $nk -a $adm_adminpw config set requirepass $adm_adminpw]
        assert_equal "requirepass\n$adm_replpw" \
            [adm_remote $adm_net $nk -a $adm_adminpw config get requirepass]
        # SHUTDOWN by the admin.
        assert_equal OK [adm_remote $adm_net $nk -a $adm_adminpw shutdown]
        wait_for_condition 50 100 {
            ![adm_alive $nk]
        } else {
            fail "SHUTDOWN by the admin did not stop Nic-KV"
        }
        nickv_assert_no_bug $nk
    }

    test {Nic-KV access: with no password at all (protected-mode no), a remote client runs no admin command} {
        set nk [nickv_start $mport --protected-mode no --bind 127.0.0.1 $host]
        assert_equal PONG [adm_remote $adm_net $nk ping]
        assert_equal [adm_noperm_local config] [adm_remote $adm_net $nk config set loglevel debug]
        assert_equal [adm_noperm_local shutdown] [adm_remote $adm_net $nk shutdown]
        assert_equal {loglevel notice} [nickv_cmd $nk config get loglevel]
        nickv_stop $nk
    }

    test {Nic-KV access: enable-protected-configs local lets only a loopback admin set fence-command} {
        set nk [nickv_start $mport --requirepass $adm_replpw --adminpass $adm_adminpw \
                    --enable-protected-configs local --bind 127.0.0.1 $host]
        assert_equal [adm_protected_err fence-command] \
            [adm_remote $adm_net $nk -a $adm_adminpw config set fence-command /bin/true]
        assert_equal {fence-command {}} [nickv_cmd $nk config get fence-command]
        assert_equal OK [adm_local $nk $adm_adminpw config set fence-command /bin/true]
        assert_equal {fence-command /bin/true} [nickv_cmd $nk config get fence-command]
        nickv_stop $nk
    }
}

} finally {
    adm_netns_down $adm_net
}
}

# ---------------------------------------------------------- from loopback ---

start_server {tags {"nickv external:skip"}} {
    set mport [srv 0 port]

    test {Nic-KV access: CONFIG SET fence-command is refused without enable-protected-configs} {
        set nk [nickv_start $mport --requirepass $adm_replpw]
        assert_equal [adm_protected_err fence-command] \
            [adm_local $nk $adm_replpw config set fence-command {touch /tmp/pwned}]
        # All or nothing: the other option is not set either.
        assert_equal [adm_protected_err fence-command] \
            [adm_local $nk $adm_replpw config set loglevel debug fence-command /bin/true]
        assert_equal {fence-command {}} [adm_local $nk $adm_replpw config get fence-command]
        assert_equal {loglevel notice} [adm_local $nk $adm_replpw config get loglevel]
        # The start-up switch itself, and the file options, stay immutable.
        assert_equal "ERR CONFIG SET failed (possibly related to argument 'enable-protected-configs') - can't set immutable config" \
            [adm_local $nk $adm_replpw config set enable-protected-configs yes]
        assert_equal "ERR CONFIG SET failed (possibly related to argument 'state-file') - can't set immutable config" \
            [adm_local $nk $adm_replpw config set state-file /tmp/x]
        nickv_stop $nk
    }

    test {Nic-KV access: with enable-protected-configs yes an admin sets fence-command} {
        set nk [nickv_start $mport --requirepass $adm_replpw --enable-protected-configs yes]
        assert_equal {enable-protected-configs yes} \
            [adm_local $nk $adm_replpw config get enable-protected-configs]
        assert_equal OK [adm_local $nk $adm_replpw config set fence-command /bin/true]
        assert_equal {fence-command /bin/true} [adm_local $nk $adm_replpw config get fence-command]
        nickv_stop $nk
    }

    test {Nic-KV access: with no adminpass a loopback client runs admin commands (protected mode's model)} {
        set nk [nickv_start $mport --requirepass $adm_replpw]
        # The password first, as for any command.
        assert_match "NOAUTH*" [adm_local $nk {} config get loglevel]
        assert_equal OK [adm_local $nk $adm_replpw config set loglevel verbose]
        assert_equal OK [adm_local $nk $adm_replpw config resetstat]
        # FAILOVER is served (it has no replica to promote here).
        assert_match "ERR FAILOVER: *" [adm_local $nk $adm_replpw failover]
        assert_equal OK [adm_local $nk $adm_replpw shutdown]
        wait_for_condition 50 100 {
            ![adm_alive $nk]
        } else {
            fail "SHUTDOWN from loopback did not stop Nic-KV"
        }
        nickv_assert_no_bug $nk
    }

    test {Nic-KV access: adminpass equal to the replicas' password is refused at start} {
        set dir [tmpdir adm-same]
        catch {exec timeout 10 [nickv_binary] --port [find_available_port [expr {$::baseport + 250}] 200] \
                   --master-port $mport --masterauth same --adminpass same \
                   --state-file $dir/st --logfile $dir/log} out
        assert_equal "nic-kv: adminpass must differ from the replicas' password (requirepass, else masterauth without masteruser)" $out
    }
}
