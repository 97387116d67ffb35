/*
 * lustre_shim.h - the user-space stand-ins Lustre's extracted unpacking code needs
 * (ptlrpc-conformance's own code, not Lustre's).
 *
 * The Lustre testee compiles functions copied verbatim from a lustre-release tree
 * (build/lustre_extract.c, written by extract.py) after this header and the tree's uapi
 * <linux/lustre/lustre_idl.h>.  Everything those functions take from the kernel and from
 * the parts of Lustre that cannot be built in user space is supplied here, as close to the
 * kernel's behaviour as matters for unpacking a message:
 *
 *   __u8..__u64, __swab*, __swab*s   the Linux uapi headers <linux/types.h>, <linux/swab.h>
 *   round_up                         the kernel's definition: 32-bit operands wrap
 *   BUILD_BUG_ON, BIT, max, min, max_t, likely, unlikely, IS_ENABLED
 *   ENTRY, EXIT, RETURN              nothing / return
 *   CERROR, CDEBUG, CWARN            arguments evaluated (as printk would; CDEBUG only under
 *                                    a mask of libcfs's default debug mask); printed to
 *                                    stderr only when LUSTRE_TESTEE_LOG is set
 *   LASSERT, LASSERTF, LBUG          print the failed condition and abort()
 *   ptlrpc_status_ntoh               the identity, as on x86_64 (no errno translation)
 *   PAGE_SIZE, PAGE_SHIFT, PAGE_MASK 4096 bytes (x86_64); they reach PTLRPC_MAX_BUFLEN
 *   crc32_le                         the kernel's crc32_le: reflected CRC-32, polynomial
 *                                    0xEDB88320, no final inversion
 *   struct req_capsule,              stand-ins with exactly the members the extracted
 *   struct ptlrpc_request            functions touch: the two messages and the swab masks
 *                                    (__u32, as in lustre_req_layout.h; in the request
 *                                    itself up to 2.12, LT_REQUEST_HELPERS)
 *   CLASSERT, cfs_size_round         libcfs's, for releases up to 2.12 and 2.15
 */
#ifndef PTLRPC_CONFORMANCE_LUSTRE_SHIM_H
#define PTLRPC_CONFORMANCE_LUSTRE_SHIM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>
#include <linux/swab.h>
#include <linux/errno.h>

/* ---- arithmetic ---------------------------------------------------------------------- */

/* include/linux/math.h: on a 32-bit x the result is 32-bit, so 0xFFFFFFF9 rounds to 0 */
#define __round_mask(x, y) ((__typeof__(x))((y) - 1))
#define round_up(x, y) ((((x) - 1) | __round_mask(x, y)) + 1)
#define round_down(x, y) ((x) & ~__round_mask(x, y))

#define BUILD_BUG_ON(cond) ((void)sizeof(char[1 - 2 * !!(cond)]))
#define CLASSERT(cond) BUILD_BUG_ON(!(cond))      /* libcfs, up to 2.12 */

/* libcfs_private.h up to 2.15: round up to 8 in size_t; the callers keep it in 32 bits */
static inline size_t cfs_size_round(size_t val)
{
	return (val + 7) & ~(size_t)7;
}
#define BIT(nr) (1UL << (nr))
#define fallthrough __attribute__((__fallthrough__))
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
/* llog_swab.c marks server-only routines (2.15 on): compiled here as any other */
#define SERVER_ONLY
#define SERVER_ONLY_EXPORT_SYMBOL(sym)
#define EXPORT_SYMBOL(sym)
#define max(x, y) ({ __typeof__(x) _max_x = (x); __typeof__(y) _max_y = (y); \
		    _max_x > _max_y ? _max_x : _max_y; })
#define min(x, y) ({ __typeof__(x) _min_x = (x); __typeof__(y) _min_y = (y); \
		    _min_x < _min_y ? _min_x : _min_y; })
#define max_t(type, x, y) max((type)(x), (type)(y))
#define min_t(type, x, y) min((type)(x), (type)(y))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define IS_ENABLED(option) (option)
#define CONFIG_CRC32 1

#define PAGE_SHIFT 12
#define PAGE_SIZE (1UL << PAGE_SHIFT)
#define PAGE_MASK (~(PAGE_SIZE - 1))

/* ---- debugging ------------------------------------------------------------------------ */

