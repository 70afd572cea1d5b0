/* icefloe's compiled manifest decoder: the decoding core of
 * icefloe.enumerator._native_manifest (see its __init__.py for the contract).
 *
 * The Avro writer schema is compiled in Python (__init__.py: _program) into a flat int32
 * program: one node per Avro type; a record node lists its fields as (type node, capture)
 * pairs. This file walks that program over each entry's bytes, captures what planning
 * needs into growable C buffers (Arrow layouts: offsets, data, validity bitmaps), steps
 * over the rest, and hands the buffers back as bytes objects. The whole walk (and the
 * deflate of each block, with zlib) runs with the GIL released; every piece of state is
 * local to one call, so calls from several threads at once are safe.
 *
 * Also: split_ids, icefloe's split ids (blake2b, 10-byte digest) for many splits at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* node kinds: keep in step with __init__.py */
enum { K_NULL = 0, K_BOOL, K_LONG, K_FLOAT, K_DOUBLE, K_BYTES, K_FIXED, K_ARRAY, K_MAP,
       K_UNION, K_RECORD };
/* captures: keep in step with __init__.py */
enum { C_NONE = 0, C_STATUS, C_SNAPSHOT, C_SEQ, C_PATH, C_FORMAT, C_PARTITION, C_RECORDS,
       C_SIZE, C_SPLITS, C_VC, C_NC, C_NAN, C_LOWER, C_UPPER };
#define N_LONG_STATS 3
#define N_BOUND_STATS 2

enum { E_OK = 0, E_EOF, E_VALUE, E_NOMEM };

typedef struct {
    char *data;
    size_t len, cap;
} buf_t;

static int buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) return -1;
    b->data = d;
    b->cap = cap;
    return 0;
}

static inline int buf_put(buf_t *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int buf_i64(buf_t *b, int64_t v) { return buf_put(b, &v, 8); }
static inline int buf_i32(buf_t *b, int32_t v) { return buf_put(b, &v, 4); }

/* validity bit ``row`` of a bitmap (rows are appended in order) */
static inline int bit_put(buf_t *b, int64_t row, int valid) {
    size_t need = (size_t)(row >> 3) + 1;
    if (need > b->len) {
        if (buf_reserve(b, need - b->len)) return -1;
        memset(b->data + b->len, 0, need - b->len);
        b->len = need;
    }
    if (valid) b->data[row >> 3] |= (char)(1 << (row & 7));
    return 0;
}

/* a binary / string column: int32 offsets, data, optional validity */
typedef struct {
    buf_t off, data, valid;
} bin_col;

static inline int bin_put(bin_col *c, int64_t row, const uint8_t *p, int64_t n, int valid,
                          int nullable) {
    if (row == 0 && buf_i32(&c->off, 0)) return -1;
    if (c->data.len + (size_t)n > INT32_MAX) return -2;
    if (valid && buf_put(&c->data, p, (size_t)n)) return -1;
    if (buf_i32(&c->off, (int32_t)c->data.len)) return -1;
    if (nullable && bit_put(&c->valid, row, valid)) return -1;
    return 0;
}

typedef struct {
    buf_t vals, valid;
} long_col;

typedef struct {
    /* input */
    const int32_t *prog;
    Py_ssize_t prog_len;
    const int64_t *stats_ids;
    int n_stats;
    /* reading */
    const uint8_t *p, *end;
    int err;
    char msg[200];
    /* the entry being decoded */
    int64_t status, snapshot, seq, records, size;
    int has_status, has_snapshot, has_seq, has_records, has_size, has_path, has_format,
        has_splits;
    const uint8_t *path, *fmt, *part;
    int64_t path_len, fmt_len, part_len;
    int64_t *stat_vals;         /* [N_LONG_STATS][n_stats] */
    const uint8_t **bound_ptr;  /* [N_BOUND_STATS][n_stats] */
    int64_t *bound_len;         /* [N_BOUND_STATS][n_stats] */
    uint8_t *stat_has;          /* [N_LONG_STATS + N_BOUND_STATS][n_stats] */
    /* output */
    int64_t rows;
    bin_col path_col, fmt_col, part_col;
    buf_t records_col, size_col, seq_vals, seq_valid;
    buf_t split_off, split_valid, split_vals;
    long_col *lstats;  /* [N_LONG_STATS * n_stats]: kind-major */
    bin_col *bstats;   /* [N_BOUND_STATS * n_stats] */
} ctx_t;

static int fail(ctx_t *c, int code, const char *msg) {
    if (c->err == E_OK) {
        c->err = code;
        snprintf(c->msg, sizeof c->msg, "%s", msg);
    }
    return -1;
}

static inline int rd_long(ctx_t *c, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        if (c->p >= c->end) return fail(c, E_EOF, "the manifest ends inside a block");
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) return fail(c, E_VALUE, "an Avro varint longer than 10 bytes");
    }
    *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
    return 0;
}

