/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/serve/inode.c: names <-> nodes <-> inode numbers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/inode.h"
#include "serve/kind.h"

static struct rfs_node node(enum rfs_node_type type, uint64_t epoch,
			    uint64_t rank, uint64_t kind, uint64_t batch)
{
	return (struct rfs_node){ .type = type,
				  .epoch = epoch,
				  .rank = rank,
				  .kind = kind,
				  .batch = batch };
}

static void assert_node_equal(const struct rfs_node *a,
			      const struct rfs_node *b)
{
	if (a->type != b->type || a->epoch != b->epoch || a->rank != b->rank ||
	    a->kind != b->kind || a->batch != b->batch)
		fail_msg("node (%d e%llu r%llu k%llu b%llu) != (%d e%llu r%llu "
			 "k%llu b%llu)",
			 a->type, (unsigned long long)a->epoch,
			 (unsigned long long)a->rank,
			 (unsigned long long)a->kind,
			 (unsigned long long)a->batch, b->type,
			 (unsigned long long)b->epoch,
			 (unsigned long long)b->rank,
			 (unsigned long long)b->kind,
			 (unsigned long long)b->batch);
}

static void check_round_trip(const struct rfs_inode_space *s, struct rfs_node n)
{
	uint64_t ino = rfs_inode_of(s, &n);
	struct rfs_node back;
	assert_true(ino >= 1);
	assert_int_equal(rfs_inode_node(s, ino, &back), 0);
	assert_node_equal(&back, &n);
}

static void test_space_numbers(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	assert_int_equal(rfs_inode_space_init(&s, 4, 2, 0, 100, 10), 0);
	assert_true(s.world_size == 4 && s.kinds == 2 && s.batches == 100 &&
		    s.epochs_listed == 10);
	assert_true(s.per_rank == 1 + 2 + 2 * 100);
	assert_true(s.per_epoch == 2 + 4 * s.per_rank);
	assert_int_equal(s.width, 6);
}

static void test_round_trip_every_type(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	const uint64_t ws = 3, batches = 1000;
	const uint64_t max_epoch = RFS_EPOCHS - 1;
	assert_int_equal(
		rfs_inode_space_init(&s, ws, RFS_KIND_NPZ, 0, batches, 10), 0);
	check_round_trip(&s, node(RFS_NODE_ROOT, 0, 0, 0, 0));
	check_round_trip(&s, node(RFS_NODE_CONFIG, 0, 0, 0, 0));
	check_round_trip(&s, node(RFS_NODE_DATASET, 0, 0, 0, 0));
	check_round_trip(&s, node(RFS_NODE_STATS, 0, 0, 0, 0));
	check_round_trip(&s, node(RFS_NODE_EPOCHS, 0, 0, 0, 0));
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	assert_true(rfs_inode_of(&s, &root) == 1); /* FUSE's root */
	const uint64_t epochs[] = { 0, 1, 2, 12345, max_epoch - 1, max_epoch };
	for (size_t i = 0; i < sizeof(epochs) / sizeof(epochs[0]); i++) {
		uint64_t e = epochs[i];
		check_round_trip(&s, node(RFS_NODE_EPOCH, e, 0, 0, 0));
		check_round_trip(&s, node(RFS_NODE_RANKS, e, 0, 0, 0));
		for (uint64_t r = 0; r < ws; r++) {
			check_round_trip(&s, node(RFS_NODE_RANK, e, r, 0, 0));
			for (uint64_t k = 0; k < RFS_KIND_NPZ; k++) {
				check_round_trip(&s, node(RFS_NODE_KIND, e, r,
							  k, 0));
				check_round_trip(&s, node(RFS_NODE_FILE, e, r,
							  k, 0));
				check_round_trip(&s, node(RFS_NODE_FILE, e, r,
							  k, 1));
				check_round_trip(&s, node(RFS_NODE_FILE, e, r,
							  k, batches - 1));
			}
		}
	}
}

