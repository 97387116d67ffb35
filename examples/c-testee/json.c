/*
 * json.c - see json.h.
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

/* ---- sbuf ------------------------------------------------------------------------------ */

void sb_init(struct sbuf *sb)
{
    sb->data = NULL;
    sb->len = 0;
    sb->cap = 0;
    sb->oom = 0;
}

void sb_free(struct sbuf *sb)
{
    free(sb->data);
    sb_init(sb);
}

void sb_reset(struct sbuf *sb)
{
    sb->len = 0;
    sb->oom = 0;
}

static int sb_reserve(struct sbuf *sb, size_t extra)
{
    size_t need, ncap;
    char *p;

    if (sb->oom)
        return 0;
    if (extra > (size_t)-1 - sb->len - 1) {
        sb->oom = 1;
        return 0;
    }
    need = sb->len + extra + 1;
    if (need <= sb->cap)
        return 1;
    ncap = sb->cap ? sb->cap : 256;
    while (ncap < need) {
        if (ncap > (size_t)-1 / 2) {
            ncap = need;
            break;
        }
        ncap *= 2;
    }
    p = realloc(sb->data, ncap);
    if (p == NULL) {
        sb->oom = 1;
        return 0;
    }
    sb->data = p;
    sb->cap = ncap;
    return 1;
}

void sb_putn(struct sbuf *sb, const char *s, size_t n)
{
    if (!sb_reserve(sb, n))
        return;
    if (n)
        memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void sb_puts(struct sbuf *sb, const char *s)
{
    sb_putn(sb, s, strlen(s));
}

void sb_putc(struct sbuf *sb, char c)
{
    sb_putn(sb, &c, 1);
}

void sb_put_u64(struct sbuf *sb, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;

    do {
        tmp[--i] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0);
    sb_putn(sb, tmp + i, sizeof tmp - i);
}

void sb_put_i64(struct sbuf *sb, int64_t v)
{
    if (v < 0) {
        sb_putc(sb, '-');
        /* negate in unsigned arithmetic: well defined even for INT64_MIN */
        sb_put_u64(sb, (uint64_t)0 - (uint64_t)v);
    } else {
        sb_put_u64(sb, (uint64_t)v);
    }
}

static const char hexdigits[] = "0123456789abcdef";

void sb_put_jstr(struct sbuf *sb, const char *s, size_t n)
{
    size_t i;

    sb_putc(sb, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char esc[2];
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_putn(sb, esc, 2);
        } else if (c >= 0x20 && c < 0x7f) {
            sb_putc(sb, (char)c);
        } else {
            char esc[6];
            esc[0] = '\\';
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hexdigits[c >> 4];
            esc[5] = hexdigits[c & 15];
            sb_putn(sb, esc, 6);
        }
    }
    sb_putc(sb, '"');
}

void sb_put_hex(struct sbuf *sb, const uint8_t *p, size_t n)
{
    size_t i;
    char *out;

    if (n > ((size_t)-1 - 1) / 2) {
        sb->oom = 1;
        return;
    }
    if (!sb_reserve(sb, 2 * n))
        return;
    out = sb->data + sb->len;
    for (i = 0; i < n; i++) {
        out[2 * i] = hexdigits[p[i] >> 4];
        out[2 * i + 1] = hexdigits[p[i] & 15];
    }
    sb->len += 2 * n;
    sb->data[sb->len] = '\0';
}

static int hexval(int c);

uint8_t *hex_decode(const char *s, size_t len, size_t *outlen, int *bad)
{
    uint8_t *out;
    size_t i;

    *bad = 0;
    if (len % 2 != 0) {
        *bad = 1;
        return NULL;
    }
    out = malloc(len / 2 + 1);          /* +1: never malloc(0) */
    if (out == NULL)
        return NULL;
    for (i = 0; i < len / 2; i++) {
        int h = hexval((unsigned char)s[2 * i]);
        int l = hexval((unsigned char)s[2 * i + 1]);
        if (h < 0 || l < 0) {
            free(out);
            *bad = 1;
            return NULL;
        }
        out[i] = (uint8_t)(h * 16 + l);
    }
    *outlen = len / 2;
    return out;
}

/* ---- arena ----------------------------------------------------------------------------- */

struct arena_chunk {
    struct arena_chunk *prev;
    size_t size;
    size_t used;
    /* payload follows, aligned like this union */
    union {
        uint64_t u;
        void *p;
        double d;
        long double ld;
    } align[1];
};

#define ARENA_CHUNK 65536u
#define ARENA_ALIGN 16u

void arena_init(struct arena *a)
{
    a->head = NULL;
}

void arena_free(struct arena *a)
{
    struct arena_chunk *c = a->head;

    while (c != NULL) {
        struct arena_chunk *prev = c->prev;
        free(c);
        c = prev;
    }
    a->head = NULL;
}

