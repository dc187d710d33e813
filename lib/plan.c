/*
 * From epoch sequence to batches: fetch windows.
 *
 * S_e is cut into windows of fetch_factor global batches. A window's rows are
 * read from the source together, so they are sorted (I/O locality), and then
 * a keyed permutation of the window (seed, epoch, window) decides the order
 * in which they are cut into global batches. The result T_e is S_e with each
 * window shuffled internally: for block_shuffle a batch mixes rows of many
 * blocks instead of serving a block's neighbours together. streaming keeps
 * windows in order, so T_e = S_e.
 *
 * Planning one batch costs one window: O(W_f log W_f) with W_f =
 * fetch_factor * G rows, independent of N. Windows are cached (a few) since
 * every batch of every rank in a window needs the same sorted list.
 */
#include "plan.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "sampler.h"

#define WINDOW_SLOTS 4

struct window {
	uint64_t epoch;
	uint64_t index;
	uint64_t *rows; /* sorted; NULL: empty slot */
	uint64_t len;
	uint64_t last_used;
};

struct rfs_planner {
	struct rfs_config config;
	uint64_t rows;
	struct rfs_layout layout;
	pthread_mutex_t lock;
	uint64_t clock; /* protected by lock */
	struct window slots[WINDOW_SLOTS]; /* protected by lock */
};

int rfs_planner_create(const struct rfs_config *c, uint64_t rows,
		       struct rfs_planner **out)
{
	struct rfs_planner *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->config = *c;
	p->config.dataset = p->config.log_file = NULL;
	p->rows = rows;
	int rc = rfs_partition_layout(c, rows, &p->layout);
	if (rc != 0) {
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void rfs_planner_destroy(struct rfs_planner *p)
{
	if (!p)
		return;
	for (int i = 0; i < WINDOW_SLOTS; i++)
		free(p->slots[i].rows);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

const struct rfs_layout *rfs_planner_layout(const struct rfs_planner *p)
{
	return &p->layout;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int build_window(const struct rfs_planner *p, uint64_t epoch,
			uint64_t index, struct window *w)
{
	struct rfs_sampler s;
	rfs_sampler_init(&s, &p->config, p->rows, epoch);
	uint64_t start = index * p->layout.window;
	uint64_t len = rfs_sampler_length(&s) - start;
	if (len > p->layout.window)
		len = p->layout.window;
	uint64_t *rows = malloc(len * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (uint64_t i = 0; i < len; i++)
		rows[i] = rfs_sampler_row(&s, start + i);
	qsort(rows, len, sizeof(*rows), cmp_u64);
	*w = (struct window){ .epoch = epoch, .index = index, .rows = rows,
			      .len = len };
	return 0;
}

static struct window *find_window(struct rfs_planner *p, uint64_t epoch,
				  uint64_t index)
{
	for (int i = 0; i < WINDOW_SLOTS; i++) {
		struct window *w = &p->slots[i];
		if (w->rows && w->epoch == epoch && w->index == index)
			return w;
	}
	return NULL;
}

/* Keeps w (taking its rows) unless another thread cached it meanwhile. */
static struct window *insert_window(struct rfs_planner *p, struct window *w)
{
	struct window *have = find_window(p, w->epoch, w->index);
	if (have) {
		free(w->rows);
		return have;
	}
	struct window *victim = &p->slots[0];
	for (int i = 1; i < WINDOW_SLOTS; i++)
		if (p->slots[i].last_used < victim->last_used)
			victim = &p->slots[i];
	free(victim->rows);
	*victim = *w;
	return victim;
}

int rfs_planner_batch(struct rfs_planner *p, uint64_t epoch, uint64_t rank,
		      uint64_t batch, int64_t *out)
{
	const struct rfs_config *c = &p->config;
	uint64_t first = rfs_partition_position(c, rank, batch, 0);

	if (c->strategy == RFS_STREAMING) {
		for (uint64_t j = 0; j < c->batch_size; j++)
			out[j] = (int64_t)(first + j);
		return 0;
	}

	/* A batch never straddles windows: a window is whole global batches. */
	uint64_t index = first / p->layout.window;
	pthread_mutex_lock(&p->lock);
	struct window *w = find_window(p, epoch, index);
	if (!w) {
		pthread_mutex_unlock(&p->lock);
		struct window fresh;
		int rc = build_window(p, epoch, index, &fresh);
		if (rc != 0)
			return rc;
		pthread_mutex_lock(&p->lock);
		w = insert_window(p, &fresh);
	}
	w->last_used = ++p->clock;

	struct rfs_permute order;
	rfs_permute_init(&order, w->len,
			 rfs_permute_key(c->seed, epoch, RFS_PURPOSE_WINDOW,
					 index));
	uint64_t base = index * p->layout.window;
	for (uint64_t j = 0; j < c->batch_size; j++) {
		uint64_t local = first + j - base;
		out[j] = (int64_t)w->rows[rfs_permute_apply(&order, local)];
	}
	pthread_mutex_unlock(&p->lock);
	return 0;
}