static void test_invalid_numbers(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	struct rfs_node n;
	assert_int_equal(rfs_inode_space_init(&s, 2, 2, 0, 10, 3), 0);
	assert_int_equal(rfs_inode_node(&s, 0, &n), -ENOENT);
	for (uint64_t ino = 8; ino < 16; ino++)
		assert_int_equal(rfs_inode_node(&s, ino, &n), -ENOENT);
	/* The number after epoch 2^31 - 1 is the step view's first. */
	struct rfs_node last = node(RFS_NODE_FILE, RFS_EPOCHS - 1, 1, 1, 9);
	uint64_t ino = rfs_inode_of(&s, &last);
	assert_int_equal(rfs_inode_node(&s, ino, &n), 0);
	assert_true(ino + 1 == s.step_base);
	assert_int_equal(rfs_inode_node(&s, ino + 1, &n), 0);
	assert_node_equal(&n, &(struct rfs_node){ .type = RFS_NODE_STEP_RANK });
	/* And the number after the last step file is nobody's. */
	struct rfs_node step = node(RFS_NODE_STEP_FILE, 0, 1, 1, s.steps - 1);
	ino = rfs_inode_of(&s, &step);
	assert_int_equal(rfs_inode_node(&s, ino, &n), 0);
	assert_node_equal(&n, &step);
	assert_int_equal(rfs_inode_node(&s, ino + 1, &n), -ENOENT);
	assert_int_equal(rfs_inode_node(&s, UINT64_MAX, &n), -ENOENT);
}

static void test_overflow(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, UINT64_C(1) << 32,
					      1),
			 -EOVERFLOW);
	assert_int_equal(rfs_inode_space_init(&s, 1 << 20, 2, 0, 1 << 20, 1),
			 -EOVERFLOW);
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, UINT64_MAX, 1),
			 -EOVERFLOW);
	assert_int_equal(rfs_inode_space_init(&s, UINT64_MAX, 2, 0, 1, 1),
			 -EOVERFLOW);
	assert_int_equal(rfs_inode_space_init(&s, 1, 0, 0, 10, 1), -EOVERFLOW);
	assert_int_equal(rfs_inode_space_init(&s, 0, 2, 0, 10, 1), -EOVERFLOW);
	assert_int_equal(rfs_inode_space_init(&s, 1, UINT64_MAX, 0, 10, 1),
			 -EOVERFLOW);

	/* The largest accepted shape: its last node still round-trips. */
	uint64_t lo = 1, hi = UINT64_C(1) << 34;
	while (lo + 1 < hi) { /* largest batches accepted for 8 ranks */
		uint64_t mid = lo + (hi - lo) / 2;
		if (rfs_inode_space_init(&s, 8, 2, 0, mid, 1) == 0)
			lo = mid;
		else
			hi = mid;
	}
	assert_int_equal(rfs_inode_space_init(&s, 8, 2, 0, lo + 1, 1),
			 -EOVERFLOW);
	assert_int_equal(rfs_inode_space_init(&s, 8, 2, 0, lo, 1), 0);
	assert_true(lo > (UINT64_C(1) << 28)); /* ~2^32 files per epoch */
	struct rfs_node last =
		node(RFS_NODE_FILE, RFS_EPOCHS - 1, 7, 1, lo - 1);
	struct rfs_node first = node(RFS_NODE_EPOCH, RFS_EPOCHS - 1, 0, 0, 0);
	uint64_t ino = rfs_inode_of(&s, &last);
	assert_true(ino > rfs_inode_of(&s, &first)); /* no wrap */
	check_round_trip(&s, last);
	check_round_trip(&s, node(RFS_NODE_KIND, RFS_EPOCHS - 1, 7, 1, 0));
}

static void lookup_ok(const struct rfs_inode_space *s,
		      const struct rfs_node *parent, const char *name,
		      struct rfs_node want)
{
	struct rfs_node got;
	int rc = rfs_inode_lookup(s, parent, name, &got);
	if (rc != 0)
		fail_msg("lookup \"%s\": %d", name, rc);
	assert_node_equal(&got, &want);
}

