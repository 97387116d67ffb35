/*
 * main.c - a testee (docs/testee-protocol.md, protocol v1) that decodes with Lustre's own
 * message-unpacking code, copied from a lustre-release tree by extract.py.
 *
 * ptlrpc-conformance's own code; the Lustre functions it calls come from
 * build/lustre_extract.c (Lustre's code, GPL-2.0, never committed).  For each `decode`:
 *
 *   1. the input is copied (the unpack swabs in place) so that it ends against an
 *      inaccessible guard page: a read past the message faults, every time (the sanitize
 *      build copies into a malloc'd block of the exact size instead, for ASan);
 *   2. request: ptlrpc_unpack_req_msg(), then lustre_unpack_req_ptlrpc_body(), then the
 *      check ptlrpc_server_handle_req_in() makes: pb_type must be PTL_RPC_MSG_REQUEST;
 *      reply: ptlrpc_unpack_rep_msg(), then lustre_unpack_rep_ptlrpc_body(), then the
 *      check after_reply() makes: pb_type must be PTL_RPC_MSG_REPLY or PTL_RPC_MSG_ERR;
 *   3. the first failure is the answer: the function's errno (EINVAL, EFAULT), or EPROTO
 *      for a wrong pb_type (the client's errno; the server drops the request);
 *   4. the null security flavour's own checks (null_accept() drops a request whose wire
 *      flavour is not SPTLRPC_FLVR_NULL; do_cli_unwrap_reply() refuses a reply whose
 *      policy differs from the request's, null) are worked out with Lustre's macros and
 *      reported in `detail`, never deciding the answer (the suite leaves them to targets);
 *   5. an accepted message is reported from what Lustre holds after unpacking: the header
 *      and body fields, the jobid through lustre_msg_get_jobid(), each buffer where
 *      lustre_msg_buf_v2() puts it with lustre_msg_buflen() bytes (read from an untouched
 *      copy of the input, also against a guard page), and lustre_msg_calc_cksum() of buffer
 *      0, computed where null_ctx_verify() does, before the body is swabbed.
 *
 * A fault (a read past the message, a failed LASSERT) ends the process: the harness records
 * that case as a crash and starts the testee again.  Diagnostics go to stderr.
 */
#define _GNU_SOURCE
#include "lustre_compat.h"         /* written by extract.py: how the tree differs (build/) */
#include "lustre_shim.h"
#include <linux/lustre/lustre_idl.h>
/* what the structures' swab routines take from the uapi headers besides lustre_idl.h */
#if __has_include(<linux/lustre/lustre_cfg.h>)
#include <linux/lustre/lustre_cfg.h>
#endif
#if __has_include(<linux/lustre/lustre_fid.h>)
#include <linux/lustre/lustre_fid.h>
#endif
#if __has_include(<linux/lustre/lustre_ostid.h>)
#include <linux/lustre/lustre_ostid.h>
#endif
/* llog_swab.c prints a config record under `libcfs_debug & D_OTHER`: debugging is off here, and
 * lustre_cfg_string (obd_config.c) is never reached */
static const unsigned int libcfs_debug = 0;
#ifndef D_OTHER
#define D_OTHER 0x00000001
#endif
struct lustre_cfg;
static char *lustre_cfg_string(struct lustre_cfg *lcfg, __u32 index)
{
	(void)lcfg;
	(void)index;
	return NULL;
}
#include "lustre_extract.c"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "json.h"

/* ---- structures (capability structs) ------------------------------------------------------
 * build/lustre_structs.c (structs_table.py) lists each structure the testee decodes: its size
 * in the release's layout table, the tree's sizeof, the steps that report its fields as an
 * x86_64 receiver reads them, and the tree's lustre_swab_* routine a big-endian sender's
 * structure goes through (none for lustre_handle and obd_uuid: opaque bytes). */
