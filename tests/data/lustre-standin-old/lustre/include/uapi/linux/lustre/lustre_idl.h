/* Stand-in uapi header (old layout) in the shape of lustre_idl.h. */
#ifndef _STANDIN_LUSTRE_IDL_H
#define _STANDIN_LUSTRE_IDL_H

#include <linux/lustre/lustre_user.h>

struct lustre_handle {
	__u64 cookie;
};

struct lustre_msg_v2 {
	__u32 lm_bufcount;
	__u32 lm_secflvr;
	__u32 lm_magic;
	__u32 lm_repsize;
	__u32 lm_cksum;
	__u32 lm_flags;
	__u32 lm_padding_2;	/* unused */
	__u32 lm_padding_3;
	__u32 lm_buflens[0];
};

#define PTLRPC_NUM_VERSIONS	4
#define LUSTRE_JOBID_SIZE	32

struct ptlrpc_body_v3 {
	struct lustre_handle pb_handle;
	__u32 pb_type;
	__u32 pb_version;
	__u32 pb_opc;
	__u32 pb_status;
	__u64 pb_last_xid;
	__u16 pb_tag;
	__u16 pb_padding0;
	__u32 pb_padding1;
	__u64 pb_last_committed;
	__u64 pb_transno;
	__u32 pb_flags;
	__u32 pb_op_flags;
	__u32 pb_conn_cnt;
	__u32 pb_timeout;
	__u32 pb_service_time;
	__u32 pb_limit;
	__u64 pb_slv;
	__u64 pb_pre_versions[PTLRPC_NUM_VERSIONS];
	__u64 pb_mbits;
	__u64 pb_padding64_0;
	__u64 pb_padding64_1;
	__u64 pb_padding64_2;
	char  pb_jobid[LUSTRE_JOBID_SIZE];
};
#define ptlrpc_body     ptlrpc_body_v3

#define OBD_CONNECT_RDONLY		0x1ULL
#define OBD_CONNECT_INDEX		0x2ULL
#define OBD_CONNECT_GRANT		0x8ULL
#define OBD_CONNECT_SRVLOCK		0x10ULL
#define OBD_CONNECT_REQPORTAL		0x40ULL
#define OBD_CONNECT_LRU_RESIZE		0x2000000ULL
#define OBD_CONNECT_FLAGS2		0x8000000000000000ULL
#define OBD_CONNECT2_LOCKAHEAD		0x2ULL

#ifdef HAVE_LRU_RESIZE_SUPPORT
#define LRU_RESIZE_CONNECT_FLAG OBD_CONNECT_LRU_RESIZE
#else
#define LRU_RESIZE_CONNECT_FLAG 0
#endif

#define OST_CONNECT_SUPPORTED  (OBD_CONNECT_SRVLOCK | OBD_CONNECT_GRANT | \
				OBD_CONNECT_REQPORTAL | OBD_CONNECT_INDEX | \
				LRU_RESIZE_CONNECT_FLAG | OBD_CONNECT_FLAGS2)
#define OST_CONNECT_SUPPORTED2 OBD_CONNECT2_LOCKAHEAD

#endif
