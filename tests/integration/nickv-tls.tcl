# TLS on every Nic-KV connection (NIC-KV.md, "TLS"): a master and two
# replicas that speak TLS only (port 0, tls-port, client certificates
# required, tls-replication yes), and a Nic-KV that does too (port 0,
# tls-port, tls-replication yes): the replicas stream through it, a kill -9
# of the master under a WAIT writer fails over with nothing acknowledged
# lost, and a process at a member's address without a certificate the CA
# signed is sent nothing (it used to get AUTH <nickv-user> <password> in
# clear: issue 30). The servers are started here, not by the harness,
# whose clients speak plain TCP; commands go through redis-cli --tls.

source tests/skv/helpers.tcl

# A CA, a certificate it signs (every node's, Nic-KV's and the clients'),
# and a self-signed one (a stranger's), in dir.
proc tls_certs {dir} {
    set q {2>/dev/null}
    exec sh -c "cd '$dir' &&
        openssl genrsa -out ca.key 2048 $q &&
        openssl req -x509 -new -nodes -key ca.key -sha256 -days 30 -subj '/CN=SKV test CA' -out ca.crt $q &&
        openssl genrsa -out node.key 2048 $q &&
        openssl req -new -key node.key -subj '/CN=skv-node' -out node.csr $q &&
        openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -out node.crt $q &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.crt -subj /CN=rogue -days 1 $q"
}

set ::nkt(dir) [file normalize [tmpdir nickv-tls]]
tls_certs $::nkt(dir)
set ::nkt(files) [list --tls-cert-file $::nkt(dir)/node.crt --tls-key-file $::nkt(dir)/node.key \
                    --tls-ca-cert-file $::nkt(dir)/ca.crt --tls-auth-clients yes --tls-replication yes]
set ::nkt(pids) {}

# redis-cli over TLS to port (with the node certificate), as user:pass.
proc tls_cli {port pass args} {
    
    catch {exec src/redis-cli --tls --cert $::nkt(dir)/node.crt --key $::nkt(dir)/node.key \
               --cacert $::nkt(dir)/ca.crt --no-auth-warning -p $port -a $pass {*}$args} r
    return $r
}

# A TLS-only SKV node on port (replicaof: "" or a port).
proc tls_node {port replicaof} {
    
    set dir $::nkt(dir)/node-$port
    file mkdir $dir
    # A file: exec would take a password's ">" for a redirection.
    set f [open $dir/redis.conf w]
    puts $f "port 0\ntls-port $port\nsave \"\"\ndir $dir\nlogfile $dir/log\nenable-debug-command yes"
    foreach {k v} $::nkt(files) { puts $f "[string range $k 2 end] $v" }
    puts $f "nickv-lease yes\nnickv-user nickv\nrequirepass admin-secret"
    puts $f "masteruser replica\nmasterauth replica-secret"
    puts $f "user nickv on >nickv-secret +psync +replconf +ping +auth +info +replicaof +config|rewrite +client|kill +cluster|nodes"
    puts $f "user replica on >replica-secret +psync +replconf +ping"
    if {$replicaof ne ""} { puts $f "replicaof 127.0.0.1 $replicaof" }
    close $f
    lappend ::nkt(pids) [exec src/redis-server $dir/redis.conf &]
    wait_for_condition 100 50 {
        [tls_cli $port admin-secret ping] eq {PONG} || [string match {*MASTERDOWN*} [tls_cli $port admin-secret ping]]
    } else {
        fail "the TLS node on $port did not start: [exec tail -n 5 $dir/log]"
    }
    return [lindex $::nkt(pids) end]
}

set ::nkt(ports) {}
foreach _ {0 1 2} { lappend ::nkt(ports) [find_available_port [expr {$::baseport + 600}] 100] }
lassign $::nkt(ports) mport r1port r2port