struct lt_step {
	char op;            /* O open object, C close, L open list, E end list, I integer, A integer
			     * array, S char array, F flexible array (of sub, or of integers), G flexible
			     * array of strings, X flexible array with no room (a nested structure's) */
	const char *key;    /* member name (NULL: a list element) */
	unsigned int off, size, count;
	int is_signed, sub;
};

struct lt_struct {
	const char *name;
	size_t size, csize;
	const struct lt_step *steps;
	int (*swab)(void *p, size_t n);
	const char *routine, *file;
	int direct;         /* decode_struct decodes it (else only as an element of another's array) */
};

struct lt_format {
	unsigned int opc;
	int is_reply;
	unsigned int buf;
	const char *type;
};

#include "lustre_structs.c"

#ifdef LUSTRE_TESTEE_SANITIZE
#include <sanitizer/asan_interface.h>
#define BUILD_KIND "sanitize (ASan and UBSan; exact-size copies)"

const char *__asan_default_options(void)
{
	return "print_legend=0:detect_leaks=0";
}

/*
 * The harness keeps the last 500 bytes of a crashed testee's stderr in the case's message:
 * repeat the report's essentials (what, where, the first frames, the summary) at its end.
 */
static void asan_report(const char *report)
{
	char brief[480], kind[64] = "?", access[64] = "", where[96] = "", frames[300] = "";
	const char *p, *line;
	int nframes = 0;

	if ((p = strstr(report, "ERROR: AddressSanitizer: ")) != NULL)
		sscanf(p + 25, "%63s", kind);
	if ((p = strstr(report, "READ of size")) != NULL || (p = strstr(report, "WRITE of size")) != NULL)
		snprintf(access, sizeof access, "%.*s", (int)strcspn(p, "a\n") - 1, p);
	if ((p = strstr(report, "is located ")) != NULL)
		snprintf(where, sizeof where, "%.*s", (int)strcspn(p + 11, "[\n") - 1, p + 11);
	/* the first frames of the first stack: "#N 0x... in FUNCTION FILE:LINE" */
	for (line = strstr(report, "#0 "); line && nframes < 4; nframes++) {
		const char *in = strstr(line, " in "), *end = strchr(line, '\n'), *file, *slash;
		char func[96] = "", path[200] = "";

		if (in == NULL || (end && in > end))
			break;
		sscanf(in + 4, "%95s %199s", func, path);
		slash = strrchr(path, '/');
		file = slash ? slash + 1 : path;
		snprintf(frames + strlen(frames), sizeof frames - strlen(frames), "%s%s %s",
			 nframes ? " < " : "", func, file);
		line = end ? strstr(end, "#") : NULL;
		if (line == NULL || line[1] != (char)('1' + nframes))
			break;
	}
	snprintf(brief, sizeof brief, "AddressSanitizer %s: %s, %s; at %s", kind, access, where, frames);
	fprintf(stderr, "\nlustre-testee: %s\n", brief);
}
#else
#define BUILD_KIND "normal (messages against a guard page)"
#endif

/* ---- copies of the input --------------------------------------------------------------- */

struct copy {
	void *map;          /* the mapping (normal build) or the allocation (sanitize build) */
	size_t maplen;
	unsigned char *p;   /* the message: n bytes, ending at the guard page (8-aligned start) */
};

static int copy_in(struct copy *c, const unsigned char *data, size_t n)
{
#ifdef LUSTRE_TESTEE_SANITIZE
	c->map = malloc(n ? n : 1);
	if (c->map == NULL)
		return -1;
	c->maplen = n;
	c->p = c->map;
#else
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t span = (n + 7) & ~(size_t)7;
	size_t body = (span + page - 1) / page * page;

	c->maplen = body + page;
	c->map = mmap(NULL, c->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->map == MAP_FAILED)
		return -1;
	if (mprotect((char *)c->map + body, page, PROT_NONE) != 0) {
		munmap(c->map, c->maplen);
		return -1;
	}
	c->p = (unsigned char *)c->map + body - span;
#endif
	if (n)
		memcpy(c->p, data, n);
	return 0;
}

