# utils/setup-deps.sh while another apt or dpkg holds dpkg's lock: it waits
# for it (apt-get -o DPkg::Lock::Timeout), says who holds it, and goes on
# once it is free, rather than failing at once.

source tests/skv/helpers.tcl

tags {"skv build"} {
    # It installs (as root): only where this runs as root on Debian.
    if {[exec id -u] == 0 && [auto_execok apt-get] ne {} && [auto_execok python3] ne {}} {
    test {setup-deps.sh waits for dpkg's lock held by another process, then installs} {
        set dir [file normalize [tmpdir setup-deps]]
        # A dpkg-query that calls patch (installed: make needs it) missing,
        # so that setup-deps runs apt-get install for it.
        set fd [open $dir/dpkg-query w]
        puts $fd "#!/bin/sh\n\[ \"\$3\" = patch \] && exit 1\nexec /usr/bin/dpkg-query \"\$@\""
        close $fd
        file attributes $dir/dpkg-query -permissions 0755
        # apt's locks are fcntl(2) locks (flock(1) takes another kind,
        # which apt does not see): python's lockf takes apt's kind.
        set holder [exec python3 -c {
import fcntl, sys, time
f = open("/var/lib/dpkg/lock-frontend", "w")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1], "w").write("locked\n")
time.sleep(120)
} $dir/locked &]
        wait_for_condition 600 100 {[file exists $dir/locked]} else {
            fail "the lock was not taken"
        }
        exec sh -c "PATH='$dir':\"\$PATH\" SKV_APT_LOCK_TIMEOUT=300 '$::skv_root/utils/setup-deps.sh' build \
                    > '$dir/out' 2>&1; echo \$? > '$dir/rc'" &
        wait_for_condition 1200 100 {
            ![catch {exec grep -q "Waiting for cache lock" $dir/out}] || [file exists $dir/rc]
        } else {
            fail "setup-deps neither waited nor ended: [exec cat $dir/out]"
        }
        set waited [expr {![file exists $dir/rc]}]
        exec kill $holder
        wait_for_condition 1200 100 {[file exists $dir/rc]} else {
            fail "setup-deps did not end once the lock was free: [exec cat $dir/out]"
        }
        set out [exec cat $dir/out]
        assert_equal 1 $waited
        assert_equal 0 [string trim [exec cat $dir/rc]]
        assert_match "*setup-deps: apt-get install patch\n*" "$out\n"
        assert_match "*setup-deps: Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process $holder (python3)... (waiting up to 300 s)\n*" "$out\n"
    }
    }
}
