# fake-master.tcl -- a stand-in master that redirects every replica to a
# "Nic-KV" that is not there. Run as its own process:
#
#   tclsh tests/fake-master.tcl <port> <nickv-port>
#
# Every replica gets +OK to its handshake and "+NICKV 127.0.0.1
# <nickv-port> 0" to its PSYNC. On <nickv-port> it only accepts, prints
# "nickv-port: connection" for each connection and closes it: a test reads
# that to see whether a replica followed the redirect.

lassign $argv port nkport

proc replica_readable {fd} {
    global nkport
    if {[catch {read $fd} data] || [eof $fd]} { catch {close $fd}; return }
    if {$data eq ""} return
    set cmds [regexp -all {(?:^|\n)\*[0-9]+\r\n} $data]
    set psync [regexp -nocase {\$5\r\nPSYNC\r\n} $data]
    for {set i [expr {$psync ? 1 : 0}]} {$i < $cmds} {incr i} {
        puts -nonewline $fd "+OK\r\n"
    }
    if {$psync} {
        puts -nonewline $fd "+NICKV 127.0.0.1 $nkport 0\r\n"
        flush $fd
        close $fd
        return
    }
    flush $fd
}

proc accept {fd addr port} {
    fconfigure $fd -translation binary -buffering none -blocking 0
    fileevent $fd readable [list replica_readable $fd]
}

proc accept_nickv {fd addr port} {
    puts "nickv-port: connection"
    flush stdout
    close $fd
}

socket -server accept -myaddr 127.0.0.1 $port
socket -server accept_nickv -myaddr 127.0.0.1 $nkport
puts "fake-master: listening"
flush stdout
vwait forever
