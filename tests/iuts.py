"""Deliberately broken implementations for the project's own tests, each breaking one rule.

Every one is the reference testee built with a different configuration (the injection
seam of reference.codec.CodecConfig): no monkeypatching, no copies.
Load them with --iut python:iuts:NAME (tests/ on sys.path).
"""
from ptlrpc_conformance.reference import CodecConfig, make_testee

BASE = CodecConfig()


def accepts_bufcount_zero():
    """lm_bufcount 0 is let through the bufcount check (HDR-BUFCOUNT-1)."""
    return make_testee(BASE.but(min_bufcount=0), name="broken: accepts bufcount 0")


def no_header_pad():
    """Header size 32 + 4*bufcount, never rounded up to 8 (PAD-HEADER-1), on decode and encode."""
    return make_testee(BASE.but(pad_header=False), name="broken: no odd-bufcount header pad")


def swabbed_magic_unknown():
    """A byte-swapped magic is not recognised, so foreign-endian peers are refused (HDR-MAGIC-2)."""
    return make_testee(BASE.but(magic_swabbed=None), name="broken: swabbed magic unknown")


def accepts_151_byte_body():
    """Buffer 0 of 151 bytes is accepted as a ptlrpc_body (BODY-SIZE-1)."""
    return make_testee(BASE.but(min_body=151), name="broken: 151-byte body accepted")


def decode_only():
    """A correct decoder that declares no encode capability: encode cases are not applicable."""
    return make_testee(capabilities=("decode",), name="decode only")


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


# ---- one broken implementation per rule family (framing) -----------------------------------
import zlib  # noqa: E402

from ptlrpc_conformance.reference.codec import check_magic, check_version  # noqa: E402


def _without(*checks):
    return tuple(c for c in BASE.decode_checks if c not in checks)


FAMILIES = {
    # name: (configuration changes, what it gets wrong)
    "magic_unchecked": (dict(decode_checks=_without(check_magic)), "any magic is accepted"),
    "bufcount_max_31": (dict(max_bufcount=31), "the seed's limit of 31 buffers"),
    "buflen_unrounded": (dict(round_buflens=False), "buffers placed without rounding lengths up to 8"),
    "buflen_max_off_by_8": (dict(max_buflen=BASE.max_buflen + 8), "PTLRPC_MAX_BUFLEN one step too big"),
    "wrap_accepted": (dict(reject_wrapped_buflen=False), "buflens whose rounding wraps are accepted"),
    "encoder_pad_ff": (dict(pad_byte=0xFF), "the encoder pads with 0xFF"),
    "encoder_no_buffer_pad": (dict(pad_buffers=False), "the encoder does not pad buffers"),
    "encoder_padded_buflens": (dict(encode_padded_buflens=True), "the encoder writes rounded buflens"),
    "swabs_handle": (dict(unswabbed=BASE.unswabbed - {"pb_handle"}), "pb_handle is byte-swapped"),
    "no_swab_transno": (dict(unswabbed=BASE.unswabbed | {"pb_transno"}), "pb_transno is not byte-swapped"),
    "no_swab_padding_3": (dict(unswabbed=BASE.unswabbed - {"lm_padding_3"}), "lm_padding_3 is byte-swapped"),
    "version_unchecked": (dict(decode_checks=_without(check_version)), "pb_version is not checked"),
    "reply_accepts_request_type": (dict(reply_types=BASE.reply_types | {4711}), "a reply may be a REQUEST"),
    "cksum_final_inversion": (dict(cksum=lambda b: zlib.crc32(b)), "the checksum is inverted at the end"),
}


def family(name):
    changes, what = FAMILIES[name]
    return make_testee(BASE.but(**changes), name=f"broken: {what}")


for _name in FAMILIES:
    globals()[_name] = (lambda n: lambda: family(n))(_name)


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


# ---- broken structure codecs -------------------------------------------------------------------
import copy  # noqa: E402

from ptlrpc_conformance.reference.structs import StructConfig  # noqa: E402

SBASE = StructConfig()


def _shifted_layouts():
    table = copy.deepcopy(SBASE.layouts)
    for f in table["structs"]["obdo"]["fields"]:
        if f["name"] == "o_size":
            f["offset"] += 8          # o_size read where o_mtime is
    return table


def _valid_bits_with_extra_bit():
    table = copy.deepcopy(SBASE.valid_bits)
    table["obdo"]["fields"]["o_size"].append(["OBD_MD_FLID", 1])   # o_size reported under FLID
    return table


STRUCT_FAMILIES = {
    "struct_field_shifted": (dict(layouts=_shifted_layouts()), "obdo.o_size read 8 bytes too far"),
    "struct_union_misread": (dict(union_choice="oi"), "ost_id always swabbed as {oi_id, oi_seq}"),
    "struct_clear_bit_valid": (dict(valid_bits=_valid_bits_with_extra_bit()), "o_size valid under FLID"),
    "struct_unknown_bits_dropped": (dict(drop_unknown_valid_bits=True), "unknown o_valid bits dropped"),
    "struct_encoder_sets_every_bit": (dict(auto_valid_all=True), "omitted o_valid becomes every known bit"),
}


def struct_family(name):
    changes, what = STRUCT_FAMILIES[name]
    return make_testee(name=f"broken: {what}", struct_config=SBASE.but(**changes))


for _name in STRUCT_FAMILIES:
    globals()[_name] = (lambda n: lambda: struct_family(n))(_name)


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


