# Nic-KV's etcd client (nic-kv/nickv_etcd.c), through nickv-etcd-check,
# against a real three-member etcd cluster (tests/etcd.tcl): leases, the
# create-once leader key, guarded writes and deletes, and what it does when
# members die: the next endpoint within the call's deadline, and an error
# naming the endpoints when no quorum is left. Then the same calls with
# etcd's authentication enabled (a user limited to /skv/, tokens that expire
# after 2 s) and over TLS (a CA made here, client certificates required).
#
# SKV_ETCD_CHECK runs another build of the tool (e.g. one compiled with
# -fsanitize=address,undefined).

source tests/skv/helpers.tcl
source tests/skv/etcd.tcl

set ::etcd_check src/nickv-etcd-check
if {[info exists ::env(SKV_ETCD_CHECK)]} { set ::etcd_check $::env(SKV_ETCD_CHECK) }

# Run the tool: {status output}, output being stdout and stderr together
# (without the line Tcl's exec adds when the status is not 0).
proc ec_exec {args} {
    set status [catch {exec $::etcd_check {*}$args 2>@1} out]
    regsub {\nchild process exited abnormally$} $out {} out
    list $status $out
}

# One call on the cluster: {status output ms}.
proc ec_run {timeout args} {
    set start [clock milliseconds]
    lassign [ec_exec -t $timeout [etcd_cluster_urls] {*}$args] status out
    list $status $out [expr {[clock milliseconds] - $start}]
}

# The first line of a call that must succeed.
proc ec {args} {
    lassign [ec_run 2000 {*}$args] status out
    if {$status != 0} { fail "nickv-etcd-check $args: $out" }
    lindex [split $out "\n"] 0
}

# What etcdctl (not our client) sees of a key: its value, or {} when absent.
proc etcdctl_get {key} {
    etcd_ctl get --print-value-only $key
}

proc etcdctl_lease_ttl {id} {
    set out [etcd_ctl lease timetolive [format %x $id]]
    if {[regexp {remaining\((-?\d+)s\)} $out -> ttl]} { return $ttl }
    return $out
}

# A CA, a server certificate for 127.0.0.1 (its only name), a client
# certificate, and a second CA that signed neither, in dir.
proc ec_make_certs {dir} {
    set ossl {openssl}
    foreach ca {ca other-ca} {
        exec {*}$ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
            -subj /CN=skv-test-$ca -keyout $dir/$ca.key -out $dir/$ca.crt 2>@1
    }
    foreach {name san} {server IP:127.0.0.1 client {}} {
        set ext [expr {$san eq {} ? {} : [list -addext subjectAltName=$san]}]
        exec {*}$ossl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -subj /CN=skv-test-$name {*}$ext -keyout $dir/$name.key -out $dir/$name.csr 2>@1
        exec {*}$ossl x509 -req -in $dir/$name.csr -CA $dir/ca.crt -CAkey $dir/ca.key -CAcreateserial \
            -days 2 -copy_extensions copy -out $dir/$name.crt 2>@1
    }
}

# A call that must fail: {output ms}.
proc ec_fails {args} {
    set start [clock milliseconds]
    lassign [ec_exec {*}$args] status out
    if {$status != 1} { fail "nickv-etcd-check $args: exit status $status, not 1: $out" }
    list $out [expr {[clock milliseconds] - $start}]
}

