# tcp-proxy.tcl -- a TCP relay that a test can cut, for the network faults
# between one process and the others on this host:
#
#   tclsh tests/tcp-proxy.tcl <listen-port> <target-host> <target-port>
#
# Every connection to 127.0.0.1:<listen-port> is relayed, both ways, to
# <target-host>:<target-port>. Stopped (SIGSTOP), it is a silent partition:
# connections are still accepted by the kernel, nothing is answered; killed,
# the port refuses. It prints "ready" once it listens.

lassign $argv lport thost tport

proc relay {from to} {
    if {[catch {set data [read $from]}] || ([eof $from] && $data eq "")} {
        catch {close $from}
        catch {close $to}
        return
    }
    if {[catch {puts -nonewline $to $data; flush $to}]} {
        catch {close $from}
        catch {close $to}
    }
}

proc accept {c addr port} {
    if {[catch {socket $::thost $::tport} up]} {
        close $c
        return
    }
    foreach s [list $c $up] { fconfigure $s -translation binary -blocking 0 -buffering none }
    fileevent $c readable [list relay $c $up]
    fileevent $up readable [list relay $up $c]
}

socket -server accept -myaddr 127.0.0.1 $lport
puts ready
flush stdout
vwait forever
