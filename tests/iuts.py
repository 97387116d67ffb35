"""Implementations for the project's own tests that misbehave in ways no mutant models: a
decoder that raises, a wrong hello, errno classes renamed, garbled results, a decode-only
testee, and the broken targets.  The broken codecs, one bug each, are the mutant zoo
(ptlrpc_conformance/mutants.py); the few other tests load by name here are aliases of it.

Every one is the reference testee built with a different configuration (the injection
seams of reference.codec.CodecConfig and TargetConfig): no monkeypatching, no copies.
Load them with --iut python:iuts:NAME (tests/ on sys.path).
"""
import functools

from ptlrpc_conformance.reference import make_testee, release_ost
from ptlrpc_conformance import spec


def decode_only():
    """A correct decoder that declares no encode capability: encode cases are not applicable."""
    return make_testee(capabilities=("decode",), name="decode only")


def no_capabilities():
    """A testee that declares no capability: it answers the testee protocol, nothing else."""
    return make_testee(capabilities=(), name="no capabilities")


class WithoutChecksum:
    """A correct decoder (decode only) that leaves the optional `computed_cksum` out of its results."""

    def __init__(self):
        self.inner = make_testee(capabilities=("decode",), name="decode only, no computed_cksum")

    def handle(self, request):
        response = self.inner.handle(request)
        if request.get("op") == "decode" and response.get("ok"):
            response["result"].pop("computed_cksum", None)
        return response


def decode_only_without_cksum():
    return WithoutChecksum()


class Raises:
    """An in-process implementation that raises on every decode."""

    def handle(self, request):
        if request.get("op") == "hello":
            return {"ok": True, "result": {"name": "raises", "version": "0", "capabilities": ["decode"],
                                           "protocol": 1}}
        raise RuntimeError("boom")


def raises():
    return Raises()


class BadHello:
    def handle(self, request):
        return {"ok": True, "result": {"name": "old", "version": "0", "capabilities": [], "protocol": 2}}


def bad_hello():
    return BadHello()


# ---- broken codecs: the mutant zoo's (ptlrpc_conformance/mutants.py), kept in one place ------
# Tests import the zoo from there; these names are the ones other tests load as python:iuts:NAME.
from ptlrpc_conformance import mutants as _zoo  # noqa: E402

ZOO_NAMES = {"no_header_pad": "no_header_pad", "accepts_151_byte_body": "body_151_accepted",
             "magic_unchecked": "magic_unchecked", "encoder_pad_ff": "encoder_pad_ff",
             "cksum_final_inversion": "cksum_final_inversion"}
for _name, _id in ZOO_NAMES.items():
    globals()[_name] = _zoo.BY_ID[_id].factory


class RenamesErrors:
    """A correct decoder that names every rejection EBADMSG, as third-party decoders do."""

    def __init__(self, declares_agnostic=False):
        self.inner = make_testee(name="EBADMSG for everything")
        self.declares_agnostic = declares_agnostic

    def handle(self, request):
        response = self.inner.handle(request)
        if request.get("op") == "hello" and self.declares_agnostic:
            response["result"]["errno_agnostic"] = True
        if not response["ok"] and response["error"] != "EOPNOTSUPP":
            response["error"] = "EBADMSG"
        return response


def ebadmsg():
    return RenamesErrors()


def ebadmsg_agnostic():
    return RenamesErrors(declares_agnostic=True)


class ClientErrnos:
    """A correct decoder that reports every rejected *reply* as EPROTO, as a Lustre client does
    (do_cli_unwrap_reply / after_reply): framing must pass (docs/target-rules.md section 9).
    With `requests_too`, requests get EPROTO as well: that breaks the request errno classes."""

    def __init__(self, requests_too=False):
        self.inner = make_testee(name="EPROTO for rejected replies")
        self.requests_too = requests_too

    def handle(self, request):
        response = self.inner.handle(request)
        reply = request.get("op") == "decode" and request.get("direction") == "reply"
        if not response["ok"] and response["error"] in ("EINVAL", "EFAULT") and (reply or self.requests_too):
            response["error"] = "EPROTO"
        return response


def client_errnos():
    return ClientErrnos()


def eproto_everywhere():
    return ClientErrnos(requests_too=True)


