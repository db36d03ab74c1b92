# Sourced by the tests that run sw-train under mpirun, after tap.sh:
# OpenMPI in a sandbox, as root, on a machine of 2 cores (shared memory
# between the ranks, no network, more ranks than cores allowed); under
# the sanitizers, the suppressions of OpenMPI's own allocations, which
# live to the end of the process (whole stacks: the slow unwinder, since
# OpenMPI has no frame pointers). MPI is 1 when mpirun is there and
# sw-train was built with MPI, else empty.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_btl OMPI_MCA_rmaps_base_oversubscribe \
	OMPI_MCA_btl_vader_single_copy_mechanism
if [ -n "${SW_SANITIZED:-}" ]; then
	LSAN_OPTIONS=suppressions=$SW_TOP/tests/lib/lsan-mpi.supp:print_suppressions=0
	ASAN_OPTIONS=${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0
	export LSAN_OPTIONS ASAN_OPTIONS
fi
MPI=
if command -v mpirun >/dev/null 2>&1 && sw-train --version >"$TRASH/.mpi-version" &&
	grep -q "^MPI: .*data parallel" "$TRASH/.mpi-version"; then
	MPI=1
fi
