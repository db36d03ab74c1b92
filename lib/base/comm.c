/*
 * comm.c - the job's processes (see comm.h). Compiled twice: plain, into
 * libscalewatch.a (one process), and by mpicc with -DSW_MPI for the tools
 * that run under mpirun, whose link puts that object before the library.
 */
#include "comm.h"
#include "grow.h"

#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void comm_split(size_t n, int rank, int size, size_t *lo, size_t *hi)
{
	/* in 128 bits' worth of care: n * rank may pass 2^64 only for absurd n */
	*lo = (size_t)((unsigned __int128)n * (unsigned)rank / (unsigned)size);
	*hi = (size_t)((unsigned __int128)n * (unsigned)(rank + 1) / (unsigned)size);
}

static size_t type_size(enum comm_type t)
{
	return t == COMM_F32 || t == COMM_I32 ? 4 : t == COMM_BYTE ? 1 : 8;
}

/* A gather over one process: its part copied into place (host memory) */
static int one_part(const void *part, void *all, size_t count, size_t displ, size_t size,
		    enum comm_mem mem, struct sw_err *err)
{
	char *to = (char *)all + displ * size;

	if (!count || to == part)
		return SW_OK;
	if (mem != COMM_HOST)
		return sw_fail(err, SW_EUSAGE, "one process: a device part must already be in place");
	memmove(to, part, count * size);
	return SW_OK;
}

/* Started by a launcher (mpirun, mpiexec, srun with an MPI plugin), its
 * variables in the environment? *n: the job's process count when it says
 * (0 when not). */
static int launched(const char **var, long *n)
{
	static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
	static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
	int any = 0;

	*n = 0;
	*var = NULL;
	for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
		any |= getenv(ranks[i]) != NULL;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		const char *v = getenv(sizes[i]);
		if (v && (*n = strtol(v, NULL, 10)) > 0) {
			*var = sizes[i];
			return 1;
		}
	}
	return any;
}

#ifdef SW_MPI

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

struct comm {
	int rank, size;
	MPI_Request *req;               /* started, not yet waited for */
	int nreq;
	size_t req_cap;
};

/* MPI counts are int: larger buffers go in pieces of this many elements */
#define COMM_CHUNK ((size_t)1 << 30)

static int mpi_fail(struct sw_err *err, int mrc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof s, "MPI error %d", mrc);
	return sw_fail(err, SW_EIO, "MPI: %s: %s", what, s);
}

static MPI_Datatype mpi_type(enum comm_type t)
{
	switch (t) {
	case COMM_F32: return MPI_FLOAT;
	case COMM_F64: return MPI_DOUBLE;
	case COMM_I32: return MPI_INT32_T;
	case COMM_I64: return MPI_INT64_T;
	case COMM_U64: return MPI_UINT64_T;
	default: return MPI_BYTE;
	}
}

static MPI_Op mpi_op(enum comm_op op)
{
	return op == COMM_SUM ? MPI_SUM : op == COMM_MIN ? MPI_MIN : MPI_MAX;
}

/* Device memory goes to MPI as it is, if the library reads it. */
static int mem_ok(enum comm_mem mem, struct sw_err *err)
{
	if (mem == COMM_HOST)
		return SW_OK;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
	if (MPIX_Query_cuda_support())
		return SW_OK;
#endif
	return sw_fail(err, SW_EUSAGE, "this MPI library is not CUDA-aware: it cannot exchange device buffers");
}

