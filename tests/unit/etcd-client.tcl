# Nic-KV's etcd client (nic-kv/nickv_etcd.c), through nickv-etcd-check,
# against a real three-member etcd cluster (tests/etcd.tcl): leases, the
# create-once leader key, guarded writes and deletes, and what it does when
# members die: the next endpoint within the call's deadline, and an error
# naming the endpoints when no quorum is left.
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
    exec etcdctl --endpoints=[join [etcd_running_urls] ,] get --print-value-only $key
}

proc etcdctl_lease_ttl {id} {
    set out [exec etcdctl --endpoints=[join [etcd_running_urls] ,] lease timetolive [format %x $id]]
    if {[regexp {remaining\((-?\d+)s\)} $out -> ttl]} { return $ttl }
    return $out
}

tags {"skv etcd external:skip"} {
    if {![etcd_available]} {
        test {etcd client: etcd is installed} {
            fail "etcd and etcdctl are not installed (utils/setup-deps.sh test installs etcd-server, etcd-client)"
        }
    } else {
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
            http://127.0.0.1:2379,127.0.0.1:2380 {etcd: bad endpoint '127.0.0.1:2380' (want etcd://h:p,h:p or http://h:p,http://h:p)}
            https://127.0.0.1:2379 {etcd: bad endpoint 'https://127.0.0.1:2379' (want etcd://h:p,h:p or http://h:p,http://h:p)}
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

    etcd_cluster_stop
    }
}