class RejectsEverything:
    """Declares decode, encode and structs and rejects every one of them with EINVAL (or, with
    `errno_agnostic`, says its rejections name no Lustre errno class): it must earn no pass,
    its rejections of invalid inputs included."""

    def __init__(self, errno_agnostic=False):
        self.inner = make_testee(capabilities=("decode", "encode", "structs"), name="rejects everything")
        self.errno_agnostic = errno_agnostic

    def handle(self, request):
        if request.get("op") == "hello":
            response = self.inner.handle(request)
            if self.errno_agnostic:
                response["result"]["errno_agnostic"] = True
            return response
        if request.get("op") not in ("decode", "encode", "decode_struct", "encode_struct"):
            return self.inner.handle(request)       # unknown operations: EOPNOTSUPP, as it should
        return {"ok": False, "error": "EINVAL", "detail": "everything is rejected"}


def rejects_everything():
    return RejectsEverything()


def rejects_everything_agnostic():
    return RejectsEverything(errno_agnostic=True)


class Garbles:
    """Answers every encode and decode_struct with an object of the wrong shape."""

    def __init__(self):
        self.inner = make_testee(name="garbled results")

    def handle(self, request):
        if request.get("op") in ("encode", "decode_struct", "encode_struct"):
            return {"ok": True, "result": {"nothing": "useful"}}
        return self.inner.handle(request)


def garbles():
    return Garbles()


class OddStructValues:
    """Decodes structures right, but names each one's type with a number and reports a valid
    view of names and numbers mixed: any JSON value may come back, and the suite must judge it."""

    def __init__(self):
        self.inner = make_testee(name="odd values in structure results")

    def handle(self, request):
        response = self.inner.handle(request)
        if request.get("op") == "decode_struct" and response.get("ok"):
            response["result"]["type"] = 7
            if "valid" in response["result"]:
                response["result"]["valid"] = [*response["result"]["valid"], 3]
        return response


def odd_struct_values():
    return OddStructValues()


class LustreMdtValidView:
    """The reference, except that its mdt_body valid view is worked out here, from the pairs
    of field and OBD_MD_* bit that Lustre's MDT sets together and its client reads together
    (not from the suite's table): mdt_pack_attr2body's attributes; mdt_data_version_get's
    FLDATAVERSION (mbo_version) and LAYOUT_VERSION (mbo_layout_gen); mdt_getattr_internal's
    TSTATE (mbo_t_state), its optional buffers' sizes (mbo_eadatasize under FLEASIZE, FLDIREA,
    MEA, DEFAULT_MEA or LINKNAME; mbo_max_mdsize under FLMODEASIZE); mdt_pack_acl2body's FLACL
    (mbo_aclsize); mdt_lvb2reply's DOM_SIZE (mbo_dom_size, mbo_dom_blocks); and FLXATTR of a
    getxattr reply (mdt_getxattr: mbo_eadatasize; mdt_getxattr_all: mbo_aclsize and
    mbo_max_mdsize).  A decoder faithful to Lustre's code: it must pass every valid-bit case."""

    PAIRS = {
        "mbo_fid1": ["FLID"], "mbo_atime": ["FLATIME"], "mbo_mtime": ["FLMTIME"], "mbo_ctime": ["FLCTIME"],
        "mbo_size": ["FLSIZE", "FLLAZYSIZE"], "mbo_blocks": ["FLBLOCKS", "FLLAZYBLOCKS"],
        "mbo_mode": ["FLMODE", "FLTYPE"], "mbo_uid": ["FLUID"], "mbo_gid": ["FLGID"], "mbo_flags": ["FLFLAGS"],
        "mbo_rdev": ["FLRDEV"], "mbo_nlink": ["FLNLINK"], "mbo_projid": ["FLPROJID"], "mbo_btime": ["FLBTIME"],
        "mbo_version": ["FLDATAVERSION"], "mbo_layout_gen": ["LAYOUT_VERSION"], "mbo_t_state": ["TSTATE"],
        "mbo_eadatasize": ["FLEASIZE", "FLDIREA", "MEA", "DEFAULT_MEA", "LINKNAME", "FLXATTR"],
        "mbo_max_mdsize": ["FLMODEASIZE", "FLXATTR"], "mbo_aclsize": ["FLACL", "FLXATTR"],
        "mbo_dom_size": ["DOM_SIZE"], "mbo_dom_blocks": ["DOM_SIZE"],
    }

    def __init__(self):
        self.inner = make_testee(name="mdt_body valid view from Lustre's code")
        from ptlrpc_conformance.spec import releases
        defined = releases.load("2.17.57")["valid_bits_defined"]      # lustre_idl.h's OBD_MD_* values
        self.bits = {f: sum(defined[f"OBD_MD_{b}"]["value"] for b in bits) for f, bits in self.PAIRS.items()}

    def _view(self, result):
        if isinstance(result, dict) and result.get("type") == "mdt_body" and "valid" in result:
            mask = result["fields"]["mbo_valid"]
            result["valid"] = [f for f, bits in self.bits.items() if mask & bits]

    def handle(self, request):
        response = self.inner.handle(request)
        if response.get("ok") and request.get("op") == "decode_struct":
            self._view(response["result"])
        elif response.get("ok") and request.get("op") == "decode":
            for struct in (response["result"].get("structs") or {}).values():
                self._view(struct)
        return response