static void copy_free(struct copy *c)
{
#ifdef LUSTRE_TESTEE_SANITIZE
	free(c->map);
#else
	munmap(c->map, c->maplen);
#endif
}

/* ---- small helpers ------------------------------------------------------------------- */

static const char *errno_name(int e)
{
	static char other[16];
	const char *name = strerrorname_np(e);

	if (name != NULL)
		return name;
	snprintf(other, sizeof other, "E%d", e);
	return other;
}

static void put_u(struct sbuf *out, const char *name, uint64_t v, int first)
{
	if (!first)
		sb_putc(out, ',');
	sb_putc(out, '"');
	sb_puts(out, name);
	sb_puts(out, "\":");
	sb_put_u64(out, v);
}

/* ---- the null security flavour, reported and never deciding ----------------------------- */

static void flavour_note(const struct lustre_msg *m, int is_reply, char *note, size_t len)
{
	__u32 flvr = WIRE_FLVR(m->lm_secflvr);

	if (is_reply) {
		__u32 policy = SPTLRPC_FLVR_POLICY(m->lm_secflvr);

		if (policy != SPTLRPC_FLVR_POLICY(SPTLRPC_FLVR_NULL))
			snprintf(note, len, "null flavour: reply policy %u differs from the request's (null), "
				 "do_cli_unwrap_reply() would return -EPROTO (not decided here)", policy);
		else
			snprintf(note, len, "null flavour: reply policy null matches the request's");
	} else if (SPTLRPC_FLVR_POLICY(flvr) != SPTLRPC_POLICY_NULL) {
		snprintf(note, len, "null flavour: wire flavour 0x%x has policy %u, so "
			 "sptlrpc_svc_unwrap_request() would hand it to that policy, not null (not decided here)",
			 flvr, SPTLRPC_FLVR_POLICY(flvr));
	} else if (flvr != SPTLRPC_FLVR_NULL) {
		snprintf(note, len, "null flavour: null_accept() would drop it, wire flavour 0x%x is not "
			 "SPTLRPC_FLVR_NULL (not decided here)", flvr);
	} else {
		snprintf(note, len, "null flavour: null_accept() accepts wire flavour 0x0");
	}
}

/* ---- structures ---------------------------------------------------------------------- */

static const struct lt_struct *lt_find(const char *name)
{
	int i;

	for (i = 0; lt_aliases[i][0] != NULL; i++)
		if (strcmp(lt_aliases[i][0], name) == 0)
			name = lt_aliases[i][1];
	for (i = 0; i < LT_NSTRUCTS; i++)
		if (strcmp(lt_structs[i].name, name) == 0)
			return &lt_structs[i];
	return NULL;
}

static uint64_t lt_read(const unsigned char *p, unsigned int size)
{
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < size; i++)            /* little-endian: as an x86_64 receiver reads memory */
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void lt_put_int(struct sbuf *out, const unsigned char *p, unsigned int size, int is_signed)
{
	uint64_t v = lt_read(p, size);

	if (is_signed && size < 8 && (v >> (8 * size - 1)) & 1)
		v |= ~(uint64_t)0 << (8 * size);
	if (is_signed)
		sb_put_i64(out, (int64_t)v);
	else
		sb_put_u64(out, v);
}

static void lt_put_str(struct sbuf *out, const unsigned char *p, size_t max)
{
	sb_put_jstr(out, (const char *)p, strnlen((const char *)p, max));
}