set code [catch {
    set mpid [tls_node $mport ""]
    tls_node $r1port $mport
    tls_node $r2port $mport
    set nkport [find_available_port [expr {$::baseport + 600}] 100]
    set nklog $::nkt(dir)/nickv.log
    set nkpid [exec [nickv_binary] --port 0 --tls-port $nkport {*}$::nkt(files) --master-port $mport \
                   --masteruser nickv --masterauth nickv-secret --requirepass replica-secret \
                   --replica-user replica --node 127.0.0.1:$mport --node 127.0.0.1:$r1port \
                   --node 127.0.0.1:$r2port --failover yes --min-slaves 1 --state-file $::nkt(dir)/nickv.state \
                   --logfile $nklog >>& $::nkt(dir)/nickv.out &]
    lappend ::nkt(pids) $nkpid
    lappend ::nickv_pids $nkpid

    test {TLS: master, replicas and Nic-KV TLS-only, client certificates required: the replicas stream through Nic-KV} {
        wait_for_condition 100 100 {
            [string match "*nickv_replicas:2*" [tls_cli $mport admin-secret info nickv]] &&
            [string match "*nickv_lease:held*" [tls_cli $mport admin-secret info nickv]]
        } else {
            fail "no replica behind Nic-KV over TLS: [tls_cli $mport admin-secret info nickv]\n[exec tail -n 20 $nklog]"
        }
        # The master's watch thread speaks TLS too (tls-replication yes).
        wait_for_condition 100 50 {
            [string match "*watch:connected*" [tls_cli $nkport replica-secret info failover]]
        } else {
            fail "the watch is not connected: [tls_cli $nkport replica-secret info failover]"
        }
        set info [tls_cli $nkport replica-secret info all]
        assert_match "*tls_port:$nkport*" $info
        assert_match "*master_link_transport:tls*" $info
        assert_match "*replica0:*transport=tls*" $info
        assert_match "*replica1:*transport=tls*" $info
        assert_equal OK [tls_cli $mport admin-secret set hello tls]
        assert_equal 2 [tls_cli $mport admin-secret wait 2 2000]
        # A client with no certificate is refused at the handshake.
        catch {exec src/redis-cli --tls --cacert $::nkt(dir)/ca.crt -p $nkport -a replica-secret \
                   --no-auth-warning ping} e
        assert_no_match {PONG} $e
    }

    test {TLS: kill -9 of the master under a WAIT writer: failed over, nothing acknowledged lost} {
        # SET k<i> then WAIT 1 200, two thousand times, from one redis-cli;
        # the master is killed while it runs.
        set cmds $::nkt(dir)/cmds
        set f [open $cmds w]
        for {set i 0} {$i < 2000} {incr i} { puts $f "SET k$i v$i\nWAIT 1 200" }
        close $f
        set out $::nkt(dir)/writer.out
        set wpid [exec src/redis-cli --tls --cert $::nkt(dir)/node.crt --key $::nkt(dir)/node.key \
                      --cacert $::nkt(dir)/ca.crt --no-auth-warning -p $mport -a admin-secret < $cmds > $out 2>@1 &]
        wait_for_condition 100 20 {
            [file size $out] > 2000
        } else {
            fail "the writer wrote nothing: [exec cat $out]"
        }
        exec kill -9 $mpid
        catch {exec kill $wpid}
        wait_for_condition 100 100 {
            [lindex [tls_cli $nkport replica-secret sentinel get-master-addr-by-name mymaster] 1] != $mport
        } else {
            fail "no failover: [tls_cli $nkport replica-secret info failover]"
        }
        set new [lindex [tls_cli $nkport replica-secret sentinel get-master-addr-by-name mymaster] 1]
        assert {$new == $r1port || $new == $r2port}
        # The writer's replies, in pairs: OK then the WAIT's count.
        set lines [split [string trim [exec cat $out]] "\n"]
        set acked {}
        for {set i 0} {$i + 1 < [llength $lines]} {incr i 2} {
            if {[lindex $lines $i] eq {OK} && [string is integer -strict [lindex $lines [expr {$i + 1}]]] &&
                [lindex $lines [expr {$i + 1}]] >= 1} {
                lappend acked [expr {$i / 2}]
            } else break
        }
        assert {[llength $acked] >= 10}
        wait_for_condition 100 50 {
            [tls_cli $new admin-secret get k0] eq {v0}
        } else {
            fail "the new master serves nothing: [tls_cli $new admin-secret get k0]"
        }
        set lost 0
        foreach i $acked {
            if {[tls_cli $new admin-secret get k$i] ne "v$i"} { incr lost }
        }
        assert_equal 0 $lost
        assert_equal OK [tls_cli $new admin-secret set after-failover 1]
    }

    test {TLS: a process at a member's address without a certificate the CA signed is sent nothing} {
        # The dead master's address is a member, and the old master is to be
        # repointed: Nic-KV connects there again and again. A stranger with
        # a self-signed certificate listens there and prints what it reads.
        set rout $::nkt(dir)/rogue.out
        set rpid [exec openssl s_server -accept $mport -cert $::nkt(dir)/rogue.crt -key $::nkt(dir)/rogue.key \
                      -quiet > $rout 2>@1 &]
        lappend ::nkt(pids) $rpid
        wait_for_condition 100 100 {
            ![catch {exec grep -q "127.0.0.1:$mport: TLS handshake: .*nothing is sent to it" $nklog}]
        } else {
            fail "Nic-KV did not try the stranger: [exec tail -n 10 $nklog]"
        }
        set status [catch {
            assert_stays 0.5 {![regexp {AUTH|nickv-secret} [exec cat $rout]]} "Nic-KV sent the stranger its password"
        } e]
        exec kill $rpid
        if {$status} { error $e $::errorInfo }
        set seen [exec cat $rout]
        assert_no_match "*AUTH*" $seen
        assert_no_match "*nickv-secret*" $seen
        assert_no_match "*REPLICAOF*" $seen
        assert_match "*unknown ca*" $seen
    }
} e]
foreach pid $::nkt(pids) { catch {exec kill -9 $pid} }
if {$code} { error $e $::errorInfo }