def lustre_mdt_valid_view():
    return LustreMdtValidView()


class RandomValues:
    """The reference, except that about one successful result in three has one to three of its
    values (the whole result, a member, an element) replaced by a JSON value of another kind:
    null, a boolean, a float, NaN, a huge or negative integer, a string, a list, an object.
    Which and where follow from the request (its `id` left out), so a case asked again gets
    the same answer: whatever comes back, the case is judged (pass, fail or error), never
    the suite's bug."""

    ODD = [None, True, False, 1.5, float("nan"), -1, 2 ** 70, "zz", "", [], {}, [[1]], {"a": 1}, 0, "00"]

    def __init__(self):
        self.inner = make_testee(name="random values in results")

    @staticmethod
    def _places(value, path=()):
        yield path
        if isinstance(value, dict):
            for k, v in value.items():
                yield from RandomValues._places(v, path + (k,))
        elif isinstance(value, list):
            for i, v in enumerate(value[:8]):
                yield from RandomValues._places(v, path + (i,))

    def handle(self, request):
        import json
        import random
        response = self.inner.handle(request)
        draw = random.Random(json.dumps({k: v for k, v in request.items() if k != "id"}, sort_keys=True))
        if request.get("op") == "hello" or not response.get("ok") or draw.random() >= 0.35:
            return response
        for _ in range(draw.randint(1, 3)):
            path, value = draw.choice(list(self._places(response["result"]))), draw.choice(self.ODD)
            if not path:
                response["result"] = value
                continue
            holder = response["result"]
            for step in path[:-1]:
                holder = holder[step]
            holder[path[-1]] = value
        return response


def random_values():
    return RandomValues()


class Unsteady:
    """A decoder that answers one input two ways: its third decode reports pb_transno one
    higher; every other decode, and the same input sent again, is right."""

    def __init__(self):
        self.inner = make_testee(capabilities=("decode",), name="unsteady")
        self.decodes = 0

    def handle(self, request):
        response = self.inner.handle(request)
        if request.get("op") == "decode" and response.get("ok"):
            self.decodes += 1
            if self.decodes == 3:
                response["result"]["body"]["pb_transno"] += 1
        return response


def unsteady():
    return Unsteady()


class CrashesOnItsFirstDecode:
    """A decoder that raises on the first decode it is sent (in a decode property's run, one
    of the direction controls sent before the examples) and decodes right after it."""

    def __init__(self):
        self.inner = make_testee(capabilities=("decode",), name="crashes on its first decode")
        self.decodes = 0

    def handle(self, request):
        if request.get("op") == "decode":
            self.decodes += 1
            if self.decodes == 1:
                raise RuntimeError("first decode")
        return self.inner.handle(request)


def crashes_on_its_first_decode():
    return CrashesOnItsFirstDecode()


# ---- broken targets (docs/target-rules.md): one bug each, a class of mutants/broken_targets.py
# (the conforming ones below and target_no_full20 differ from the reference in a TargetConfig setting)
from ptlrpc_conformance.mutants import broken_targets as mt  # noqa: E402
from ptlrpc_conformance.reference import TargetConfig  # noqa: E402

BASE_TARGET = TargetConfig()


def _target(what: str, **changes):
    return lambda: make_testee(target_config=BASE_TARGET.but(**changes), name=f"broken: {what}")


def _broken(what: str, bug, **settings):
    return lambda: mt.testee(bug, name=f"broken: {what}", **settings)


