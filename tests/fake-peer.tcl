# fake-peer.tcl -- stand-in peers for tests that need one that misbehaves
# in a precise way. Each runs as its own process:
#
#   tclsh tests/fake-peer.tcl nickv <master-port> <listen-port> bounce|hang|stall [<user> <password>]
#   tclsh tests/fake-peer.tcl master <port> <nickv-port>
#   tclsh tests/fake-peer.tcl replica <master-port> <listen-port> <claim> <priority> <rotate> [<password>]
#   tclsh tests/fake-peer.tcl impostor <master-port> <user> <password> <instance> <key> <ms>
#   tclsh tests/fake-peer.tcl acker <master-port> <password> <announce-ip> <announce-port>
#   tclsh tests/fake-peer.tcl psyncer <port> <hello-reply> <psync-reply> [<lease-reply> <info-extra>]
#
# nickv: a Nic-KV daemon. It joins the master as a daemon would (REPLCONF
# nickv hello, PSYNC at the master's offset), reads and drops the stream,
# reports a backlog covering every offset every 200 ms (the heartbeat), and
# listens on <listen-port>: every replica that comes there gets +OK to its
# handshake and "-NICKV cannot serve ..." to its PSYNC, as a real Nic-KV
# says when its backlog does not hold the offset. With hang: once the
# stream carries the key "hang-now", it acknowledges what it read (REPLCONF
# ACK, as the daemon does) and then sends nothing more, its connection
# open: a daemon that hung right after the stream reached it. With stall:
# its heartbeats go on, but its ACK stays where it joined (a daemon whose
# link to the master is paused).
#
# master: a master that redirects every replica ("+NICKV 127.0.0.1
# <nickv-port> 0" to its PSYNC) to a "Nic-KV" that is not there: on
# <nickv-port> it only accepts, prints "nickv-port: connection" for each
# connection and closes it, so that a test sees whether a replica followed.
#
# replica: a hostile replica. It PSYNCs from the master (AUTH <password>
# first, if given) as a plain replica, announcing <listen-port>, reads and
# drops the stream, and on <listen-port> answers PING, AUTH and anything
# else with +OK/+PONG, and INFO with the master's real replication id, a
# run id of its own, slave_repl_offset:<claim> (any text: a number past
# the stream's end, or one that overflows) and slave_priority:<priority>: a replica that says it holds
# more than anybody, to be promoted. What it is sent on <listen-port> is
# printed ("request: ..."), so that a test sees whether Nic-KV tried to
# promote it (REPLICAOF NO ONE). With <rotate> 1 its run id changes when
# its master is gone: another process at the replica's address. <claim>
# "master+N": N bytes past the master's offset when it synced (plausible).

# acker: a replica that lies about where it is and what it holds. It
# PSYNCs from the master (AUTH <password>), announcing <announce-ip> and
# <announce-port> (REPLCONF ip-address, listening-port: a member's), reads
# and drops the stream, and every 100 ms acknowledges an offset far past
# anything written. It prints "acker: replicating" once in.
#
# psyncer: a master whose answers to Nic-KV are given: <hello-reply> to
# REPLCONF nickv hello, <psync-reply> to PSYNC, <lease-reply> (if given)
# to REPLCONF nickv lease; +PONG to PING, to INFO a master's replication
# section (and <info-extra>, lines joined by "|"), +OK to anything else.
# It prints "psync: <n>" for each PSYNC it answered, "closed: <n>" when
# Nic-KV closes a connection that got one, and "info: <n>" for each INFO.
#
# impostor: a client that holds the nickv-user's password and Nic-KV's
# public instance id (its INFO's run_id), but not its key. Every 100 ms it
# closes the nickv-user's other connections (CLIENT KILL USER <user>
# SKIPME yes: Nic-KV's probe and link) and sends REPLCONF nickv "lease
# <t> <ms> <instance> <key>", t the master's clock from its last answer;
# each answer is printed ("lease-reply: ..."). It runs until killed.

set role [lindex $argv 0]

proc resp {args} {
    set out "*[llength $args]\r\n"
    foreach a $args { append out "\$[string length $a]\r\n$a\r\n" }
    return $out
}

