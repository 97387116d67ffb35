/* Stand-in for lustre/ptlrpc/pack_generic.c (ptlrpc-conformance tests), new style: the
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
		__swab32s(&m->lm_opc);
		BUILD_BUG_ON(offsetof(typeof(*m), lm_padding_3) == 0);
	}
	required_len = lustre_msg_hdr_size_v2(m->lm_bufcount);
	for (i = 0; i < m->lm_bufcount; i++) {
		if (swabbed)
			__swab32s(&m->lm_buflens[i]);
		if (m->lm_buflens[i] > PTLRPC_MAX_BUFLEN)
			return -EINVAL;
		buflen = round_up(m->lm_buflens[i], 8);
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
	__swab32s(&body->pb_projid);
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
	__swab32s(&body->pb_uid);
	__swab32s(&body->pb_gid);
}

char *lustre_msg_get_jobid(struct lustre_msg *msg)
{
	struct ptlrpc_body *pb;

	if (msg->lm_buflens[MSG_PTLRPC_BODY_OFF] < sizeof(struct ptlrpc_body))
		return NULL;
	pb = lustre_msg_buf_v2(msg, MSG_PTLRPC_BODY_OFF, sizeof(*pb));
	if (!pb)
		return NULL;
	if (pb->pb_jobid[LUSTRE_JOBID_SIZE - 1] != '\0')
		pb->pb_jobid[LUSTRE_JOBID_SIZE - 1] = '\0';
	return pb->pb_jobid;
}

__u32 lustre_msg_calc_cksum(struct lustre_msg *msg, __u32 buf)
{
	return crc32_le(~(__u32)0, (unsigned char *)msg, lustre_msg_buflen(msg, buf));
}