TARGET_FAMILIES = {
    # name: (factory, what it gets wrong, requirement ids it violates)
    "target_transno_reused": (_broken("a transno issued twice", mt.TransnoReused),
                              "the transno counter is not incremented", ["TGT-TRANSNO-1"]),
    "target_transno_on_getattr": (_broken("transno on GETATTR", mt.TransnoOnGetattr),
                                  "a successful OST_GETATTR gets a transno", ["TGT-TRANSNO-2"]),
    "target_transno_on_failure": (_broken("transno on failed transactions", mt.TransnoOnFailure),
                                  "a failed OST_SETATTR (-ENOENT, -EPERM) gets a transno", ["TGT-TRANSNO-2"]),
    "target_last_committed_backwards": (_broken("last_committed goes back", mt.LastCommittedBackwards),
                                        "every other reply reports an older last_committed", ["TGT-TRANSNO-3"]),
    "target_last_committed_ahead": (_broken("last_committed ahead", mt.LastCommittedAhead),
                                    "last_committed is above the highest transno issued", ["TGT-TRANSNO-3"]),
    "target_handler_error_as_err": (_broken("handler errors as ERR", mt.HandlerErrorsAsErr),
                                    "a handler's failure (-ENOENT, -EPERM) is sent as ERR",
                                    ["TGT-ERR-2", "TGT-ERR-3"]),
    "target_early_rejection_as_reply": (_broken("early rejections as REPLY", mt.EarlyRejectionsAsReply),
                                        "rows 5-15 (-ENOTCONN, -EPROTO, ...) are sent as REPLY", ["TGT-ERR-1"]),
    "target_replies_to_undecodable": (_broken("replies to undecodable requests", mt.RepliesToUndecodable),
                                      "an undecodable request gets ERR instead of being dropped", ["TGT-DROP-1"]),
    "target_err_status_positive": (_broken("positive ERR status", mt.ErrStatusPositive),
                                   "ERR replies carry a positive status", ["TGT-ERR-1", "TGT-ERR-3"]),
    "target_handle_in_replies": (_broken("pb_handle in every reply", mt.HandleInReplies),
                                 "non-connect replies carry the export cookie in pb_handle", ["TGT-CONN-1"]),
    "target_no_reconnect_flag": (_broken("no RECONNECT flag", mt.NoReconnectFlag),
                                 "a reconnect reply lacks MSG_CONNECT_RECONNECT", ["TGT-CONN-1"]),
    "target_no_ealready": (_broken("no -EALREADY", mt.NoEalready),
                           "a reconnect with the stored count or another client handle is accepted",
                           ["TGT-CONN-2"]),
    "target_connect_data_any_size": (_broken("any connect data size", mt.ConnectDataAnySize),
                                     "connect data longer than 8 structures is taken", ["TGT-CONN-3"]),
    "target_uuid_any_length": (_broken("UUIDs of any length", mt.UuidAnyLength),
                               "a target or client UUID over 39 characters is taken", ["TGT-CONN-4"]),
    "target_unknown_handle_served": (_broken("unknown handles served", mt.UnknownHandleServed),
                                     "a request naming no export is served instead of -ENOTCONN", ["TGT-CONN-2"]),
    "target_stale_conn_cnt_served": (_broken("stale conn_cnt served", mt.StaleConnCntServed),
                                     "a request with a pb_conn_cnt below the export's is served",
                                     ["TGT-DROP-1", "TGT-CONN-2"]),
    "target_resend_executed_twice": (_broken("no saved replies", mt.NoSavedReplies),
                                     "a resent request is executed again (no reply reconstruction)",
                                     ["TGT-RESEND-2"]),     # a bug only where reconstruction is required
    "target_setattr_ignores_valid": (_broken("SETATTR ignores o_valid", mt.SetattrIgnoresValid),
                                     "OST_SETATTR applies every attribute field whatever o_valid says", ["TGT-OBJ-1"]),
    "target_punch_without_size_blocks": (_broken("PUNCH without FLSIZE|FLBLOCKS", mt.PunchWithoutSizeBlocks),
                                         "OST_PUNCH without both FLSIZE and FLBLOCKS is served", ["TGT-ERR-2"]),
    "target_replay_outside_recovery": (_broken("replays outside recovery", mt.ReplayOutsideRecovery),
                                       "a replay outside recovery is executed (no -ENODEV, no eviction)",
                                       ["RCV-OUTSIDE-1", "TGT-ERR-1"]),
    "target_replay_new_transno": (_broken("replays get new transnos", mt.ReplayNewTransno),
                                  "a replay is answered with a new transno instead of its own", ["RCV-REPLAY-1"]),
    "target_replays_in_arrival_order": (_broken("replays in arrival order", mt.ReplaysInArrivalOrder),
                                        "replays run as they arrive, not in transno order", ["RCV-ORDER-1"]),
    "target_no_epoch_jump": (_broken("no epoch jump", mt.NoEpochJump),
                             "transnos after recovery stay in the old epoch", ["RCV-EPOCH-1"]),
    "target_restart_keeps_uncommitted": (_broken("uncommitted changes survive", mt.RestartKeepsUncommitted),
                                         "uncommitted changes survive a restart", ["RCV-STATE-1"]),
    "target_restart_loses_committed": (_broken("committed changes lost", mt.RestartLosesCommitted),
                                       "a restart loses committed changes too", ["RCV-STATE-1"]),
    # bugs against the rules of Lustre 2.17.57's OST as its code reads (issue 18)
    "target_create_eexist": (_broken("CREATE of the named id only", mt.CreateEexist),
                             "OST_CREATE creates only the id it names and answers -EEXIST if it exists",
                             ["TGT-OBJ-1"]),
    "target_create_applies_attrs": (_broken("CREATE applies attributes", mt.CreateAppliesAttrs),
                                    "a new object takes the attributes the create request carries", ["TGT-OBJ-1"]),
    "target_zeroed_objects": (_broken("new objects mode 0", mt.ZeroedObjects),
                              "a new object's permission bits are 0, not 07666", ["TGT-OBJ-1"]),
    "target_uid_keeps_suid": (_broken("uid keeps S_ISUID", mt.UidKeepsSuid),
                              "setting the uid does not clear S_ISUID", ["TGT-OBJ-1"]),
    "target_punch_sets_ids": (_broken("PUNCH sets ids", mt.PunchSetsIds),
                              "OST_PUNCH applies uid/gid/projid as OST_SETATTR does", ["TGT-OBJ-1"]),
    "target_honours_ungranted_rdonly": (_broken("honours an ungranted RDONLY", mt.HonoursUngrantedRdonly),
                                        "a client that asked for RDONLY without being granted it gets -EROFS",
                                        ["TGT-ERR-2"]),
    "target_rdonly_unenforced": (_broken("granted RDONLY not enforced", mt.RdonlyUnenforced, grant_rdonly=True),
                                 "OBD_CONNECT_RDONLY is granted but mutable requests are served", ["TGT-ERR-2"]),
    "target_timeout_drop_first": (_broken("pb_timeout drop first", mt.TimeoutDropFirst),
                                  "the pb_timeout 0 drop runs before the replay-outside-recovery check",
                                  ["RCV-OUTSIDE-1"]),
    "target_claimed_always_dropped": (_broken("replayed transnos always dropped", mt.ClaimedAlwaysDropped),
                                      "a replay of a transno another client already replayed is dropped",
                                      ["RCV-CLAIMED-1"]),
    "target_runs_queued_duplicate_replay": (_broken("queued duplicate replays run", mt.RunsQueuedDuplicateReplay),
                                            "a replay of a transno a still-queued replay holds is queued too",
                                            ["RCV-CLAIMED-1"]),
    "target_version_on_every_change": (_broken("version on every change", mt.VersionOnEveryChange),
                                       "every change, not only a size change, sets the object's VBR version",
                                       ["RCV-VBR-1"]),
    # issue 25 (item 5): rules the suite stated and never checked, or never exercised
    "target_getattr_omits_projid": (_broken("GETATTR without FLPROJID", mt.GetattrOmitsProjid),
                                    "OST_GETATTR leaves OBD_MD_FLPROJID out of o_valid", ["TGT-OBJ-1"]),
    "target_no_full20": (_target("connect replies without FULL20",
                                 connect_flags=BASE_TARGET.connect_flags & ~spec.constant("OBD_CONNECT_FULL20")),
                         "a successful connect reply does not grant OBD_CONNECT_FULL20", ["TGT-CONN-1"]),
    "target_runs_last_transaction_xid": (_broken("last transaction XID run again", mt.RunsLastTransactionXid),
                                         "the export's last transaction XID again without MSG_RESENT is run",
                                         ["TGT-DROP-1"]),
}

