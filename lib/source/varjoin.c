/* SPDX-License-Identifier: MIT */
#include "source/varjoin.h"

#include "core/buf.h"
#include "os/memlimit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct map {
	int64_t *from; /* served column j <- source column from[j], or -1 */
	int64_t *to; /* source column c -> served column to[c], or -1 */
	uint64_t cols; /* of the source */
	int identity, drops;
};

struct rfs_varjoin {
	enum rfs_varjoin_mode mode;
	char **names; /* served, owned */
	uint64_t cols;
	uint64_t fingerprint;
	size_t nsources;
	struct map *maps;
	/* The served names and the maps, claimed (memlimit.c) in claims
	 * until destroy. */
	uint64_t claimed;
	struct rfs_claims *claims;
};

const char *rfs_varjoin_mode_name(enum rfs_varjoin_mode m)
{
	switch (m) {
	case RFS_VARJOIN_INNER:
		return "inner";
	case RFS_VARJOIN_OUTER:
		return "outer";
	case RFS_VARJOIN_NAMES:
		return "names";
	case RFS_VARJOIN_NONE:
		break;
	}
	return "none";
}

uint64_t rfs_varjoin_fingerprint_of(char *const *names, uint64_t n)
{
	XXH3_state_t *st = XXH3_createState();
	uint64_t h = 0;
	if (!st)
		return 0; /* out of memory at mount: caught by what follows */
	XXH3_64bits_reset(st);
	for (uint64_t i = 0; i < n; i++)
		XXH3_64bits_update(st, names[i], strlen(names[i]) + 1);
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

/* Names to their position: open addressing over XXH3, built once per
 * source at mount time (a gene list is tens of thousands, but a var
 * index's length is the file's word: claimed before it is made). */
struct index {
	char *const *names; /* borrowed */
	uint64_t mask;
	int64_t *slot; /* position in names, or -1 */
	uint64_t claimed; /* slot's bytes (memlimit.c), in claims */
	struct rfs_claims *claims;
};

/* The slots of an index of n names: a power of two, at least 2n and 16
 * (UINT64_MAX past 2^60 names: a claim no memory holds). */
static uint64_t index_slots(uint64_t n)
{
	uint64_t cap = 16;
	if (n > (UINT64_C(1) << 60))
		return UINT64_MAX;
	while (cap < 2 * n)
		cap *= 2;
	return cap;
}

/* An empty index for n names, claimed for file's what before it is
 * allocated. @return 0, or -ENOMEM with err set. */
static int index_init(struct index *x, struct rfs_claims *claims,
		      char *const *names, uint64_t n, const char *file,
		      const char *what, char *err, size_t errlen)
{
	uint64_t cap = index_slots(n);
	*x = (struct index){ .names = names, .claims = claims };
	int rc = rfs_memlimit_claim(claims, file, what, cap, sizeof(*x->slot),
				    &x->claimed, err, errlen);
	if (rc != 0)
		return rc;
	x->mask = cap - 1;
	x->slot = malloc(cap * sizeof(*x->slot));
	if (!x->slot) {
		rfs_memlimit_release(claims, &x->claimed);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memset(x->slot, 0xff, cap * sizeof(*x->slot));
	return 0;
}

/* Frees x's slots and releases their claim. Accepts a zeroed x. */
static void index_free(struct index *x)
{
	free(x->slot);
	x->slot = NULL;
	rfs_memlimit_release(x->claims, &x->claimed);
}

/* The slot holding name, or the empty one where it would go. */
static uint64_t index_probe(const struct index *x, const char *name)
{
	uint64_t h = XXH3_64bits(name, strlen(name)) & x->mask;
	while (x->slot[h] >= 0 && strcmp(x->names[x->slot[h]], name) != 0)
		h = (h + 1) & x->mask;
	return h;
}

static int64_t index_find(const struct index *x, const char *name)
{
	return x->slot[index_probe(x, name)];
}

/* Adds names[i]; @return -1, or the position of the same name before. */
static int64_t index_add(struct index *x, uint64_t i)
{
	uint64_t h = index_probe(x, x->names[i]);
	if (x->slot[h] >= 0)
		return x->slot[h];
	x->slot[h] = (int64_t)i;
	return -1;
}

/* An index of names[0..n), the var names of what (a file), refusing a
 * name given twice. */
static int index_build(struct index *x, struct rfs_claims *claims,
		       char *const *names, uint64_t n, const char *what,
		       char *err, size_t errlen)
{
	int rc = index_init(x, claims, names, n, what,
			    "var_join's hash index of its var names", err,
			    errlen);
	if (rc != 0)
		return rc;
	for (uint64_t i = 0; i < n; i++) {
		int64_t before = index_add(x, i);
		if (before >= 0) {
			snprintf(
				err, errlen,
				"%s: var name '%.200s' is given twice (at "
				"%lld and %llu): var_join needs distinct names",
				what, names[i], (long long)before,
				(unsigned long long)i);
			index_free(x);
			return -EINVAL;
		}
	}
	return 0;
}

int rfs_varjoin_read_file(struct rfs_claims *claims, const char *path,
			  char ***names, uint64_t *n, uint64_t *claimed,
			  char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char **list = NULL, *line = NULL;
	size_t cap = 0, linecap = 0;
	uint64_t count = 0, at = 0, held = 0;
	char what[4200];
	int rc = 0;
	*names = NULL;
	*n = 0;
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "var_names=%s: %s", path,
			 strerror(errno));
		return rc;
	}
	snprintf(what, sizeof(what), "var_names=%s", path);
	ssize_t len;
	while ((len = getline(&line, &linecap, f)) >= 0) {
		at++;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len > 0 && line[len - 1] == '\r') /* CRLF */
			line[--len] = '\0';
		/* A UTF-8 byte order mark (Notepad, Excel's "CSV UTF-8"):
		 * not part of the first name, and invisible in an error. */
		char *name = line;
		if (at == 1 && len >= 3 &&
		    memcmp(line, "\xef\xbb\xbf", 3) == 0) {
			name += 3;
			len -= 3;
		}
		if (len == 0 || memchr(name, '\0', (size_t)len)) {
			snprintf(err, errlen,
				 "var_names=%s: line %llu is empty (one var "
				 "name per line)",
				 path, (unsigned long long)at);
			rc = -EINVAL;
			break;
		}
		if (count == cap) {
			/* Claimed as the list grows, a heap string per
			 * slot: the slots left empty are released below. */
			size_t more = cap ? 2 * cap : 64;
			rc = rfs_memlimit_claim(claims, what, "its var names",
						more - cap,
						RFS_MEMLIMIT_STRING_BYTES,
						&held, err, errlen);
			if (rc != 0)
				break;
			char **grown = realloc(list, more * sizeof(*grown));
			if (!grown) {
				rc = -ENOMEM;
				snprintf(err, errlen, "out of memory");
				break;
			}
			list = grown;
			cap = more;
		}
		if (!(list[count] = strdup(name))) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			break;
		}
		count++;
	}
	if (rc == 0 && ferror(f)) {
		/* getline's errno: a directory says so. */
		rc = errno ? -errno : -EIO;
		snprintf(err, errlen, "var_names=%s: %s", path, strerror(-rc));
	}
	if (rc == 0 && count == 0) {
		rc = -EINVAL;
		snprintf(err, errlen, "var_names=%s: the file names no var",
			 path);
	}
	free(line);
	fclose(f);
	rfs_memlimit_release_part(claims, &held,
				  (cap - count) * RFS_MEMLIMIT_STRING_BYTES);
	if (rc == 0) {
		struct index x;
		rc = index_build(&x, claims, list, count, what, err, errlen);
		if (rc == 0)
			index_free(&x);
	}
	if (rc != 0) {
		rfs_buf_free_strings(list, count);
		rfs_memlimit_release(claims, &held);
		return rc;
	}
	*names = list;
	*n = count;
	*claimed += held;
	return 0;
}

