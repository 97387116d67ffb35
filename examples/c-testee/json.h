/*
 * json.h - a small JSON reader and writer, just enough for the ptlrpc-conformance
 * testee protocol (docs/testee-protocol.md).  Plain C99, libc only.
 *
 * Reader: parses one complete JSON text held in memory into a tree allocated from an
 * arena.  Integers keep all 64 bits (unsigned) and their sign; the raw text of every
 * number is kept so that an `id` can be echoed exactly.
 *
 * Writer: appends to a growable byte buffer (struct sbuf).  Strings are written as pure
 * ASCII: every byte outside 0x20..0x7E is written as \u00XX (i.e. bytes are treated as
 * ISO-8859-1 characters).
 */
#ifndef PTLRPC_TESTEE_JSON_H
#define PTLRPC_TESTEE_JSON_H

#include <stddef.h>
#include <stdint.h>

/* ---- growable byte buffer ------------------------------------------------------------ */

struct sbuf {
    char *data;
    size_t len;
    size_t cap;
    int oom;            /* set when an allocation failed; further appends are dropped */
};

void sb_init(struct sbuf *sb);
void sb_free(struct sbuf *sb);
void sb_reset(struct sbuf *sb);
void sb_putn(struct sbuf *sb, const char *s, size_t n);
void sb_puts(struct sbuf *sb, const char *s);
void sb_putc(struct sbuf *sb, char c);
void sb_put_u64(struct sbuf *sb, uint64_t v);
void sb_put_i64(struct sbuf *sb, int64_t v);
/* a JSON string literal; bytes are ISO-8859-1 characters */
void sb_put_jstr(struct sbuf *sb, const char *s, size_t n);
/* lower-case hexadecimal of bytes, without quotes */
void sb_put_hex(struct sbuf *sb, const uint8_t *p, size_t n);
/* Decode a hex string (either case).  Returns a malloc'ed buffer or NULL (bad hex or no
 * memory, told apart by *bad). */
uint8_t *hex_decode(const char *s, size_t len, size_t *outlen, int *bad);

/* ---- arena ----------------------------------------------------------------------------- */

struct arena_chunk;
struct arena {
    struct arena_chunk *head;
};

void arena_init(struct arena *a);
void arena_free(struct arena *a);        /* releases everything allocated since init */
void *arena_alloc(struct arena *a, size_t n);   /* NULL when out of memory */

/* ---- tree ------------------------------------------------------------------------------ */

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT };

struct jmember;

struct jvalue {
    enum jtype type;
    struct jvalue *next;        /* next element when inside an array */

    /* J_STRING: decoded UTF-8 bytes, NUL-terminated (but may contain NULs) */
    const char *str;
    size_t len;

    /* J_NUMBER */
    const char *raw;            /* the number's text as it appeared in the input */
    size_t rawlen;
    int is_integer;             /* no fraction and no exponent */
    int negative;               /* a leading minus sign */
    int overflow;               /* magnitude does not fit in 64 bits */
    uint64_t mag;               /* magnitude (valid when is_integer && !overflow) */

    /* J_ARRAY: elements; J_OBJECT: members */
    struct jvalue *items;
    struct jmember *members;
    size_t count;
};

struct jmember {
    const char *key;            /* decoded, NUL-terminated */
    size_t keylen;
    struct jvalue *value;
    struct jmember *next;
};

/*
 * Parse text[0..len) as one JSON text (surrounding whitespace allowed).  Returns the root
 * or NULL; on NULL, *err points to a static message.  Nesting is limited to
 * JSON_MAX_DEPTH levels so that hostile input cannot exhaust the stack.
 */
#define JSON_MAX_DEPTH 256
struct jvalue *json_parse(struct arena *a, const char *text, size_t len, const char **err);

/* Member lookup (the last one wins when a key is repeated, as in Python's json). */
const struct jvalue *json_get(const struct jvalue *obj, const char *key);

/* True when v is a JSON integer whose value fits in [0, max]. */
int json_as_u64(const struct jvalue *v, uint64_t max, uint64_t *out);
/* True when v is a JSON integer whose value fits in [min, max]. */
int json_as_i64(const struct jvalue *v, int64_t min, int64_t max, int64_t *out);

#endif
