/*
 * main.c - ptlrpc-conformance example testee: the request loop of the testee protocol
 * (docs/testee-protocol.md, section 1 and 2).  Plain C99, libc only.
 *
 * Reads JSON Lines requests on stdin, writes one JSON Lines response per request on
 * stdout (flushed each time), exits 0 at end of input.  Diagnostics, if any, go to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "wire.h"

#define TESTEE_NAME    "ptlrpc-conformance C example testee"
#define TESTEE_VERSION "0.1.0"

/* ---- line reader: arbitrary length, NUL bytes kept ------------------------------------ */

struct line {
    char *buf;
    size_t len;
    size_t cap;
    int oom;        /* the line did not fit in memory (it was consumed, but not kept) */
};

/*
 * Reads one line (without its '\n') into ln.  Returns 0 at end of input with nothing
 * read, 1 otherwise.  getc() is used on purpose: unlike fread() it never waits for more
 * input than is available, so pipelined requests cannot deadlock.
 */
static int read_line(FILE *in, struct line *ln)
{
    int c, any = 0;

    ln->len = 0;
    ln->oom = 0;
    while ((c = getc(in)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (ln->oom)
            continue;
        if (ln->len + 1 >= ln->cap) {
            size_t ncap = ln->cap ? ln->cap * 2 : 65536;
            char *p = ncap > ln->cap ? realloc(ln->buf, ncap) : NULL;
            if (p == NULL) {
                ln->oom = 1;
                continue;
            }
            ln->buf = p;
            ln->cap = ncap;
        }
        ln->buf[ln->len++] = (char)c;
    }
    if (ln->buf != NULL)
        ln->buf[ln->len] = '\0';
    return any;
}

static int is_blank(const struct line *ln)
{
    size_t i;

    for (i = 0; i < ln->len; i++)
        if (ln->buf[i] != ' ' && ln->buf[i] != '\t' && ln->buf[i] != '\r')
            return 0;
    return 1;
}

/* ---- responses ------------------------------------------------------------------------- */

/* `id` is the request's id as raw JSON text (echoed exactly), or NULL for null */
static void begin_response(struct sbuf *out, const struct jvalue *id, int ok)
{
    sb_puts(out, "{\"id\":");
    if (id != NULL)
        sb_putn(out, id->raw, id->rawlen);
    else
        sb_puts(out, "null");
    sb_puts(out, ok ? ",\"ok\":true,\"result\":" : ",\"ok\":false");
}

static void error_response(struct sbuf *out, const struct jvalue *id, const char *err,
                           const char *detail)
{
    sb_reset(out);
    begin_response(out, id, 0);
    sb_puts(out, ",\"error\":");
    sb_put_jstr(out, err, strlen(err));
    if (detail != NULL && *detail) {
        sb_puts(out, ",\"detail\":");
        sb_put_jstr(out, detail, strlen(detail));
    }
    sb_putc(out, '}');
}

static void send_response(struct sbuf *out)
{
    if (out->oom) {
        /* could not build the response: still answer, in a form that needs no memory */
        static const char msg[] = "{\"id\":null,\"ok\":false,\"error\":\"ENOMEM\","
                                  "\"detail\":\"out of memory building the response\"}\n";
        fputs(msg, stdout);
    } else {
        sb_putc(out, '\n');
        fwrite(out->data, 1, out->len, stdout);
    }
    fflush(stdout);
}

/* ---- operations ------------------------------------------------------------------------ */

static void op_hello(const struct jvalue *id, struct sbuf *out)
{
    begin_response(out, id, 1);
    sb_puts(out, "{\"name\":");
    sb_put_jstr(out, TESTEE_NAME, strlen(TESTEE_NAME));
    sb_puts(out, ",\"version\":");
    sb_put_jstr(out, TESTEE_VERSION, strlen(TESTEE_VERSION));
    sb_puts(out, ",\"capabilities\":[\"decode\",\"encode\"],\"protocol\":1}}");
}

static void op_decode(const struct jvalue *id, const struct jvalue *req, struct sbuf *out)
{
    const struct jvalue *data = json_get(req, "data");
    const struct jvalue *dir = json_get(req, "direction");
    struct outcome oc;
    uint8_t *bytes;
    size_t n = 0;
    int bad, is_reply;

    if (data == NULL || data->type != J_STRING) {
        error_response(out, id, "EINVAL", "decode needs a hex string \"data\"");
        return;
    }
    if (dir == NULL || dir->type != J_STRING ||
        (strcmp(dir->str, "request") != 0 && strcmp(dir->str, "reply") != 0) ||
        strlen(dir->str) != dir->len) {
        error_response(out, id, "EINVAL", "decode needs \"direction\": \"request\" or \"reply\"");
        return;
    }
    is_reply = strcmp(dir->str, "reply") == 0;
    bytes = hex_decode(data->str, data->len, &n, &bad);
    if (bytes == NULL) {
        error_response(out, id, bad ? "EINVAL" : "ENOMEM",
                       bad ? "\"data\" is not valid hex" : "out of memory");
        return;
    }
    oc.err = NULL;
    oc.detail[0] = '\0';
    begin_response(out, id, 1);
    if (wire_decode(bytes, n, is_reply, out, &oc) < 0)
        error_response(out, id, oc.err, oc.detail);
    else
        sb_putc(out, '}');
    free(bytes);
}

static void op_encode(const struct jvalue *id, const struct jvalue *req, struct sbuf *out)
{
    struct outcome oc;

    oc.err = NULL;
    oc.detail[0] = '\0';
    begin_response(out, id, 1);
    sb_puts(out, "{\"data\":\"");
    if (wire_encode(json_get(req, "message"), out, &oc) < 0)
        error_response(out, id, oc.err, oc.detail);
    else
        sb_puts(out, "\"}}");
}

static void handle_line(const struct line *ln, struct sbuf *out)
{
    struct arena arena;
    const struct jvalue *req, *id, *op;
    const char *perr = NULL;

    sb_reset(out);
    if (ln->oom) {
        error_response(out, NULL, "ENOMEM", "request line too long for memory");
        return;
    }
    arena_init(&arena);
    req = json_parse(&arena, ln->buf, ln->len, &perr);
    if (req == NULL) {
        char detail[120];
        snprintf(detail, sizeof detail, "malformed JSON: %s", perr);
        error_response(out, NULL, "EINVAL", detail);
        goto done;
    }
    if (req->type != J_OBJECT) {
        error_response(out, NULL, "EINVAL", "a request must be a JSON object");
        goto done;
    }
    id = json_get(req, "id");
    if (id == NULL || id->type != J_NUMBER || !id->is_integer) {
        error_response(out, NULL, "EINVAL", "a request needs an integer \"id\"");
        goto done;
    }
    op = json_get(req, "op");
    if (op == NULL || op->type != J_STRING) {
        error_response(out, id, "EINVAL", "a request needs a string \"op\"");
        goto done;
    }
    if (strcmp(op->str, "hello") == 0 && op->len == 5) {
        op_hello(id, out);
    } else if (strcmp(op->str, "decode") == 0 && op->len == 6) {
        op_decode(id, req, out);
    } else if (strcmp(op->str, "encode") == 0 && op->len == 6) {
        op_encode(id, req, out);
    } else {
        char detail[120];
        snprintf(detail, sizeof detail, "unknown op %.80s", op->str);
        error_response(out, id, "EOPNOTSUPP", detail);
    }
done:
    arena_free(&arena);
}

int main(void)
{
    struct line ln = { NULL, 0, 0, 0 };
    struct sbuf out;

    sb_init(&out);
    while (read_line(stdin, &ln)) {
        if (!ln.oom && is_blank(&ln))
            continue;               /* blank lines are not requests */
        handle_line(&ln, &out);
        send_response(&out);
        if (ferror(stdout))
            break;                  /* nobody is listening any more */
    }
    sb_free(&out);
    free(ln.buf);
    return 0;
}
