# Sourced by every hack/ script that runs the go command, and mirrored by the
# Makefile and test/cluster's goEnv: the local toolchain only, no VCS stamping,
# and no DWARF debug information in what is compiled. Nothing here runs a
# debugger (stack traces come from the runtime's own tables, which stay), and
# without DWARF the compiler does about a quarter less work: on a first run on
# 2 CPUs that is minutes (docs/local-cluster.md).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false"