static inline int rd_skip(ctx_t *c, int64_t n) {
    if (n < 0) return fail(c, E_VALUE, "a negative Avro length");
    if (c->end - c->p < n) return fail(c, E_EOF, "the manifest ends inside a block");
    c->p += n;
    return 0;
}

static inline int rd_bytes(ctx_t *c, const uint8_t **p, int64_t *n) {
    if (rd_long(c, n)) return -1;
    *p = c->p;
    return rd_skip(c, *n);
}

static int walk(ctx_t *c, int32_t at, int cap);

/* step over n varints: count the bytes that end one */
static inline int skip_varints(ctx_t *c, int64_t n) {
    const uint8_t *p = c->p, *end = c->end;
    while (n > 0) {
        if (p >= end) return fail(c, E_EOF, "the manifest ends inside a block");
        n -= !(*p++ & 0x80);
    }
    c->p = p;
    return 0;
}

/* an array of longs (split_offsets), appended to the list column's values */
static int read_splits(ctx_t *c, int32_t item) {
    int64_t count, v;
    (void)item;
    c->has_splits = 1;
    for (;;) {
        if (rd_long(c, &count)) return -1;
        if (count == 0) return 0;
        if (count < 0) {
            count = -count;
            if (rd_long(c, &v)) return -1;
        }
        for (int64_t i = 0; i < count; i++) {
            if (rd_long(c, &v)) return -1;
            if (buf_i64(&c->split_vals, v)) return fail(c, E_NOMEM, "");
        }
    }
}

/* an Iceberg int-keyed map (an Avro array of {key, value} records): keep the values of
 * the keys in stats_ids (the last one of a repeated key, as a dict would) */
static int read_stats(ctx_t *c, int cap, int32_t item) {
    /* item: a record node [K_RECORD, 2, key type, key cap, value type, value cap] */
    int value_kind = c->prog[c->prog[item + 4]];
    int bound = cap == C_LOWER || cap == C_UPPER;
    int slot = bound ? N_LONG_STATS + (cap - C_LOWER) : cap - C_VC;
    int64_t count, key, v = 0, skip;
    const uint8_t *bp = NULL;
    for (;;) {
        if (rd_long(c, &count)) return -1;
        if (count == 0) return 0;
        if (count < 0) {
            count = -count;
            if (rd_long(c, &skip)) return -1;
        }
        for (int64_t i = 0; i < count; i++) {
            if (rd_long(c, &key)) return -1;
            if (value_kind == K_BYTES) {
                if (rd_bytes(c, &bp, &v)) return -1;
            } else if (rd_long(c, &v)) {
                return -1;
            }
            for (int s = 0; s < c->n_stats; s++) {
                if (c->stats_ids[s] != key) continue;
                c->stat_has[slot * c->n_stats + s] = 1;
                if (bound) {
                    c->bound_ptr[(cap - C_LOWER) * c->n_stats + s] = bp;
                    c->bound_len[(cap - C_LOWER) * c->n_stats + s] = v;
                } else {
                    c->stat_vals[slot * c->n_stats + s] = v;
                }
            }
        }
    }
}

