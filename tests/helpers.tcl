# helpers.tcl -- shared by SKV's own tests (sourced by each test file).
#
# SKV's tests run in upstream's harness from the patched tree (build/redis),
# where run-tests.sh links this directory as tests/skv.

# The SKV repository's top directory.
set ::skv_root [file dirname [file readlink tests/skv]]

# The SKV version compiled in (src/skv_version.h).
proc skv_source_version {} {
    set fd [open $::skv_root/src/skv_version.h]
    set text [read $fd]
    close $fd
    if {![regexp {#define SKV_VERSION "([^"]+)"} $text -> v]} {
        error "no SKV_VERSION in src/skv_version.h"
    }
    return $v
}

# A value from deps/redis/pin (NAME=value lines).
proc skv_pin {name} {
    set fd [open $::skv_root/deps/redis/pin]
    set text [read $fd]
    close $fd
    if {![regexp -line "^$name=\"?(\[^\"\n\]*)\"?$" $text -> v]} {
        error "no $name in deps/redis/pin"
    }
    return $v
}
