"""ost_id and FID arithmetic of the reference target (Lustre's lustre_ostid.h, lustre_fid.h)."""
from __future__ import annotations

from .constants import (FID_SEQ_ECHO, FID_SEQ_IDIF, FID_SEQ_IDIF_MAX, FID_SEQ_LOV_DEFAULT, FID_SEQ_NORMAL,
                        FID_SEQ_OST_MDT0, IDIF_MAX_OID, OBIF_MAX_OID, OST_INDEX)


# --------------------------------------------------------------------------------------
# ost_id arithmetic (Lustre's lustre_ostid.h / lustre_fid.h)
#
# An ost_id is 16 bytes read two ways: {oi_id, oi_seq} or a lu_fid {f_seq, f_oid, f_ver}.
# The reference keeps it as the pair (lo, hi) = (oi_id, oi_seq) of native integers; the FID
# view is f_seq = lo, f_oid = hi & 0xFFFFFFFF, f_ver = hi >> 32.
# --------------------------------------------------------------------------------------

def is_idif(seq: int) -> bool:
    return FID_SEQ_IDIF <= seq <= FID_SEQ_IDIF_MAX


def raw_oi(oi: dict) -> tuple[int, int]:
    """The (lo, hi) pair of a decoded ost_id (the codec gives both union views)."""
    return oi["oi"]["oi_id"], oi["oi"]["oi_seq"]


def pair_seq(lo: int, hi: int) -> int:
    """ostid_seq."""
    if hi == FID_SEQ_OST_MDT0:
        return FID_SEQ_OST_MDT0
    if hi == FID_SEQ_LOV_DEFAULT:
        return FID_SEQ_LOV_DEFAULT
    if is_idif(lo):
        return FID_SEQ_OST_MDT0
    return lo


def pair_id(lo: int, hi: int) -> int:
    """ostid_id."""
    if hi == FID_SEQ_OST_MDT0:
        return lo & IDIF_MAX_OID
    if hi == FID_SEQ_LOV_DEFAULT:
        return lo
    if is_idif(lo):
        return ((lo & 0xFFFF) << 32) | (hi & 0xFFFFFFFF)       # fid_idif_id(seq, oid, 0)
    return hi & 0xFFFFFFFF


def ostid_seq(oi: dict) -> int:
    """The object's sequence from a decoded ost_id (both union views)."""
    return pair_seq(*raw_oi(oi))


def ostid_id(oi: dict) -> int:
    return pair_id(*raw_oi(oi))


def valid_sequence(seq: int) -> bool:
    """tgt_validate_obdo: IDIF, MDT0, normal or echo."""
    return (FID_SEQ_IDIF <= seq <= FID_SEQ_IDIF_MAX or seq == FID_SEQ_OST_MDT0
            or seq >= FID_SEQ_NORMAL or seq == FID_SEQ_ECHO)


def _idif_fid(oid: int, idx: int = OST_INDEX) -> tuple[int, int]:
    """The IDIF FID of id `oid` on OST `idx`, as a (lo, hi) pair (fid_idif_seq)."""
    return FID_SEQ_IDIF | (idx << 16) | ((oid >> 32) & 0xFFFF), (oid & 0xFFFFFFFF) | ((oid >> 48) << 32)


def ostid_to_fid(lo: int, hi: int) -> tuple[int, int] | None:
    """ostid_to_fid with this OST's index: the FID form tgt_validate_obdo rewrites o_oi into,
    or None where Lustre returns -EBADF (a non-IDIF FID with a non-zero f_ver)."""
    seq = pair_seq(lo, hi)
    if seq == FID_SEQ_OST_MDT0:
        return _idif_fid(pair_id(lo, hi))
    if seq == FID_SEQ_LOV_DEFAULT:
        return lo, hi                    # Lustre leaves the FID unset; not a sequence the suite uses
    if hi >> 32:
        return None
    return lo, hi


def fid_key(lo: int, hi: int) -> tuple[int, int]:
    """The (sequence, id) an object FID names (what lookups use: the FID, never the ost_id view
    of its bytes)."""
    if is_idif(lo):
        return FID_SEQ_OST_MDT0, ((hi >> 32) << 48) | ((lo & 0xFFFF) << 32) | (hi & 0xFFFFFFFF)
    return lo, hi & 0xFFFFFFFF


def ostid_set_id(lo: int, hi: int, oid: int) -> tuple[int, int] | None:
    """ostid_set_id on an ost_id in either form; None where Lustre returns -E2BIG."""
    if hi == FID_SEQ_OST_MDT0:
        return (oid, hi) if oid <= IDIF_MAX_OID else None
    if is_idif(lo):
        return _idif_fid(oid, (lo >> 16) & 0xFFFF) if oid <= IDIF_MAX_OID else None
    return (lo, (hi & ~0xFFFFFFFF) | oid) if oid <= OBIF_MAX_OID else None


def fid_to_ostid(lo: int, hi: int) -> tuple[int, int]:
    """fid_to_ostid: an IDIF FID goes back to the {id, seq 0} form, any other FID stays."""
    if is_idif(lo):
        return fid_key(lo, hi)[1], FID_SEQ_OST_MDT0
    return lo, hi

