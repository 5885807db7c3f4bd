# The pinned upstream: deps/redis/fetch.sh must stop, saying which thing is
# wrong, when a tarball does not match its pinned checksum or when one of
# SKV's patches does not apply exactly. (A good fetch is what built the
# server these tests run against.)

source tests/skv/helpers.tcl

# Run fetch.sh into a scratch tree with the given environment overrides.
# Returns {status output}.
proc skv_fetch {envs} {
    set dir [tmpdir fetch]
    set status [catch {
        exec env {*}$envs $::skv_root/deps/redis/fetch.sh $dir/tree 2>@1
    } out]
    return [list $status $out $dir]
}

# A pin file equal to deps/redis/pin with one value replaced.
proc skv_bad_pin {name value} {
    set fd [open $::skv_root/deps/redis/pin]
    set text [read $fd]
    close $fd
    regsub -line "^$name=.*$" $text "$name=$value" text
    set path [tmpfile pin]
    set fd [open $path w]
    puts -nonewline $fd $text
    close $fd
    return $path
}

# A patch series of one patch that adds a line at the top of upstream's
# README.md, whose hunk says it starts at line $at, with context lines taken
# from the real file (or garbage, when $context is "garbage").
proc skv_test_series {at context} {
    set fd [open README.md]
    set lines [lrange [split [read $fd] "\n"] 0 2]
    close $fd
    if {$context eq "garbage"} {set lines {no such line one} }
    set dir [tmpdir patches]
    set n [llength $lines]
    set fd [open $dir/0001-test.patch w]
    puts $fd "Subject: test patch\n---\ndiff --git a/README.md b/README.md"
    puts $fd "--- a/README.md\n+++ b/README.md"
    puts $fd "@@ -$at,$n +$at,[expr {$n+1}] @@"
    puts $fd "+SKV test line"
    foreach l $lines { puts $fd " $l" }
    close $fd
    set fd [open $dir/series w]
    puts $fd "0001-test.patch"
    close $fd
    return $dir
}

tags {"skv build"} {
    test {fetch.sh refuses a tarball whose sha256 is not the pinned one} {
        set pin [skv_bad_pin ORIG_SHA256 [string repeat 0 64]]
        lassign [skv_fetch [list SKV_PIN=$pin]] status out dir
        assert_equal 1 $status
        assert_match "*checksum mismatch for *[skv_pin ORIG_TARBALL]*expected 0000*" $out
        assert {![file exists $dir/tree]}
    }

    test {fetch.sh applies an SKV patch that applies exactly} {
        lassign [skv_fetch [list SKV_PATCHES=[skv_test_series 1 real]]] status out dir
        assert_equal 0 $status
        set fd [open $dir/tree/README.md]
        set first [gets $fd]
        close $fd
        assert_equal "SKV test line" $first
    }

    test {fetch.sh refuses an SKV patch that applies only with an offset} {
        lassign [skv_fetch [list SKV_PATCHES=[skv_test_series 4 real]]] status out dir
        assert_equal 1 $status
        assert_match "*SKV patch 0001-test.patch applies only with an offset*" $out
        assert {![file exists $dir/tree]}
    }

    test {fetch.sh refuses an SKV patch that does not apply} {
        lassign [skv_fetch [list SKV_PATCHES=[skv_test_series 1 garbage]]] status out dir
        assert_equal 1 $status
        assert_match "*SKV patch 0001-test.patch does not apply*" $out
        assert {![file exists $dir/tree]}
    }
}