static void lookup_fails(const struct rfs_inode_space *s,
			 const struct rfs_node *parent, const char *name,
			 int want)
{
	struct rfs_node got;
	int rc = rfs_inode_lookup(s, parent, name, &got);
	if (rc != want)
		fail_msg("lookup \"%s\" under type %d: %d, want %d", name,
			 parent->type, rc, want);
}

static void test_lookup_valid(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	assert_int_equal(rfs_inode_space_init(&s, 4, 2, 0, 100, 10), 0);
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	lookup_ok(&s, &root, "config.json", node(RFS_NODE_CONFIG, 0, 0, 0, 0));
	lookup_ok(&s, &root, "dataset.json",
		  node(RFS_NODE_DATASET, 0, 0, 0, 0));
	lookup_ok(&s, &root, "stats.json", node(RFS_NODE_STATS, 0, 0, 0, 0));
	lookup_ok(&s, &root, "epoch", node(RFS_NODE_EPOCHS, 0, 0, 0, 0));
	struct rfs_node epochs = node(RFS_NODE_EPOCHS, 0, 0, 0, 0);
	lookup_ok(&s, &epochs, "0", node(RFS_NODE_EPOCH, 0, 0, 0, 0));
	lookup_ok(&s, &epochs, "7", node(RFS_NODE_EPOCH, 7, 0, 0, 0));
	/* Any epoch resolves, not only the listed ones. */
	lookup_ok(&s, &epochs, "10", node(RFS_NODE_EPOCH, 10, 0, 0, 0));
	lookup_ok(&s, &epochs, "2147483647",
		  node(RFS_NODE_EPOCH, 2147483647, 0, 0, 0));
	struct rfs_node ep = node(RFS_NODE_EPOCH, 5, 0, 0, 0);
	lookup_ok(&s, &ep, "rank", node(RFS_NODE_RANKS, 5, 0, 0, 0));
	struct rfs_node ranks = node(RFS_NODE_RANKS, 5, 0, 0, 0);
	lookup_ok(&s, &ranks, "0", node(RFS_NODE_RANK, 5, 0, 0, 0));
	lookup_ok(&s, &ranks, "3", node(RFS_NODE_RANK, 5, 3, 0, 0));
	struct rfs_node rank = node(RFS_NODE_RANK, 5, 3, 0, 0);
	lookup_ok(&s, &rank, "batch", node(RFS_NODE_KIND, 5, 3, 0, 0));
	lookup_ok(&s, &rank, "index", node(RFS_NODE_KIND, 5, 3, 1, 0));
	struct rfs_node kind = node(RFS_NODE_KIND, 5, 3, 1, 0);
	lookup_ok(&s, &kind, "000000.npy", node(RFS_NODE_FILE, 5, 3, 1, 0));
	lookup_ok(&s, &kind, "000042.npy", node(RFS_NODE_FILE, 5, 3, 1, 42));
	lookup_ok(&s, &kind, "000099.npy", node(RFS_NODE_FILE, 5, 3, 1, 99));
}

