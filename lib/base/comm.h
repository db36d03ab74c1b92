/*
 * comm.h - the processes of one job and what they exchange: MPI when the
 * tool was built with it (lib/base/comm.c compiled by mpicc with SW_MPI; the
 * Makefile does so for sw-train and sw-sharpness when mpicc is found),
 * else one process of rank 0, where every exchange is a no-op.
 *
 * Every exchange names its buffer as a (pointer, count, type) triple and
 * says where the memory is: COMM_HOST, or COMM_DEVICE for GPU buffers,
 * which go to the MPI library as they are (a CUDA-aware MPI reads device
 * memory itself; one that is not refuses them here, SW_EUSAGE, rather
 * than crash on a device pointer). The callers never copy through host
 * memory themselves, so the data-parallel code takes device buffers the
 * day the model has them.
 *
 * Errors are returned (MPI's handler is set to MPI_ERRORS_RETURN), never
 * exited on: the caller decides how a job stops. Every rank must make the
 * same collective calls in the same order; a failure on one rank is
 * carried to the next comm_agree, where every rank learns it.
 */
#ifndef SW_COMM_H
#define SW_COMM_H

#include <stddef.h>

#include "status.h"

struct comm;

enum comm_mem { COMM_HOST, COMM_DEVICE };
enum comm_type { COMM_F32, COMM_F64, COMM_I32, COMM_I64, COMM_U64, COMM_BYTE };
enum comm_op { COMM_SUM, COMM_MIN, COMM_MAX };

/*
 * Join the job: MPI_Init_thread (MPI calls come from the main thread
 * only, outside OpenMP regions) when built with MPI and started by a
 * launcher (mpirun, srun: its variables in the environment); started
 * alone, *out is NULL: one process, MPI untouched. Without MPI, a
 * process that a launcher started as one of several (OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE, PMIX_SIZE above 1) is refused with SW_EUSAGE: N copies of a
 * one-process tool would each write the same run.
 */
int comm_init(int *argc, char ***argv, struct comm **out, struct sw_err *err);

/* Leave the job (MPI_Finalize) and free c; NULL is a no-op. */
void comm_finalize(struct comm *c);

int comm_rank(const struct comm *c);   /* 0 for NULL */
int comm_size(const struct comm *c);   /* 1 for NULL */

/* For --version: "MPI: Open MPI v4.1.4 (what)", the library built in,
 * or "MPI: not built in (...)", in buf. */
const char *comm_version_line(char *buf, size_t len, const char *what);

/* In place: buf (count of type, at mem) becomes op over every rank's. */
int comm_allreduce(struct comm *c, void *buf, size_t count, enum comm_type type,
		   enum comm_op op, enum comm_mem mem, struct sw_err *err);

/*
 * The same, started and left to run (MPI_Iallreduce): buf must stay
 * untouched until comm_wait_all. comm_progress lets the library move the
 * started ones on (MPI progresses nonblocking collectives only inside its
 * calls); comm_wait_all finishes them all.
 */
int comm_iallreduce(struct comm *c, void *buf, size_t count, enum comm_type type,
		    enum comm_op op, enum comm_mem mem, struct sw_err *err);
int comm_progress(struct comm *c, struct sw_err *err);
int comm_wait_all(struct comm *c, struct sw_err *err);

/* buf (count of type) from root to every rank. */
int comm_bcast(struct comm *c, void *buf, size_t count, enum comm_type type, int root,
	       enum comm_mem mem, struct sw_err *err);

/*
 * Parts of one block: rank r's is [displ[r], displ[r] + count[r]) (in
 * elements). allgather, in place in buf, which every rank holds whole:
 * every rank gets every part. gather: every rank sends its part (count[r]
 * elements at part); root receives them all into all (unused elsewhere).
 */
int comm_allgather_parts(struct comm *c, void *buf, const size_t *count, const size_t *displ,
			 enum comm_type type, enum comm_mem mem, struct sw_err *err);
int comm_gather_parts(struct comm *c, const void *part, void *all, const size_t *count,
		      const size_t *displ, enum comm_type type, int root, enum comm_mem mem,
		      struct sw_err *err);

/*
 * Agree on how a stretch of work went: every rank gives its status (0:
 * ok); all get the status of the lowest-ranked one that failed (0 when
 * none did) and, in *reporter, that rank (-1 when none): the rank whose
 * message the user sees. An exchange failing here is SW_EIO on every rank
 * it reaches.
 */
int comm_agree(struct comm *c, int status, int *reporter);

/* The sharded ranges of a flat block: part r of n items split into
 * contiguous parts, [*lo, *hi), sizes differing by at most one. */
void comm_split(size_t n, int rank, int size, size_t *lo, size_t *hi);

#endif