/* Report the fields of st at p (n bytes that follow for a flexible array), from the steps. */
static void lt_put_fields(struct sbuf *out, const struct lt_struct *st, const unsigned char *p, size_t n)
{
	const struct lt_step *s;
	int first = 1, depth = 0;
	unsigned int i;
	size_t at;

	for (s = st->steps;; s++) {
		if (s->op != 'C' && s->op != 'E') {
			if (!first)
				sb_putc(out, ',');
			if (s->key != NULL) {
				sb_put_jstr(out, s->key, strlen(s->key));
				sb_putc(out, ':');
			}
		}
		first = 0;
		switch (s->op) {
		case 'O': sb_putc(out, '{'); depth++; first = 1; break;
		case 'L': sb_putc(out, '['); first = 1; break;
		case 'C': sb_putc(out, '}'); depth--; break;
		case 'E': sb_putc(out, ']'); break;
		case 'I': lt_put_int(out, p + s->off, s->size, s->is_signed); break;
		case 'S': lt_put_str(out, p + s->off, s->count); break;
		case 'X': sb_puts(out, "[]"); break;
		case 'A':
			sb_putc(out, '[');
			for (i = 0; i < s->count; i++) {
				if (i)
					sb_putc(out, ',');
				lt_put_int(out, p + s->off + i * s->size, s->size, s->is_signed);
			}
			sb_putc(out, ']');
			break;
		case 'F':
		case 'G':
			sb_putc(out, '[');
			for (at = s->off; at + s->size <= n; at += s->size) {
				if (at != s->off)
					sb_putc(out, ',');
				if (s->op == 'G')
					lt_put_str(out, p + at, s->size);
				else if (s->sub >= 0)
					lt_put_fields(out, &lt_structs[s->sub], p + at, s->size);
				else
					lt_put_int(out, p + at, s->size, s->is_signed);
			}
			sb_putc(out, ']');
			break;
		}
		if (depth == 0)
			return;
	}
}

/* Decode one structure as Lustre's receiver holds it: the bytes copied against a guard page
 * (the sanitize build: an exact-size block), the tree's swab routine run on the copy for a
 * big-endian sender, then every field read.  0, or the errno of a refusal (detail set). */
static int lt_decode_struct(struct sbuf *out, const struct lt_struct *st, const unsigned char *data, size_t n,
			    int big, char *detail, size_t dlen)
{
	struct copy c;
	int rc = 0;

	if (st->csize != st->size) {
		snprintf(detail, dlen, "%s: the layout table of Lustre %s gives %zu bytes, this tree's sizeof %zu",
			 st->name, LT_LAYOUT_RELEASE, st->size, st->csize);
		return EOPNOTSUPP;
	}
	if (n < st->size) {
		snprintf(detail, dlen, "%s needs %zu bytes, got %zu", st->name, st->size, n);
		return EINVAL;
	}
	if (copy_in(&c, data, n) != 0) {
		snprintf(detail, dlen, "cannot map a copy of %zu bytes", n);
		return ENOMEM;
	}
	if (big && st->swab != NULL)
		rc = st->swab(c.p, n);
	if (rc < 0) {
		snprintf(detail, dlen, "%s() = %d", st->routine, rc);
		copy_free(&c);
		return -rc;
	}
	sb_puts(out, "{\"type\":");
	sb_put_jstr(out, st->name, strlen(st->name));
	sb_puts(out, ",\"fields\":");
	lt_put_fields(out, st, c.p, n);
	sb_putc(out, '}');
	copy_free(&c);
	return 0;
}

/* `structs` of a decoded message: the buffers the opcode's request format defines */
static void put_structs(struct sbuf *out, struct lustre_msg *m, const unsigned char *orig, int swabbed,
			int is_reply, __u32 opc)
{
	char detail[160];
	int i, any = 0;

	sb_puts(out, ",\"structs\":{");
	for (i = 0; lt_formats[i].type != NULL; i++) {
		const struct lt_format *f = &lt_formats[i];
		const struct lt_struct *st = lt_find(f->type);
		size_t mark;

		if (f->opc != opc || f->is_reply != is_reply || f->buf >= m->lm_bufcount || st == NULL)
			continue;
		if (lustre_msg_buflen(m, f->buf) < st->size)
			continue;
		mark = out->len;
		if (any)
			sb_putc(out, ',');
		sb_putc(out, '"');
		sb_put_u64(out, f->buf);
		sb_puts(out, "\":");
		if (lt_decode_struct(out, st, orig + ((char *)lustre_msg_buf_v2(m, f->buf, 0) - (char *)m),
				     lustre_msg_buflen(m, f->buf), swabbed, detail, sizeof detail) != 0) {
			out->len = mark;          /* refused: left out */
			continue;
		}
		any = 1;
	}
	sb_putc(out, '}');
}