void *arena_alloc(struct arena *a, size_t n)
{
    struct arena_chunk *c = a->head;
    size_t rounded;
    char *base;

    if (n > (size_t)-1 - ARENA_ALIGN - sizeof(struct arena_chunk))
        return NULL;
    rounded = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (c == NULL || c->size - c->used < rounded) {
        size_t size = rounded > ARENA_CHUNK ? rounded : ARENA_CHUNK;
        c = malloc(offsetof(struct arena_chunk, align) + size);
        if (c == NULL)
            return NULL;
        c->size = size;
        c->used = 0;
        c->prev = a->head;
        a->head = c;
    }
    base = (char *)c->align + c->used;
    c->used += rounded;
    return base;
}

/* ---- parser ---------------------------------------------------------------------------- */

struct parser {
    struct arena *a;
    const char *p;
    const char *end;
    const char *err;
    int depth;
};

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static struct jvalue *new_value(struct parser *ps, enum jtype t)
{
    struct jvalue *v = arena_alloc(ps->a, sizeof *v);

    if (v == NULL) {
        ps->err = "out of memory";
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_u4(struct parser *ps, unsigned *out)
{
    unsigned v = 0;
    int i;

    if (ps->end - ps->p < 4) {
        ps->err = "truncated \\u escape";
        return 0;
    }
    for (i = 0; i < 4; i++) {
        int h = hexval((unsigned char)ps->p[i]);
        if (h < 0) {
            ps->err = "bad \\u escape";
            return 0;
        }
        v = v * 16u + (unsigned)h;
    }
    ps->p += 4;
    *out = v;
    return 1;
}

static size_t put_utf8(char *o, unsigned long cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ps->p is just after the opening quote.  Decodes into arena memory. */
static int parse_string_raw(struct parser *ps, const char **out, size_t *outlen)
{
    const char *q = ps->p;
    size_t rawlen;
    char *buf, *o;

    /* find the closing quote; the decoded text is never longer than the raw text */
    while (q < ps->end && *q != '"') {
        if (*q == '\\') {
            q++;
            if (q >= ps->end)
                break;
        }
        q++;
    }
    if (q >= ps->end) {
        ps->err = "unterminated string";
        return 0;
    }
    rawlen = (size_t)(q - ps->p);
    buf = arena_alloc(ps->a, rawlen + 1);
    if (buf == NULL) {
        ps->err = "out of memory";
        return 0;
    }
    o = buf;
    while (ps->p < q) {
        unsigned char c = (unsigned char)*ps->p++;
        if (c < 0x20) {
            ps->err = "control character in string";
            return 0;
        }
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        c = (unsigned char)*ps->p++;
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned hi, lo;
            unsigned long cp;
            if (q - ps->p < 4) {
                ps->err = "truncated \\u escape";
                return 0;
            }
            if (!read_u4(ps, &hi))
                return 0;
            cp = hi;
            if (hi >= 0xD800 && hi <= 0xDBFF && q - ps->p >= 6 &&
                ps->p[0] == '\\' && ps->p[1] == 'u') {
                const char *save = ps->p;
                ps->p += 2;
                if (!read_u4(ps, &lo))
                    return 0;
                if (lo >= 0xDC00 && lo <= 0xDFFF)
                    cp = 0x10000ul + (((unsigned long)hi - 0xD800ul) << 10) + (lo - 0xDC00ul);
                else
                    ps->p = save;       /* lone high surrogate; the next escape stands alone */
            }
            /* a lone surrogate is kept as its 3-byte form (it is never a Latin-1 character) */
            o += put_utf8(o, cp);
            break;
        }
        default:
            ps->err = "bad escape in string";
            return 0;
        }
    }
    ps->p = q + 1;
    *o = '\0';
    *out = buf;
    *outlen = (size_t)(o - buf);
    return 1;
}

static struct jvalue *parse_value(struct parser *ps);

static struct jvalue *parse_number(struct parser *ps)
{
    const char *start = ps->p;
    struct jvalue *v = new_value(ps, J_NUMBER);

    if (v == NULL)
        return NULL;
    v->is_integer = 1;
    if (ps->p < ps->end && *ps->p == '-') {
        v->negative = 1;
        ps->p++;
    }
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
        ps->err = "bad number";
        return NULL;
    }
    if (*ps->p == '0') {
        ps->p++;
    } else {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            unsigned d = (unsigned)(*ps->p - '0');
            if (v->mag > (UINT64_MAX - d) / 10u)
                v->overflow = 1;
            else
                v->mag = v->mag * 10u + d;
            ps->p++;
        }
    }
    if (ps->p < ps->end && *ps->p == '.') {
        v->is_integer = 0;
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
            ps->err = "bad number";
            return NULL;
        }
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        v->is_integer = 0;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
            ps->err = "bad number";
            return NULL;
        }
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    v->raw = start;
    v->rawlen = (size_t)(ps->p - start);
    return v;
}

static int match_word(struct parser *ps, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, w, n) == 0) {
        ps->p += n;
        return 1;
    }
    ps->err = "invalid literal";
    return 0;
}

