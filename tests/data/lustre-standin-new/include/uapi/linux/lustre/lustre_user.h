/* Stand-in uapi header (new layout): a few declarations in the shape of lustre_user.h. */
#ifndef _STANDIN_LUSTRE_USER_H
#define _STANDIN_LUSTRE_USER_H

#define UUID_MAX		40

struct obd_uuid {
	char uuid[UUID_MAX];
};

struct lu_fid {
	__u64 f_seq;
	__u32 f_oid;
	__u32 f_ver;
} __attribute__((packed));

struct ost_id {
	union {
		struct {
			__u64 oi_id;
			__u64 oi_seq;
		} oi;
		struct lu_fid oi_fid;
	};
} __attribute__((packed));

#endif
