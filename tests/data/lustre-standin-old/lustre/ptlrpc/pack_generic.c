/* Stand-in for lustre/ptlrpc/pack_generic.c (ptlrpc-conformance tests), old style: the
 * functions tools/gen_release_facts.py reads, in the shape of the real ones; not Lustre's code. */

static int lustre_unpack_msg_v2(struct lustre_msg_v2 *m, int len)
{
	int swabbed, required_len, i, buflen;

	swabbed = (m->lm_magic == LUSTRE_MSG_MAGIC_V2_SWABBED);
	if (swabbed) {
		__swab32s(&m->lm_magic);
		__swab32s(&m->lm_bufcount);
		__swab32s(&m->lm_secflvr);
		__swab32s(&m->lm_repsize);
		__swab32s(&m->lm_cksum);
		__swab32s(&m->lm_flags);
		CLASSERT(offsetof(typeof(*m), lm_padding_2) != 0);
		CLASSERT(offsetof(typeof(*m), lm_padding_3) != 0);
	}
	required_len = lustre_msg_hdr_size_v2(m->lm_bufcount);
	for (i = 0; i < m->lm_bufcount; i++) {
		if (swabbed)
			__swab32s(&m->lm_buflens[i]);
		buflen = cfs_size_round(m->lm_buflens[i]);
		if (buflen < 0 || buflen > PTLRPC_MAX_BUFLEN)
			return -EINVAL;
		required_len += buflen;
	}
	return swabbed;
}

void lustre_swab_ptlrpc_body(struct ptlrpc_body *body)
{
	__swab32s(&body->pb_type);
	__swab32s(&body->pb_version);
	__swab32s(&body->pb_opc);
	__swab32s(&body->pb_status);
	__swab64s(&body->pb_last_xid);
	__swab16s(&body->pb_tag);
	CLASSERT(offsetof(typeof(*body), pb_padding1) != 0);
	__swab64s(&body->pb_last_committed);
	__swab64s(&body->pb_transno);
	__swab32s(&body->pb_flags);
	__swab32s(&body->pb_op_flags);
	__swab32s(&body->pb_conn_cnt);
	__swab32s(&body->pb_timeout);
	__swab32s(&body->pb_service_time);
	__swab32s(&body->pb_limit);
	__swab64s(&body->pb_slv);
	__swab64s(&body->pb_pre_versions[0]);
	__swab64s(&body->pb_mbits);
	CLASSERT(offsetof(typeof(*body), pb_padding64_2) != 0);
}

void *lustre_msg_buf_v2(struct lustre_msg_v2 *m, __u32 n, __u32 min_size)
{
	__u32 buflen;

	if (n >= m->lm_bufcount)
		return NULL;
	buflen = m->lm_buflens[n];
	if (buflen < min_size)
		return NULL;
	return (char *)m + lustre_msg_hdr_size_v2(m->lm_bufcount);
}

char *lustre_msg_get_jobid(struct lustre_msg *msg)
{
	struct ptlrpc_body *pb = lustre_msg_buf_v2(msg, MSG_PTLRPC_BODY_OFF, sizeof(*pb));

	return pb ? pb->pb_jobid : NULL;
}

__u32 lustre_msg_calc_cksum(struct lustre_msg *msg)
{
	return crc32_le(~(__u32)0, (unsigned char *)msg, lustre_msg_buflen(msg, 0));
}