static int walk(ctx_t *c, int32_t at, int cap) {
    const int32_t *n = c->prog + at;
    int64_t v, count;
    const uint8_t *p;
    switch (n[0]) {
    case K_NULL:
        return 0;
    case K_BOOL:
        return rd_skip(c, 1);
    case K_LONG:
        if (rd_long(c, &v)) return -1;
        switch (cap) {
        case C_STATUS: c->status = v; c->has_status = 1; break;
        case C_SNAPSHOT: c->snapshot = v; c->has_snapshot = 1; break;
        case C_SEQ: c->seq = v; c->has_seq = 1; break;
        case C_RECORDS: c->records = v; c->has_records = 1; break;
        case C_SIZE: c->size = v; c->has_size = 1; break;
        default: break;
        }
        return 0;
    case K_FLOAT:
        return rd_skip(c, 4);
    case K_DOUBLE:
        return rd_skip(c, 8);
    case K_BYTES:
        if (rd_bytes(c, &p, &v)) return -1;
        if (cap == C_PATH) {
            c->path = p; c->path_len = v; c->has_path = 1;
        } else if (cap == C_FORMAT) {
            c->fmt = p; c->fmt_len = v; c->has_format = 1;
        }
        return 0;
    case K_FIXED:
        return rd_skip(c, n[1]);
    case K_ARRAY:
        if (cap == C_SPLITS) return read_splits(c, n[1]);
        if (cap >= C_VC) return read_stats(c, cap, n[1]);
        for (;;) {
            if (rd_long(c, &count)) return -1;
            if (count == 0) return 0;
            if (count < 0) {  /* a block with its size in bytes: step over it whole */
                if (rd_long(c, &v) || rd_skip(c, v)) return -1;
                continue;
            }
            if (n[2] > 0) {  /* items of n[2] ints / longs (an int -> long map) */
                if (skip_varints(c, count * n[2])) return -1;
            } else if (n[2] < 0) {  /* items of an int and bytes (an int -> bytes map) */
                for (int64_t i = 0; i < count; i++)
                    if (skip_varints(c, 1) || rd_bytes(c, &p, &v)) return -1;
            } else {
                for (int64_t i = 0; i < count; i++)
                    if (walk(c, n[1], C_NONE)) return -1;
            }
        }
    case K_MAP:
        for (;;) {
            if (rd_long(c, &count)) return -1;
            if (count == 0) return 0;
            if (count < 0) {
                if (rd_long(c, &v) || rd_skip(c, v)) return -1;
                continue;
            }
            for (int64_t i = 0; i < count; i++)
                if (rd_bytes(c, &p, &v) || walk(c, n[1], C_NONE)) return -1;
        }
    case K_UNION:
        if (rd_long(c, &v)) return -1;
        if (v < 0 || v >= n[1]) return fail(c, E_VALUE, "an Avro union index out of range");
        return walk(c, n[2 + v], cap);
    case K_RECORD: {
        const uint8_t *start = c->p;
        for (int32_t i = 0; i < n[1]; i++)
            if (walk(c, n[2 + 2 * i], n[3 + 2 * i])) return -1;
        if (cap == C_PARTITION) {
            c->part = start;
            c->part_len = c->p - start;
        }
        return 0;
    }
    default:
        return fail(c, E_VALUE, "a bad decoder program");
    }
}