proc send_cmd {fd args} {
    puts -nonewline $fd [resp {*}$args]
    flush $fd
}

proc read_line {fd} {
    fconfigure $fd -blocking 1
    set line [string trimright [gets $fd] "\r"]
    fconfigure $fd -blocking 0
    return $line
}

# A replica's handshake: +OK to each command (several may come in one read:
# a replica pipelines AUTH and its REPLCONFs), $psync_reply to its PSYNC,
# after which the connection is closed.
proc replica_readable {fd psync_reply} {
    if {[catch {read $fd} data] || [eof $fd]} { catch {close $fd}; return }
    if {$data eq ""} return
    set cmds [regexp -all {(?:^|\n)\*[0-9]+\r\n} $data]
    # The PSYNC command (not "capa psync2").
    set psync [regexp -nocase {\$5\r\nPSYNC\r\n} $data]
    for {set i [expr {$psync ? 1 : 0}]} {$i < $cmds} {incr i} {
        puts -nonewline $fd "+OK\r\n"
    }
    if {$psync} {
        puts -nonewline $fd "$psync_reply\r\n"
        flush $fd
        close $fd
        return
    }
    flush $fd
}

proc serve_replicas {port psync_reply} {
    socket -server [list accept_replica $psync_reply] -myaddr 127.0.0.1 $port
}

proc accept_replica {psync_reply fd addr port} {
    fconfigure $fd -translation binary -buffering none -blocking 0
    fileevent $fd readable [list replica_readable $fd $psync_reply]
}

# ------------------------------------------------------------ master ---
if {$role eq "master"} {
    lassign $argv - port nkport
    proc accept_nickv {fd addr port} {
        puts "nickv-port: connection"
        flush stdout
        close $fd
    }
    serve_replicas $port "+NICKV 127.0.0.1 $nkport 0"
    socket -server accept_nickv -myaddr 127.0.0.1 $nkport
    puts "fake-master: listening"
    flush stdout
    vwait forever
}

# ----------------------------------------------------------- replica ---
if {$role eq "replica"} {
    lassign $argv - mport lport claim priority rotate password
    set m [socket 127.0.0.1 $mport]
    fconfigure $m -translation binary -buffering none
    if {$password ne ""} {
        send_cmd $m AUTH $password
        read_line $m
    }
    send_cmd $m REPLCONF listening-port $lport
    read_line $m
    send_cmd $m REPLCONF capa eof capa psync2
    read_line $m
    send_cmd $m PSYNC ? -1
    # +FULLRESYNC <replid> <offset>, then the RDB: dropped with the stream.
    set full [read_line $m]
    if {![regexp {^\+FULLRESYNC ([0-9a-f]{40}) ([0-9]+)} $full -> replid offset]} {
        puts stderr "fake-replica: the master refused PSYNC: $full"
        exit 1
    }
    set runid [string repeat f 40]
    if {[regexp {^master\+([0-9]+)$} $claim -> ahead]} { set claim [expr {$offset + $ahead}] }
    # The master gone, it goes on answering on <listen-port>: a candidate.
    proc drain_master {fd} {
        global rotate runid
        if {[catch {read $fd} data] || [eof $fd]} {
            catch {close $fd}
            if {$rotate} { set runid [string repeat e 40] }
        }
    }
    fileevent $m readable [list drain_master $m]
    # Our ACKs keep the master's view of us fresh.
    proc ack {} {
        global m offset
        catch {send_cmd $m REPLCONF ACK $offset}
        after 500 ack
    }
    ack
    proc info_reply {} {
        global replid claim runid priority
        set body "# Server\r\nrun_id:$runid\r\n# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\n"
        append body "master_port:1\r\nmaster_link_status:up\r\nslave_repl_offset:$claim\r\n"
        append body "slave_priority:$priority\r\nmaster_replid:$replid\r\nmaster_replid2:[string repeat 0 40]\r\n"
        append body "master_repl_offset:$claim\r\n# Nic-KV\r\nnickv_lease:expired\r\n"
        return "\$[string length $body]\r\n$body\r\n"
    }
    proc fake_cmd {fd} {
        if {[catch {read $fd} data] || [eof $fd]} { catch {close $fd}; return }
        # Multibulk requests: the first bulk names the command. (Printed
        # with its arguments: the request's bulks, one line.)
        puts "request: [regsub -all {\r\n[*$][0-9]+\r\n|\r\n} $data { }]"
        flush stdout
        foreach {- name} [regexp -all -inline {\*[0-9]+\r\n\$[0-9]+\r\n([A-Za-z]+)\r\n} $data] {
            set name [string toupper $name]
            switch -- $name {
                PING { puts -nonewline $fd "+PONG\r\n" }
                INFO { puts -nonewline $fd [info_reply] }
                default { puts -nonewline $fd "+OK\r\n" }
            }
        }
        flush $fd
    }
    proc accept_cmd {fd addr port} {
        fconfigure $fd -translation binary -buffering none -blocking 0
        fileevent $fd readable [list fake_cmd $fd]
    }
    socket -server accept_cmd -myaddr 127.0.0.1 $lport
    puts "fake-replica: replicating, claiming offset $claim"
    flush stdout
    vwait forever
}