/* ---- decode ---------------------------------------------------------------------------- */

struct answer {
	int ok;
	const char *error;
	char detail[512];
};

static void reject(struct answer *a, const char *error, const char *fmt, ...)
{
	va_list ap;

	a->ok = 0;
	a->error = error;
	va_start(ap, fmt);
	vsnprintf(a->detail, sizeof a->detail, fmt, ap);
	va_end(ap);
}

static void put_message(struct sbuf *out, struct lustre_msg *m, const unsigned char *orig, int swabbed,
			int is_reply, __u32 cksum)
{
	struct ptlrpc_body *pb = lustre_msg_buf_v2(m, MSG_PTLRPC_BODY_OFF, sizeof(struct ptlrpc_body_v2));
	__u32 i;

	sb_puts(out, "{\"byte_order\":");
	sb_puts(out, swabbed ? "\"big\"" : "\"little\"");
	sb_puts(out, ",\"header\":{");
	put_u(out, "lm_bufcount", m->lm_bufcount, 1);
	put_u(out, "lm_secflvr", m->lm_secflvr, 0);
	put_u(out, "lm_magic", m->lm_magic, 0);
	put_u(out, "lm_repsize", m->lm_repsize, 0);
	put_u(out, "lm_cksum", m->lm_cksum, 0);
	put_u(out, "lm_flags", m->lm_flags, 0);
	put_u(out, "lm_opc", LT_LM_OPC(m), 0);
	put_u(out, "lm_padding_3", m->lm_padding_3, 0);
	sb_puts(out, "},\"buflens\":[");
	for (i = 0; i < m->lm_bufcount; i++) {
		if (i)
			sb_putc(out, ',');
		sb_put_u64(out, m->lm_buflens[i]);
	}
	sb_puts(out, "],\"body\":{");
	put_u(out, "pb_handle", pb->pb_handle.cookie, 1);
	put_u(out, "pb_type", pb->pb_type, 0);
	put_u(out, "pb_version", pb->pb_version, 0);
	put_u(out, "pb_opc", pb->pb_opc, 0);
	sb_puts(out, ",\"pb_status\":");
	sb_put_i64(out, (__s32)pb->pb_status);
	put_u(out, "pb_last_xid", pb->pb_last_xid, 0);
	put_u(out, "pb_tag", pb->pb_tag, 0);
	put_u(out, "pb_padding0", pb->pb_padding0, 0);
	put_u(out, "pb_projid", LT_PB_PROJID(pb), 0);
	put_u(out, "pb_last_committed", pb->pb_last_committed, 0);
	put_u(out, "pb_transno", pb->pb_transno, 0);
	put_u(out, "pb_flags", pb->pb_flags, 0);
	put_u(out, "pb_op_flags", pb->pb_op_flags, 0);
	put_u(out, "pb_conn_cnt", pb->pb_conn_cnt, 0);
	put_u(out, "pb_timeout", pb->pb_timeout, 0);
	put_u(out, "pb_service_time", pb->pb_service_time, 0);
	put_u(out, "pb_limit", pb->pb_limit, 0);
	put_u(out, "pb_slv", pb->pb_slv, 0);
	sb_puts(out, ",\"pb_pre_versions\":[");
	for (i = 0; i < 4; i++) {
		if (i)
			sb_putc(out, ',');
		sb_put_u64(out, pb->pb_pre_versions[i]);
	}
	sb_putc(out, ']');
	put_u(out, "pb_mbits", pb->pb_mbits, 0);
	put_u(out, "pb_padding64_0", pb->pb_padding64_0, 0);
	put_u(out, "pb_padding64_1", pb->pb_padding64_1, 0);
	put_u(out, "pb_uid", LT_PB_UID(pb), 0);
	put_u(out, "pb_gid", LT_PB_GID(pb), 0);
	if (m->lm_buflens[MSG_PTLRPC_BODY_OFF] >= sizeof(struct ptlrpc_body)) {
		char *jobid = lustre_msg_get_jobid(m);

		if (jobid != NULL) {
			sb_puts(out, ",\"pb_jobid\":");
			sb_put_jstr(out, jobid, strnlen(jobid, LUSTRE_JOBID_SIZE));   /* up to 2.12 it may be unterminated */
		}
	}
	sb_puts(out, "},\"buffers\":[");
	for (i = 0; i < m->lm_bufcount; i++) {
		/* where Lustre puts buffer i, and as many bytes as it says the buffer holds */
		char *at = lustre_msg_buf_v2(m, i, 0);
		__u32 len = lustre_msg_buflen(m, i);

		if (i)
			sb_putc(out, ',');
		sb_putc(out, '"');
		sb_put_hex(out, orig + (at - (char *)m), len);
		sb_putc(out, '"');
	}
	sb_putc(out, ']');
	put_structs(out, m, orig, swabbed, is_reply, pb->pb_opc);
	sb_puts(out, ",\"computed_cksum\":");
	sb_put_u64(out, cksum);
	sb_putc(out, '}');
}

