/* Stand-in for lustre/ofd/ofd_objects.c (ptlrpc-conformance tests), old style; not Lustre's code. */

int ofd_attr_handle_id(const struct lu_env *env, struct ofd_object *fo,
		       struct lu_attr *la, int is_setattr)
{
	struct lu_attr *ln = &ofd_info(env)->fti_attr2;

	if (!(la->la_valid & LA_MODE) || !is_setattr) {
		if (!(ln->la_mode & S_ISUID))
			la->la_valid &= ~LA_UID;
		if (!(ln->la_mode & S_ISGID))
			la->la_valid &= ~LA_GID;
		if (!(ln->la_mode & S_ISVTX))
			la->la_valid &= ~LA_PROJID;
	}
	return 0;
}