# ------------------------------------------------------------- acker ---
if {$role eq "acker"} {
    lassign $argv - mport password aip aport
    set m [socket 127.0.0.1 $mport]
    fconfigure $m -translation binary -buffering none
    send_cmd $m AUTH $password
    read_line $m
    send_cmd $m REPLCONF listening-port $aport
    read_line $m
    send_cmd $m REPLCONF ip-address $aip
    read_line $m
    send_cmd $m REPLCONF capa eof capa psync2
    read_line $m
    send_cmd $m PSYNC ? -1
    set full [read_line $m]
    if {![string match "+FULLRESYNC*" $full]} {
        puts stderr "acker: the master refused PSYNC: $full"
        exit 1
    }
    proc drain_acker {fd} {
        if {[catch {read $fd} data] || [eof $fd]} { exit 0 }
    }
    fileevent $m readable [list drain_acker $m]
    proc ack {} {
        global m
        catch {send_cmd $m REPLCONF ACK 999999999999}
        after 100 ack
    }
    ack
    puts "acker: replicating"
    flush stdout
    vwait forever
}

# ---------------------------------------------------------- impostor ---
if {$role eq "impostor"} {
    lassign $argv - mport user password instance key ms
    set m [socket 127.0.0.1 $mport]
    fconfigure $m -translation binary -buffering none
    send_cmd $m AUTH $user $password
    puts "impostor: auth [read_line $m]"
    flush stdout
    set t 0
    proc round {} {
        global m user instance key ms t
        send_cmd $m CLIENT KILL USER $user SKIPME yes
        read_line $m
        send_cmd $m REPLCONF nickv "lease $t [expr {$t ? $ms : 0}] $instance $key"
        set reply [read_line $m]
        regexp {^\+LEASE ([0-9]+) } $reply -> t
        puts "lease-reply: $reply"
        flush stdout
        after 100 round
    }
    round
    vwait forever
}