static void decode(const unsigned char *data, size_t n, int is_reply, struct sbuf *out, struct answer *a)
{
	struct ptlrpc_request req;
	struct copy msgc, origc;
	struct lustre_msg *m;
	char note[256] = "";
	__u32 cksum = 0, type;
	int rc, swabbed;

	if (copy_in(&msgc, data, n) != 0 || copy_in(&origc, data, n) != 0) {
		reject(a, "ENOMEM", "cannot map a copy of %zu bytes", n);
		return;
	}
	m = (struct lustre_msg *)msgc.p;
	memset(&req, 0, sizeof req);
	LT_INIT_REQ(req);
	if (is_reply) {
		req.rq_repmsg = m;
		rc = ptlrpc_unpack_rep_msg(&req, (int)n);
	} else {
		req.rq_reqmsg = m;
		rc = ptlrpc_unpack_req_msg(&req, (int)n);
	}
	if (rc < 0) {
		reject(a, errno_name(-rc), "ptlrpc_unpack_%s_msg() = %d", is_reply ? "rep" : "req", rc);
		goto done;
	}
	swabbed = LT_SWABBED(req, is_reply);
	flavour_note(m, is_reply, note, sizeof note);
	cksum = LT_CKSUM(m);
	rc = is_reply ? lustre_unpack_rep_ptlrpc_body(&req, MSG_PTLRPC_BODY_OFF)
		      : lustre_unpack_req_ptlrpc_body(&req, MSG_PTLRPC_BODY_OFF);
	if (rc < 0) {
		reject(a, errno_name(-rc), "lustre_unpack_%s_ptlrpc_body() = %d; %s", is_reply ? "rep" : "req", rc,
		       note);
		goto done;
	}
	type = lustre_msg_get_type(m);
	if (is_reply && type != PTL_RPC_MSG_REPLY && type != PTL_RPC_MSG_ERR) {
		reject(a, "EPROTO", "after_reply(): invalid packet received (type=%u), -EPROTO; %s", type, note);
		goto done;
	}
	if (!is_reply && type != PTL_RPC_MSG_REQUEST) {
		reject(a, "EPROTO", "ptlrpc_server_handle_req_in(): wrong packet type received (type=%u), "
		       "the request is dropped; %s", type, note);
		goto done;
	}
	a->ok = 1;
	snprintf(a->detail, sizeof a->detail, "%s", note);
	put_message(out, m, origc.p, swabbed, is_reply, cksum);
done:
	copy_free(&msgc);
	copy_free(&origc);
}

/* ---- the request loop -------------------------------------------------------------------- */

