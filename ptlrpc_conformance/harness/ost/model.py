"""The suite's model of an OST's objects (docs/target-rules.md §3), independent of any
implementation under test.

An `Obj` holds what OST_GETATTR must report of an object.  Where the rules allow several
outcomes (mtime after a size-changing OST_PUNCH depends on the back-end), the attribute holds
a frozenset of the allowed values until a GETATTR tells which one the target chose.  The
functions here compute the effect of one request on a model state: they are shared by the
stateful target suite (harness/ost/session.py), the recovery suite (its candidate states
after a restart) and the scenario generator.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ptlrpc_conformance.harness.ost.client import (ATTRS, EOF, FRESH_MODE, MD, PROJID_APPLIED, PROJID_DROPPED,
                                                   PROJID_REFUSED, S_ISGID, S_ISUID, S_ISVTX, errno)

PERM = 0o7777


def allowed(value) -> frozenset:
    """The set of values an attribute may have."""
    return value if isinstance(value, frozenset) else frozenset((value,))


def one_of(values) -> int | frozenset:
    values = frozenset(v for vs in values for v in allowed(vs))
    return next(iter(values)) if len(values) == 1 else values


_ATTRS = ("size", "atime", "mtime", "ctime", "mode", "uid", "gid", "projid")


@dataclass
class Obj:
    size: int = 0
    atime: int = 0
    mtime: int | frozenset = 0       # a frozenset: any of these (the back-end decides)
    ctime: int = 0
    mode: int = FRESH_MODE & PERM    # the permission bits (o_mode & 07777); the type is S_IFREG
    uid: int = 0
    gid: int = 0
    projid: int = 0

    def matches(self, other: "Obj") -> bool:
        """`other` (what GETATTR showed; projid None: not reported) is one of the states this
        model allows."""
        return all(getattr(other, a) in allowed(getattr(self, a)) for a in _ATTRS
                   if getattr(other, a) is not None)

    def show(self) -> str:
        def v(x):
            return "{" + ", ".join(str(i) for i in sorted(x)) + "}" if isinstance(x, frozenset) else str(x)
        return (f"size {v(self.size)} mode {self.mode:#o} uid {self.uid} gid {self.gid} projid {v(self.projid)} "
                f"atime {self.atime} mtime {v(self.mtime)} ctime {self.ctime}")


@dataclass
class State:
    """Objects of sequence 0 by id, and LAST_ID (None: not known).  Ids at or below `floor`
    are not modelled (the suite did not watch them being made)."""
    objects: dict[int, Obj] = field(default_factory=dict)
    last_id: int | None = None
    floor: int = 0

    def copy(self) -> "State":
        return copy.deepcopy(self)


def fresh() -> Obj:
    """A precreated object (ofd_precreate_objects): size 0, times 0, owner 0, mode 0o7666."""
    return Obj()


def create(state: State, n: int, reply_id: int | None = None) -> int | None:
    """OST_CREATE of id `n` answered 0 with reply id `reply_id` (None: as far as the target
    may go, `n`): every id in (LAST_ID, M] exists afterwards, the new ones fresh.  Returns
    the new LAST_ID.  With LAST_ID unknown the state learns it and models nothing below."""
    if state.last_id is None:
        if reply_id is None:
            return None
        state.last_id = reply_id if reply_id <= n else reply_id - 1
        state.floor = state.last_id
        state.objects = {k: v for k, v in state.objects.items() if k > state.floor}
        return state.last_id
    last = state.last_id
    if n <= last:
        return last
    m = n if reply_id is None or not last < reply_id <= n else reply_id
    for i in range(last + 1, m + 1):
        state.objects.setdefault(i, fresh())
    state.last_id = m
    return m


def expected_create_id(last: int, n: int) -> list[int]:
    """The reply ids a create of `n` may answer with status 0 when LAST_ID is `last`."""
    if n > last:
        return list(range(last + 1, n + 1))
    return [last + 1 if n < last else n]


def punch_rules(release: str | None = None) -> tuple[bool, bool]:
    """What a punch does with ids under `release` (default: the default profile's), from its facts:
    (it applies uid, gid and projid at all: ofd_punch_hdl hands them to la_from_obdo from
    2.17.0; it sets a projid on an object whose stored projid is 0: ofd_attr_handle_id, also
    2.17.0).  Before, a punch applies only the size and the times."""
    from ptlrpc_conformance.harness.verdicts import release as release_rules
    release = release or release_rules.default()
    return release_rules.behaviour(release, "punch_sets_ids"), release_rules.behaviour(release, "punch_projid")


def sets_projid(obj: Obj, opc: str, valid: int, fields: dict, release: str | None = None) -> bool:
    """The request hands the back-end a projid other than the stored one (a project quota
    transfer: osd_quota_transfer, osd-zfs osd_declare_attr_set): SETATTR with FLPROJID; PUNCH
    with FLPROJID where ofd_attr_handle_id (is_setattr 0) keeps it, in a release whose punch
    applies ids (punch_rules)."""
    if not valid & MD["FLPROJID"] or opc not in ("OST_SETATTR", "OST_PUNCH"):
        return False
    new, stored = fields.get("o_projid", 0), allowed(obj.projid)
    if opc == "OST_PUNCH":
        ids, when_unset = punch_rules(release)
        if not ids or not (obj.mode & S_ISVTX or (when_unset and 0 in stored and new != 0)):
            return False
    return stored != {new}


def _projid_after(obj: Obj, new: int, modes) -> int | frozenset:
    """The stored projid after a transfer to `new` that succeeded under one of `modes`
    (applied: the new one; dropped: the old one, ZFS before 0.8)."""
    values = ({new} if PROJID_APPLIED in modes else set()) | (set(allowed(obj.projid)) if PROJID_DROPPED in modes else set())
    return one_of([frozenset(values or {new})])


def setattr_result(obj: Obj, valid: int, fields: dict, projid=(PROJID_APPLIED,)) -> Obj:
    """OST_SETATTR on an existing object (ofd_attr_set, ofd_attr_handle_id with is_setattr 1):
    times, uid, gid, projid per bit; FLMODE takes all of 07777; FLUID/FLGID/FLPROJID clear
    S_ISUID/S_ISGID/S_ISVTX while the stored mode has them.  `projid`: the modes the target may
    be in when the request sets a new projid (sets_projid): refused, nothing changes; dropped,
    everything but the projid."""
    if PROJID_REFUSED in projid and sets_projid(obj, "OST_SETATTR", valid, fields):
        return copy.deepcopy(obj)
    new = copy.deepcopy(obj)
    for attr in ("atime", "mtime", "ctime", "uid", "gid", "projid"):
        fname, bit = ATTRS[attr]
        if valid & bit:
            setattr(new, attr, fields.get(fname, 0))
    if valid & MD["FLPROJID"] and sets_projid(obj, "OST_SETATTR", valid, fields):
        new.projid = _projid_after(obj, fields.get("o_projid", 0), projid)
    stored = obj.mode
    mask = 0
    if valid & MD["FLUID"] and stored & S_ISUID:
        mask |= S_ISUID
    if valid & MD["FLGID"] and stored & S_ISGID:
        mask |= S_ISGID
    if valid & MD["FLPROJID"] and stored & S_ISVTX:
        mask |= S_ISVTX
    bits = fields.get("o_mode", 0) & PERM if valid & MD["FLMODE"] else stored
    new.mode = bits & ~mask & PERM
    return new


def punch_result(obj: Obj, valid: int, fields: dict, projid=(PROJID_APPLIED,), release: str | None = None) -> Obj:
    """OST_PUNCH to start `o_size` on an existing object (ofd_object_punch; ofd_attr_handle_id
    with is_setattr 0; osd_punch on either back-end).  mtime is a set of allowed values when
    the size changes (docs/target-rules.md §3).  `projid`: as for setattr_result, except that a
    refused punch may have truncated (ldiskfs punches before it sets the attributes, and the
    truncate runs at transaction stop; ZFS refuses when it declares them): the size is either,
    and so is mtime where the truncate would set it.  `release`: whose punch rules apply
    (punch_rules; before 2.17.0 the ids and the mode stay as they were)."""
    start = fields.get("o_size", 0)
    if PROJID_REFUSED in projid and sets_projid(obj, "OST_PUNCH", valid, fields, release):
        new = copy.deepcopy(obj)
        if start not in allowed(obj.size) or len(allowed(obj.size)) > 1:
            new.size = one_of([obj.size, start])
            new.mtime = one_of([obj.mtime, obj.ctime])
        return new
    new = copy.deepcopy(obj)
    new.size = start
    if valid & MD["FLATIME"]:
        new.atime = fields.get("o_atime", 0)
    c = fields.get("o_ctime", 0) if valid & MD["FLCTIME"] else obj.ctime
    new.ctime = c
    m0 = fields.get("o_mtime", 0) if valid & MD["FLMTIME"] else obj.mtime
    if start == obj.size:
        new.mtime = m0
    else:
        choices = [m0, c] + ([obj.ctime] if not valid & MD["FLMTIME"] else [])
        new.mtime = one_of(choices)
    stored = obj.mode
    cleared = 0
    ids, when_unset = punch_rules(release)
    if not ids:
        return new
    if valid & MD["FLUID"] and stored & S_ISUID:
        new.uid = fields.get("o_uid", 0)
        cleared |= S_ISUID
    if valid & MD["FLGID"] and stored & S_ISGID:
        new.gid = fields.get("o_gid", 0)
        cleared |= S_ISGID
    projid_value = fields.get("o_projid", 0)
    if valid & MD["FLPROJID"] and (stored & S_ISVTX or (when_unset and 0 in allowed(obj.projid) and projid_value != 0)):
        new.projid = _projid_after(obj, projid_value, projid) if sets_projid(obj, "OST_PUNCH", valid, fields, release) \
            else projid_value
        if stored & S_ISVTX:
            cleared |= S_ISVTX
    new.mode = stored & ~cleared & PERM
    return new


def apply(state: State, opc: str, oid: int, valid: int = 0, fields: dict | None = None,
          reply_id: int | None = None, projid=(PROJID_APPLIED,), release: str | None = None) -> int:
    """Apply one request that the target ran to `state`; returns the status it must have
    (0, or -ENOENT when the object is missing).  Creates always succeed here.  `projid`: the
    projid modes the target may be in (setattr_result).  `release`: whose punch rules apply
    (default: the session's)."""
    fields = fields or {}
    if opc == "OST_CREATE":
        create(state, oid, reply_id)
        return 0
    obj = state.objects.get(oid)
    if obj is None:
        return errno("ENOENT")
    if opc == "OST_DESTROY":
        del state.objects[oid]
    elif opc == "OST_SETATTR":
        state.objects[oid] = setattr_result(obj, valid, fields, projid)
    elif opc == "OST_PUNCH":
        state.objects[oid] = punch_result(obj, valid, fields, projid, release)
    return errno("EOPNOTSUPP") if PROJID_REFUSED in projid and sets_projid(obj, opc, valid, fields, release) else 0


def observed(rep) -> Obj | None:
    """What a GETATTR reply shows of an object (None: it failed; projid None: not reported,
    which a back-end without project accounting may do)."""
    from ptlrpc_conformance.harness.ost import wire
    if rep is None or rep.body["pb_type"] != wire.REPLY or rep.status != 0:
        return None
    oa = rep.struct(1, "ost_body") or {}
    return Obj(size=oa.get("oa.o_size", 0), atime=oa.get("oa.o_atime", 0), mtime=oa.get("oa.o_mtime", 0),
               ctime=oa.get("oa.o_ctime", 0), mode=oa.get("oa.o_mode", 0) & PERM, uid=oa.get("oa.o_uid", 0),
               gid=oa.get("oa.o_gid", 0),
               projid=oa.get("oa.o_projid", 0) if oa.get("oa.o_valid", 0) & MD["FLPROJID"] else None)


def same(model: Obj | None, seen: Obj | None) -> bool:
    """A GETATTR result agrees with a model object (None: no object)."""
    if model is None or seen is None:
        return model is None and seen is None
    return model.matches(seen)


def resolve(model: Obj, seen: Obj) -> Obj:
    """The model after a GETATTR showed `seen`: allowed sets narrowed to what was seen."""
    out = copy.deepcopy(model)
    for a in _ATTRS:
        value = getattr(out, a)
        if isinstance(value, frozenset) and getattr(seen, a) in value:
            setattr(out, a, getattr(seen, a))
    return out


def getattr_expect(obj: Obj, requirement: str = "TGT-OBJ-1", why: str = "getattr"):
    """What OST_GETATTR of an existing object must answer (ofd_getattr_hdl): REPLY 0 with
    FLSIZE, the times, FLTYPE, FLMODE, FLUID, FLGID and FLPROJID (obdo_from_la sets the bits
    of its mask, whatever the back-end reports), the type S_IFREG, and the values the model
    holds.  An attribute with several allowed values gives one outcome per value (an AnyOf),
    never one squeezed predicate."""
    from ptlrpc_conformance.harness.ost.client import GETATTR_BITS, S_IFMT, S_IFREG, AnyOf, reply

    import itertools
    varying = [a for a in _ATTRS if isinstance(getattr(obj, a), frozenset)]

    def one(values):
        o = copy.copy(obj)
        for a, v in zip(varying, values):
            setattr(o, a, v)
        fields = {"oa.o_size": o.size, "oa.o_atime": o.atime, "oa.o_mtime": o.mtime, "oa.o_ctime": o.ctime,
                  f"oa.o_mode&{PERM}": o.mode, f"oa.o_mode&{S_IFMT}": S_IFREG, "oa.o_uid": o.uid,
                  "oa.o_gid": o.gid, "oa.o_projid": o.projid, f"oa.o_valid&{GETATTR_BITS}": GETATTR_BITS}
        return reply(0, requirement=requirement, why=why, struct="ost_body", fields=fields)
    if varying:
        combos = itertools.product(*(sorted(getattr(obj, a)) for a in varying))
        return AnyOf([(",".join(f"{a}-{v}" for a, v in zip(varying, c)), one(c)) for c in combos])
    return one(())
