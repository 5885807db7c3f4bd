# The fencing protocol's model: utils/check-model.sh passes on the model as
# main has it (every configuration, no violation), and catches each
# mutation (a bug SKV once had, put back into the model) with a trail.

source tests/skv/helpers.tcl

# Run utils/check-model.sh with args. Returns {status output}.
proc skv_check_model {args} {
    set status [catch {exec $::skv_root/utils/check-model.sh {*}$args 2>@1} out]
    # exec's own words on a non-zero exit are not the script's.
    regsub {\nchild process exited abnormally$} $out {} out
    return [list $status $out]
}

tags {"skv build"} {
    test {check-model: spin finds no violation in the model of main} {
        lassign [skv_check_model] status out
        puts $out
        if {$status != 0} { fail "check-model failed:\n$out" }
        foreach config {small live large} {
            assert_match "*\n$config *ok*" $out
        }
        assert_match "*check-model: ok" $out
    }

    test {check-model: every mutation gives a violation with a trail} {
        lassign [skv_check_model --mutations] status out
        puts $out
        if {$status != 0} { fail "a mutation was not caught:\n$out" }
        foreach m {MUT_GRANT_ANY_HOLDER MUT_WINDOW_FROM_NOW MUT_STALE_MEMBER
                   MUT_COUNT_BEFORE_RECORD MUT_ROLLBACK_NO_BUMP
                   MUT_RESUME_AFTER_LAPSE} {
            assert_match "*\n$m *caught, violated: *fencing.pml.trail*" $out
        }
        assert_match "*check-model: ok" $out
    }
}
