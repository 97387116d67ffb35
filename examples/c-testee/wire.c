/*
 * wire.c - see wire.h.  Layouts and rules: docs/testee-protocol.md sections 2.2-4.
 */
#include "wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- constants (docs/testee-protocol.md section 4, RULES.md section 0) ------------------ */

#define LUSTRE_MSG_MAGIC_V2         0x0BD00BD3u
#define LUSTRE_MSG_MAGIC_V2_SWABBED 0xD30BD00Bu
#define MSG_HDR_FIXED               32u        /* lustre_msg_v2 up to lm_buflens[] */
#define PTLRPC_MAX_BUFCOUNT         32u
#define PTLRPC_MAX_BUFLEN           1024000u
#define PTLRPC_BODY_V2_SIZE         152u
#define PTLRPC_BODY_SIZE            184u       /* ptlrpc_body_v3 */
#define PB_JOBID_OFF                152u
#define LUSTRE_JOBID_SIZE           32u
#define PTLRPC_MSG_VERSION          3u
#define PTL_RPC_MSG_REQUEST         4711u
#define PTL_RPC_MSG_ERR             4712u
#define PTL_RPC_MSG_REPLY           4713u

/* The encoder refuses to produce more than this (the harness reads lines of at most
 * 16 MiB, i.e. 8 MiB of message as hex). */
#define ENCODE_MAX_BYTES            (8u * 1024u * 1024u)

/* lustre_msg_v2 header words; `swab`: swapped for a foreign-endian sender (section 3) */
struct hdr_field {
    const char *name;
    unsigned off;
    int swab;
};

static const struct hdr_field hdr_fields[] = {
    { "lm_bufcount",  0,  1 },
    { "lm_secflvr",   4,  1 },
    { "lm_magic",     8,  1 },
    { "lm_repsize",   12, 1 },
    { "lm_cksum",     16, 1 },
    { "lm_flags",     20, 1 },
    { "lm_opc",       24, 1 },
    { "lm_padding_3", 28, 0 },          /* never swapped */
};
#define N_HDR_FIELDS (sizeof hdr_fields / sizeof hdr_fields[0])

/* ptlrpc_body integer fields (everything but pb_jobid) */
struct body_field {
    const char *name;
    unsigned off;
    unsigned size;              /* bytes per element: 2, 4 or 8 */
    unsigned count;             /* elements: 1, or 4 for pb_pre_versions */
    int swab;                   /* swapped for a foreign-endian sender */
    int is_signed;              /* pb_status only */
};

static const struct body_field body_fields[] = {
    { "pb_handle",         0,   8, 1, 0, 0 },   /* opaque cookie: not swapped */
    { "pb_type",           8,   4, 1, 1, 0 },
    { "pb_version",        12,  4, 1, 1, 0 },
    { "pb_opc",            16,  4, 1, 1, 0 },
    { "pb_status",         20,  4, 1, 1, 1 },
    { "pb_last_xid",       24,  8, 1, 1, 0 },
    { "pb_tag",            32,  2, 1, 1, 0 },
    { "pb_padding0",       34,  2, 1, 0, 0 },   /* not swapped */
    { "pb_projid",         36,  4, 1, 1, 0 },
    { "pb_last_committed", 40,  8, 1, 1, 0 },
    { "pb_transno",        48,  8, 1, 1, 0 },
    { "pb_flags",          56,  4, 1, 1, 0 },
    { "pb_op_flags",       60,  4, 1, 1, 0 },
    { "pb_conn_cnt",       64,  4, 1, 1, 0 },
    { "pb_timeout",        68,  4, 1, 1, 0 },
    { "pb_service_time",   72,  4, 1, 1, 0 },
    { "pb_limit",          76,  4, 1, 1, 0 },
    { "pb_slv",            80,  8, 1, 1, 0 },
    { "pb_pre_versions",   88,  8, 4, 1, 0 },
    { "pb_mbits",          120, 8, 1, 1, 0 },
    { "pb_padding64_0",    128, 8, 1, 0, 0 },   /* not swapped */
    { "pb_padding64_1",    136, 8, 1, 0, 0 },   /* not swapped */
    { "pb_uid",            144, 4, 1, 1, 0 },
    { "pb_gid",            148, 4, 1, 1, 0 },
};
#define N_BODY_FIELDS (sizeof body_fields / sizeof body_fields[0])

