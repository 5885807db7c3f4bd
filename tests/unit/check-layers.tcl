# The layers as code: utils/check-layers.sh passes on the tree as built,
# names a call nic-kv/LAYERS forbids in the exact words it promises when
# one is linked into a part, and an #include of a header it forbids when
# one is added to a part's source, and holds every function to 100 lines.

source tests/skv/helpers.tcl

# Run utils/check-layers.sh with args. Returns {status output}.
proc skv_check_layers {args} {
    set status [catch {exec $::skv_root/utils/check-layers.sh {*}$args 2>@1} out]
    # exec's own words on a non-zero exit are not the script's.
    regsub {\nchild process exited abnormally$} $out {} out
    return [list $status $out]
}

# A C file, in a scratch directory, whose one function runs $lines lines
# from the line that names it to its closing brace.
proc skv_c_function {lines} {
    set path [tmpdir length]/long.c
    set fd [open $path w]
    puts $fd "static int x;\n\nvoid skvLongFunction(void) \{"
    for {set i 0} {$i < $lines - 2} {incr i} { puts $fd "    x += $i;" }
    puts $fd "\}"
    close $fd
    return $path
}

tags {"skv build"} {
    test {check-layers: the tree keeps to nic-kv/LAYERS, no function over 100 lines} {
        lassign [skv_check_layers] status out
        if {$status != 0} { fail "check-layers failed:\n$out" }
        assert_match {*layers  \[nic-kv\] * parts: every call allowed*} $out
        assert_match {*layers  \[redis-server\] * parts: every call allowed*} $out
        assert_match "*check-layers: ok" $out
    }

    test {check-layers: a call from the probes to the failover is named, and fails the check} {
        # The objects as built, in a scratch directory; into the probes'
        # object, a function that calls the failover by name (what
        # nkProbeHooks.joining replaced).
        set dir [tmpdir layers]
        foreach o [glob [pwd]/src/nickv*.o] {
            if {![string match *-nkdebug.o $o]} { file copy $o $dir }
        }
        set fd [open $dir/forbidden.c w]
        puts $fd "int nkFailoverJoining(const char *reach, int port);"
        puts $fd "int skvLayersForbidden(void) \{ return nkFailoverJoining(\"127.0.0.1\", 1); \}"
        close $fd
        exec cc -c -o $dir/forbidden.o $dir/forbidden.c
        exec ld -r -o $dir/probe-and-forbidden.o $dir/nickv_probe.o $dir/forbidden.o
        file rename -force $dir/probe-and-forbidden.o $dir/nickv_probe.o

        lassign [skv_check_layers --layers-only --objdir $dir] status out
        assert_equal 1 $status
        set lines [split $out "\n"]
        assert_equal 1 [llength [lsearch -all -glob $lines {* not allowed by *}]]
        assert {[lsearch -exact $lines {nickv_probe.o calls nkFailoverJoining (nickv_failover.c, layer server/failover): not allowed by nic-kv/LAYERS}] >= 0}
        assert_match "*check-layers: 1 failure(s)" $out

        # The same objects without the added call pass.
        file copy -force [pwd]/src/nickv_probe.o $dir/nickv_probe.o
        lassign [skv_check_layers --layers-only --objdir $dir] status out
        assert_equal 0 $status
        assert_match "*check-layers: ok" $out
    }

    test {check-layers: an include of the failover's header in the probes is named, and fails the check} {
        # The sources, in a scratch directory; into the probes' file, an
        # #include of the failover's header (the probes may not call it).
        set dir [tmpdir layers-include]
        file copy $::skv_root/nic-kv $::skv_root/src $dir
        set path $dir/nic-kv/nickv_probe.c
        set fd [open $path r]
        set text [read $fd]
        close $fd
        assert_equal 1 [regsub -line {^#include "nickv_probe.h"$} $text "&\n#include \"nickv_failover.h\"" text]
        set fd [open $path w]
        puts -nonewline $fd $text
        close $fd

        lassign [skv_check_layers --layers-only --src $dir] status out
        assert_equal 1 $status
        set lines [split $out "\n"]
        assert_equal 1 [llength [lsearch -all -glob $lines {* not allowed by *}]]
        assert {[lsearch -exact $lines {nickv_probe.c includes nickv_failover.h (nickv_failover.c, layer server/failover): not allowed by nic-kv/LAYERS}] >= 0}
        assert_match "*check-layers: 1 failure(s)" $out

        # A header of no part is named too; the sources as they are pass.
        file copy -force $::skv_root/nic-kv/nickv_probe.c $path
        close [open $dir/nic-kv/nickv_orphan.h w]
        lassign [skv_check_layers --layers-only --src $dir] status out
        assert_equal 1 $status
        assert_match "*nic-kv/nickv_orphan.h belongs to no part of nic-kv/LAYERS*" $out
        file delete $dir/nic-kv/nickv_orphan.h
        lassign [skv_check_layers --layers-only --src $dir] status out
        assert_equal 0 $status
        assert_match "*check-layers: ok" $out
    }

    test {check-layers: a part the objects lack is an error, not a pass} {
        set dir [tmpdir layers-missing]
        lassign [skv_check_layers --layers-only --objdir $dir] status out
        assert_equal 1 $status
        assert_match "*no object for nic-kv/nickv_probe.c in $dir*" $out
    }

    test {check-layers: a function of 100 lines passes, one of 101 fails} {
        lassign [skv_check_layers --length-only [skv_c_function 100]] status out
        assert_equal 0 $status
        assert_match "*1 files, scanned 1 functions: none over 100 lines*check-layers: ok" $out

        set path [skv_c_function 101]
        lassign [skv_check_layers --length-only $path] status out
        assert_equal 1 $status
        assert_match "*$path:3 skvLongFunction (101 lines, at most 100)*" $out

        # --max moves the limit.
        lassign [skv_check_layers --length-only --max 101 $path] status out
        assert_equal 0 $status
    }
}
