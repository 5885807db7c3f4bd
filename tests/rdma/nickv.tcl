# Nic-KV over RDMA: the master streams to Nic-KV with RDMA WRITE_WITH_IMM,
# Nic-KV fans out to RDMA replicas straight from its backlog (zero copy,
# one doorbell per replica per batch). The scenarios are those of
# tests/integration/nickv.tcl over TCP, the same body of tests
# (tests/nickv-suite.tcl), with the RDMA-only ones after them.

source tests/skv/helpers.tcl
source tests/skv/nickv-suite.tcl
if {![rdma_available]} {
    puts "skipping tests/rdma/nickv: no RDMA devices (run through utils/rdma-vm.sh)"
    return
}
nickv_suite rdma