static void begin(struct sbuf *out, const struct jvalue *id, int ok)
{
	sb_puts(out, "{\"id\":");
	if (id != NULL)
		sb_putn(out, id->raw, id->rawlen);
	else
		sb_puts(out, "null");
	sb_puts(out, ok ? ",\"ok\":true" : ",\"ok\":false");
}

static void error_response(struct sbuf *out, const struct jvalue *id, const char *error, const char *detail)
{
	sb_reset(out);
	begin(out, id, 0);
	sb_puts(out, ",\"error\":");
	sb_put_jstr(out, error, strlen(error));
	if (detail && *detail) {
		sb_puts(out, ",\"detail\":");
		sb_put_jstr(out, detail, strlen(detail));
	}
	sb_putc(out, '}');
}

static void op_hello(struct sbuf *out, const struct jvalue *id)
{
	begin(out, id, 1);
	sb_puts(out, ",\"result\":{\"name\":\"Lustre\",\"version\":");
	sb_put_jstr(out, LUSTRE_EXTRACT_VERSION, strlen(LUSTRE_EXTRACT_VERSION));
	sb_puts(out, ",\"capabilities\":[\"decode\",\"structs\"],\"struct_operations\":[\"decode_struct\"],"
		"\"protocol\":1,"
		"\"code\":\"lustre/ptlrpc/pack_generic.c: ptlrpc_unpack_req_msg/ptlrpc_unpack_rep_msg "
		"(__lustre_unpack_msg, lustre_unpack_msg_v2), lustre_unpack_req_ptlrpc_body/"
		"lustre_unpack_rep_ptlrpc_body, lustre_swab_ptlrpc_body, extracted by "
		"examples/lustre-testee/extract.py\",\"pack_generic.c sha256\":");
	sb_put_jstr(out, LUSTRE_EXTRACT_PACK_GENERIC_SHA256, strlen(LUSTRE_EXTRACT_PACK_GENERIC_SHA256));
	sb_puts(out, ",\"structs\":\"decode_struct runs the tree's lustre_swab_* routine of each structure "
		"(pack_generic.c, pack_server.c, obdclass/llog_swab.c) on a big-endian sender's bytes; "
		"fields read by the layout table of Lustre " LT_LAYOUT_RELEASE " (" LT_LAYOUT_WHY "); "
		"no encoder (Lustre sends its structures as they lie in memory)\"");
	sb_puts(out, ",\"build\":");
	sb_put_jstr(out, BUILD_KIND, strlen(BUILD_KIND));
	sb_puts(out, "}}");
}

/* The bytes of a request's hex "data", or NULL once the error is answered (EINVAL for data
 * that is missing or not hex, ENOMEM when there is no memory for `what`). */
static unsigned char *request_data(struct sbuf *out, const struct jvalue *id, const struct jvalue *data,
				   const char *op, const char *what, size_t *n)
{
	char detail[96];
	unsigned char *bytes;
	int bad_hex = 0;

	if (data != NULL && data->type == J_STRING &&
	    (bytes = hex_decode(data->str, data->len, n, &bad_hex)) != NULL)
		return bytes;
	if (data != NULL && data->type == J_STRING && !bad_hex) {
		snprintf(detail, sizeof detail, "no memory for the %s", what);
		error_response(out, id, "ENOMEM", detail);
	} else {
		snprintf(detail, sizeof detail, "%s needs hex \"data\"", op);
		error_response(out, id, "EINVAL", detail);
	}
	return NULL;
}