/* whether p[0:n] is valid UTF-8 (what PyIceberg's read_utf8 decodes without error) */
static int utf8_ok(const uint8_t *p, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        if (b < 0x80) { i++; continue; }
        int len;
        uint32_t cp;
        if ((b & 0xe0) == 0xc0) { len = 2; cp = b & 0x1f; }
        else if ((b & 0xf0) == 0xe0) { len = 3; cp = b & 0x0f; }
        else if ((b & 0xf8) == 0xf0) { len = 4; cp = b & 0x07; }
        else return 0;
        if (i + len > n) return 0;
        for (int j = 1; j < len; j++) {
            if ((p[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (p[i + j] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)
            || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static const char *FORMATS[] = {"AVRO", "PARQUET", "ORC", "PUFFIN"};

/* the FileFormat member name of a raw file_format (PyIceberg: case-insensitive) */
static int format_name(ctx_t *c, const char **name) {
    for (size_t f = 0; f < sizeof FORMATS / sizeof *FORMATS; f++) {
        size_t len = strlen(FORMATS[f]);
        if ((size_t)c->fmt_len != len) continue;
        size_t i = 0;
        while (i < len) {
            uint8_t ch = c->fmt[i];
            if (ch >= 'a' && ch <= 'z') ch -= 32;
            if (ch != (uint8_t)FORMATS[f][i]) break;
            i++;
        }
        if (i == len) {
            *name = FORMATS[f];
            return 0;
        }
    }
    char raw[64];
    int shown = c->fmt_len < 60 ? (int)c->fmt_len : 60;
    memcpy(raw, c->fmt, (size_t)shown);
    raw[shown] = 0;
    char msg[120];
    snprintf(msg, sizeof msg, "'%s' is not a valid FileFormat", raw);
    return fail(c, E_VALUE, msg);
}

typedef struct {
    int64_t manifest_seq, added_by;
    int has_added_by, added_only, inherit_all;
} rules_t;

static int append_bin(ctx_t *c, bin_col *col, const uint8_t *p, int64_t n, int valid,
                      int nullable) {
    int rc = bin_put(col, c->rows, p, n, valid, nullable);
    if (rc == -2) return fail(c, E_VALUE, "a manifest column over 2 GiB");
    if (rc) return fail(c, E_NOMEM, "");
    return 0;
}

/* one entry: decode it, then keep it (append its columns) or drop it */
static int entry(ctx_t *c, int32_t root, const rules_t *r) {
    size_t splits_at = c->split_vals.len;
    c->has_status = c->has_snapshot = c->has_seq = c->has_records = c->has_size = 0;
    c->has_path = c->has_format = c->has_splits = 0;
    c->part = NULL;
    c->part_len = 0;
    if (c->n_stats) memset(c->stat_has, 0, (size_t)c->n_stats * 5);
    if (walk(c, root, C_NONE)) return -1;
    if (!c->has_status || !c->has_path || !c->has_format || !c->has_records || !c->has_size)
        return fail(c, E_VALUE, "a manifest entry without status, file_path, file_format, "
                                "record_count or file_size_in_bytes");
    int64_t st = c->status;
    int keep;
    if (r->added_only) {
        if (st != 1) {
            if (st != 0 && st != 2) goto unknown;
            keep = 0;
        } else {
            keep = !c->has_snapshot || (r->has_added_by && c->snapshot == r->added_by);
        }
    } else {
        if (st == 2) keep = 0;
        else if (st != 0 && st != 1) goto unknown;
        else keep = 1;
    }
    if (!keep) {
        c->split_vals.len = splits_at;
        return 0;
    }
    if (!c->has_seq && (r->inherit_all || st == 1)) {
        c->seq = r->manifest_seq;
        c->has_seq = 1;
    }
    const char *fmt;
    if (format_name(c, &fmt)) return -1;
    if (!utf8_ok(c->path, c->path_len))
        return fail(c, E_VALUE, "a file_path that is not UTF-8");
    int64_t row = c->rows;
    if (append_bin(c, &c->path_col, c->path, c->path_len, 1, 0)) return -1;
    if (append_bin(c, &c->fmt_col, (const uint8_t *)fmt, (int64_t)strlen(fmt), 1, 0)) return -1;
    if (append_bin(c, &c->part_col, c->part, c->part_len, 1, 0)) return -1;
    if (buf_i64(&c->records_col, c->records) || buf_i64(&c->size_col, c->size)
        || buf_i64(&c->seq_vals, c->has_seq ? c->seq : 0)
        || bit_put(&c->seq_valid, row, c->has_seq))
        return fail(c, E_NOMEM, "");
    if ((row == 0 && buf_i32(&c->split_off, 0))
        || buf_i32(&c->split_off, (int32_t)(c->split_vals.len / 8))
        || bit_put(&c->split_valid, row, c->has_splits))
        return fail(c, E_NOMEM, "");
    if (c->split_vals.len / 8 > INT32_MAX) return fail(c, E_VALUE, "too many split offsets");
    for (int k = 0; k < N_LONG_STATS; k++) {
        for (int s = 0; s < c->n_stats; s++) {
            int has = c->stat_has[k * c->n_stats + s];
            long_col *col = &c->lstats[k * c->n_stats + s];
            if (buf_i64(&col->vals, has ? c->stat_vals[k * c->n_stats + s] : 0)
                || bit_put(&col->valid, row, has))
                return fail(c, E_NOMEM, "");
        }
    }
    for (int k = 0; k < N_BOUND_STATS; k++) {
        for (int s = 0; s < c->n_stats; s++) {
            int has = c->stat_has[(N_LONG_STATS + k) * c->n_stats + s];
            if (append_bin(c, &c->bstats[k * c->n_stats + s],
                           c->bound_ptr[k * c->n_stats + s], c->bound_len[k * c->n_stats + s],
                           has, 1))
                return -1;
        }
    }
    c->rows++;
    return 0;
unknown: {
        char msg[80];
        snprintf(msg, sizeof msg, "unknown manifest entry status %lld", (long long)st);
        return fail(c, E_VALUE, msg);
    }
}

/* raw deflate (RFC 1951) of one block into *out, with a z_stream set up once per manifest
 * (*zs_ready) and reset per block: PyIceberg writes one entry per block, so setting up
 * zlib's state per block would cost more than the inflating */
static int inflate_block(ctx_t *c, z_stream *zs, int *zs_ready, const uint8_t *src, int64_t n,
                         buf_t *out) {
    if (!*zs_ready) {
        memset(zs, 0, sizeof *zs);
        if (inflateInit2(zs, -15) != Z_OK) return fail(c, E_NOMEM, "");
        *zs_ready = 1;
    } else if (inflateReset(zs) != Z_OK) {
        return fail(c, E_VALUE, "a corrupt deflate block");
    }
    out->len = 0;
    if (buf_reserve(out, (size_t)n * 4 + 1024)) return fail(c, E_NOMEM, "");
    zs->next_in = (Bytef *)src;
    zs->avail_in = (uInt)n;
    for (;;) {
        zs->next_out = (Bytef *)out->data + out->len;
        zs->avail_out = (uInt)(out->cap - out->len);
        int rc = inflate(zs, Z_NO_FLUSH);
        out->len = out->cap - zs->avail_out;
        if (rc == Z_STREAM_END) return 0;
        if (rc == Z_OK || (rc == Z_BUF_ERROR && zs->avail_out == 0)) {
            if (zs->avail_out == 0) {
                if (buf_reserve(out, out->cap)) return fail(c, E_NOMEM, "");
            } else if (zs->avail_in == 0) {
                return fail(c, E_VALUE, "a truncated deflate block");
            }
            continue;
        }
        return fail(c, E_VALUE, "a corrupt deflate block");
    }
}

/* every block after the header (as manifest_decoder.avro_blocks reads them) */
static int decode_blocks(ctx_t *c, const uint8_t *start, const uint8_t *end,
                         const uint8_t *sync, int deflate, int32_t root, const rules_t *r) {
    buf_t scratch = {0};
    z_stream zs;
    int zs_ready = 0;
    const uint8_t *p = start;
    int first = 1, rc = 0;
    for (;;) {
        c->p = p;
        c->end = end;
        if (!first) {
            if (end - p < 16) break;  /* the bytes end: no more blocks */
            if (memcmp(p, sync, 16) != 0) {
                rc = fail(c, E_VALUE, "bad sync marker");
                break;
            }
            c->p += 16;
        }
        if (c->p >= end) break;
        first = 0;
        int64_t count, size;
        if (rd_long(c, &count)) {  /* avro_blocks: no block count, no more blocks */
            if (c->err == E_EOF) c->err = E_OK;
            else rc = -1;
            break;
        }
        if (rd_long(c, &size) || rd_skip(c, size)) {
            rc = -1;
            break;
        }
        const uint8_t *data = c->p - size;
        p = c->p;
        if (deflate) {
            if (inflate_block(c, &zs, &zs_ready, data, size, &scratch)) { rc = -1; break; }
            c->p = (const uint8_t *)scratch.data;
            c->end = c->p + scratch.len;
        } else {
            c->p = data;
            c->end = data + size;
        }
        for (int64_t i = 0; i < count; i++)
            if (entry(c, root, r)) { rc = -1; break; }
        if (rc) break;
    }
    if (zs_ready) inflateEnd(&zs);
    free(scratch.data);
    return rc;
}

static void free_bin(bin_col *b) {
    free(b->off.data);
    free(b->data.data);
    free(b->valid.data);
}

static void free_ctx(ctx_t *c) {
    free_bin(&c->path_col);
    free_bin(&c->fmt_col);
    free_bin(&c->part_col);
    free(c->records_col.data);
    free(c->size_col.data);
    free(c->seq_vals.data);
    free(c->seq_valid.data);
    free(c->split_off.data);
    free(c->split_valid.data);
    free(c->split_vals.data);
    if (c->lstats)
        for (int i = 0; i < N_LONG_STATS * c->n_stats; i++) {
            free(c->lstats[i].vals.data);
            free(c->lstats[i].valid.data);
        }
    if (c->bstats)
        for (int i = 0; i < N_BOUND_STATS * c->n_stats; i++) free_bin(&c->bstats[i]);
    free(c->lstats);
    free(c->bstats);
    free(c->stat_vals);
    free(c->bound_ptr);
    free(c->bound_len);
    free(c->stat_has);
}

static PyObject *bytes_of(buf_t *b) {
    return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
}

/* an offsets buffer of a column with no rows: one zero */
static PyObject *offsets_of(buf_t *b) {
    if (b->len == 0) {
        int32_t zero = 0;
        return PyBytes_FromStringAndSize((const char *)&zero, 4);
    }
    return bytes_of(b);
}

static int add(PyObject *list, PyObject *item) {
    if (!item) return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static int add_bin(PyObject *list, bin_col *b, int nullable) {
    return add(list, nullable ? bytes_of(&b->valid) : Py_NewRef(Py_None))
        || add(list, offsets_of(&b->off)) || add(list, bytes_of(&b->data));
}

PyDoc_STRVAR(decode_doc,
"decode(content, offset, sync, deflate, program, root, manifest_seq, added_by, added_only,\n"
"       stats_ids) -> (rows, buffers)\n\n"
"The blocks of one manifest from ``offset`` (after the header) decoded by ``program``\n"
"(see __init__.py); ``buffers``: the Arrow buffers of the contract's columns, in order.\n"
"Releases the GIL while decoding. Raises ValueError, EOFError, MemoryError.");

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer content, sync, program;
    Py_ssize_t offset;
    int deflate, added_only;
    int root;
    long long manifest_seq;
    PyObject *added_by, *stats_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*ny*py*iLOpO", &content, &offset, &sync, &deflate, &program,
                          &root, &manifest_seq, &added_by, &added_only, &stats_obj))
        return NULL;
    PyObject *result = NULL, *stats_seq = NULL;
    ctx_t c;
    memset(&c, 0, sizeof c);
    int64_t *stats_ids = NULL;
    rules_t r;
    memset(&r, 0, sizeof r);
    r.manifest_seq = manifest_seq;
    r.inherit_all = manifest_seq == 0;
    r.added_only = added_only;
    if (added_by != Py_None) {
        r.added_by = PyLong_AsLongLong(added_by);
        if (r.added_by == -1 && PyErr_Occurred()) goto done;
        r.has_added_by = 1;
    }
    if (sync.len != 16 || offset < 0 || offset > content.len || program.len % 4) {
        PyErr_SetString(PyExc_ValueError, "bad arguments to decode");
        goto done;
    }
    stats_seq = PySequence_Fast(stats_obj, "stats_ids must be a sequence of ints");
    if (!stats_seq) goto done;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(stats_seq);
    c.n_stats = (int)ns;
    if (ns) {
        stats_ids = malloc(sizeof(int64_t) * (size_t)ns);
        c.stat_vals = calloc((size_t)(N_LONG_STATS * ns), sizeof(int64_t));
        c.bound_ptr = calloc((size_t)(N_BOUND_STATS * ns), sizeof(uint8_t *));
        c.bound_len = calloc((size_t)(N_BOUND_STATS * ns), sizeof(int64_t));
        c.stat_has = calloc((size_t)(5 * ns), 1);
        c.lstats = calloc((size_t)(N_LONG_STATS * ns), sizeof(long_col));
        c.bstats = calloc((size_t)(N_BOUND_STATS * ns), sizeof(bin_col));
        if (!stats_ids || !c.stat_vals || !c.bound_ptr || !c.bound_len || !c.stat_has
            || !c.lstats || !c.bstats) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < ns; i++) {
            stats_ids[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(stats_seq, i));
            if (stats_ids[i] == -1 && PyErr_Occurred()) goto done;
        }
    }
    c.stats_ids = stats_ids;
    c.prog = program.buf;
    c.prog_len = program.len / 4;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_blocks(&c, (const uint8_t *)content.buf + offset,
                       (const uint8_t *)content.buf + content.len, sync.buf, deflate, root, &r);
    Py_END_ALLOW_THREADS
    if (rc) {
        if (c.err == E_EOF) PyErr_SetString(PyExc_EOFError, c.msg);
        else if (c.err == E_NOMEM) PyErr_NoMemory();
        else PyErr_SetString(PyExc_ValueError, c.msg);
        goto done;
    }
    PyObject *bufs = PyList_New(0);
    if (!bufs) goto done;
    if (add_bin(bufs, &c.path_col, 0) || add_bin(bufs, &c.fmt_col, 0)
        || add_bin(bufs, &c.part_col, 0) || add(bufs, bytes_of(&c.records_col))
        || add(bufs, bytes_of(&c.size_col)) || add(bufs, bytes_of(&c.split_valid))
        || add(bufs, offsets_of(&c.split_off)) || add(bufs, bytes_of(&c.split_vals))
        || add(bufs, bytes_of(&c.seq_valid)) || add(bufs, bytes_of(&c.seq_vals))) {
        Py_DECREF(bufs);
        goto done;
    }
    for (int s = 0; s < c.n_stats; s++) {
        for (int k = 0; k < N_LONG_STATS; k++) {
            long_col *col = &c.lstats[k * c.n_stats + s];
            if (add(bufs, bytes_of(&col->valid)) || add(bufs, bytes_of(&col->vals))) {
                Py_DECREF(bufs);
                goto done;
            }
        }
        for (int k = 0; k < N_BOUND_STATS; k++) {
            if (add_bin(bufs, &c.bstats[k * c.n_stats + s], 1)) {
                Py_DECREF(bufs);
                goto done;
            }
        }
    }
    result = Py_BuildValue("(LN)", (long long)c.rows, bufs);
done:
    free_ctx(&c);
    free(stats_ids);
    Py_XDECREF(stats_seq);
    PyBuffer_Release(&content);
    PyBuffer_Release(&sync);
    PyBuffer_Release(&program);
    return result;
}

/* ------------------------------------------------------------------ the header */

static int hdr_long(const uint8_t **p, const uint8_t *end, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        if (*p >= end) return E_EOF;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) return E_VALUE;
    }
    *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
    return 0;
}