/* ---- helpers --------------------------------------------------------------------------- */

static uint64_t rd_le(const uint8_t *p, unsigned size)
{
    uint64_t v = 0;
    unsigned i;

    for (i = size; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t rd_be(const uint8_t *p, unsigned size)
{
    uint64_t v = 0;
    unsigned i;

    for (i = 0; i < size; i++)
        v = (v << 8) | p[i];
    return v;
}

/* read as an x86_64 host holds it: swapped fields of a big-endian sender read big-endian */
static uint64_t rd(const uint8_t *p, unsigned size, int big)
{
    return big ? rd_be(p, size) : rd_le(p, size);
}

static void wr_le(uint8_t *p, unsigned size, uint64_t v)
{
    unsigned i;

    for (i = 0; i < size; i++) {
        p[i] = (uint8_t)(v & 0xFFu);
        v >>= 8;
    }
}

static uint64_t round8(uint64_t v)
{
    return (v + 7u) & ~(uint64_t)7u;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(struct outcome *oc, const char *err, const char *fmt, ...)
{
    va_list ap;

    oc->err = err;
    va_start(ap, fmt);
    vsnprintf(oc->detail, sizeof oc->detail, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- CRC-32 ---------------------------------------------------------------------------- */

static uint32_t crc_table[256];
static int crc_table_ready;

uint32_t lustre_crc32_le(uint32_t seed, const uint8_t *p, size_t n)
{
    uint32_t crc = seed;
    size_t i;

    if (!crc_table_ready) {
        uint32_t k;
        for (k = 0; k < 256; k++) {
            uint32_t c = k;
            int j;
            for (j = 0; j < 8; j++)
                c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
            crc_table[k] = c;
        }
        crc_table_ready = 1;
    }
    for (i = 0; i < n; i++)
        crc = crc_table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return crc;             /* no final inversion */
}

/* ---- decode (section 2.2) ------------------------------------------------------------- */

int wire_decode(const uint8_t *d, size_t n, int is_reply, struct sbuf *out,
                struct outcome *oc)
{
    int big;
    uint32_t bufcount, magic, version, type;
    uint32_t buflens[PTLRPC_MAX_BUFCOUNT];
    uint64_t hdr, total, off;
    const uint8_t *body;
    unsigned i, k;

    /* check 1: the fixed header */
    if (n < MSG_HDR_FIXED)
        return fail(oc, "EINVAL", "message of %llu bytes is shorter than the 32-byte header",
                    (unsigned long long)n);

    /* byte order: only the byte-swapped V2 magic means a foreign sender */
    big = rd_le(d + 8, 4) == LUSTRE_MSG_MAGIC_V2_SWABBED;

    /* check 2: buffer count */
    bufcount = (uint32_t)rd(d + 0, 4, big);
    if (bufcount < 1 || bufcount > PTLRPC_MAX_BUFCOUNT)
        return fail(oc, "EINVAL", "lm_bufcount %lu is not in 1..32", (unsigned long)bufcount);

    /* check 3: room for lm_buflens[] */
    hdr = round8(MSG_HDR_FIXED + 4u * (uint64_t)bufcount);
    if (n < hdr)
        return fail(oc, "EINVAL", "message of %llu bytes is shorter than its %llu-byte header",
                    (unsigned long long)n, (unsigned long long)hdr);

    /* check 4: each buffer length; 64-bit arithmetic, so 0xFFFFFFF9.. cannot wrap to 0 */
    for (i = 0; i < bufcount; i++) {
        buflens[i] = (uint32_t)rd(d + MSG_HDR_FIXED + 4u * i, 4, big);
        if (round8(buflens[i]) > PTLRPC_MAX_BUFLEN)
            return fail(oc, "EINVAL", "lm_buflens[%llu] = %llu exceeds PTLRPC_MAX_BUFLEN",
                        (unsigned long long)i, (unsigned long long)buflens[i]);
    }

    /* check 5: total length */
    total = hdr;
    for (i = 0; i < bufcount; i++)
        total += round8(buflens[i]);
    if (total > n)
        return fail(oc, "EINVAL", "message needs %llu bytes but has %llu",
                    (unsigned long long)total, (unsigned long long)n);
    if (total > PTLRPC_MAX_BUFLEN)
        return fail(oc, "EINVAL", "message needs %llu bytes, more than PTLRPC_MAX_BUFLEN 1024000",
                    (unsigned long long)total);

    /* check 6: magic */
    magic = (uint32_t)rd(d + 8, 4, big);
    if (magic != LUSTRE_MSG_MAGIC_V2)
        return fail(oc, "EINVAL", "bad lustre msg magic 0x%08lx", (unsigned long)magic);

    /* check 7: buffer 0 holds at least a ptlrpc_body_v2 */
    if (buflens[0] < PTLRPC_BODY_V2_SIZE)
        return fail(oc, "EFAULT", "lm_buflens[0] = %lu is smaller than ptlrpc_body_v2 (152)",
                    (unsigned long)buflens[0]);
    body = d + hdr;

    /* check 8: PTLRPC_MSG_VERSION in the low 16 bits of pb_version */
    version = (uint32_t)rd(body + 12, 4, big);
    if ((version & 0xFFFFu) != PTLRPC_MSG_VERSION)
        return fail(oc, "EINVAL", "wrong lustre_msg version 0x%08lx", (unsigned long)version);

    /* check 9: pb_type for the direction */
    type = (uint32_t)rd(body + 8, 4, big);
    if (is_reply ? (type != PTL_RPC_MSG_REPLY && type != PTL_RPC_MSG_ERR)
                 : type != PTL_RPC_MSG_REQUEST)
        return fail(oc, "EPROTO", "pb_type %lu is not valid in a %s", (unsigned long)type,
                    is_reply ? "reply" : "request");

    /* ---- accepted: report it ---- */
    sb_puts(out, "{\"byte_order\":");
    sb_puts(out, big ? "\"big\"" : "\"little\"");

    sb_puts(out, ",\"header\":{");
    for (k = 0; k < N_HDR_FIELDS; k++) {
        if (k)
            sb_putc(out, ',');
        sb_putc(out, '"');
        sb_puts(out, hdr_fields[k].name);
        sb_puts(out, "\":");
        sb_put_u64(out, rd(d + hdr_fields[k].off, 4, big && hdr_fields[k].swab));
    }
    sb_putc(out, '}');

    sb_puts(out, ",\"buflens\":[");
    for (i = 0; i < bufcount; i++) {
        if (i)
            sb_putc(out, ',');
        sb_put_u64(out, buflens[i]);
    }
    sb_putc(out, ']');

    sb_puts(out, ",\"body\":{");
    for (k = 0; k < N_BODY_FIELDS; k++) {
        const struct body_field *f = &body_fields[k];
        int sw = big && f->swab;
        unsigned e;

        if (k)
            sb_putc(out, ',');
        sb_putc(out, '"');
        sb_puts(out, f->name);
        sb_puts(out, "\":");
        if (f->count > 1)
            sb_putc(out, '[');
        for (e = 0; e < f->count; e++) {
            uint64_t v = rd(body + f->off + e * f->size, f->size, sw);
            if (e)
                sb_putc(out, ',');
            if (f->is_signed)       /* 32-bit two's complement */
                sb_put_i64(out, (v & 0x80000000u) ? (int64_t)v - (int64_t)0x100000000 : (int64_t)v);
            else
                sb_put_u64(out, v);
        }
        if (f->count > 1)
            sb_putc(out, ']');
    }
    if (buflens[0] >= PTLRPC_BODY_SIZE) {
        /* up to the first NUL, at most 31 characters (Lustre forces byte 31 to NUL) */
        size_t jl = 0;
        while (jl < LUSTRE_JOBID_SIZE - 1 && body[PB_JOBID_OFF + jl] != 0)
            jl++;
        sb_puts(out, ",\"pb_jobid\":");
        sb_put_jstr(out, (const char *)body + PB_JOBID_OFF, jl);
    }
    sb_putc(out, '}');

    sb_puts(out, ",\"buffers\":[");
    off = hdr;
    for (i = 0; i < bufcount; i++) {
        if (i)
            sb_putc(out, ',');
        sb_putc(out, '"');
        sb_put_hex(out, d + off, buflens[i]);
        sb_putc(out, '"');
        off += round8(buflens[i]);
    }
    sb_putc(out, ']');

    sb_puts(out, ",\"computed_cksum\":");
    sb_put_u64(out, lustre_crc32_le(0xFFFFFFFFu, body, buflens[0]));
    sb_putc(out, '}');
    return 0;
}

/* ---- encode (section 2.3) ------------------------------------------------------------- */

/* UTF-8 text -> ISO-8859-1 bytes; returns the number of characters or -1 */
static long latin1_from_utf8(const char *s, size_t n, uint8_t *out, size_t outmax)
{
    size_t i = 0, o = 0;

    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        unsigned long cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cp = ((unsigned long)(c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F);
            if (cp < 0x80)
                return -1;      /* overlong */
            i += 2;
        } else {
            return -1;          /* invalid UTF-8, or a character beyond U+00FF */
        }
        if (cp > 0xFF || o >= outmax)
            return -1;
        out[o++] = (uint8_t)cp;
    }
    return (long)o;
}

static int pack_body(const struct jvalue *body, uint8_t *b, struct outcome *oc)
{
    const struct jmember *m;

    memset(b, 0, PTLRPC_BODY_SIZE);
    if (body == NULL)
        return 0;
    if (body->type != J_OBJECT)
        return fail(oc, "EINVAL", "%s is not an object", "body");
    for (m = body->members; m != NULL; m = m->next) {
        const struct body_field *f = NULL;
        unsigned k;

        if (strcmp(m->key, "pb_jobid") == 0 && strlen(m->key) == m->keylen) {
            uint8_t tmp[LUSTRE_JOBID_SIZE];
            long nch;
            if (m->value->type != J_STRING)
                return fail(oc, "EINVAL", "%s is not a string", "pb_jobid");
            nch = latin1_from_utf8(m->value->str, m->value->len, tmp, LUSTRE_JOBID_SIZE - 1);
            if (nch < 0)
                return fail(oc, "EINVAL", "%s is not at most 31 ISO-8859-1 characters",
                              "pb_jobid");
            memset(b + PB_JOBID_OFF, 0, LUSTRE_JOBID_SIZE);
            memcpy(b + PB_JOBID_OFF, tmp, (size_t)nch);
            continue;
        }
        for (k = 0; k < N_BODY_FIELDS; k++)
            if (strlen(body_fields[k].name) == m->keylen &&
                memcmp(body_fields[k].name, m->key, m->keylen) == 0)
                f = &body_fields[k];
        if (f == NULL)
            return fail(oc, "EINVAL", "unknown body field %.60s", m->key);
        if (f->count > 1) {
            const struct jvalue *it;
            unsigned e = 0;
            if (m->value->type != J_ARRAY || m->value->count != f->count)
                return fail(oc, "EINVAL", "%s is not a list of 4 integers", f->name);
            for (it = m->value->items; it != NULL; it = it->next, e++) {
                uint64_t v;
                if (!json_as_u64(it, UINT64_MAX, &v))
                    return fail(oc, "EINVAL", "%s: element is not an unsigned 64-bit integer",
                                  f->name);
                wr_le(b + f->off + e * f->size, f->size, v);
            }
        } else if (f->is_signed) {
            int64_t v;
            if (!json_as_i64(m->value, -2147483647 - 1, 2147483647, &v))
                return fail(oc, "EINVAL", "%s is not a signed 32-bit integer", f->name);
            wr_le(b + f->off, f->size, (uint64_t)v & 0xFFFFFFFFu);
        } else {
            uint64_t v;
            uint64_t max = f->size == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * f->size)) - 1u);
            if (!json_as_u64(m->value, max, &v))
                return fail(oc, "EINVAL", "%s is not an unsigned %u-bit integer", f->name,
                            8u * f->size);
            wr_le(b + f->off, f->size, v);
        }
    }
    return 0;
}

struct enc_buf {
    uint8_t *bytes;             /* malloc'ed */
    size_t len;
};

int wire_encode(const struct jvalue *msg, struct sbuf *out, struct outcome *oc)
{
    const struct jvalue *header, *body, *buflens_v, *buffers_v;
    uint32_t hvals[N_HDR_FIELDS];
    int hgiven[N_HDR_FIELDS];
    uint32_t *buflens = NULL;
    size_t nbuflens = 0, nbuf, i;
    struct enc_buf *bufs = NULL;
    uint64_t hdr, total;
    uint8_t *wire = NULL;
    int rc = -1;
    const struct jmember *m;

    if (msg == NULL || msg->type != J_OBJECT)
        return fail(oc, "EINVAL", "%s is not an object", "message");
    header = json_get(msg, "header");
    body = json_get(msg, "body");
    buflens_v = json_get(msg, "buflens");
    buffers_v = json_get(msg, "buffers");
    /* byte_order, computed_cksum and unknown members of the message are ignored */

    /* header */
    memset(hgiven, 0, sizeof hgiven);
    memset(hvals, 0, sizeof hvals);
    hvals[2] = LUSTRE_MSG_MAGIC_V2;             /* lm_magic default */
    if (header != NULL) {
        if (header->type != J_OBJECT)
            return fail(oc, "EINVAL", "%s is not an object", "header");
        for (m = header->members; m != NULL; m = m->next) {
            unsigned k, found = N_HDR_FIELDS;
            uint64_t v;
            for (k = 0; k < N_HDR_FIELDS; k++)
                if (strlen(hdr_fields[k].name) == m->keylen &&
                    memcmp(hdr_fields[k].name, m->key, m->keylen) == 0)
                    found = k;
            if (found == N_HDR_FIELDS)
                return fail(oc, "EINVAL", "unknown header field %.60s", m->key);
            if (!json_as_u64(m->value, 0xFFFFFFFFu, &v))
                return fail(oc, "EINVAL", "%s is not an unsigned 32-bit integer",
                              hdr_fields[found].name);
            hvals[found] = (uint32_t)v;
            hgiven[found] = 1;
        }
    }

    /* buflens */
    if (buflens_v != NULL) {
        const struct jvalue *it;
        if (buflens_v->type != J_ARRAY)
            return fail(oc, "EINVAL", "%s is not a list", "buflens");
        nbuflens = buflens_v->count;
        buflens = malloc((nbuflens + 1) * sizeof *buflens);
        if (buflens == NULL)
            return fail(oc, "ENOMEM", "%s", "out of memory");
        for (i = 0, it = buflens_v->items; it != NULL; it = it->next, i++) {
            uint64_t v;
            if (!json_as_u64(it, 0xFFFFFFFFu, &v)) {
                fail(oc, "EINVAL", "%s: element is not an unsigned 32-bit integer", "buflens");
                goto out;
            }
            buflens[i] = (uint32_t)v;
        }
    }

    /* buffers */
    if (buffers_v != NULL && buffers_v->type != J_ARRAY) {
        fail(oc, "EINVAL", "%s is not a list", "buffers");
        goto out;
    }
    nbuf = buffers_v != NULL ? buffers_v->count : 1;
    bufs = calloc(nbuf + 1, sizeof *bufs);
    if (bufs == NULL) {
        fail(oc, "ENOMEM", "%s", "out of memory");
        goto out;
    }
    if (buflens != NULL && nbuflens != nbuf) {
        fail(oc, "EINVAL", "buflens has %llu entries for %llu buffers",
             (unsigned long long)nbuflens, (unsigned long long)nbuf);
        goto out;
    }
    if (hgiven[0] && hvals[0] != nbuf) {
        fail(oc, "EINVAL", "lm_bufcount %llu disagrees with %llu buffers",
             (unsigned long long)hvals[0], (unsigned long long)nbuf);
        goto out;
    }
    {
        const struct jvalue *it = buffers_v != NULL ? buffers_v->items : NULL;
        for (i = 0; i < nbuf; i++) {
            if (i == 0 && (it == NULL || it->type == J_NULL)) {
                /* buffer 0 from the body */
                uint8_t packed[PTLRPC_BODY_SIZE];
                size_t len = buflens != NULL ? buflens[0] : PTLRPC_BODY_SIZE;
                if (len > ENCODE_MAX_BYTES) {
                    fail(oc, "EINVAL", "buflens[0] = %llu is too large to encode",
                         (unsigned long long)len);
                    goto out;
                }
                if (pack_body(body, packed, oc) < 0)
                    goto out;
                bufs[0].bytes = calloc(len + 1, 1);
                if (bufs[0].bytes == NULL) {
                    fail(oc, "ENOMEM", "%s", "out of memory");
                    goto out;
                }
                memcpy(bufs[0].bytes, packed, len < PTLRPC_BODY_SIZE ? len : PTLRPC_BODY_SIZE);
                bufs[0].len = len;
            } else {
                int bad;
                if (it->type != J_STRING) {
                    fail(oc, "EINVAL", "buffers[%llu] is not a hex string",
                         (unsigned long long)i);
                    goto out;
                }
                bufs[i].bytes = hex_decode(it->str, it->len, &bufs[i].len, &bad);
                if (bufs[i].bytes == NULL) {
                    if (bad)
                        fail(oc, "EINVAL", "buffers[%llu] is not valid hex",
                             (unsigned long long)i);
                    else
                        fail(oc, "ENOMEM", "%s", "out of memory");
                    goto out;
                }
                if (buflens != NULL && buflens[i] != bufs[i].len) {
                    fail(oc, "EINVAL", "buflens[%llu] disagrees with the buffer's %llu bytes",
                         (unsigned long long)i, (unsigned long long)bufs[i].len);
                    goto out;
                }
            }
            if (it != NULL)
                it = it->next;
        }
    }

    /* lay out: header, lm_buflens[], zero pad to 8, each buffer zero-padded to 8 */
    hdr = round8(MSG_HDR_FIXED + 4u * (uint64_t)nbuf);
    total = hdr;
    for (i = 0; i < nbuf; i++) {
        total += round8(bufs[i].len);
        if (total > ENCODE_MAX_BYTES) {
            fail(oc, "EINVAL", "message larger than %llu bytes",
                 (unsigned long long)ENCODE_MAX_BYTES);
            goto out;
        }
    }
    if (total > ENCODE_MAX_BYTES) {
        fail(oc, "EINVAL", "message larger than %llu bytes",
             (unsigned long long)ENCODE_MAX_BYTES);
        goto out;
    }
    wire = calloc((size_t)total + 1, 1);
    if (wire == NULL) {
        fail(oc, "ENOMEM", "%s", "out of memory");
        goto out;
    }
    hvals[0] = (uint32_t)nbuf;
    for (i = 0; i < N_HDR_FIELDS; i++)
        wr_le(wire + hdr_fields[i].off, 4, hvals[i]);
    {
        uint64_t off = hdr;
        for (i = 0; i < nbuf; i++) {
            wr_le(wire + MSG_HDR_FIXED + 4u * i, 4, bufs[i].len);
            if (bufs[i].len)
                memcpy(wire + off, bufs[i].bytes, bufs[i].len);
            off += round8(bufs[i].len);
        }
    }
    sb_put_hex(out, wire, (size_t)total);
    rc = 0;

out:
    if (bufs != NULL)
        for (i = 0; i < nbuf; i++)
            free(bufs[i].bytes);
    free(bufs);
    free(buflens);
    free(wire);
    return rc;
}
