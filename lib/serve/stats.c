/* SPDX-License-Identifier: MIT */
/*
 * Counters are relaxed atomics, read without a lock: a snapshot may mix
 * values from a few microseconds apart, which a dashboard does not mind.
 *
 * rows/s is over the last RATE_SECONDS whole seconds: each rank keeps a
 * ring of per-second row counts, the slot of second t at t mod RING. So it
 * falls to 0 seconds after a reader stops; the epoch rate stays. It is
 * over the rank's opens of one epoch, the epoch of its last open: the
 * rows of those opens after the first, over the time from the first to
 * the last (the first open's rows were read before the clock started, so
 * a reader opening a batch every d seconds shows rows / d). An open of
 * another epoch starts a new span; the last span with two opens or more
 * is shown until the new one has two. The
 * generation time distribution is a histogram of quarter-octave buckets
 * (each 19 % wider than the last) from 1 us, so p50 and p99 are upper
 * bucket bounds, within 19 %.
 */
#include "serve/stats.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RING 16
#define RATE_SECONDS 10
#define BUCKETS 96 /* 2^(96/4) us = 16.7 s */

/* One rank's opens of one epoch. */
struct epoch_span {
	uint64_t epoch;
	uint64_t opens; /* 0: no span */
	uint64_t first_ns, last_ns;
	uint64_t rows_after_first; /* of the opens after the first */
};

struct rank_counters {
	_Atomic uint64_t batches, bytes;
	_Atomic uint64_t found[3];
	_Atomic uint64_t wait_ns;
	pthread_mutex_t ring_lock;
	/* The last open, one snapshot: protected by ring_lock. */
	uint64_t last_epoch, last_batch, last_open_s;
	uint64_t ring_second[RING]; /* protected by ring_lock */
	uint64_t ring_rows[RING]; /* protected by ring_lock */
	/* The span of the last open's epoch, and the last span before it
	 * with two opens or more: protected by ring_lock. */
	struct epoch_span span, shown;
	/* The last failed generation's JSON, not closed, and when: protected
	 * by ring_lock. */
	char *error;
	uint64_t error_s;
};

struct rfs_stats {
	uint64_t ranks;
	_Atomic uint64_t generated[BUCKETS];
	struct rank_counters per_rank[];
};

#define NS_PER_S 1000000000u

uint64_t rfs_stats_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

int rfs_stats_create(uint64_t ranks, struct rfs_stats **out)
{
	struct rfs_stats *s =
		calloc(1, sizeof(*s) + ranks * sizeof(s->per_rank[0]));
	if (!s)
		return -ENOMEM;
	s->ranks = ranks;
	for (uint64_t r = 0; r < ranks; r++)
		pthread_mutex_init(&s->per_rank[r].ring_lock, NULL);
	*out = s;
	return 0;
}

void rfs_stats_destroy(struct rfs_stats *s)
{
	if (!s)
		return;
	for (uint64_t r = 0; r < s->ranks; r++) {
		pthread_mutex_destroy(&s->per_rank[r].ring_lock);
		free(s->per_rank[r].error);
	}
	free(s);
}

#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), memory_order_relaxed)
#define GET(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* Whether sp has a rate: two opens or more, over some time. */
static int has_rate(const struct epoch_span *sp)
{
	return sp->opens >= 2 && sp->last_ns > sp->first_ns;
}

/* Counts an open of epoch at now_ns in c's spans. Called with ring_lock
 * held. */
static void span_open(struct rank_counters *c, uint64_t epoch, uint64_t rows,
		      uint64_t now_ns)
{
	struct epoch_span *sp = &c->span;
	if (sp->opens && sp->epoch == epoch) {
		sp->opens++;
		sp->rows_after_first += rows;
		if (now_ns > sp->last_ns)
			sp->last_ns = now_ns;
		return;
	}
	if (has_rate(sp))
		c->shown = *sp;
	*sp = (struct epoch_span){ .epoch = epoch,
				   .opens = 1,
				   .first_ns = now_ns,
				   .last_ns = now_ns };
}