PyDoc_STRVAR(header_doc,
"header(content) -> (magic, meta, sync, offset)\n\n"
"An Avro object container's header: its 4 magic bytes, its metadata (str -> bytes), its\n"
"16-byte sync marker and the offset of the first block. Raises EOFError (the bytes end\n"
"inside the header) or ValueError (a bad length).");

static PyObject *header(PyObject *self, PyObject *arg) {
    Py_buffer content;
    (void)self;
    if (PyObject_GetBuffer(arg, &content, PyBUF_SIMPLE)) return NULL;
    const uint8_t *p = content.buf, *end = p + content.len;
    PyObject *meta = PyDict_New(), *result = NULL;
    int rc = 0;
    if (!meta) goto done;
    if (end - p < 4 || memcmp(p, "Obj\x01", 4) != 0) {
        PyObject *shown = PyBytes_FromStringAndSize((const char *)p, end - p < 4 ? end - p : 4);
        if (shown) {
            PyErr_Format(PyExc_ValueError, "not an Avro file (magic %R)", shown);
            Py_DECREF(shown);
        }
        goto done;
    }
    PyObject *magic = PyBytes_FromStringAndSize((const char *)p, 4);
    if (!magic) goto done;
    p += 4;
    for (;;) {
        int64_t count, n;
        if ((rc = hdr_long(&p, end, &count))) break;
        if (count == 0) break;
        if (count < 0) {
            count = -count;
            if ((rc = hdr_long(&p, end, &n))) break;
        }
        for (int64_t i = 0; i < count && !rc; i++) {
            const uint8_t *k, *v;
            int64_t kn, vn;
            if ((rc = hdr_long(&p, end, &kn))) break;
            if (kn < 0) { rc = E_VALUE; break; }
            if (end - p < kn) { rc = E_EOF; break; }
            k = p;
            p += kn;
            if ((rc = hdr_long(&p, end, &vn))) break;
            if (vn < 0) { rc = E_VALUE; break; }
            if (end - p < vn) { rc = E_EOF; break; }
            v = p;
            p += vn;
            PyObject *key = PyUnicode_DecodeUTF8((const char *)k, (Py_ssize_t)kn, "strict");
            PyObject *val = PyBytes_FromStringAndSize((const char *)v, (Py_ssize_t)vn);
            if (!key || !val || PyDict_SetItem(meta, key, val)) {
                Py_XDECREF(key);
                Py_XDECREF(val);
                Py_DECREF(magic);
                goto done;
            }
            Py_DECREF(key);
            Py_DECREF(val);
        }
        if (rc) break;
    }
    if (!rc && end - p < 16) rc = E_EOF;
    if (rc) {
        Py_DECREF(magic);
        goto done;
    }
    result = Py_BuildValue("(NOy#n)", magic, meta, (const char *)p, (Py_ssize_t)16,
                           (Py_ssize_t)(p + 16 - (const uint8_t *)content.buf));
done:
    if (rc == E_EOF) PyErr_SetString(PyExc_EOFError, "the bytes end inside the Avro header");
    else if (rc == E_VALUE) PyErr_SetString(PyExc_ValueError, "a bad length in the Avro header");
    Py_XDECREF(meta);
    PyBuffer_Release(&content);
    return result;
}

