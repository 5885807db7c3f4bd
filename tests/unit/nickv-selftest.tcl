# Checks of Nic-KV's internals that no peer can set up on demand, run by
# nic-kv itself (--selftest-*): each exits 0 when it passed, and says on
# stderr what failed.

source tests/skv/helpers.tcl

start_server {tags {"nickv"}} {
    test {Nic-KV finds the master's GETACK in its stream however the reads cut it} {
        # Answered at once (nic-kv/nickv_upstream.c, streamAsksAck): two
        # reads cut at every point, reads of 1 to 64 bytes. Its tail of the
        # last read was once 4 bytes too short: a GETACK cut at any of 36
        # points went unseen (and the copy wrote past the buffer).
        if {[catch {exec [nickv_binary] --selftest-getack} err]} {
            fail "nic-kv --selftest-getack: $err"
        }
    }
}