# ---- broken targets (docs/target-rules.md): one TargetConfig setting each ----------------------
from ptlrpc_conformance.reference import TargetConfig  # noqa: E402

BASE_TARGET = TargetConfig()


def _target(what: str, **changes):
    return lambda: make_testee(target_config=BASE_TARGET.but(**changes), name=f"broken: {what}")


TARGET_FAMILIES = {
    # name: (factory, what it gets wrong, requirement ids it violates)
    "target_transno_reused": (_target("a transno issued twice", transno_reuse=True),
                              "the transno counter is not incremented", ["TGT-TRANSNO-1"]),
    "target_transno_on_getattr": (_target("transno on GETATTR", extra_transno_opcodes=frozenset({"OST_GETATTR"})),
                                  "a successful OST_GETATTR gets a transno", ["TGT-TRANSNO-2"]),
    "target_transno_on_failure": (_target("transno on failed transactions", transno_on_failure=True),
                                  "a failed OST_SETATTR (-ENOENT, -EPERM) gets a transno", ["TGT-TRANSNO-2"]),
    "target_last_committed_backwards": (_target("last_committed goes back", last_committed_backwards=True),
                                        "every other reply reports an older last_committed", ["TGT-TRANSNO-3"]),
    "target_last_committed_ahead": (_target("last_committed ahead", last_committed_ahead=True),
                                    "last_committed is above the highest transno issued", ["TGT-TRANSNO-3"]),
    "target_handler_error_as_err": (_target("handler errors as ERR", handler_errors_as_err=True),
                                    "a handler's failure (-ENOENT, -EEXIST, -EPERM) is sent as ERR",
                                    ["TGT-ERR-2", "TGT-ERR-3"]),
    "target_early_rejection_as_reply": (_target("early rejections as REPLY", early_rejections_as_reply=True),
                                        "rows 5-15 (-ENOTCONN, -EPROTO, ...) are sent as REPLY", ["TGT-ERR-1"]),
    "target_replies_to_undecodable": (_target("replies to undecodable requests", reply_to_undecodable=True),
                                      "an undecodable request gets ERR instead of being dropped", ["TGT-DROP-1"]),
    "target_err_status_positive": (_target("positive ERR status", err_status_positive=True),
                                   "ERR replies carry a positive status", ["TGT-ERR-1", "TGT-ERR-3"]),
    "target_handle_in_replies": (_target("pb_handle in every reply", handle_in_replies=True),
                                 "non-connect replies carry the export cookie in pb_handle", ["TGT-CONN-1"]),
    "target_no_reconnect_flag": (_target("no RECONNECT flag", reconnect_flag=False),
                                 "a reconnect reply lacks MSG_CONNECT_RECONNECT", ["TGT-CONN-1"]),
    "target_no_ealready": (_target("no -EALREADY", check_ealready=False),
                           "a reconnect with the stored count or another client handle is accepted",
                           ["TGT-CONN-2"]),
    "target_unknown_handle_served": (_target("unknown handles served", check_handle=False),
                                     "a request naming no export is served instead of -ENOTCONN", ["TGT-CONN-2"]),
    "target_stale_conn_cnt_served": (_target("stale conn_cnt served", check_conn_cnt=False),
                                     "a request with a pb_conn_cnt below the export's is served",
                                     ["TGT-DROP-1", "TGT-CONN-2"]),
    "target_resend_executed_twice": (_target("no saved replies", save_replies=False),
                                     "a resent request is executed again (no reply reconstruction)",
                                     ["TGT-RESEND-2"]),     # a bug only where reconstruction is required
    "target_setattr_ignores_valid": (_target("SETATTR ignores o_valid", setattr_ignores_valid=True),
                                     "OST_SETATTR applies every attribute field whatever o_valid says", ["TGT-OBJ-1"]),
    "target_punch_without_size_blocks": (_target("PUNCH without FLSIZE|FLBLOCKS", punch_requires_size_blocks=False),
                                         "OST_PUNCH without both FLSIZE and FLBLOCKS is served", ["TGT-ERR-2"]),
    "target_replay_outside_recovery": (_target("replays outside recovery", replay_outside_recovery=True),
                                       "a replay outside recovery is executed (no -ENODEV, no eviction)",
                                       ["RCV-OUTSIDE-1", "TGT-ERR-1"]),
    "target_replay_new_transno": (_target("replays get new transnos", replay_new_transno=True),
                                  "a replay is answered with a new transno instead of its own", ["RCV-REPLAY-1"]),
    "target_replays_in_arrival_order": (_target("replays in arrival order", replay_in_transno_order=False),
                                        "replays run as they arrive, not in transno order", ["RCV-ORDER-1"]),
    "target_no_epoch_jump": (_target("no epoch jump", epoch_jump=False),
                             "transnos after recovery stay in the old epoch", ["RCV-EPOCH-1"]),
    "target_restart_keeps_uncommitted": (_target("uncommitted changes survive", restart_keeps_uncommitted=True),
                                         "uncommitted changes survive a restart", ["RCV-STATE-1"]),
    "target_restart_loses_committed": (_target("committed changes lost", restart_loses_committed=True),
                                       "a restart loses committed changes too", ["RCV-STATE-1"]),
}

for _name, (_factory, _what, _ids) in TARGET_FAMILIES.items():
    globals()[_name] = _factory