# Targets that differ from the reference only in a choice docs/target-rules.md allows: the
# suite must pass them (they were broken targets under the rules before issue 18).
CONFORMING_TARGETS = {
    # name: (factory, the choice, the rule that allows it)
    "target_replay_skips_committed": (_target("committed replays answered from saved replies",
                                              replay_skips_committed=True),
                                      "a replay of a committed transaction is answered from its saved reply, not run "
                                      "again", "RCV-REPLAY-1 / §7: 'or is answered from its saved reply by a target "
                                      "that reconstructs'"),
    "target_end_recovery_hard": (_target("end_recovery is the hard limit", end_recovery_hard=True),
                                 "end_recovery evicts every client that has not finished (its held requests "
                                 "answered ERR -ENOTCONN) and ends recovery",
                                 "§7 / docs/testee-protocol.md §2.4: 'or the hard limit'"),
    "target_claim_window": (_target("claims queued in the recovery thread's window", claim_window=True),
                            "a replay claim of the transno whose reply was just sent is queued, answered later",
                            "§7: 'queued and answered later'"),
    "target_without_project_quota": (_target("no project quota", project_quota=False),
                                     "a new projid is refused REPLY -EOPNOTSUPP (a punch still truncates)",
                                     "§3, 'Project ids'"),
    "target_without_recovery": (_target("recovery disabled", recovery=False),
                                "no MSG_CONNECT_REPLAYABLE, no transnos, no recovery after a restart",
                                "§4, 'Recovery disabled'"),
}