void rfs_stats_batch_opened(struct rfs_stats *s, uint64_t rank, uint64_t epoch,
			    uint64_t batch, uint64_t rows, uint64_t now_ns)
{
	struct rank_counters *c = &s->per_rank[rank];
	uint64_t t = now_ns / NS_PER_S;
	pthread_mutex_lock(&c->ring_lock);
	span_open(c, epoch, rows, now_ns);
	ADD(c->batches, 1); /* with the last open: one snapshot */
	c->last_epoch = epoch;
	c->last_batch = batch;
	c->last_open_s = t;
	if (c->ring_second[t % RING] != t) {
		c->ring_second[t % RING] = t;
		c->ring_rows[t % RING] = 0;
	}
	c->ring_rows[t % RING] += rows;
	pthread_mutex_unlock(&c->ring_lock);
}

void rfs_stats_bytes_served(struct rfs_stats *s, uint64_t rank, uint64_t bytes)
{
	ADD(s->per_rank[rank].bytes, bytes);
}

void rfs_stats_first_read(struct rfs_stats *s, uint64_t rank,
			  enum rfs_cache_found found, uint64_t wait_ns)
{
	ADD(s->per_rank[rank].found[found], 1);
	ADD(s->per_rank[rank].wait_ns, wait_ns);
}

void rfs_stats_failed(struct rfs_stats *s, uint64_t rank, const char *path,
		      const char *why)
{
	struct rank_counters *c = &s->per_rank[rank];
	struct rfs_buf j = { 0 };
	char *json;
	size_t len;
	rfs_buf_printf(&j, "\"last_error\": {\"path\": ");
	rfs_buf_json_string(&j, path);
	rfs_buf_printf(&j, ", \"error\": ");
	rfs_buf_json_string(&j, why);
	if (rfs_buf_finish(&j, &json, &len) != 0)
		return; /* out of memory: the one before stays */
	pthread_mutex_lock(&c->ring_lock);
	free(c->error);
	c->error = json;
	c->error_s = rfs_stats_now_ns() / NS_PER_S;
	pthread_mutex_unlock(&c->ring_lock);
}

void rfs_stats_generated(struct rfs_stats *s, uint64_t ns)
{
	double us = (double)ns / 1e3;
	int b = us <= 1 ? 0 : (int)ceil(4 * log2(us));
	ADD(s->generated[b < BUCKETS ? b : BUCKETS - 1], 1);
}

/* Upper bound in ms of the bucket holding quantile q, or -1 if empty. */
static double quantile_ms(struct rfs_stats *s, double q, uint64_t total)
{
	uint64_t seen = 0;
	for (int b = 0; b < BUCKETS && total; b++) {
		seen += GET(s->generated[b]);
		if ((double)seen >= q * (double)total)
			return pow(2.0, b / 4.0) / 1e3;
	}
	return -1;
}

/* Rank r's member of "ranks", read under its lock: one snapshot (an open
 * after t, while rendering, is 0 seconds ago). served: its batches and
 * bytes. */
