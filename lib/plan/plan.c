/* SPDX-License-Identifier: MIT */
/*
 * From epoch sequence to batches: fetch windows.
 *
 * S_e is cut into windows of fetch_factor batches (global batches, or the
 * rank's own for partition=file). A window's rows are read from the source
 * together, so they are sorted (I/O locality), and then a keyed
 * permutation of the window (seed, epoch, window) decides the order in
 * which they are cut into batches. The result T_e is S_e with each window
 * shuffled internally: for block_shuffle a batch mixes rows of many blocks
 * instead of serving a block's neighbours together. For weighted and
 * class_balanced the permutation moves blocks of block_size sorted draws,
 * so which rows are drawn never depends on locality; only their grouping
 * does. streaming keeps windows in order, so T_e = S_e.
 *
 * Planning one batch costs one window (two when a contiguous slice starts
 * inside one): O(F log F) with F rows per window, independent of N.
 * Windows are cached, as their rows in served order, since every batch of
 * every rank in a window is a slice of that list.
 */
#include "plan/plan.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/rowsort.h"
#include "plan/sampler.h"

struct window {
	uint64_t epoch;
	uint64_t seq;
	uint64_t index;
	uint64_t *rows; /* global ids in served order; NULL: empty slot */
	uint64_t last_used;
};

/* A window some thread is building: others wanting it wait instead of
 * building it too (every rank and prefetch thread arrives at a new window
 * at once). At most max_building (up to MAX_BUILDING) are built at a
 * time, so that the memory of builds has a bound (rfs_plan_limit). */
struct building {
	uint64_t epoch, seq, index;
	int busy;
};

#define MAX_BUILDING 8

struct rfs_planner {
	struct rfs_config config; /* strings not copied: never used */
	const struct rfs_rowset *seqs;
	uint64_t *lengths; /* S_e length per sequence */
	struct rfs_layout layout;
	uint64_t order_unit; /* items the window permutation moves together */
	pthread_mutex_t lock;
	uint64_t clock; /* protected by lock */
	uint64_t windows_built; /* protected by lock */
	size_t nslots;
	struct window *slots; /* protected by lock */
	struct building building[MAX_BUILDING]; /* protected by lock */
	size_t max_building; /* set before any batch is planned */
	pthread_cond_t built;
};

int rfs_plan_create(const struct rfs_config *c, const struct rfs_rowset *seqs,
		    struct rfs_planner **out)
{
	uint64_t nseq = rfs_partition_sequences(c);
	struct rfs_planner *p = calloc(1, sizeof(*p));
	int rc = -ENOMEM;
	if (!p)
		return rc;
	p->config = *c;
	p->config.dataset = p->config.log_file = NULL;
	p->config.weights = p->config.label = NULL;
	p->config.layer = p->config.var_names = NULL;
	p->config.filter = (struct rfs_strlist){ 0 };
	p->seqs = seqs;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->built, NULL);
	/* Enough slots for every sequence's current and next window. */
	p->nslots = nseq < 127 ? 2 + 2 * nseq : 256;
	p->lengths = calloc(nseq, sizeof(*p->lengths));
	p->slots = calloc(p->nslots, sizeof(*p->slots));
	if (!p->lengths || !p->slots)
		goto fail;
	for (uint64_t s = 0; s < nseq; s++) {
		struct rfs_sampler sm;
		rfs_sampler_init(&sm, c, &seqs[s], 0, s);
		p->lengths[s] = sm.length;
	}
	rc = rfs_partition_layout(c, p->lengths, &p->layout);
	if (rc != 0)
		goto fail;
	p->order_unit = rfs_sampler_draws(c->strategy) ? c->block_size : 1;
	p->max_building = MAX_BUILDING;
	*out = p;
	return 0;
fail:
	rfs_plan_destroy(p);
	return rc;
}

void rfs_plan_destroy(struct rfs_planner *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->slots && i < p->nslots; i++)
		free(p->slots[i].rows);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->built);
	free(p->slots);
	free(p->lengths);
	free(p);
}

const struct rfs_layout *rfs_plan_layout(const struct rfs_planner *p)
{
	return &p->layout;
}

uint64_t rfs_plan_sequence_length(const struct rfs_planner *p, uint64_t seq)
{
	return p->lengths[seq];
}

/* Bytes of one window's row ids (a sequence may be shorter); none for
 * streaming, which builds no windows. */
static uint64_t window_bytes(const struct rfs_planner *p)
{
	if (p->config.strategy == RFS_STREAMING)
		return 0;
	uint64_t longest = 0;
	for (uint64_t s = 0; s < p->layout.sequences; s++)
		if (p->lengths[s] > longest)
			longest = p->lengths[s];
	uint64_t rows = p->layout.window < longest ? p->layout.window : longest;
	return rows * sizeof(uint64_t);
}

size_t rfs_plan_memory_bound(const struct rfs_planner *p)
{
	/* The cached windows, and two arrays per build in progress. */
	return (p->nslots + 2 * p->max_building) * window_bytes(p);
}

size_t rfs_plan_least(const struct rfs_planner *p)
{
	return (p->nslots + 2) * window_bytes(p);
}

int rfs_plan_limit(struct rfs_planner *p, size_t budget, size_t *least)
{
	uint64_t w = window_bytes(p);
	*least = rfs_plan_least(p);
	if (*least == 0)
		return 0;
	uint64_t fit = budget / w; /* windows the budget holds */
	if (fit < p->nslots + 2)
		return -ENOSPC;
	uint64_t builds = (fit - p->nslots) / 2;
	p->max_building = builds < MAX_BUILDING ? (size_t)builds : MAX_BUILDING;
	return 0;
}