for _name, (_factory, _what, _ids) in {**TARGET_FAMILIES, **CONFORMING_TARGETS}.items():
    globals()[_name] = _factory


# The reference target answering as an older release's OST does (TargetConfig.release): it
# passes the target and recovery areas under its own release's profile, not under 2.17.57's
# (tests/test_target_suite.py)
RELEASE_OSTS = {f"ost_{r.replace('.', '_')}": r for r in ("2.12.9", "2.15.8", "2.16.1", "2.17.0")}
for _name, _release in RELEASE_OSTS.items():
    globals()[_name] = functools.partial(release_ost, _release)


def cksum_and_slv_32_bits():
    """Two bugs of the mutant zoo at once, decode only: the checksum lacks its final inversion
    (CKSUM-1, a SHOULD) and pb_slv is kept in 32 bits (BODY-FIELDS-1, a MUST)."""
    from ptlrpc_conformance.mutants import _checks, _crc_without_final_xor, _decode_only_mutant
    from ptlrpc_conformance.mutants import broken_codecs as mc
    from ptlrpc_conformance.reference import codec
    return _decode_only_mutant(cksum=_crc_without_final_xor, decode_checks=_checks(
        wrap={codec.unpack_body: mc.then(codec.unpack_body, mc.narrow("pb_slv", 32))}))()


class SwapLayoutsFrom:
    """The reference, except that it decodes an mdc_swap_layouts from `minimum` bytes up (the
    first 8 are msl_flags), as a 2.17.57 receiver takes one (RMF_F_MINIMUM_SIZE): with 8 it is
    Lustre-like; with 7 it takes a structure too short for its msl_flags."""

    def __init__(self, minimum: int):
        self.minimum = minimum
        self.inner = make_testee(name=f"mdc_swap_layouts from {minimum} bytes")

    def handle(self, request):
        data = bytes.fromhex(request.get("data") or "") if request.get("op") == "decode_struct" else b""
        if request.get("type") == "mdc_swap_layouts" and self.minimum <= len(data) < 24:
            flags = int.from_bytes(data[:8].ljust(8, b"\0"), "little")
            return {"ok": True, "result": {"type": "mdc_swap_layouts", "fields": {"msl_flags": flags}}}
        return self.inner.handle(request)


def swap_layouts_from_8():
    return SwapLayoutsFrom(8)


class TakesShort:
    """The reference, except that it decodes structure `struct` from any number of bytes under
    its size, as if the missing tail were zeros: Lustre's receivers take obd_connect_data and
    ldlm_request so (RMF_F_NO_SIZE_CHECK); ost_body's field has a size check."""

    def __init__(self, struct: str):
        from ptlrpc_conformance.spec import structs
        self.struct, self.size = struct, structs.size(struct)
        self.inner = make_testee(name=f"{struct} at any length")

    def handle(self, request):
        if request.get("op") == "decode_struct" and request.get("type") == self.struct:
            data = bytes.fromhex(request.get("data") or "")
            if len(data) < self.size:
                request = dict(request, data=data.ljust(self.size, b"\0").hex())
        return self.inner.handle(request)


connect_data_any_length = functools.partial(TakesShort, "obd_connect_data")
ldlm_request_any_length = functools.partial(TakesShort, "ldlm_request")
ost_body_any_length = functools.partial(TakesShort, "ost_body")


def swap_layouts_from_7():
    return SwapLayoutsFrom(7)