static void test_lookup_malformed(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	assert_int_equal(rfs_inode_space_init(&s, 4, 2, 0, 100, 10), 0);
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	static const char *const bad_root[] = {
		"",	  "config", "Config.json", "config.json ", "epochs",
		"epoch/", ".",	    "..",	   "rank",	   "batch",
	};
	for (size_t i = 0; i < sizeof(bad_root) / sizeof(bad_root[0]); i++)
		lookup_fails(&s, &root, bad_root[i], -ENOENT);

	struct rfs_node epochs = node(RFS_NODE_EPOCHS, 0, 0, 0, 0);
	static const char *const bad_epoch[] = {
		"",
		"00",
		"01",
		"1e3",
		"-1",
		"+1",
		" 1",
		"1 ",
		"0x1",
		"1.0",
		"2147483648",
		"4294967296",
		"99999999999999999999999",
		"a",
		"٣",
	};
	for (size_t i = 0; i < sizeof(bad_epoch) / sizeof(bad_epoch[0]); i++)
		lookup_fails(&s, &epochs, bad_epoch[i], -ENOENT);

	struct rfs_node ep = node(RFS_NODE_EPOCH, 0, 0, 0, 0);
	static const char *const bad_ranks[] = { "rank ", "ranks", "Rank",
						 "",	  " rank", "rank/" };
	for (size_t i = 0; i < sizeof(bad_ranks) / sizeof(bad_ranks[0]); i++)
		lookup_fails(&s, &ep, bad_ranks[i], -ENOENT);

	struct rfs_node ranks = node(RFS_NODE_RANKS, 0, 0, 0, 0);
	static const char *const bad_rank[] = {
		"4",  "5",  "00",  "01", "-0",
		"+1", " 1", "1e0", "",	 "18446744073709551616"
	};
	for (size_t i = 0; i < sizeof(bad_rank) / sizeof(bad_rank[0]); i++)
		lookup_fails(&s, &ranks, bad_rank[i], -ENOENT);

	struct rfs_node rank = node(RFS_NODE_RANK, 0, 1, 0, 0);
	static const char *const bad_kind[] = { "batches", "Batch",  "idx",
						"",	   "batch ", "0" };
	for (size_t i = 0; i < sizeof(bad_kind) / sizeof(bad_kind[0]); i++)
		lookup_fails(&s, &rank, bad_kind[i], -ENOENT);

	struct rfs_node kind = node(RFS_NODE_KIND, 0, 1, 0, 0);
	static const char *const bad_file[] = {
		"0.npy",       "1.npy",	      "00001.npy",  "0000001.npy",
		"000000.NPY",  "000000.Npy",  "000000.npz", "000000",
		"000000.npy ", " 00000.npy",  "+00001.npy", "-00001.npy",
		"00001e.npy",  "0x0001.npy",  "000100.npy", "999999.npy",
		"000000.npy.", "000000..npy", ".npy",	    "",
		"000000.npyx", "00000 .npy",
	};
	for (size_t i = 0; i < sizeof(bad_file) / sizeof(bad_file[0]); i++)
		lookup_fails(&s, &kind, bad_file[i], -ENOENT);
}

static void test_lookup_under_file_and_long_names(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	assert_int_equal(rfs_inode_space_init(&s, 2, 2, 0, 10, 3), 0);
	static const enum rfs_node_type files[] = {
		RFS_NODE_CONFIG, RFS_NODE_DATASET, RFS_NODE_STATS, RFS_NODE_FILE
	};
	for (size_t i = 0; i < 4; i++) {
		struct rfs_node f = node(files[i], 0, 0, 0, 0);
		assert_int_equal(rfs_inode_is_dir(&f), 0);
		lookup_fails(&s, &f, "x", -ENOTDIR);
		lookup_fails(&s, &f, "000000.npy", -ENOTDIR);
		assert_true(rfs_inode_count(&s, &f) == 0);
	}
	static const enum rfs_node_type dirs[] = {
		RFS_NODE_ROOT,	RFS_NODE_EPOCHS, RFS_NODE_EPOCH,
		RFS_NODE_RANKS, RFS_NODE_RANK,	 RFS_NODE_KIND
	};
	char longname[301];
	memset(longname, '1', 300);
	longname[300] = '\0';
	for (size_t i = 0; i < 6; i++) {
		struct rfs_node d = node(dirs[i], 0, 0, 0, 0);
		assert_int_not_equal(rfs_inode_is_dir(&d), 0);
		lookup_fails(&s, &d, longname, -ENAMETOOLONG);
	}
	/* 255 bytes is allowed as a name (and just does not exist). */
	longname[255] = '\0';
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	lookup_fails(&s, &root, longname, -ENOENT);
}

