# Nic-KV built for aarch64 (make nic-kv-arm64), run under qemu-user as the
# Nic-KV of a real topology: an x86 SKV master and three x86 replicas on
# loopback TCP. Run by the arm64 suite of utils/run-tests.sh, which sets
# SKV_NICKV to utils/nic-kv-arm64-qemu and SKV_NICKV_ARM64 to the binary.

source tests/skv/helpers.tcl

# The ELF header of a file: class (1: 32-bit, 2: 64-bit), data (1: little
# endian) and machine (183: EM_AARCH64, 62: EM_X86_64).
proc arm64_elf_header {path} {
    set f [open $path rb]
    set h [read $f 20]
    close $f
    if {[string range $h 0 3] ne "\x7fELF"} { return {} }
    binary scan $h @4cc@18s class data machine
    return [list $class $data [expr {$machine & 0xffff}]]
}

# The executable a process runs (its /proc/<pid>/exe) and its arguments.
proc arm64_proc {pid} {
    set exe [file readlink /proc/$pid/exe]
    set f [open /proc/$pid/cmdline rb]
    set cmd [split [string trimright [read $f] "\0"] "\0"]
    close $f
    list $exe $cmd
}

if {![info exists ::env(SKV_NICKV_ARM64)] || ![info exists ::env(SKV_NICKV)]} {
    error "run by utils/run-tests.sh (suite arm64): SKV_NICKV and SKV_NICKV_ARM64 are not set"
}
set arm64_bin $::env(SKV_NICKV_ARM64)

start_server {tags {"nickv repl arm64 external:skip"} overrides {save ""}} {
    set master [srv 0 client]
    set mhost [srv 0 host]
    set mport [srv 0 port]
    start_server {overrides {save ""}} {
    start_server {overrides {save ""}} {
    start_server {overrides {save ""}} {
        set replicas [list [srv -2 client] [srv -1 client] [srv 0 client]]
        set nk [nickv_start $mport]
        foreach r $replicas { $r replicaof $mhost $mport }
        foreach r $replicas { wait_for_sync $r }
        nickv_wait_replicas $nk 3

        test {Nic-KV aarch64: the daemon is the aarch64 binary, emulated by qemu-user} {
            # 64-bit, little endian, EM_AARCH64 (an x86 build is 62).
            assert_equal {2 1 183} [arm64_elf_header $arm64_bin]
            assert_equal {2 1 62} [arm64_elf_header src/redis-server]
            lassign [arm64_proc [dict get $nk pid]] exe cmd
            assert_match {*qemu-aarch64*} $exe
            assert {[lsearch -exact $cmd $arm64_bin] >= 0}
            assert_match {*Nic-KV*} [exec {*}$::env(SKV_NICKV) --version]
            # Its own view of the machine: the emulated one.
            assert_match {*os:Linux * aarch64*arch_bits:64*} [nickv_cmd $nk info server]
        }

        test {Nic-KV aarch64: it carries the stream to three x86 replicas; WAIT 3; digests equal} {
            assert_equal healthy [nickv_status $master nickv_daemon]
            set info [$master info replication]
            assert_match {*slave0:*via=nickv*slave1:*via=nickv*slave2:*via=nickv*} $info
            assert_equal 3 [nickv_info $nk connected_replicas]
            set writes [nickv_status $master repl_stream_writes]
            nickv_mixed_load $master 200
            assert_equal 3 [$master wait 3 10000]
            nickv_assert_digests $master $replicas
            # The stream went to Nic-KV, not to each replica: the master
            # wrote it to one connection.
            assert_equal 3 [nickv_info $nk connected_replicas]
            assert_match {*slave0:*via=nickv*slave1:*via=nickv*slave2:*via=nickv*} [$master info replication]
            puts "    (master wrote the stream [expr {[nickv_status $master repl_stream_writes] - $writes}] times for 3 replicas)"
        }

        test {Nic-KV aarch64: killed and restarted under a write load, nothing lost} {
            set nk [nickv_check_kill_under_load $master $mhost $mport $nk $replicas]
            assert_equal 3 [$master wait 3 10000]
            lassign [arm64_proc [dict get $nk pid]] exe cmd
            assert_match {*qemu-aarch64*} $exe
            assert_match {*slave0:*via=nickv*slave1:*via=nickv*slave2:*via=nickv*} [$master info replication]
            nickv_assert_no_bug $nk
        }
        nickv_stop $nk
    }
    }
    }
}
