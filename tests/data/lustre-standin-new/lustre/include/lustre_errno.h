/* Stand-in for lustre/include/lustre_errno.h (ptlrpc-conformance tests): a few wire errno
 * numbers in the shape of the real header; not Lustre's code. */
#ifndef _STANDIN_LUSTRE_ERRNO_H
#define _STANDIN_LUSTRE_ERRNO_H

#define LUSTRE_EPERM		1	/* not permitted */
#define LUSTRE_EPROTO		71	/* protocol error */
#define LUSTRE_ENOTCONN		107	/* not connected */

#endif
