/* mapguard.c - mappings that survive their file shrinking (see mapguard.h). */
#include "mapguard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * One registered mapping, [lo, hi). seq is odd while the slot is being
 * (re)written; the handler trusts lo, hi and active only when it read the
 * same even seq before and after them. Slots live as long as the process.
 */
struct mapguard_slot {
	atomic_uint seq;
	atomic_int active;
	atomic_uintptr_t lo, hi;
	atomic_uint faults;             /* SIGBUS in it since registered */
	atomic_int claimed;             /* owned by a mapping (0: free for reuse) */
	struct mapguard_slot *next;     /* set before the slot is published */
};

/* The registry: the process-wide state of this module (see mapguard.h). */
static _Atomic(struct mapguard_slot *) slots;
static atomic_ullong faults_total;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static atomic_int handler_installed;

_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_POINTER_LOCK_FREE == 2 &&
	       ATOMIC_LLONG_LOCK_FREE == 2,
	       "the signal handler needs lock-free atomics");

/* The registered slot whose mapping holds addr, or NULL. */
static struct mapguard_slot *find(uintptr_t addr)
{
	for (struct mapguard_slot *s = atomic_load(&slots); s; s = s->next) {
		unsigned before = atomic_load(&s->seq);
		uintptr_t lo, hi;
		int active;

		if (before & 1)
			continue;
		active = atomic_load(&s->active);
		lo = atomic_load(&s->lo);
		hi = atomic_load(&s->hi);
		if (atomic_load(&s->seq) != before)
			continue;
		if (active && addr >= lo && addr < hi)
			return s;
	}
	return NULL;
}

static void on_sigbus(int sig, siginfo_t *info, void *uctx)
{
	int saved = errno;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at;
	struct mapguard_slot *s = NULL;
	struct sigaction dfl;

	(void)uctx;
	/* a fault of ours (not a kill -BUS): si_code > 0 and an address */
	if (info && info->si_code > 0)
		s = find((uintptr_t)info->si_addr);
	if (s) {
		at = (uintptr_t)info->si_addr / page * page;
		/* zeros from the faulting page to the end of the mapping: the
		 * file ends before it, so no later page has data either */
		if ((long)syscall(SYS_mmap, (void *)at, (size_t)(atomic_load(&s->hi) - at), PROT_READ,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, (off_t)0) != -1) {
			atomic_fetch_add(&s->faults, 1);
			atomic_fetch_add(&faults_total, 1);
			errno = saved;
			return;         /* the access runs again, on zeros */
		}
	}
	/* not ours, or no way to survive it: die of it as without us */
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	raise(sig);     /* blocked in here: delivered on return */
	errno = saved;
}

static void install_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	atomic_store(&handler_installed, sigaction(SIGBUS, &sa, NULL) == 0);
}

/* A slot for [lo, hi): a free one reused, else a new one pushed on the list. */
static struct mapguard_slot *claim(uintptr_t lo, uintptr_t hi)
{
	struct mapguard_slot *s;

	for (s = atomic_load(&slots); s; s = s->next) {
		int free_ = 0;
		if (atomic_compare_exchange_strong(&s->claimed, &free_, 1))
			break;
	}
	if (!s) {
		if (!(s = calloc(1, sizeof *s)))
			return NULL;
		atomic_init(&s->claimed, 1);
		s->next = atomic_load(&slots);
		while (!atomic_compare_exchange_weak(&slots, &s->next, s))
			;
	}
	atomic_fetch_add(&s->seq, 1);           /* odd: being written */
	atomic_store(&s->lo, lo);
	atomic_store(&s->hi, hi);
	atomic_store(&s->faults, 0);
	atomic_store(&s->active, 1);
	atomic_fetch_add(&s->seq, 1);           /* even: a consistent slot */
	return s;
}

static void release(struct mapguard_slot *s)
{
	atomic_fetch_add(&s->seq, 1);
	atomic_store(&s->active, 0);
	atomic_fetch_add(&s->seq, 1);
	atomic_store(&s->claimed, 0);
}

int mapguard_map(int fd, uint64_t offset, size_t len, struct mapguard *g,
		 struct sw_err *err)
{
	void *base;

	memset(g, 0, sizeof *g);
	g->fd = -1;
	pthread_once(&handler_once, install_handler);
	if (!atomic_load(&handler_installed))
		return sw_fail(err, SW_ESOFTWARE, "cannot install the SIGBUS handler: %s",
			       strerror(errno));
	base = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)offset);
	if (base == MAP_FAILED)
		return sw_fail(err, SW_EIO, "mmap: %s", strerror(errno));
	/* registered before any byte of it is read */
	if (!(g->slot = claim((uintptr_t)base, (uintptr_t)base + len))) {
		munmap(base, len);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	g->base = base;
	g->len = len;
	g->fd = fd;
	g->end = offset + len;
	return SW_OK;
}

int mapguard_shrank(const struct mapguard *g)
{
	struct stat st;

	if (!g->slot)
		return 0;
	if (atomic_load(&g->slot->faults))
		return 1;
	/* truncated where this process has not read yet, or after it read */
	return fstat(g->fd, &st) == 0 && (uint64_t)st.st_size < g->end;
}

int mapguard_check(const struct mapguard *g, struct sw_err *err)
{
	if (mapguard_shrank(g))
		return sw_fail(err, SW_EIO, "the file shrank while it was read");
	return SW_OK;
}

void mapguard_unmap(struct mapguard *g)
{
	if (!g->slot)
		return;
	/* forgotten before unmapped: the address range may be reused at once */
	release(g->slot);
	munmap(g->base, g->len);
	memset(g, 0, sizeof *g);
	g->fd = -1;
}

uint64_t mapguard_faults(void)
{
	return atomic_load(&faults_total);
}