void rfs_varjoin_destroy(struct rfs_varjoin *j)
{
	if (!j)
		return;
	for (size_t f = 0; j->maps && f < j->nsources; f++) {
		free(j->maps[f].from);
		free(j->maps[f].to);
	}
	free(j->maps);
	rfs_buf_free_strings(j->names, j->cols);
	rfs_memlimit_release(j->claims, &j->claimed);
	free(j);
}

/* What the served names come from, in claims' messages. */
static void option_name(enum rfs_varjoin_mode mode, const char *wanted_from,
			char *out, size_t n)
{
	if (mode == RFS_VARJOIN_NAMES)
		snprintf(out, n, "option var_names=%s", wanted_from);
	else
		snprintf(out, n, "option var_join=%s",
			 rfs_varjoin_mode_name(mode));
}

/* Pointers to the served names, by mode, from the sources' indexes:
 * *pick (heap, pick_claimed) of j->cols, into names or wanted. */
static int choose_names(struct rfs_varjoin *j, const struct index *idx,
			char *const *const *names, const uint64_t *counts,
			const char *const *paths, char *const *wanted,
			uint64_t nwanted, const char *wanted_from,
			const char *option, char ***pick,
			uint64_t *pick_claimed, char *err, size_t errlen)
{
	/* At most: file 0's names, every file's, or the wanted ones. */
	uint64_t most = j->mode == RFS_VARJOIN_INNER ? counts[0] :
			j->mode == RFS_VARJOIN_NAMES ? nwanted :
						       0;
	for (size_t f = 0; j->mode == RFS_VARJOIN_OUTER && f < j->nsources; f++)
		most += counts[f];
	int rc = rfs_memlimit_claim(j->claims, option,
				    "a list of the served var names, before "
				    "they are copied",
				    most, sizeof(**pick), pick_claimed, err,
				    errlen);
	if (rc != 0)
		return rc;
	char **p = *pick = malloc((most ? most : 1) * sizeof(**pick));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (j->mode == RFS_VARJOIN_INNER) {
		for (uint64_t i = 0; i < counts[0]; i++) {
			size_t f = 1;
			while (f < j->nsources &&
			       index_find(&idx[f], names[0][i]) >= 0)
				f++;
			if (f == j->nsources)
				p[j->cols++] = names[0][i];
		}
		if (j->cols == 0) {
			snprintf(err, errlen,
				 "var_join=inner: no var name is in every "
				 "file (%s and the others share none)",
				 paths[0]);
			return -EINVAL;
		}
	} else if (j->mode == RFS_VARJOIN_OUTER) {
		/* One index of the names picked so far, over p. */
		struct index seen;
		rc = index_init(&seen, j->claims, p, most, option,
				"a hash index of every file's var names", err,
				errlen);
		for (size_t f = 0; f < j->nsources && rc == 0; f++) {
			for (uint64_t i = 0; i < counts[f]; i++) {
				uint64_t h = index_probe(&seen, names[f][i]);
				if (seen.slot[h] >= 0)
					continue;
				p[j->cols] = names[f][i];
				seen.slot[h] = (int64_t)j->cols++;
			}
		}
		index_free(&seen);
	} else { /* wanted: distinct (rfs_varjoin_read_file()) */
		for (uint64_t i = 0; i < nwanted; i++) {
			size_t f = 0;
			while (f < j->nsources &&
			       index_find(&idx[f], wanted[i]) < 0)
				f++;
			if (f == j->nsources) {
				snprintf(err, errlen,
					 "var_names=%s: '%.200s' (line %llu) "
					 "is in no source file's var names",
					 wanted_from, wanted[i],
					 (unsigned long long)(i + 1));
				return -EINVAL;
			}
			p[j->cols++] = wanted[i];
		}
	}
	return rc;
}