/* ------------------------------------------------------------------ split ids: blake2b */

static const uint64_t B2_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};
static const uint8_t B2_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

typedef struct {
    uint64_t h[8], t;
    uint8_t buf[128];
    size_t n;
} b2_t;

#define ROTR64(x, y) (((x) >> (y)) | ((x) << (64 - (y))))
#define B2_G(a, b, c, d, x, y)      \
    do {                            \
        v[a] = v[a] + v[b] + (x);   \
        v[d] = ROTR64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];         \
        v[b] = ROTR64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);   \
        v[d] = ROTR64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];         \
        v[b] = ROTR64(v[b] ^ v[c], 63); \
    } while (0)

static void b2_compress(b2_t *s, int last) {
    uint64_t v[16], m[16];
    for (int i = 0; i < 8; i++) {
        v[i] = s->h[i];
        v[i + 8] = B2_IV[i];
    }
    v[12] ^= s->t;
    if (last) v[14] = ~v[14];
    for (int i = 0; i < 16; i++) {
        uint64_t w = 0;
        for (int j = 7; j >= 0; j--) w = (w << 8) | s->buf[8 * i + j];
        m[i] = w;
    }
    for (int i = 0; i < 12; i++) {
        const uint8_t *z = B2_SIGMA[i];
        B2_G(0, 4, 8, 12, m[z[0]], m[z[1]]);
        B2_G(1, 5, 9, 13, m[z[2]], m[z[3]]);
        B2_G(2, 6, 10, 14, m[z[4]], m[z[5]]);
        B2_G(3, 7, 11, 15, m[z[6]], m[z[7]]);
        B2_G(0, 5, 10, 15, m[z[8]], m[z[9]]);
        B2_G(1, 6, 11, 12, m[z[10]], m[z[11]]);
        B2_G(2, 7, 8, 13, m[z[12]], m[z[13]]);
        B2_G(3, 4, 9, 14, m[z[14]], m[z[15]]);
    }
    for (int i = 0; i < 8; i++) s->h[i] ^= v[i] ^ v[i + 8];
}

