/* Stand-in for lustre/ofd/ofd_objects.c (ptlrpc-conformance tests), new style; not Lustre's code. */

int ofd_attr_handle_id(const struct lu_env *env, struct ofd_object *fo,
		       struct lu_attr *la, int is_setattr)
{
	struct lu_attr *ln = &ofd_info(env)->fti_attr2;

	if (!(la->la_valid & LA_MODE) || !is_setattr) {
		if (!(ln->la_mode & S_ISUID))
			la->la_valid &= ~LA_UID;
		if (!(ln->la_mode & S_ISGID))
			la->la_valid &= ~LA_GID;
		if (!(ln->la_mode & S_ISVTX) &&
		    (ln->la_projid != 0 || la->la_projid == 0))
			la->la_valid &= ~LA_PROJID;
	}
	return 0;
}

int ofd_check_resource_ids(const struct lu_env *env, struct ofd_object *fo,
			   const struct ldlm_res_id *res)
{
	return ostid_res_name_eq(&fo->ofo_oid, res) ? 0 : -EPROTO;
}