tags {"skv etcd external:skip"} {
    if {![etcd_available]} {
        test {etcd client: etcd is installed} {
            fail "etcd and etcdctl are not installed (utils/setup-deps.sh test installs etcd-server, etcd-client)"
        }
    } else {
    set ::ec_certs [file normalize [tmpdir etcd-certs]]
    ec_make_certs $::ec_certs

    etcd_cluster_start 3

    test {etcd client: a lease is granted with the TTL etcd gives} {
        lassign [ec grant 5] id granted
        assert {$id > 0}
        assert_equal 5 $granted
        # etcd itself knows the lease, with that TTL.
        set ttl [etcdctl_lease_ttl $id]
        assert {$ttl > 0 && $ttl <= 5}
        # Two grants are two leases.
        lassign [ec grant 5] id2
        assert {$id2 != $id}
    }

    test {etcd client: create wins once, a second caller loses and sees the first value} {
        assert_equal won [ec create /skv/leader alpha 0]
        assert_equal {lost alpha} [ec create /skv/leader beta 0]
        assert_equal alpha [etcdctl_get /skv/leader]
        lassign [ec get /skv/leader] val rev
        assert_equal alpha $val
        assert {$rev > 0}
        assert_equal none [ec get /skv/no-such-key]
    }

    test {etcd client: values that need escaping go through unchanged} {
        set v "a \"quoted\" \\ value/with+base64=chars é"
        assert_equal won [ec create /skv/odd $v 0]
        assert_equal "lost $v" [ec create /skv/odd other 0]
        assert_equal $v [etcdctl_get /skv/odd]
    }

    test {etcd client: a key on a lease stays while keep-alives are sent} {
        lassign [ec grant 1] id
        assert_equal won [ec create /skv/kept x $id]
        set start [clock milliseconds]
        while {[clock milliseconds] - $start < 3000} {
            set ttl [ec keepalive $id]
            assert {$ttl >= 1}
            after 250
        }
        # Three times the TTL later, the key is still there.
        assert_equal x [lindex [ec get /skv/kept] 0]
        assert_equal x [etcdctl_get /skv/kept]
        # Without keep-alives it goes, and the lease reports 0 left.
        wait_for_condition 40 100 {
            [ec get /skv/kept] eq {none}
        } else {
            fail "the key outlived its lease"
        }
        assert_equal 0 [ec keepalive $id]
        assert_equal {} [etcdctl_get /skv/kept]
    }

    test {etcd client: a key on a lease disappears when the lease expires} {
        lassign [ec grant 1] id
        assert_equal won [ec create /skv/leased y $id]
        assert_equal y [lindex [ec get /skv/leased] 0]
        wait_for_condition 40 100 {
            [ec get /skv/leased] eq {none}
        } else {
            fail "the key outlived its lease"
        }
        # It can be created again: the leader key is free.
        assert_equal won [ec create /skv/leased z 0]
    }

    test {etcd client: putif writes only when the guard has the given value} {
        assert_equal won [ec create /skv/epoch 7 0]
        assert_equal refused [ec putif /skv/epoch 6 /skv/record r1]
        assert_equal none [ec get /skv/record]
        assert_equal refused [ec putif /skv/no-guard 7 /skv/record r1]
        assert_equal none [ec get /skv/record]
        assert_equal ok [ec putif /skv/epoch 7 /skv/record r1]
        assert_equal r1 [etcdctl_get /skv/record]
        assert_equal ok [ec putif /skv/epoch 7 /skv/record r2]
        assert_equal r2 [lindex [ec get /skv/record] 0]
    }

    test {etcd client: deleteif deletes only when the value is the given one} {
        assert_equal won [ec create /skv/del mine 0]
        assert_equal refused [ec deleteif /skv/del theirs]
        assert_equal mine [etcdctl_get /skv/del]
        assert_equal ok [ec deleteif /skv/del mine]
        assert_equal none [ec get /skv/del]
        assert_equal refused [ec deleteif /skv/del mine]
    }

    test {etcd client: movelease moves a key to another lease only when its value and lease match} {
        # What a Nic-KV does with its leader key when etcd renewed its lease
        # after its own count ran out (nickv_coord.c, roundLease).
        lassign [ec grant 30] old
        lassign [ec grant 30] new
        assert_equal won [ec create /skv/moved mine $old]
        assert_equal refused [ec movelease /skv/moved theirs $old $new]
        assert_equal refused [ec movelease /skv/moved mine $new $new]
        assert_equal refused [ec movelease /skv/absent mine $old $new]
        assert_equal ok [ec movelease /skv/moved mine $old $new]
        # The old lease revoked: the key stays, on the new one.
        assert_equal ok [ec revoke $old]
        assert_equal mine [lindex [ec get /skv/moved] 0]
        assert_equal ok [ec revoke $new]
        assert_equal none [ec get /skv/moved]
    }

    test {etcd client: a lease's TTL, as granted, and the raft term of the answer} {
        # The standby's reads of the leader's lease (roundKeyExpiring): the
        # term must be there, or no revoke is ever proven.
        lassign [ec grant 30] id
        lassign [ec ttl $id] ttl granted term
        assert_equal 30 $granted
        assert {$ttl >= 28 && $ttl <= 30}
        assert {$term >= 1}
        assert_equal ok [ec revoke $id]
        lassign [ec ttl $id] ttl granted
        assert_equal -1 $ttl
    }

    test {etcd client: revoke deletes the lease's keys at once} {
        lassign [ec grant 30] id
        assert_equal won [ec create /skv/revoked v $id]
        assert_equal ok [ec revoke $id]
        assert_equal none [ec get /skv/revoked]
        assert_equal 0 [ec keepalive $id]
        # A second revoke is etcd's refusal, named.
        lassign [ec_run 2000 revoke $id] status out
        assert_equal 1 $status
        assert_match "etcd 127.0.0.1:*: POST /v3/lease/revoke: HTTP 404: etcdserver: requested lease not found" $out
    }

    test {etcd client: with the first endpoint dead, every call uses the next one in time} {
        set dead 127.0.0.1:[dict get [lindex [dict get $::etcd_cluster members] 0] client]
        etcd_member_kill 0
        wait_for_condition 50 100 {
            [etcd_healthy [etcd_running_urls]]
        } else {
            fail "two members of three are not healthy"
        }
        set calls {
            {grant 5}
            {create /skv/rot one 0}
            {create /skv/rot two 0}
            {get /skv/rot}
            {putif /skv/rot one /skv/rot2 x}
            {deleteif /skv/rot2 x}
        }
        set worst 0
        foreach call $calls {
            lassign [ec_run 1000 {*}$call] status out ms
            if {$status != 0} { fail "$call with $dead dead: $out" }
            assert {![string match "*endpoint $dead*" $out]}
            assert_match "*endpoint 127.0.0.1:*" $out
            if {$ms > $worst} { set worst $ms }
            if {[lindex $call 0] eq {grant}} { set id [lindex $out 0] }
        }
        assert_equal {lost one} [ec create /skv/rot three 0]
        assert {[ec keepalive $id] > 0}
        assert_equal ok [ec revoke $id]
        puts "etcd client: slowest call with the first endpoint dead: $worst ms (timeout 1000 ms)"
        assert {$worst < 1000}
    }

    test {etcd client: with two members dead, a call fails within its deadline, naming the endpoints} {
        set urls [etcd_cluster_urls]
        etcd_member_kill 1
        foreach {timeout call} {1000 {get /skv/rot} 1000 {create /skv/quorum x 0} 500 {grant 5}} {
            lassign [ec_run $timeout {*}$call] status out ms
            puts "etcd client: '$call' without a quorum failed in $ms ms (timeout $timeout ms): $out"
            assert_equal 1 $status
            assert_match "etcd: POST /v3/*: no endpoint answered in * ms (timeout $timeout ms): *127.0.0.1:*: *" $out
            # Each dead member is named with what happened to it.
            foreach i {0 1} {
                set hp 127.0.0.1:[dict get [lindex [dict get $::etcd_cluster members] $i] client]
                assert_match "*$hp: connect: Connection refused*" $out
            }
            assert {$ms < 2 * $timeout}
        }
    }

    test {etcd client: the members come back and the data is there} {
        etcd_member_start 0
        etcd_member_start 1
        wait_for_condition 50 100 {
            [etcd_healthy [etcd_running_urls]]
        } else {
            fail "the cluster did not come back"
        }
        assert_equal one [lindex [ec get /skv/rot] 0]
        assert_equal alpha [lindex [ec get /skv/leader] 0]
    }

    test {etcd client: a malformed endpoint list is refused, saying what is wrong} {
        foreach {urls why} {
            {} {etcd: no endpoints given}
            etcd://127.0.0.1 {etcd: bad endpoint '127.0.0.1' (want host:port)}
            etcd://127.0.0.1:99999 {etcd: bad endpoint '127.0.0.1:99999' (want host:port)}
            etcd://127.0.0.1:2379,,127.0.0.1:2380 {etcd: bad endpoint '' (want host:port)}
            etcd://127.0.0.1:23x9 {etcd: bad endpoint '127.0.0.1:23x9' (want host:port)}
            http://127.0.0.1:2379,127.0.0.1:2380 {etcd: bad endpoint '127.0.0.1:2380' (want etcd://h:p,h:p, etcds://h:p,h:p, http://h:p,http://h:p or https://h:p,https://h:p)}
            http://127.0.0.1:2379,https://127.0.0.1:2380 {etcd: bad endpoint 'https://127.0.0.1:2380' (want etcd://h:p,h:p, etcds://h:p,h:p, http://h:p,http://h:p or https://h:p,https://h:p)}
        } {
            set start [clock milliseconds]
            lassign [ec_exec -t 1000 $urls get /k] status out
            assert_equal 1 $status
            assert_equal $why $out
            assert {[clock milliseconds] - $start < 500}
        }
        # Both forms of a good list work.
        set hps [string range [etcd_cluster_urls] 7 end]
        set http [join [lmap hp [split $hps ,] {string cat http:// $hp}] ,]
        assert_match "one *" [exec $::etcd_check $http get /skv/rot]
    }

    test {etcd client: a plain-HTTP member given as https fails at the handshake, in time} {
        set hp [lindex [split [string range [etcd_cluster_urls] 7 end] ,] 0]
        foreach url [list https://$hp etcds://$hp] {
            lassign [ec_fails -t 1000 --cacert $::ec_certs/ca.crt $url get /skv/rot] out ms
            puts "etcd client: TLS to a plain member failed in $ms ms: $out"
            assert_match "etcd: POST /v3/kv/range: no endpoint answered in * ms (timeout 1000 ms): $hp: TLS handshake: *" $out
            assert {$ms < 2000}
        }
        # TLS files with plain endpoints are a mistake, not ignored.
        lassign [ec_fails --cacert $::ec_certs/ca.crt [etcd_cluster_urls] get /skv/rot] out
        assert_equal {etcd: TLS files given, but the endpoints are not etcds:// or https://} $out
    }

    etcd_cluster_stop

    # ------------------------------ Authentication ------------------------------

    # Tokens expire 2 s after their last use.
    etcd_cluster_start 3 {flags {--auth-token-ttl 2}}
    set ::ec_pw {p@ss "wo\rd" :x}
    etcd_ctl --interactive=false user add root:rootpw
    etcd_ctl role add root
    etcd_ctl user grant-role root root
    etcd_ctl role add skv
    etcd_ctl role grant-permission skv --prefix=true readwrite /skv/
    etcd_ctl --interactive=false user add "nickv:$::ec_pw"
    etcd_ctl user grant-role nickv skv
    etcd_ctl auth enable
    etcd_ctl_flags_add --user root:rootpw

    proc eca {args} {
        lassign [ec_exec -t 2000 --user nickv --password $::ec_pw [etcd_cluster_urls] {*}$args] status out
        if {$status != 0} { fail "nickv-etcd-check --user nickv $args: $out" }
        lindex [split $out "\n"] 0
    }

    test {etcd auth: with the right password every call works} {
        lassign [eca grant 10] id granted
        assert {$id > 0 && $granted == 10}
        assert_equal won [eca create /skv/auth/leader me $id]
        assert_equal {lost me} [eca create /skv/auth/leader you 0]
        assert_equal me [lindex [eca get /skv/auth/leader] 0]
        assert_equal me [etcdctl_get /skv/auth/leader]
        assert_equal won [eca create /skv/auth/epoch 1 0]
        assert_equal ok [eca putif /skv/auth/epoch 1 /skv/auth/record r]
        assert_equal refused [eca putif /skv/auth/epoch 2 /skv/auth/record s]
        assert_equal r [etcdctl_get /skv/auth/record]
        assert_equal ok [eca deleteif /skv/auth/record r]
        assert {[eca keepalive $id] > 0}
        assert_equal ok [eca revoke $id]
        assert_equal none [eca get /skv/auth/leader]
        # The password from the environment instead of the command line.
        set ::env(NICKV_ETCD_PASSWORD) $::ec_pw
        set r [catch {exec $::etcd_check --user nickv [etcd_cluster_urls] get /skv/auth/epoch} out]
        unset ::env(NICKV_ETCD_PASSWORD)
        assert_equal 0 $r
        assert_match "1 *" $out
    }

    test {etcd auth: a wrong password is an error naming the endpoint, at once} {
        lassign [ec_fails -t 2000 --user nickv --password wrong [etcd_cluster_urls] get /skv/auth/epoch] out ms
        puts "etcd auth: wrong password refused in $ms ms: $out"
        assert_match "etcd 127.0.0.1:*: authentication as user 'nickv' failed: HTTP 4*: etcdserver: authentication failed, invalid user ID or password" $out
        assert {$ms < 1000}
        lassign [ec_fails -t 2000 --user nobody --password x [etcd_cluster_urls] grant 5] out
        assert_match "etcd 127.0.0.1:*: authentication as user 'nobody' failed: *authentication failed*" $out
        # The same client calling again at once is told the same, without
        # asking etcd again; a second later it asks again.
        foreach {pause again} {
            100 {HTTP 400: * (not asked again for * ms)}
            1100 {HTTP 400: etcdserver: authentication failed, invalid user ID or password}
        } {
            lassign [ec_fails -t 2000 --user nickv --password wrong --again $pause [etcd_cluster_urls] get /k] out
            set lines [split $out "\n"]
            assert_equal 3 [llength $lines]
            assert_match "*authentication as user 'nickv' failed: HTTP 400: *" [lindex $lines 0]
            assert_match "etcd 127.0.0.1:*: authentication as user 'nickv' failed: $again" [lindex $lines 1]
            assert_equal {authentications 0} [lindex $lines 2]
        }
    }

    test {etcd auth: without credentials, or outside its prefix, a call fails saying why} {
        lassign [ec_fails -t 2000 [etcd_cluster_urls] get /skv/auth/epoch] out
        assert_match "etcd 127.0.0.1:*: POST /v3/kv/range: HTTP 4*: etcdserver: user name is empty (etcd requires authentication: no user and password were given)" $out
        lassign [ec_fails -t 2000 --user nickv --password $::ec_pw [etcd_cluster_urls] create /other x 0] out
        assert_match "etcd 127.0.0.1:*: POST /v3/kv/txn: HTTP 4*: etcdserver: permission denied" $out
    }

    test {etcd auth: an expired token is renewed without the caller noticing} {
        # Used again within its TTL, the token is kept.
        lassign [ec_exec -t 2000 --user nickv --password $::ec_pw --again 500 [etcd_cluster_urls] get /skv/auth/epoch] status out
        assert_equal 0 $status
        assert_match "*\nauthentications 1" $out
        # 3.5 s idle: etcd has dropped it (--auth-token-ttl 2); the second
        # call authenticates again and succeeds.
        foreach call {{get /skv/auth/epoch} {grant 5}} {
            lassign [ec_exec -t 2000 --user nickv --password $::ec_pw --again 3500 [etcd_cluster_urls] {*}$call] status out
            assert_equal 0 $status
            assert_match "*\nauthentications 2" $out
        }
        # etcd 3.4 does not check the token of a keep-alive (nor, then,
        # renew it): the stale token is sent and the keep-alive still works.
        lassign [eca grant 10] id
        lassign [ec_exec -t 2000 --user nickv --password $::ec_pw --again 3500 [etcd_cluster_urls] keepalive $id] status out
        assert_equal 0 $status
        assert_match "1*\nauthentications 1" $out
    }

    etcd_cluster_stop

    # ------------------------ A slow authentication ------------------------

    # etcd checks a password with bcrypt: about 80 ms at its default cost on
    # an idle core of this machine, and several times that on a loaded one,
    # longer than the share of a short call each endpoint gets (Nic-KV's
    # calls: 500 ms over three members). Cost 12 (four times the default)
    # makes that happen on an idle machine too.
    etcd_cluster_start 3 {flags {--bcrypt-cost 12}}
    etcd_ctl role add skv
    etcd_ctl role grant-permission skv --prefix=true readwrite /skv/
    etcd_ctl --interactive=false user add root:rootpw
    etcd_ctl role add root
    etcd_ctl user grant-role root root
    etcd_ctl --interactive=false user add nickv:slowpw
    etcd_ctl user grant-role nickv skv
    etcd_ctl auth enable

    test {etcd auth: an authentication slower than a call gets a deadline of its own} {
        set urls [etcd_cluster_urls]
        # Inside a 300 ms call it cannot finish, however often it is tried.
        for {set i 0} {$i < 3} {incr i} {
            lassign [ec_fails -t 300 --user nickv --password slowpw $urls get /skv/slow] out
            assert_match "*authenticate: no answer in time*" $out
        }
        # Its own deadline, then the same short call.
        set start [clock milliseconds]
        lassign [ec_exec -t 300 --auth-timeout 10000 --user nickv --password slowpw $urls get /skv/slow] status out
        puts "etcd auth: a bcrypt-cost 12 authentication and a call took [expr {[clock milliseconds] - $start}] ms"
        assert_equal 0 $status
        assert_match "none\nendpoint 127.0.0.1:*" $out
    }

    start_server {tags {"nickv"}} {
        test {etcd auth: a Nic-KV leads although etcd takes longer to authenticate than its calls may} {
            set dir [file normalize [tmpdir nickv-slowauth]]
            set nk [nickv_start [srv 0 port] --coordinator [etcd_cluster_urls] --coordinator-user nickv \
                        --coordinator-password slowpw --local-node 127.0.0.1:[srv 0 port] \
                        --master-host 127.0.0.1]
            wait_for_condition 150 100 {
                [nickv_info $nk coordinator_role] eq {leader}
            } else {
                fail "it does not lead: [nickv_cmd $nk info coordinator]"
            }
            nickv_stop $nk
        }
    }

    etcd_cluster_stop

    # ----------------------------------- TLS ------------------------------------

    set c $::ec_certs
    etcd_cluster_start 3 [dict create \
        flags [list --cert-file $c/server.crt --key-file $c/server.key --trusted-ca-file $c/ca.crt --client-cert-auth] \
        etcdctl [list --cacert $c/ca.crt --cert $c/client.crt --key $c/client.key]]
    set ::ec_tls [list --cacert $c/ca.crt --cert $c/client.crt --key $c/client.key]

    test {etcd TLS: with the CA and a client certificate every call works} {
        assert_match etcds://* [etcd_cluster_urls]
        proc ect {args} {
            lassign [ec_exec -t 2000 {*}$::ec_tls [etcd_cluster_urls] {*}$args] status out
            if {$status != 0} { fail "nickv-etcd-check (TLS) $args: $out" }
            lindex [split $out "\n"] 0
        }
        lassign [ect grant 10] id
        assert_equal won [ect create /skv/tls/leader me $id]
        assert_equal {lost me} [ect create /skv/tls/leader you 0]
        assert_equal me [etcdctl_get /skv/tls/leader]
        assert_equal ok [ect putif /skv/tls/leader me /skv/tls/record r]
        assert_equal ok [ect deleteif /skv/tls/record r]
        assert {[ect keepalive $id] > 0}
        assert_equal ok [ect revoke $id]
        assert_equal none [ect get /skv/tls/leader]
        # The https:// form of the list too.
        lassign [ec_exec -t 2000 {*}$::ec_tls [join [etcd_running_urls] ,] get /skv/tls/epoch] status out
        assert_equal 0 $status
        assert_match "none\nendpoint 127.0.0.1:*" $out
    }

    test {etcd TLS: a certificate from another CA, the wrong host, no client certificate: clear failures} {
        set urls [etcd_cluster_urls]
        lassign [ec_fails -t 1000 --cacert $c/other-ca.crt --cert $c/client.crt --key $c/client.key $urls get /k] out ms
        puts "etcd TLS: another CA refused in $ms ms: $out"
        assert_match "*127.0.0.1:*: TLS handshake: certificate verify failed: unable to get local issuer certificate*" $out
        assert {$ms < 1000}
        # The certificate names 127.0.0.1 only.
        set port [dict get [lindex [dict get $::etcd_cluster members] 0] client]
        lassign [ec_fails -t 1000 {*}$::ec_tls etcds://localhost:$port get /k] out
        assert_match "*localhost:$port: TLS handshake: certificate verify failed: hostname mismatch*" $out
        # etcd --client-cert-auth refuses a client without a certificate.
        lassign [ec_fails -t 1000 --cacert $c/ca.crt $urls get /k] out ms
        puts "etcd TLS: no client certificate: $out"
        assert_match "etcd: POST /v3/kv/range: no endpoint answered in * ms (timeout 1000 ms): 127.0.0.1:*: TLS *" $out
        assert {$ms < 2000}
        # Files that do not load are named.
        lassign [ec_fails --cacert $c/no-such.crt $urls get /k] out
        assert_match "etcd: TLS CA file '$c/no-such.crt': *" $out
        lassign [ec_fails --cacert $c/ca.crt --cert $c/client.crt --key $c/server.key $urls get /k] out
        assert_match "etcd: TLS key file '$c/server.key'*" $out
    }

    etcd_cluster_stop
    }
}