static void op_decode(struct sbuf *out, const struct jvalue *id, const struct jvalue *req)
{
	const struct jvalue *data = json_get(req, "data"), *dir = json_get(req, "direction");
	struct answer a = { 0, NULL, "" };
	unsigned char *bytes;
	size_t n = 0;
	int is_reply;

	if ((bytes = request_data(out, id, data, "decode", "message", &n)) == NULL)
		return;
	if (dir == NULL || dir->type != J_STRING ||
	    (strcmp(dir->str, "request") != 0 && strcmp(dir->str, "reply") != 0)) {
		free(bytes);
		error_response(out, id, "EINVAL", "decode needs \"direction\": \"request\" or \"reply\"");
		return;
	}
	is_reply = strcmp(dir->str, "reply") == 0;
	begin(out, id, 1);
	sb_puts(out, ",\"result\":");
	decode(bytes, n, is_reply, out, &a);
	free(bytes);
	if (!a.ok) {
		error_response(out, id, a.error, a.detail);
		return;
	}
	if (a.detail[0]) {            /* an unknown member of a response, for people (io logs) */
		sb_puts(out, ",\"detail\":");
		sb_put_jstr(out, a.detail, strlen(a.detail));
	}
	sb_putc(out, '}');
}

static void op_decode_struct(struct sbuf *out, const struct jvalue *id, const struct jvalue *req)
{
	const struct jvalue *data = json_get(req, "data"), *type = json_get(req, "type");
	const struct jvalue *order = json_get(req, "byte_order");
	const struct lt_struct *st;
	char detail[256] = "";
	unsigned char *bytes;
	size_t n = 0;
	int rc;

	if (type == NULL || type->type != J_STRING || order == NULL || order->type != J_STRING ||
	    (strcmp(order->str, "little") != 0 && strcmp(order->str, "big") != 0)) {
		error_response(out, id, "EINVAL", "decode_struct needs \"type\" and \"byte_order\": little or big");
		return;
	}
	if ((bytes = request_data(out, id, data, "decode_struct", "structure", &n)) == NULL)
		return;
	st = lt_find(type->str);
	if (st == NULL || !st->direct) {
		free(bytes);
		snprintf(detail, sizeof detail, "%.80s: no swab routine of this tree decodes it", type->str);
		error_response(out, id, "EOPNOTSUPP", detail);
		return;
	}
	begin(out, id, 1);
	sb_puts(out, ",\"result\":");
	rc = lt_decode_struct(out, st, bytes, n, strcmp(order->str, "big") == 0, detail, sizeof detail);
	free(bytes);
	if (rc != 0) {
		error_response(out, id, errno_name(rc), detail);
		return;
	}
	sb_putc(out, '}');
}

static void handle(const char *line, size_t len, struct sbuf *out)
{
	struct arena arena;
	const struct jvalue *req, *id, *op;
	const char *perr = NULL;

	sb_reset(out);
	arena_init(&arena);
	req = json_parse(&arena, line, len, &perr);
	id = req && req->type == J_OBJECT ? json_get(req, "id") : NULL;
	if (id == NULL || id->type != J_NUMBER || !id->is_integer) {
		error_response(out, NULL, "EINVAL", "not a request");
	} else if ((op = json_get(req, "op")) == NULL || op->type != J_STRING) {
		error_response(out, id, "EINVAL", "a request needs a string \"op\"");
	} else if (strcmp(op->str, "hello") == 0) {
		op_hello(out, id);
	} else if (strcmp(op->str, "decode") == 0) {
		op_decode(out, id, req);
	} else if (strcmp(op->str, "decode_struct") == 0) {
		op_decode_struct(out, id, req);
	} else {
		char detail[128];

		snprintf(detail, sizeof detail, "unknown op %.80s", op->str);
		error_response(out, id, "EOPNOTSUPP", detail);
	}
	arena_free(&arena);
}

int main(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	struct sbuf out;

	sb_init(&out);
#ifdef LUSTRE_TESTEE_SANITIZE
	__asan_set_error_report_callback(asan_report);
#endif
	/* getline() returns as soon as a line is there: pipelined requests cannot deadlock */
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (strspn(line, " \t") == (size_t)len)
			continue;
		handle(line, (size_t)len, &out);
		if (out.oom)
			fputs("{\"id\":null,\"ok\":false,\"error\":\"ENOMEM\"}\n", stdout);
		else {
			sb_putc(&out, '\n');
			fwrite(out.data, 1, out.len, stdout);
		}
		fflush(stdout);
	}
	sb_free(&out);
	free(line);
	return 0;
}