static void test_width(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	struct rfs_node n;
	char name[64];
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 1, 1), 0);
	assert_int_equal(s.width, 6);
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 10, 1), 0);
	assert_int_equal(s.width, 6);
	/* 5-digit batch numbers are padded to 6 too. */
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 50000, 1), 0);
	assert_int_equal(s.width, 6);
	struct rfs_node k5 = node(RFS_NODE_KIND, 0, 0, 1, 0);
	lookup_ok(&s, &k5, "012345.npy", node(RFS_NODE_FILE, 0, 0, 1, 12345));
	lookup_fails(&s, &k5, "12345.npy", -ENOENT);
	lookup_fails(&s, &k5, "050000.npy", -ENOENT);
	rfs_inode_entry(&s, &k5, 49999, &n, name, sizeof(name));
	assert_string_equal(name, "049999.npy");
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 100000, 1), 0);
	assert_int_equal(s.width, 6);
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 1000000, 1), 0);
	assert_int_equal(s.width, 6);
	struct rfs_node kind = node(RFS_NODE_KIND, 0, 0, 0, 0);
	lookup_ok(&s, &kind, "999999.npy",
		  node(RFS_NODE_FILE, 0, 0, 0, 999999));
	lookup_fails(&s, &kind, "1000000.npy", -ENOENT);

	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 1000001, 1), 0);
	assert_int_equal(s.width, 7);
	lookup_ok(&s, &kind, "1000000.npy",
		  node(RFS_NODE_FILE, 0, 0, 0, 1000000));
	lookup_ok(&s, &kind, "0000000.npy", node(RFS_NODE_FILE, 0, 0, 0, 0));
	lookup_ok(&s, &kind, "0999999.npy",
		  node(RFS_NODE_FILE, 0, 0, 0, 999999));
	lookup_fails(&s, &kind, "000000.npy", -ENOENT);
	lookup_fails(&s, &kind, "999999.npy", -ENOENT);
	lookup_fails(&s, &kind, "1000001.npy", -ENOENT);
	rfs_inode_entry(&s, &kind, 1000000, &n, name, sizeof(name));
	assert_string_equal(name, "1000000.npy");
	rfs_inode_entry(&s, &kind, 3, &n, name, sizeof(name));
	assert_string_equal(name, "0000003.npy");

	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 123456789, 1), 0);
	assert_int_equal(s.width, 9);
	lookup_ok(&s, &kind, "123456788.npy",
		  node(RFS_NODE_FILE, 0, 0, 0, 123456788));
}

static void test_count_and_entries(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	struct rfs_node n;
	char name[64];
	assert_int_equal(rfs_inode_space_init(&s, 3, 2, 0, 12, 5), 0);
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	assert_true(rfs_inode_count(&s, &root) == 5);
	static const char *const root_names[] = { "config.json", "dataset.json",
						  "stats.json", "epoch",
						  "step" };
	for (uint64_t i = 0; i < 5; i++) {
		rfs_inode_entry(&s, &root, i, &n, name, sizeof(name));
		assert_string_equal(name, root_names[i]);
	}
	struct rfs_node epochs = node(RFS_NODE_EPOCHS, 0, 0, 0, 0);
	assert_true(rfs_inode_count(&s, &epochs) == 5);
	rfs_inode_entry(&s, &epochs, 4, &n, name, sizeof(name));
	assert_string_equal(name, "4");
	assert_node_equal(&n, &(struct rfs_node){ .type = RFS_NODE_EPOCH,
						  .epoch = 4 });
	struct rfs_node ep = node(RFS_NODE_EPOCH, 2, 0, 0, 0);
	assert_true(rfs_inode_count(&s, &ep) == 1);
	rfs_inode_entry(&s, &ep, 0, &n, name, sizeof(name));
	assert_string_equal(name, "rank");
	struct rfs_node ranks = node(RFS_NODE_RANKS, 2, 0, 0, 0);
	assert_true(rfs_inode_count(&s, &ranks) == 3);
	rfs_inode_entry(&s, &ranks, 2, &n, name, sizeof(name));
	assert_string_equal(name, "2");
	struct rfs_node rank = node(RFS_NODE_RANK, 2, 1, 0, 0);
	assert_true(rfs_inode_count(&s, &rank) == 2);
	rfs_inode_entry(&s, &rank, 0, &n, name, sizeof(name));
	assert_string_equal(name, "batch");
	rfs_inode_entry(&s, &rank, 1, &n, name, sizeof(name));
	assert_string_equal(name, "index");
	struct rfs_node kind = node(RFS_NODE_KIND, 2, 1, 1, 0);
	assert_true(rfs_inode_count(&s, &kind) == 12);
	rfs_inode_entry(&s, &kind, 11, &n, name, sizeof(name));
	assert_string_equal(name, "000011.npy");
	assert_node_equal(&n, &(struct rfs_node){ .type = RFS_NODE_FILE,
						  .epoch = 2,
						  .rank = 1,
						  .kind = 1,
						  .batch = 11 });
	/* A small name buffer truncates, NUL-terminated. */
	char small[4];
	rfs_inode_entry(&s, &kind, 11, &n, small, sizeof(small));
	assert_string_equal(small, "000");
}