# ----------------------------------------------------------- psyncer ---
if {$role eq "psyncer"} {
    lassign $argv - port hello_reply psync_reply lease_reply info_extra
    set psyncs 0
    set infos 0
    # Whole commands off the connection's buffer, each answered.
    proc psyncer_commands {fd} {
        upvar #0 buf($fd) buf
        while {[regexp {^\*([0-9]+)\r\n} $buf all n]} {
            set at [string length $all]
            set words {}
            for {set i 0} {$i < $n} {incr i} {
                if {![regexp {^\$([0-9]+)\r\n} [string range $buf $at end] hdr len]} return
                set start [expr {$at + [string length $hdr]}]
                if {[string length $buf] < $start + $len + 2} return
                lappend words [string range $buf $start [expr {$start + $len - 1}]]
                set at [expr {$start + $len + 2}]
            }
            set buf [string range $buf $at end]
            psyncer_reply $fd $words
        }
    }
    proc psyncer_reply {fd words} {
        global hello_reply psync_reply lease_reply info_extra psyncs
        set cmd [string tolower [lindex $words 0]]
        set sub [string tolower [lindex [split [lindex $words 2]] 0]]
        if {$cmd eq "replconf" && [string tolower [lindex $words 1]] eq "nickv" && $sub eq "hello"} {
            puts -nonewline $fd "$hello_reply\r\n"
        } elseif {$cmd eq "replconf" && [string tolower [lindex $words 1]] eq "nickv" && $sub eq "lease" &&
                  $lease_reply ne ""} {
            puts -nonewline $fd "$lease_reply\r\n"
        } elseif {$cmd eq "psync"} {
            puts -nonewline $fd "$psync_reply\r\n"
            set ::psynced($fd) 1
            incr psyncs
            puts "psync: $psyncs"
            flush stdout
        } elseif {$cmd eq "ping"} {
            puts -nonewline $fd "+PONG\r\n"
        } elseif {$cmd eq "info"} {
            set info "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
            append info "master_replid:[string repeat a 40]\r\nmaster_repl_offset:0\r\n"
            foreach l [split $info_extra |] { if {$l ne ""} { append info "$l\r\n" } }
            puts -nonewline $fd "\$[string length $info]\r\n$info\r\n"
            incr ::infos
            puts "info: $::infos"
            flush stdout
        } else {
            puts -nonewline $fd "+OK\r\n"
        }
        flush $fd
    }
    proc psyncer_readable {fd} {
        if {[catch {read $fd} data] || [eof $fd]} {
            if {[info exists ::psynced($fd)]} {
                puts "closed: $::psyncs"
                flush stdout
            }
            catch {close $fd}
            return
        }
        append ::buf($fd) $data
        psyncer_commands $fd
    }
    proc psyncer_accept {fd addr port} {
        fconfigure $fd -translation binary -buffering none -blocking 0
        set ::buf($fd) ""
        fileevent $fd readable [list psyncer_readable $fd]
    }
    socket -server psyncer_accept -myaddr 127.0.0.1 $port
    puts "psyncer: listening"
    flush stdout
    vwait forever
}

# ------------------------------------------------------------- nickv ---
lassign $argv - mport lport mode user password
set m [socket 127.0.0.1 $mport]
fconfigure $m -translation binary -buffering none
if {$user ne ""} {
    send_cmd $m AUTH $user $password
    read_line $m
}
send_cmd $m REPLCONF listening-port $lport
read_line $m
send_cmd $m REPLCONF capa eof capa psync2
read_line $m
send_cmd $m REPLCONF nickv "hello 127.0.0.1 $lport 0 [string repeat b 40] [string repeat f 40] 0"
set hello [read_line $m]
if {![regexp {^\+([0-9a-f]{40}) ([0-9]+)$} $hello -> replid offset]} {
    puts stderr "fake-nickv: the master refused the hello: $hello"
    exit 1
}
send_cmd $m PSYNC $replid [expr {$offset + 1}]
set cont [read_line $m]
if {![string match "+CONTINUE*" $cont]} {
    puts stderr "fake-nickv: the master refused PSYNC: $cont"
    exit 1
}
set joined $offset
puts "fake-nickv: streaming from the master at offset $offset"
flush stdout

# The stream: read and dropped (counted: our offset).
set hung 0
proc drain {fd} {
    global offset hung mode
    if {[catch {read $fd} data] || [eof $fd]} { exit 0 }
    incr offset [string length $data]
    if {$mode eq "hang" && !$hung && [string first "hang-now" $data] >= 0} {
        send_cmd $fd REPLCONF ACK $offset
        set hung 1
        puts "fake-nickv: hung at offset $offset"
        flush stdout
    }
}
fileevent $m readable [list drain $m]

# The heartbeat: a backlog that holds everything.
proc heartbeat {} {
    global m offset hung mode joined
    if {$hung} return
    send_cmd $m REPLCONF ACK [expr {$mode eq "stall" ? $joined : $offset}]
    send_cmd $m REPLCONF nickv "backlog 1 [expr {$offset + 1000000000}] 100"
    after 200 heartbeat
}
heartbeat

serve_replicas $lport "-NICKV cannot serve this offset (fake Nic-KV): sync with the master"

vwait forever