static struct jvalue *parse_array(struct parser *ps)
{
    struct jvalue *arr = new_value(ps, J_ARRAY), *last = NULL;

    if (arr == NULL)
        return NULL;
    ps->p++;                    /* '[' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return arr;
    }
    for (;;) {
        struct jvalue *item = parse_value(ps);
        if (item == NULL)
            return NULL;
        if (last == NULL)
            arr->items = item;
        else
            last->next = item;
        last = item;
        arr->count++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            return arr;
        }
        ps->err = "expected ',' or ']' in array";
        return NULL;
    }
}

static struct jvalue *parse_object(struct parser *ps)
{
    struct jvalue *obj = new_value(ps, J_OBJECT);
    struct jmember *last = NULL;

    if (obj == NULL)
        return NULL;
    ps->p++;                    /* '{' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return obj;
    }
    for (;;) {
        struct jmember *m;

        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            ps->err = "expected a string key in object";
            return NULL;
        }
        m = arena_alloc(ps->a, sizeof *m);
        if (m == NULL) {
            ps->err = "out of memory";
            return NULL;
        }
        memset(m, 0, sizeof *m);
        ps->p++;
        if (!parse_string_raw(ps, &m->key, &m->keylen))
            return NULL;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            ps->err = "expected ':' in object";
            return NULL;
        }
        ps->p++;
        m->value = parse_value(ps);
        if (m->value == NULL)
            return NULL;
        if (last == NULL)
            obj->members = m;
        else
            last->next = m;
        last = m;
        obj->count++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            return obj;
        }
        ps->err = "expected ',' or '}' in object";
        return NULL;
    }
}

static struct jvalue *parse_value(struct parser *ps)
{
    struct jvalue *v = NULL;

    skip_ws(ps);
    if (ps->p >= ps->end) {
        ps->err = "unexpected end of input";
        return NULL;
    }
    if (++ps->depth > JSON_MAX_DEPTH) {
        ps->err = "nesting too deep";
        return NULL;
    }
    switch (*ps->p) {
    case '{':
        v = parse_object(ps);
        break;
    case '[':
        v = parse_array(ps);
        break;
    case '"':
        v = new_value(ps, J_STRING);
        if (v != NULL) {
            ps->p++;
            if (!parse_string_raw(ps, &v->str, &v->len))
                v = NULL;
        }
        break;
    case 't':
        if (match_word(ps, "true"))
            v = new_value(ps, J_TRUE);
        break;
    case 'f':
        if (match_word(ps, "false"))
            v = new_value(ps, J_FALSE);
        break;
    case 'n':
        if (match_word(ps, "null"))
            v = new_value(ps, J_NULL);
        break;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            v = parse_number(ps);
        else
            ps->err = "unexpected character";
        break;
    }
    ps->depth--;
    return v;
}

struct jvalue *json_parse(struct arena *a, const char *text, size_t len, const char **err)
{
    struct parser ps;
    struct jvalue *root;

    ps.a = a;
    ps.p = text;
    ps.end = text + len;
    ps.err = NULL;
    ps.depth = 0;
    root = parse_value(&ps);
    if (root != NULL) {
        skip_ws(&ps);
        if (ps.p != ps.end) {
            ps.err = "trailing characters after the JSON value";
            root = NULL;
        }
    }
    if (root == NULL)
        *err = ps.err != NULL ? ps.err : "malformed JSON";
    return root;
}

const struct jvalue *json_get(const struct jvalue *obj, const char *key)
{
    const struct jmember *m;
    const struct jvalue *found = NULL;
    size_t klen = strlen(key);

    if (obj == NULL || obj->type != J_OBJECT)
        return NULL;
    for (m = obj->members; m != NULL; m = m->next)
        if (m->keylen == klen && memcmp(m->key, key, klen) == 0)
            found = m->value;
    return found;
}

int json_as_u64(const struct jvalue *v, uint64_t max, uint64_t *out)
{
    if (v == NULL || v->type != J_NUMBER || !v->is_integer || v->overflow)
        return 0;
    if (v->negative && v->mag != 0)
        return 0;
    if (v->mag > max)
        return 0;
    *out = v->mag;
    return 1;
}

int json_as_i64(const struct jvalue *v, int64_t min, int64_t max, int64_t *out)
{
    if (v == NULL || v->type != J_NUMBER || !v->is_integer || v->overflow)
        return 0;
    if (v->negative) {
        /* value = -mag; compare magnitudes in unsigned arithmetic */
        uint64_t lim = min < 0 ? (uint64_t)0 - (uint64_t)min : 0;
        if (v->mag > lim)
            return 0;
        *out = v->mag == 0 ? 0 : -(int64_t)(v->mag - 1) - 1;
        return 1;
    }
    if (max < 0 || v->mag > (uint64_t)max)
        return 0;
    if (v->mag < (uint64_t)(min < 0 ? 0 : min))
        return 0;
    *out = (int64_t)v->mag;
    return 1;
}