static void b2_init(b2_t *s, size_t outlen) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 8; i++) s->h[i] = B2_IV[i];
    s->h[0] ^= 0x01010000ULL ^ (uint64_t)outlen;
}

static void b2_update(b2_t *s, const uint8_t *in, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (s->n == 128) {
            s->t += 128;
            b2_compress(s, 0);
            s->n = 0;
        }
        s->buf[s->n++] = in[i];
    }
}

static void b2_final(b2_t *s, uint8_t *out, size_t outlen) {
    s->t += s->n;
    memset(s->buf + s->n, 0, 128 - s->n);
    b2_compress(s, 1);
    for (size_t i = 0; i < outlen; i++) out[i] = (uint8_t)(s->h[i / 8] >> (8 * (i % 8)));
}

PyDoc_STRVAR(split_ids_doc,
"split_ids(snapshot_id, path_offsets, path_data, path_index, starts, lengths) -> bytes\n\n"
"icefloe's split ids (icefloe.splits.split.split_id_maker(snapshot_id)(path, start,\n"
"length), byte for byte) for n splits at once, as one bytes object of n ids of equal\n"
"width: \"<snapshot_id>-\" and the 20 hex digits of blake2b(digest_size=10) of\n"
"\"<snapshot_id>|<path>|<start>|<length>\". Split i's path is string\n"
"path_index[i] of an Arrow string array given as its int32 offsets and UTF-8 data;\n"
"path_index, starts and lengths are int64 buffers of n values. Releases the GIL.");