int comm_init(int *argc, char ***argv, struct comm **out, struct sw_err *err)
{
	struct comm *c = calloc(1, sizeof *c);
	int provided, mrc;

	const char *var;
	long n;

	*out = NULL;
	/* started alone: one process, without MPI (no singleton MPI_Init:
	 * its start-up costs, and it may fail where mpirun would work) */
	if (!launched(&var, &n)) {
		free(c);
		return SW_OK;
	}
	if (!c)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	/* the main thread alone calls MPI, outside the OpenMP regions */
	if ((mrc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS) {
		free(c);
		return sw_fail(err, SW_EIO, "MPI_Init_thread failed (%d)", mrc);
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	*out = c;
	return SW_OK;
}

void comm_finalize(struct comm *c)
{
	if (!c)
		return;
	free(c->req);
	free(c);
	MPI_Finalize();
}

int comm_rank(const struct comm *c) { return c ? c->rank : 0; }
int comm_size(const struct comm *c) { return c ? c->size : 1; }

static const char *library(char *buf, size_t len)
{
	char version[MPI_MAX_LIBRARY_VERSION_STRING];
	int n = 0;

	if (MPI_Get_library_version(version, &n) != MPI_SUCCESS)
		snprintf(version, sizeof version, "MPI");
	version[strcspn(version, ",\n")] = '\0';
	snprintf(buf, len, "%s", version);
	return buf;
}

/* What goes over a buffer in pieces of at most COMM_CHUNK elements. */
enum chunked_op { ALLREDUCE, IALLREDUCE, BCAST };

/* MPI_Allreduce, MPI_Iallreduce (kept in c->req) or MPI_Bcast from root */
static int chunked(struct comm *c, enum chunked_op what, void *buf, size_t count,
		   enum comm_type type, enum comm_op op, int root, enum comm_mem mem, struct sw_err *err)
{
	MPI_Datatype t = mpi_type(type);
	int rc, mrc;

	if (!c || c->size == 1)
		return SW_OK;
	if ((rc = mem_ok(mem, err)))
		return rc;
	for (size_t i = 0; i < count; i += COMM_CHUNK) {
		int n = (int)(count - i < COMM_CHUNK ? count - i : COMM_CHUNK);
		void *at = (char *)buf + i * type_size(type);
		if (what == IALLREDUCE && SW_GROW(c->req, &c->req_cap, (size_t)c->nreq + 1) < 0)
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
		if (what == BCAST)
			mrc = MPI_Bcast(at, n, t, root, MPI_COMM_WORLD);
		else if (what == IALLREDUCE)
			mrc = MPI_Iallreduce(MPI_IN_PLACE, at, n, t, mpi_op(op), MPI_COMM_WORLD, &c->req[c->nreq]);
		else
			mrc = MPI_Allreduce(MPI_IN_PLACE, at, n, t, mpi_op(op), MPI_COMM_WORLD);
		if (mrc != MPI_SUCCESS)
			return mpi_fail(err, mrc, what == BCAST ? "broadcast" : "allreduce");
		c->nreq += what == IALLREDUCE;
	}
	return SW_OK;
}

int comm_allreduce(struct comm *c, void *buf, size_t count, enum comm_type type,
		   enum comm_op op, enum comm_mem mem, struct sw_err *err)
{
	return chunked(c, ALLREDUCE, buf, count, type, op, 0, mem, err);
}

int comm_iallreduce(struct comm *c, void *buf, size_t count, enum comm_type type,
		    enum comm_op op, enum comm_mem mem, struct sw_err *err)
{
	return chunked(c, IALLREDUCE, buf, count, type, op, 0, mem, err);
}

int comm_progress(struct comm *c, struct sw_err *err)
{
	int done, mrc;

	if (!c || !c->nreq)
		return SW_OK;
	if ((mrc = MPI_Testall(c->nreq, c->req, &done, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
		return mpi_fail(err, mrc, "test");
	if (done)
		c->nreq = 0;
	return SW_OK;
}

int comm_wait_all(struct comm *c, struct sw_err *err)
{
	int mrc, n;

	if (!c || !c->nreq)
		return SW_OK;
	n = c->nreq;
	c->nreq = 0;
	if ((mrc = MPI_Waitall(n, c->req, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
		return mpi_fail(err, mrc, "wait");
	return SW_OK;
}

int comm_bcast(struct comm *c, void *buf, size_t count, enum comm_type type, int root,
	       enum comm_mem mem, struct sw_err *err)
{
	return chunked(c, BCAST, buf, count, type, COMM_SUM, root, mem, err);
}

/* counts and displacements as MPI's ints, or SW_EUSAGE past INT_MAX */
static int int_parts(const struct comm *c, const size_t *count, const size_t *displ, int **ic,
		     int **id, struct sw_err *err)
{
	*ic = malloc((size_t)c->size * sizeof **ic);
	*id = malloc((size_t)c->size * sizeof **id);
	if (!*ic || !*id)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (int r = 0; r < c->size; r++) {
		if (count[r] > INT_MAX || displ[r] > INT_MAX)
			return sw_fail(err, SW_EUSAGE, "a part of %zu elements at %zu is past MPI's int counts",
				       count[r], displ[r]);
		(*ic)[r] = (int)count[r];
		(*id)[r] = (int)displ[r];
	}
	return SW_OK;
}

int comm_allgather_parts(struct comm *c, void *buf, const size_t *count, const size_t *displ,
			 enum comm_type type, enum comm_mem mem, struct sw_err *err)
{
	int *ic = NULL, *id = NULL, rc, mrc;

	if (!c || c->size == 1)
		return SW_OK;
	if (!(rc = mem_ok(mem, err)) && !(rc = int_parts(c, count, displ, &ic, &id, err)) &&
	    (mrc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, ic, id, mpi_type(type),
				  MPI_COMM_WORLD)) != MPI_SUCCESS)
		rc = mpi_fail(err, mrc, "allgather");
	free(ic);
	free(id);
	return rc;
}

int comm_gather_parts(struct comm *c, const void *part, void *all, const size_t *count,
		      const size_t *displ, enum comm_type type, int root, enum comm_mem mem,
		      struct sw_err *err)
{
	int *ic = NULL, *id = NULL, rc, mrc;

	if (!c)
		return one_part(part, all, count[0], displ[0], type_size(type), mem, err);
	if (!(rc = mem_ok(mem, err)) && !(rc = int_parts(c, count, displ, &ic, &id, err)) &&
	    (mrc = MPI_Gatherv(part, ic[c->rank], mpi_type(type), all, ic, id, mpi_type(type), root,
			       MPI_COMM_WORLD)) != MPI_SUCCESS)
		rc = mpi_fail(err, mrc, "gather");
	free(ic);
	free(id);
	return rc;
}

int comm_agree(struct comm *c, int status, int *reporter)
{
	int first, code = status;

	*reporter = status ? 0 : -1;
	if (!c || c->size == 1)
		return status;
	/* the lowest failing rank, then its status from it */
	first = status ? c->rank : c->size;
	if (MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
		return *reporter = c->rank, SW_EIO;
	if (first == c->size)
		return *reporter = -1, SW_OK;
	if (MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD) != MPI_SUCCESS)
		return *reporter = c->rank, SW_EIO;
	*reporter = first;
	return code;
}

#else /* one process */

struct comm {
	int unused;
};

int comm_init(int *argc, char ***argv, struct comm **out, struct sw_err *err)
{
	const char *var;
	long n;

	(void)argc;
	(void)argv;
	*out = NULL;
	if (launched(&var, &n) && n > 1)
		return sw_fail(err, SW_EUSAGE,
			       "started as one of %ld processes (%s), but built without MPI: "
			       "rebuild with mpicc installed (make deps) to train data-parallel", n, var);
	return SW_OK;
}

void comm_finalize(struct comm *c) { (void)c; }

int comm_rank(const struct comm *c) { (void)c; return 0; }
int comm_size(const struct comm *c) { (void)c; return 1; }
static const char *library(char *buf, size_t len)
{
	(void)buf, (void)len;
	return NULL;
}

int comm_allreduce(struct comm *c, void *buf, size_t count, enum comm_type type,
		   enum comm_op op, enum comm_mem mem, struct sw_err *err)
{
	(void)c, (void)buf, (void)count, (void)type, (void)op, (void)mem, (void)err;
	return SW_OK;
}

int comm_iallreduce(struct comm *c, void *buf, size_t count, enum comm_type type,
		    enum comm_op op, enum comm_mem mem, struct sw_err *err)
{
	(void)c, (void)buf, (void)count, (void)type, (void)op, (void)mem, (void)err;
	return SW_OK;
}

int comm_progress(struct comm *c, struct sw_err *err) { (void)c, (void)err; return SW_OK; }
int comm_wait_all(struct comm *c, struct sw_err *err) { (void)c, (void)err; return SW_OK; }

int comm_bcast(struct comm *c, void *buf, size_t count, enum comm_type type, int root,
	       enum comm_mem mem, struct sw_err *err)
{
	(void)c, (void)buf, (void)count, (void)type, (void)root, (void)mem, (void)err;
	return SW_OK;
}

int comm_allgather_parts(struct comm *c, void *buf, const size_t *count, const size_t *displ,
			 enum comm_type type, enum comm_mem mem, struct sw_err *err)
{
	(void)c, (void)buf, (void)count, (void)displ, (void)type, (void)mem, (void)err;
	return SW_OK;
}

int comm_gather_parts(struct comm *c, const void *part, void *all, const size_t *count,
		      const size_t *displ, enum comm_type type, int root, enum comm_mem mem,
		      struct sw_err *err)
{
	(void)c, (void)root;
	return one_part(part, all, count[0], displ[0], type_size(type), mem, err);
}

int comm_agree(struct comm *c, int status, int *reporter)
{
	(void)c;
	*reporter = status ? 0 : -1;
	return status;
}

#endif

const char *comm_version_line(char *buf, size_t len, const char *what)
{
	char lib[256];

	if (library(lib, sizeof lib))
		snprintf(buf, len, "MPI: %s (%s)", lib, what);
	else
		snprintf(buf, len, "MPI: not built in (one process; build with mpicc installed)");
	return buf;
}
