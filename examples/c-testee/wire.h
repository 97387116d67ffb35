/*
 * wire.h - lustre_msg_v2 / ptlrpc_body decoding and encoding for the testee
 * (docs/testee-protocol.md sections 2.2, 2.3, 3 and 4).  Plain C99, libc only.
 *
 * This is the part a vendor replaces with calls into their own implementation.
 */
#ifndef PTLRPC_TESTEE_WIRE_H
#define PTLRPC_TESTEE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* Outcome of an operation: on failure, `err` is an errno name and `detail` a message. */
struct outcome {
    const char *err;            /* NULL on success */
    char detail[160];
};

/* crc32_le, seed given, no final inversion (Lustre's lm_cksum, RULES CKSUM-1). */
uint32_t lustre_crc32_le(uint32_t seed, const uint8_t *p, size_t n);

/*
 * Decode `n` bytes received as a request (is_reply == 0) or a reply (is_reply != 0).
 * On success appends the MESSAGE object (JSON) to `out` and returns 0; otherwise fills
 * `oc` and returns -1.
 */
int wire_decode(const uint8_t *data, size_t n, int is_reply, struct sbuf *out,
                struct outcome *oc);

/*
 * Encode the MESSAGE object `msg`.  On success appends the lower-case hex of the wire
 * bytes (no quotes) to `out` and returns 0; otherwise fills `oc` and returns -1.
 */
int wire_encode(const struct jvalue *msg, struct sbuf *out, struct outcome *oc);


#endif