static void render_rank(struct rank_counters *c, uint64_t r, uint64_t t,
			struct rfs_buf *b, uint64_t served[2])
{
	uint64_t rows = 0, ready = GET(c->found[RFS_CACHE_READY]);
	uint64_t waited = GET(c->found[RFS_CACHE_WAITED]);
	uint64_t made = GET(c->found[RFS_CACHE_FILLED]);
	uint64_t reads = ready + waited + made;
	pthread_mutex_lock(&c->ring_lock);
	for (int i = 0; i < RING; i++)
		if (c->ring_second[i] < t &&
		    c->ring_second[i] + RATE_SECONDS >= t)
			rows += c->ring_rows[i];
	served[0] = GET(c->batches);
	served[1] = GET(c->bytes);
	rfs_buf_printf(b,
		       "%s\n    {\"rank\": %llu, \"batches_served\": %llu, "
		       "\"bytes_served\": %llu, \"rows_per_s\": %.1f, ",
		       r ? "," : "", (unsigned long long)r,
		       (unsigned long long)served[0],
		       (unsigned long long)served[1],
		       (double)rows / RATE_SECONDS);
	const struct epoch_span *sp = has_rate(&c->span) ? &c->span : &c->shown;
	double secs = (double)(sp->last_ns - sp->first_ns) / NS_PER_S;
	if (sp->opens)
		rfs_buf_printf(b,
			       "\"epoch_rows_per_s\": %.1f, \"epoch_rate\": "
			       "{\"epoch\": %llu, \"batches\": %llu, "
			       "\"seconds\": %.3f}, ",
			       (double)sp->rows_after_first / secs,
			       (unsigned long long)sp->epoch,
			       (unsigned long long)sp->opens, secs);
	else
		rfs_buf_printf(b, "\"epoch_rows_per_s\": null, "
				  "\"epoch_rate\": null, ");
	if (served[0])
		rfs_buf_printf(b,
			       "\"last_opened\": {\"epoch\": %llu, \"batch\": "
			       "%llu, \"seconds_ago\": %llu}, ",
			       (unsigned long long)c->last_epoch,
			       (unsigned long long)c->last_batch,
			       (unsigned long long)(t > c->last_open_s ?
							    t - c->last_open_s :
							    0));
	else
		rfs_buf_printf(b, "\"last_opened\": null, ");
	if (c->error)
		rfs_buf_printf(b, "%s, \"seconds_ago\": %llu}, ", c->error,
			       (unsigned long long)(t > c->error_s ?
							    t - c->error_s :
							    0));
	else
		rfs_buf_printf(b, "\"last_error\": null, ");
	pthread_mutex_unlock(&c->ring_lock);
	rfs_buf_printf(b,
		       "\"first_reads\": {\"ready\": %llu, \"waited\": %llu, "
		       "\"generated\": %llu}, \"ready_rate\": %.3f, "
		       "\"wait_s\": %.3f}",
		       (unsigned long long)ready, (unsigned long long)waited,
		       (unsigned long long)made,
		       reads ? (double)ready / (double)reads : 0.0,
		       (double)GET(c->wait_ns) / 1e9);
}

void rfs_stats_render_json(struct rfs_stats *s, struct rfs_buf *b)
{
	uint64_t batches = 0, bytes = 0, t = rfs_stats_now_ns() / NS_PER_S,
		 total = 0;
	struct rfs_buf ranks = { 0 };
	for (uint64_t r = 0; r < s->ranks; r++) {
		uint64_t served[2];
		render_rank(&s->per_rank[r], r, t, &ranks, served);
		batches += served[0];
		bytes += served[1];
	}
	for (int k = 0; k < BUCKETS; k++)
		total += GET(s->generated[k]);
	/* null before the first generation, as other counters without a
	 * value yet. */
	char p50[32] = "null", p99[32] = "null";
	if (total) {
		snprintf(p50, sizeof(p50), "%.3f", quantile_ms(s, 0.5, total));
		snprintf(p99, sizeof(p99), "%.3f", quantile_ms(s, 0.99, total));
	}
	rfs_buf_printf(
		b,
		"  \"batches_served\": %llu,\n  \"bytes_served\": %llu,\n"
		"  \"generation\": {\"batches\": %llu, \"p50_ms\": %s, "
		"\"p99_ms\": %s},\n"
		"  \"ranks\": [%s\n  ]",
		(unsigned long long)batches, (unsigned long long)bytes,
		(unsigned long long)total, p50, p99,
		ranks.failed || !ranks.data ? "" : ranks.data);
	if (ranks.failed)
		b->failed = 1;
	rfs_buf_free(&ranks);
}