/* The served names, copied from pick, claimed for the mount. */
static int copy_names(struct rfs_varjoin *j, char *const *pick,
		      const char *option, char *err, size_t errlen)
{
	int rc = rfs_memlimit_claim(j->claims, option, "the served var names",
				    j->cols, RFS_MEMLIMIT_STRING_BYTES,
				    &j->claimed, err, errlen);
	if (rc != 0)
		return rc;
	uint64_t i = 0;
	j->names = calloc(j->cols ? j->cols : 1, sizeof(*j->names));
	while (j->names && i < j->cols && (j->names[i] = strdup(pick[i])))
		i++;
	if (!j->names || i < j->cols) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* Source f's columns onto the served ones and back, claimed for the
 * mount. */
static int build_map(struct rfs_varjoin *j, struct map *m,
		     const struct index *x, uint64_t cols, const char *path,
		     char *err, size_t errlen)
{
	int rc = rfs_memlimit_claim(j->claims, path,
				    "var_join's map of its columns onto the "
				    "served ones",
				    j->cols + cols, sizeof(*m->from),
				    &j->claimed, err, errlen);
	if (rc != 0)
		return rc;
	m->cols = cols;
	m->from = malloc((j->cols ? j->cols : 1) * sizeof(*m->from));
	m->to = malloc((cols ? cols : 1) * sizeof(*m->to));
	if (!m->from || !m->to) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memset(m->to, 0xff, (cols ? cols : 1) * sizeof(*m->to));
	m->identity = cols == j->cols;
	for (uint64_t s = 0; s < j->cols; s++) {
		int64_t c = index_find(x, j->names[s]);
		m->from[s] = c;
		if (c >= 0)
			m->to[c] = (int64_t)s;
		if (c != (int64_t)s)
			m->identity = 0;
	}
	for (uint64_t c = 0; c < cols; c++)
		if (m->to[c] < 0)
			m->drops = 1;
	return 0;
}

int rfs_varjoin_create(struct rfs_claims *claims, enum rfs_varjoin_mode mode,
		       char *const *const *names, const uint64_t *counts,
		       const char *const *paths, size_t nsources,
		       char *const *wanted, uint64_t nwanted,
		       const char *wanted_from, struct rfs_varjoin **out,
		       char *err, size_t errlen)
{
	struct rfs_varjoin *j = calloc(1, sizeof(*j));
	struct index *idx = calloc(nsources ? nsources : 1, sizeof(*idx));
	char **pick = NULL, option[4200];
	uint64_t pick_claimed = 0;
	int rc = -ENOMEM;
	size_t built = 0;
	*out = NULL;
	if (!j || !idx || nsources == 0 ||
	    !(j->maps = calloc(nsources, sizeof(*j->maps)))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	j->mode = mode;
	j->claims = claims;
	j->nsources = nsources;
	option_name(mode, wanted_from, option, sizeof(option));
	for (; built < nsources; built++) {
		rc = index_build(&idx[built], claims, names[built],
				 counts[built], paths[built], err, errlen);
		if (rc != 0)
			goto out;
	}
	rc = choose_names(j, idx, names, counts, paths, wanted, nwanted,
			  wanted_from, option, &pick, &pick_claimed, err,
			  errlen);
	if (rc == 0)
		rc = copy_names(j, pick, option, err, errlen);
	free(pick);
	rfs_memlimit_release(claims, &pick_claimed);
	for (size_t f = 0; f < nsources && rc == 0; f++)
		rc = build_map(j, &j->maps[f], &idx[f], counts[f], paths[f],
			       err, errlen);
	if (rc == 0)
		j->fingerprint = rfs_varjoin_fingerprint_of(j->names, j->cols);
out:
	for (size_t f = 0; f < built; f++)
		index_free(&idx[f]);
	free(idx);
	if (rc != 0) {
		rfs_varjoin_destroy(j);
		return rc;
	}
	*out = j;
	return 0;
}

uint64_t rfs_varjoin_cols(const struct rfs_varjoin *j)
{
	return j->cols;
}

const char *rfs_varjoin_name(const struct rfs_varjoin *j, uint64_t i)
{
	return j->names[i];
}

uint64_t rfs_varjoin_fingerprint(const struct rfs_varjoin *j)
{
	return j->fingerprint;
}

int rfs_varjoin_identity(const struct rfs_varjoin *j, size_t f)
{
	return j->maps[f].identity;
}

int rfs_varjoin_drops(const struct rfs_varjoin *j, size_t f)
{
	return j->maps[f].drops;
}

int64_t rfs_varjoin_served(const struct rfs_varjoin *j, size_t f, uint64_t c)
{
	return c < j->maps[f].cols ? j->maps[f].to[c] : -1;
}

/* Typed, so that the compiler moves whole elements. */
#define GATHER(type)                                                \
	do {                                                        \
		const type *s = src;                                \
		type *d = dst;                                      \
		for (uint64_t k = 0; k < j->cols; k++)              \
			d[k] = from[k] >= 0 ? s[from[k]] : (type)0; \
	} while (0)

void rfs_varjoin_gather(const struct rfs_varjoin *j, size_t f, const void *src,
			void *dst, size_t elem)
{
	const int64_t *from = j->maps[f].from;
	switch (elem) {
	case 1:
		GATHER(uint8_t);
		break;
	case 2:
		GATHER(uint16_t);
		break;
	case 4:
		GATHER(uint32_t);
		break;
	default: /* 8: every dtype is 1, 2, 4 or 8 bytes */
		GATHER(uint64_t);
	}
}

struct entry {
	int64_t col;
	uint64_t at;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return (x->at > y->at) - (x->at < y->at);
}

size_t rfs_varjoin_row_scratch(uint64_t len, size_t elem)
{
	return len * (sizeof(struct entry) + elem) + 1;
}

uint64_t rfs_varjoin_remap_row(const struct rfs_varjoin *j, size_t f,
			       int64_t *cols, void *values, size_t elem,
			       uint64_t len, void *scratch)
{
	const struct map *m = &j->maps[f];
	unsigned char *v = values;
	uint64_t w = 0;
	int sorted = 1;
	for (uint64_t k = 0; k < len; k++) {
		int64_t c = m->to[cols[k]];
		if (c < 0)
			continue;
		if (w && c < cols[w - 1])
			sorted = 0;
		cols[w] = c;
		if (w != k)
			memcpy(v + w * elem, v + k * elem, elem);
		w++;
	}
	if (sorted)
		return w;
	/* Served order differs from the source's: sort as scipy's
	 * canonical CSR (sorted indices), values following. */
	struct entry *e = scratch;
	unsigned char *tmp = (unsigned char *)(e + w);
	for (uint64_t k = 0; k < w; k++)
		e[k] = (struct entry){ cols[k], k };
	qsort(e, w, sizeof(*e), cmp_entry);
	for (uint64_t k = 0; k < w; k++)
		memcpy(tmp + k * elem, v + e[k].at * elem, elem);
	memcpy(v, tmp, w * elem);
	for (uint64_t k = 0; k < w; k++)
		cols[k] = e[k].col;
	return w;
}