/* Walks the whole tree through readdir entries: every entry looks up to
 * itself by name, round-trips through its number, and numbers are
 * distinct. */
struct walk {
	uint64_t *inos;
	size_t count, cap;
};

static void walk(const struct rfs_inode_space *s, const struct rfs_node *dir,
		 struct walk *w)
{
	uint64_t n = rfs_inode_count(s, dir);
	for (uint64_t i = 0; i < n; i++) {
		struct rfs_node child, found;
		char name[64];
		rfs_inode_entry(s, dir, i, &child, name, sizeof(name));
		assert_int_equal(rfs_inode_lookup(s, dir, name, &found), 0);
		assert_node_equal(&found, &child);
		check_round_trip(s, child);
		assert_true(w->count < w->cap);
		w->inos[w->count++] = rfs_inode_of(s, &child);
		if (rfs_inode_is_dir(&child))
			walk(s, &child, w);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void test_distinct_numbers(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	assert_int_equal(rfs_inode_space_init(&s, 3, 2, 0, 7, 3), 0);
	struct walk w = { .cap = 1000 };
	w.inos = malloc(w.cap * sizeof(*w.inos));
	assert_non_null(w.inos);
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	w.inos[w.count++] = rfs_inode_of(&s, &root);
	walk(&s, &root, &w);
	/* root, 5 root entries, per epoch: epoch, rank/, 3 x (rank, 2
	 * kinds, 2 x 7 files); step/rank/, 3 x (rank, index/, 2 x 21
	 * step files). */
	size_t epoch_nodes = 3 * (2 + 3 * (1 + 2 + 14));
	assert_int_equal(w.count, 1 + 5 + epoch_nodes + 1 + 3 * (2 + 42));
	qsort(w.inos, w.count, sizeof(*w.inos), cmp_u64);
	for (size_t i = 1; i < w.count; i++)
		assert_true(w.inos[i] != w.inos[i - 1]);
	/* The listed epochs' numbers are contiguous from 16. */
	assert_true(w.inos[7] == 16);
	assert_true(w.inos[7 + epoch_nodes - 1] == 16 + epoch_nodes - 1);
	assert_true(w.inos[7 + epoch_nodes] == s.step_base);
	free(w.inos);
}

static void test_steps(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	struct rfs_node n;
	char name[64];
	/* 3 kinds (batch, index, label), 40 batches, 10 epochs listed. */
	assert_int_equal(rfs_inode_space_init(&s, 2, 3, 0, 40, 10), 0);
	assert_int_equal(s.step_width, 9);
	assert_true(s.steps_listed == 400);
	assert_true(s.steps == UINT64_C(1000000000)); /* 9 digits' worth */
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	struct rfs_node steps, ranks, rank, label, file;
	assert_int_equal(rfs_inode_lookup(&s, &root, "step", &steps), 0);
	assert_int_equal(rfs_inode_lookup(&s, &steps, "rank", &ranks), 0);
	assert_int_equal(rfs_inode_lookup(&s, &ranks, "1", &rank), 0);
	assert_int_equal(rfs_inode_lookup(&s, &ranks, "2", &n), -ENOENT);
	assert_true(rfs_inode_count(&s, &rank) == 2 + 400);
	rfs_inode_entry(&s, &rank, 0, &n, name, sizeof(name));
	assert_string_equal(name, "index");
	rfs_inode_entry(&s, &rank, 1, &n, name, sizeof(name));
	assert_string_equal(name, "label");
	rfs_inode_entry(&s, &rank, 2, &n, name, sizeof(name));
	assert_string_equal(name, "000000000.npy");
	/* A batch file right in step/rank/R/: step 123 is batch 3 of
	 * epoch 3. */
	assert_int_equal(rfs_inode_lookup(&s, &rank, "000000123.npy", &file),
			 0);
	assert_node_equal(&file, &(struct rfs_node){ .type = RFS_NODE_STEP_FILE,
						     .rank = 1,
						     .kind = 0,
						     .batch = 123 });
	uint64_t epoch, batch;
	rfs_inode_batch(&s, &file, &epoch, &batch);
	assert_true(epoch == 3 && batch == 3);
	check_round_trip(&s, file);
	assert_int_equal(rfs_inode_lookup(&s, &rank, "label", &label), 0);
	assert_int_equal(rfs_inode_lookup(&s, &label, "999999999.npy", &file),
			 0);
	assert_true(file.kind == RFS_KIND_LABEL);
	rfs_inode_batch(&s, &file, &epoch, &batch);
	assert_true(epoch == 999999999 / 40 && batch == 999999999 % 40);
	check_round_trip(&s, file);
	/* Beyond what 9 digits spell, or not exactly 9 digits. */
	static const char *const bad[] = { "1000000000.npy", "00000123.npy",
					   "0000000123.npy", "000000123.NPY",
					   "batch",	     "000000123.npz" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(rfs_inode_lookup(&s, &rank, bad[i], &n),
				 -ENOENT);
	assert_int_equal(rfs_inode_lookup(&s, &file, "x", &n), -ENOTDIR);

	/* More listed steps than 9 digits: the names grow. */
	assert_int_equal(rfs_inode_space_init(&s, 1, 2, 0, 1000000, 2000), 0);
	assert_int_equal(s.step_width, 10);
	assert_true(s.steps == UINT64_C(10000000000));
}

/* var_names.txt: at the root, inode 8, only where the sources name
 * their columns. */
static void test_var_names_file(void **state)
{
	(void)state;
	struct rfs_inode_space s;
	struct rfs_node n;
	char name[64];
	assert_int_equal(rfs_inode_space_init(&s, 2, 2, 0, 10, 3), 0);
	struct rfs_node root = node(RFS_NODE_ROOT, 0, 0, 0, 0);
	lookup_fails(&s, &root, "var_names.txt", -ENOENT);
	assert_int_equal(rfs_inode_node(&s, 8, &n), -ENOENT);
	s.var_names = 1;
	struct rfs_node want = node(RFS_NODE_VAR_NAMES, 0, 0, 0, 0);
	lookup_ok(&s, &root, "var_names.txt", want);
	assert_true(rfs_inode_of(&s, &want) == 8);
	check_round_trip(&s, want);
	assert_false(rfs_inode_is_dir(&want));
	lookup_fails(&s, &want, "x", -ENOTDIR);
	assert_true(rfs_inode_count(&s, &root) == 6);
	rfs_inode_entry(&s, &root, 5, &n, name, sizeof(name));
	assert_string_equal(name, "var_names.txt");
	assert_node_equal(&n, &want);
	for (uint64_t ino = 9; ino < 16; ino++)
		assert_int_equal(rfs_inode_node(&s, ino, &n), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_space_numbers),
		cmocka_unit_test(test_round_trip_every_type),
		cmocka_unit_test(test_invalid_numbers),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_lookup_valid),
		cmocka_unit_test(test_lookup_malformed),
		cmocka_unit_test(test_lookup_under_file_and_long_names),
		cmocka_unit_test(test_width),
		cmocka_unit_test(test_count_and_entries),
		cmocka_unit_test(test_distinct_numbers),
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_var_names_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