static inline void lustre_shim_log(const char *fmt, ...)
{
	static int enabled = -1;
	va_list ap;

	if (enabled < 0)
		enabled = getenv("LUSTRE_TESTEE_LOG") != NULL;
	if (!enabled)
		return;
	va_start(ap, fmt);
	fputs("lustre: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

#define ENTRY do { } while (0)
#define EXIT do { } while (0)
#define RETURN(rc) return (rc)
#define CERROR(...) lustre_shim_log(__VA_ARGS__)
#define CWARN(...) lustre_shim_log(__VA_ARGS__)
/* CDEBUG prints, and so evaluates its arguments, only under a mask libcfs's debug mask
 * enables; its default is LIBCFS_D_DEFAULT (lnet/libcfs/debug.c: D_ERROR, D_EMERG, D_WARNING,
 * D_CONSOLE, D_NETERROR, D_HA, D_CONFIG, D_IOCTL, D_LFSCK), told here by the mask's spelling
 * (the D_* names are not all declared where the extracted code uses them).  A print under
 * D_OTHER (llog_swab.c's print_llog_hdr reads the tail of an unswapped header) is not run. */
static inline int lustre_shim_cdebug_on(const char *mask)
{
	static const char *const on[] = { "D_ERROR", "D_EMERG", "D_WARNING", "D_CONSOLE", "D_NETERROR",
					  "D_HA", "D_CONFIG", "D_IOCTL", "D_LFSCK", "D_CANTMASK" };
	size_t i;

	for (i = 0; i < sizeof(on) / sizeof(on[0]); i++)
		if (strstr(mask, on[i]) != NULL)
			return 1;
	return 0;
}
#define CDEBUG(mask, ...) do { if (lustre_shim_cdebug_on(#mask)) lustre_shim_log(__VA_ARGS__); } while (0)

#define LBUG() do { fprintf(stderr, "LBUG at %s:%d\n", __FILE__, __LINE__); abort(); } while (0)
#define LASSERT(cond) do { if (!(cond)) { \
	fprintf(stderr, "LASSERT(%s) failed at %s:%d\n", #cond, __FILE__, __LINE__); abort(); } } while (0)
#define LASSERTF(cond, ...) do { if (!(cond)) { \
	fprintf(stderr, "LASSERT(%s) failed at %s:%d: ", #cond, __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); abort(); } } while (0)

/* ---- Lustre facilities outside the extracted code ---------------------------------------- */

/* lustre_errno.h without LUSTRE_TRANSLATE_ERRNOS (x86_64): the wire errno is the host's */
#define ptlrpc_status_ntoh(n) (n)

static inline __u32 crc32_le(__u32 crc, const unsigned char *p, size_t len)
{
	size_t i;
	int k;

	for (i = 0; i < len; i++) {
		crc ^= p[i];
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320U & (0U - (crc & 1U)));
	}
	return crc;
}

/* up to 2.12, lustre_msg_calc_cksum goes through libcfs's crypto API: the "crc32" hash,
 * whose default key (libcfs_crypto.h, cht_key) is ~0, so the same sum as crc32_le(~0, ...) */
enum cfs_crypto_hash_alg { CFS_HASH_ALG_CRC32 = 3 };

static inline int cfs_crypto_hash_digest(enum cfs_crypto_hash_alg alg, const void *buf, unsigned int len,
					 unsigned char *key, unsigned int key_len, unsigned char *hash,
					 unsigned int *hash_len)
{
	__u32 crc = ~(__u32)0;

	(void)alg;
	if (key != NULL && key_len == 4)
		memcpy(&crc, key, 4);
	crc = crc32_le(crc, buf, len);
	memcpy(hash, &crc, 4);
	*hash_len = 4;
	return 0;
}

struct lustre_msg_v2;
struct ptlrpc_request;

#ifdef LT_REQUEST_HELPERS
/* up to 2.12 (lustre_net.h): the request holds the messages and the swab masks itself */
struct ptlrpc_request {
	struct lustre_msg_v2 *rq_reqmsg;
	struct lustre_msg_v2 *rq_repmsg;
	__u32 rq_req_swab_mask;
	__u32 rq_rep_swab_mask;
};
#else
/* lustre_net.h reaches the messages through the capsule: rq_reqmsg is rq_pill.rc_reqmsg */
struct req_capsule {
	struct ptlrpc_request *rc_req;
	struct lustre_msg_v2 *rc_reqmsg;
	struct lustre_msg_v2 *rc_repmsg;
	__u32 rc_req_swab_mask;
	__u32 rc_rep_swab_mask;
};

struct ptlrpc_request {
	struct req_capsule rq_pill;
};
#endif

#endif