uint64_t rfs_plan_windows_built(struct rfs_planner *p)
{
	pthread_mutex_lock(&p->lock);
	uint64_t n = p->windows_built;
	pthread_mutex_unlock(&p->lock);
	return n;
}

static int build_window(const struct rfs_planner *p, uint64_t epoch,
			uint64_t seq, uint64_t index, struct window *w)
{
	const struct rfs_config *c = &p->config;
	struct rfs_sampler s;
	rfs_sampler_init(&s, c, &p->seqs[seq], epoch, seq);
	uint64_t start = index * p->layout.window;
	uint64_t len = p->lengths[seq] - start;
	if (len > p->layout.window)
		len = p->layout.window;
	uint64_t *sorted = malloc(len * sizeof(*sorted));
	uint64_t *served = malloc(len * sizeof(*served));
	if (!sorted || !served) {
		free(sorted);
		free(served);
		return -ENOMEM;
	}
	rfs_sampler_rows(&s, start, len, sorted);
	rfs_rowsort_u64(sorted, served, len);
	/* With one sequence the key index is the window number, as before
	 * partition=file existed; plans stay the same. */
	struct rfs_blocked order;
	rfs_permute_blocked_init(
		&order, len, p->order_unit,
		rfs_permute_key(c->seed, epoch, RFS_PURPOSE_WINDOW,
				index * p->layout.sequences + seq));
	rfs_permute_blocked_apply_range(&order, 0, len, served);
	for (uint64_t i = 0; i < len; i++)
		served[i] = sorted[served[i]];
	free(sorted);
	*w = (struct window){
		.epoch = epoch, .seq = seq, .index = index, .rows = served
	};
	return 0;
}

static struct window *find_window(struct rfs_planner *p, uint64_t epoch,
				  uint64_t seq, uint64_t index)
{
	for (size_t i = 0; i < p->nslots; i++) {
		struct window *w = &p->slots[i];
		if (w->rows && w->epoch == epoch && w->seq == seq &&
		    w->index == index)
			return w;
	}
	return NULL;
}

/* Keeps w (taking its rows) unless another thread cached it meanwhile. */
static struct window *insert_window(struct rfs_planner *p, struct window *w)
{
	struct window *have = find_window(p, w->epoch, w->seq, w->index);
	if (have) {
		free(w->rows);
		return have;
	}
	struct window *victim = &p->slots[0];
	for (size_t i = 1; i < p->nslots; i++)
		if (p->slots[i].last_used < victim->last_used)
			victim = &p->slots[i];
	free(victim->rows);
	*victim = *w;
	return victim;
}

static struct building *find_building(struct rfs_planner *p, uint64_t epoch,
				      uint64_t seq, uint64_t index)
{
	for (size_t i = 0; i < MAX_BUILDING; i++) {
		struct building *b = &p->building[i];
		if (b->busy && b->epoch == epoch && b->seq == seq &&
		    b->index == index)
			return b;
	}
	return NULL;
}

/* @return a free entry marked busy for the window, or NULL when all are
 * taken (then the caller waits for one). */
static struct building *announce(struct rfs_planner *p, uint64_t epoch,
				 uint64_t seq, uint64_t index)
{
	for (size_t i = 0; i < p->max_building; i++) {
		struct building *b = &p->building[i];
		if (!b->busy) {
			*b = (struct building){ epoch, seq, index, 1 };
			return b;
		}
	}
	return NULL;
}

/* Called and returns with the lock held; the window stays valid until the
 * lock is next released. Builds outside the lock. */
static int get_window(struct rfs_planner *p, uint64_t epoch, uint64_t seq,
		      uint64_t index, struct window **out)
{
	struct window *w;
	struct building *b = NULL;
	while (!(w = find_window(p, epoch, seq, index)) &&
	       (find_building(p, epoch, seq, index) ||
		!(b = announce(p, epoch, seq, index))))
		pthread_cond_wait(&p->built, &p->lock);
	if (!w) {
		struct window fresh;
		pthread_mutex_unlock(&p->lock);
		int rc = build_window(p, epoch, seq, index, &fresh);
		pthread_mutex_lock(&p->lock);
		b->busy = 0;
		pthread_cond_broadcast(&p->built);
		if (rc != 0)
			return rc;
		p->windows_built++;
		w = insert_window(p, &fresh);
	}
	w->last_used = ++p->clock;
	*out = w;
	return 0;
}

int rfs_plan_batch(struct rfs_planner *p, uint64_t epoch, uint64_t rank,
		   uint64_t batch, int64_t *out)
{
	const struct rfs_config *c = &p->config;
	const struct rfs_layout *l = &p->layout;
	uint64_t n = rfs_partition_batch_rows(l, batch);
	struct window *w = NULL;
	int rc = 0;

	if (c->strategy != RFS_STREAMING)
		pthread_mutex_lock(&p->lock);
	for (uint64_t j = 0; j < n && rc == 0; j++) {
		uint64_t seq, pos;
		rfs_partition_locate(c, l, rank, batch, j, &seq, &pos);
		pos %= p->lengths[seq]; /* drop_last=0 wraps around */
		if (c->strategy == RFS_STREAMING) {
			out[j] = (int64_t)rfs_rowset_row(&p->seqs[seq], pos);
			continue;
		}
		uint64_t index = pos / l->window;
		if (!w || w->epoch != epoch || w->seq != seq ||
		    w->index != index)
			rc = get_window(p, epoch, seq, index, &w);
		if (rc == 0)
			out[j] = (int64_t)w->rows[pos - index * l->window];
	}
	if (c->strategy != RFS_STREAMING)
		pthread_mutex_unlock(&p->lock);
	return rc;
}