static PyObject *split_ids(PyObject *self, PyObject *args) {
    long long snapshot_id;
    Py_buffer offs, data, index, starts, lengths;
    (void)self;
    if (!PyArg_ParseTuple(args, "Ly*y*y*y*y*", &snapshot_id, &offs, &data, &index, &starts,
                          &lengths))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = index.len / 8, n_paths = offs.len / 4 - 1;
    if (starts.len / 8 != n || lengths.len / 8 != n || n_paths < 0) {
        PyErr_SetString(PyExc_ValueError, "split_ids: buffers of different lengths");
        goto done;
    }
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, "%lld", snapshot_id);
    Py_ssize_t width = plen + 1 + 20;
    result = PyBytes_FromStringAndSize(NULL, n * width);
    if (!result) goto done;
    char *out = PyBytes_AS_STRING(result);
    const int32_t *off = offs.buf;
    const int64_t *idx = index.buf, *st = starts.buf, *ln = lengths.buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    b2_t base;
    b2_init(&base, 10);
    b2_update(&base, (const uint8_t *)prefix, (size_t)plen);
    b2_update(&base, (const uint8_t *)"|", 1);
    static const char hex[] = "0123456789abcdef";
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t k = idx[i];
        if (k < 0 || k >= n_paths || off[k] > off[k + 1] || off[k + 1] > data.len) {
            bad = 1;
            break;
        }
        b2_t s = base;
        char tail[64];
        b2_update(&s, (const uint8_t *)data.buf + off[k], (size_t)(off[k + 1] - off[k]));
        int tn = snprintf(tail, sizeof tail, "|%lld|%lld", (long long)st[i], (long long)ln[i]);
        b2_update(&s, (const uint8_t *)tail, (size_t)tn);
        uint8_t digest[10];
        b2_final(&s, digest, 10);
        char *o = out + i * width;
        memcpy(o, prefix, (size_t)plen);
        o[plen] = '-';
        for (int j = 0; j < 10; j++) {
            o[plen + 1 + 2 * j] = hex[digest[j] >> 4];
            o[plen + 2 + 2 * j] = hex[digest[j] & 15];
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        Py_CLEAR(result);
        PyErr_SetString(PyExc_ValueError, "split_ids: a path index out of range");
    }
done:
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    PyBuffer_Release(&index);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {"header", header, METH_O, header_doc},
    {"split_ids", split_ids, METH_VARARGS, split_ids_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core",
                                    "icefloe's compiled manifest decoder (see __init__.py).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
