"""The mutant zoo: realistic single bugs in the reference implementation, each violating one
requirement, to prove that the suite catches them (`ptlrpc-conformance mutants`,
docs/mutants.md).

Every mutant is built outside the reference, which has no setting that makes it wrong: with
other values of the reference's own settings (`CodecConfig.but(...)`: other constants, tables
or decode checks; `StructConfig.but(...)`: other tables), or with its bug as code of its own -
a decode check or a subclass of `Codec`, `StructCodec` or `ReferenceTestee` (mutants/broken_codecs.py),
a subclass of the reference `Target` (mutants/broken_targets.py) - passed to `make_testee`; never by
patching the reference.  A mutant is loaded like any IUT:

    ptlrpc-conformance certify --iut python:ptlrpc_conformance.mutants:MUTANT-ID --area AREA

`area` names the case-id prefixes (framing, structs, protocol, target, recovery) whose cases
are run against the mutant; `profile` the profile its requirement belongs to, when that is
not the default one.
"""
from __future__ import annotations

import copy
import dataclasses
import zlib
from dataclasses import dataclass
from typing import Callable

from .. import spec
from ..reference import Codec, CodecConfig, make_testee
from ..reference import codec as _codec
from ..reference.structs import StructCodec, StructConfig
from . import broken_codecs as mc
from . import broken_targets as mt

C = spec.constant


@dataclass(frozen=True)
class Mutant:
    id: str                      # a Python identifier: the factory name after python:...mutants:
    description: str             # the bug, in one line
    requirement: str             # the requirement id it violates (spec/requirements.yaml)
    area: str | tuple            # case-id prefix(es) of the cases run against it
    factory: Callable[[], object]
    profile: str | None = None   # the profile to certify under (None: the default one)

    @property
    def areas(self) -> tuple[str, ...]:
        return (self.area,) if isinstance(self.area, str) else tuple(self.area)

    @property
    def iut(self) -> str:
        """The --iut spec that loads this mutant."""
        return f"python:{__name__}:{self.id}"


# ---- building blocks: the reference's seams -------------------------------------------------

def _codec_mutant(codec_class=Codec, **changes) -> Callable[[], object]:
    """A codec mutant: the reference codec with other settings (`changes`: other constants or
    decode checks), or a broken subclass of it (`codec_class`)."""
    return lambda: make_testee(CodecConfig().but(**changes), codec_class=codec_class)


def _decode_only_mutant(codec_class=Codec, **changes) -> Callable[[], object]:
    """A codec mutant that declares `decode` only, as dissectors and many decoders do: no
    encoder, so no round trip can catch it."""
    return lambda: make_testee(CodecConfig().but(**changes), capabilities=("decode",), codec_class=codec_class)


def _struct_mutant(changes: Callable[[StructConfig], dict], struct_class=StructCodec) -> Callable[[], object]:
    """A structure mutant: other tables (`changes` of StructConfig), or a broken subclass of the
    reference's StructCodec (`struct_class`)."""
    def build():
        base = StructConfig()
        return make_testee(struct_config=base.but(**changes(base)), struct_class=struct_class)
    return build


def _target_mutant(bug, **settings) -> Callable[[], object]:
    """A target mutant: the reference target's broken subclass `bug` (mutants/broken_targets.py), set
    up with TargetConfig `settings`."""
    return lambda: mt.testee(bug, **settings)


def _checks(*, without=(), before=None, wrap=None) -> tuple:
    """The reference's decode checks (CodecConfig.decode_checks) with some left out
    (`without`), one moved (`before`: (check, the check it now runs before)), or some replaced
    (`wrap`: {check: its replacement, or a tuple of checks run in its place})."""
    checks = [c for c in _codec.DEFAULT_DECODE_CHECKS if c not in without]
    if before:
        moved, anchor = before
        checks.remove(moved)
        checks.insert(checks.index(anchor), moved)
    for original, replacement in (wrap or {}).items():
        i = checks.index(original)
        checks[i:i + 1] = list(replacement) if isinstance(replacement, tuple) else [replacement]
    return tuple(checks)


def _errno_is(check, errno: str):
    """`check`, but its rejection is named `errno`."""
    def renamed(st):
        try:
            check(st)
        except _codec.CodecError as e:
            raise _codec.CodecError(errno, e.detail) from None
    renamed.__name__ = check.__name__
    return renamed


def _reject_nonzero_secflvr(st) -> None:
    """(a bug) only the null security flavour is accepted: a decoder's business it is not."""
    if st.header["lm_secflvr"] != 0:
        st.reject("EINVAL", f"lm_secflvr {st.header['lm_secflvr']:#x} is not SPTLRPC_FLVR_NULL")


def _buflens_unbounded(st) -> None:
    """(a bug) each lm_buflens[] is checked for a rounding that wraps, never against
    PTLRPC_MAX_BUFLEN."""
    base = st.config.header_layout.field("lm_buflens").offset
    st.buflens = [st.u32(base + 4 * i) for i in range(st.bufcount)]
    for i, n in enumerate(st.buflens):
        if _codec.round_up(n, st.config.alignment) > 0xFFFFFFFF:
            st.reject("EINVAL", f"lm_buflens[{i}] = {n:#x} wraps past 2^32 when rounded up")


def _total_in_32_bits(st) -> None:
    """(a bug) header and rounded buffers summed in 32-bit arithmetic, as C code with a __u32
    total would: a huge buffer length wraps the sum, which then fits the message."""
    offset = st.header_size
    st.offsets = []
    for n in st.buflens:
        st.offsets.append(offset)
        offset = (offset + _codec.round_up(n, st.config.alignment)) & 0xFFFFFFFF
    if offset > len(st.data):
        st.reject("EINVAL", f"header and buffers need {offset} bytes, message has {len(st.data)}")
    if offset > st.config.max_buflen:
        st.reject("EINVAL", f"message needs {offset} bytes, more than PTLRPC_MAX_BUFLEN")


def _reject_nonzero_pad(st) -> None:
    """(a bug) pad bytes must be zero."""
    base = st.config.header_layout.field("lm_buflens").offset + 4 * st.bufcount
    pads = [st.data[base:st.header_size]]
    for offset, n in zip(st.offsets, st.buflens):
        end = offset + n
        pads.append(st.data[end:_codec.round_up(end, st.config.alignment)])
    if any(any(p) for p in pads):
        st.reject("EINVAL", "a pad byte is not zero")


def _reject_trailing_bytes(st) -> None:
    """(a bug) the message must end right after the last buffer's pad."""
    end = st.offsets[-1] + _codec.round_up(st.buflens[-1], st.config.alignment) if st.offsets else st.header_size
    if len(st.data) != end:
        st.reject("EINVAL", f"{len(st.data) - end} bytes after the last buffer")


def _body_fields_swapped(a: str, b: str) -> spec.Layout:
    """ptlrpc_body with the offsets of fields a and b exchanged (same size)."""
    layout = CodecConfig().body_layout
    fa, fb = layout.field(a), layout.field(b)
    assert fa.size == fb.size
    fields = tuple(dataclasses.replace(f, offset=fb.offset) if f.name == a else
                   dataclasses.replace(f, offset=fa.offset) if f.name == b else f for f in layout.fields)
    return dataclasses.replace(layout, fields=tuple(sorted(fields, key=lambda f: f.offset)))


def _layout_field_moved(struct: str, name: str, by: int):
    def changes(base: StructConfig) -> dict:
        table = copy.deepcopy(base.layouts)
        for f in table["structs"][struct]["fields"]:
            if f["name"] == name:
                f["offset"] += by
        return {"layouts": table}
    return changes


def _swab_rule(struct: str, edit: Callable[[dict], None]):
    def changes(base: StructConfig) -> dict:
        table = copy.deepcopy(base.swab)
        edit(table[struct])
        return {"swab": table}
    return changes


def _valid_bits(struct: str, edit: Callable[[dict], None]):
    def changes(base: StructConfig) -> dict:
        table = copy.deepcopy(base.valid_bits)
        edit(table[struct]["fields"])
        return {"valid_bits": table}
    return changes


def _no_aliases(base: StructConfig) -> dict:
    table = copy.deepcopy(base.layouts)
    table["aliases"] = {}
    return {"layouts": table}


def _reply_formats_as_request(base: StructConfig) -> dict:
    formats = copy.deepcopy(base.message_formats)
    for fmt in formats.values():
        fmt["reply"] = dict(fmt["request"])
    return {"message_formats": formats}


def _crc_without_final_xor(data: bytes) -> int:
    return zlib.crc32(data)


def _crc_of_v2_body(data: bytes) -> int:
    return zlib.crc32(data[:C("PTLRPC_BODY_V2_SIZE")]) ^ 0xFFFFFFFF


_UNSWABBED = CodecConfig().unswabbed
_REQUEST, _REPLY, _ERR = C("PTL_RPC_MSG_REQUEST"), C("PTL_RPC_MSG_REPLY"), C("PTL_RPC_MSG_ERR")
_MAX_BUFLEN = C("PTLRPC_MAX_BUFLEN")


def _unswabbed(*, add=(), remove=()) -> frozenset:
    return (_UNSWABBED | set(add)) - set(remove)


def _m(id, description, requirement, area, build, profile=None) -> Mutant:
    """A mutant whose testee `build()` makes, named after it in its hello."""
    def factory():
        testee = build()
        testee.name = f"mutant {id}"
        return testee
    return Mutant(id, description, requirement, area, factory, profile)


F, S, P, T = "framing", "structs", "protocol", "target"
R = ("target", "recovery")       # recovery cases (restart capability)
cc = _codec_mutant

# ---- the zoo -----------------------------------------------------------------------------------

MUTANTS: list[Mutant] = [
    # magic and byte order detection
    _m("magic_v1_constant", "compares lm_magic with LUSTRE_MSG_MAGIC_V1 instead of V2",
       "HDR-MAGIC-1", F, cc(magic=C("LUSTRE_MSG_MAGIC_V1"))),
    _m("swabbed_magic_unknown", "does not recognise the byte-swapped magic: foreign-endian peers are refused",
       "HDR-MAGIC-2", F, cc(magic_swabbed=None)),
    _m("magic_unchecked", "never checks lm_magic: any magic is accepted",
       "HDR-MAGIC-3", F, cc(decode_checks=_checks(without=[_codec.check_magic]))),
    # lengths and counts
    _m("short_header_eproto", "rejects a message shorter than the fixed header with EPROTO, not EINVAL",
       "HDR-LENGTH-1", F, cc(decode_checks=_checks(
           wrap={_codec.check_min_length: _errno_is(_codec.check_min_length, "EPROTO")}))),
    _m("bufcount_zero_accepted", "lm_bufcount 0 passes the count check (>= 0 instead of >= 1)",
       "HDR-BUFCOUNT-1", F, cc(min_bufcount=0)),
    _m("bufcount_33_accepted", "lm_bufcount checked with <= 33: one buffer too many accepted",
       "HDR-BUFCOUNT-1", F, cc(max_bufcount=33)),
    _m("bufcount_max_31", "the limit of seed 003: at most 31 buffers (32 refused)",
       "HDR-BUFCOUNT-1", F, cc(max_bufcount=31)),
    _m("bufcount_max_8", "the limit of seed 000: at most 8 buffers",
       "HDR-BUFCOUNT-1", F, cc(max_bufcount=8)),
    _m("buflens_room_efault", "a message too short for lm_buflens[] is rejected with EFAULT, not EINVAL",
       "HDR-BUFLENS-1", F, cc(decode_checks=_checks(
           wrap={_codec.check_buflens_room: _errno_is(_codec.check_buflens_room, "EFAULT")}))),
    _m("buflen_max_off_by_8", "PTLRPC_MAX_BUFLEN taken one alignment step too big (1024008): a message of "
       "1024008 bytes passes (no single buffer can exceed the limit and still fit)",
       "HDR-TOTAL-1", F, cc(max_buflen=_MAX_BUFLEN + 8)),
    _m("buflen_unbounded_total_wraps", "a buffer length is checked for wrapping, not against PTLRPC_MAX_BUFLEN, "
       "and the total is summed in 32 bits: 0xFFFFFFF8 wraps the sum and passes",
       "HDR-BUFLEN-1", F, cc(decode_checks=_checks(
           wrap={_codec.check_buflens: _buflens_unbounded, _codec.check_total: _total_in_32_bits}))),
    _m("buflen_wrap_accepted", "a buflen of 0xFFFFFFF9..0xFFFFFFFF wraps to 0 when rounded and is accepted",
       "HDR-BUFLEN-2", F, cc(reject_wrapped_buflen=False)),
    _m("total_ignores_last_pad", "the total-length check does not require the last buffer's pad",
       "HDR-TOTAL-1", F, cc(decode_checks=_checks(wrap={_codec.check_total: mc.named(
           lambda st: mc.total(st, covers="unpadded"), "check_total")}))),
    _m("total_unchecked", "never checks that the buffers fit in the message (reads past its end)",
       "HDR-TOTAL-1", F, cc(decode_checks=_checks(wrap={_codec.check_total: mc.named(
           lambda st: mc.total(st, covers="nothing"), "check_total")}))),
    _m("order_body_size_first", "checks buffer 0's size (EFAULT) before the buffers fit the message",
       "HDR-ORDER-1", F, cc(decode_checks=_checks(
           before=(_codec.check_body_size, _codec.check_total)))),
    _m("order_type_before_version", "checks pb_type before pb_version",
       "HDR-ORDER-1", F, cc(decode_checks=_checks(
           before=(_codec.check_type, _codec.check_version)))),
    _m("jobid_utf8_crash", "decodes pb_jobid as UTF-8: a jobid byte >= 0x80 crashes the decoder",
       "DEC-ROBUST-1", F, cc(decode_checks=_checks(wrap={_codec.unpack_body: mc.then(_codec.unpack_body, mc.jobid_utf8)}))),
    # header byte order, field by field
    _m("swabs_padding_3", "byte-swaps lm_padding_3, which Lustre leaves alone",
       "HDR-SWAB-1", F, cc(unswabbed=_unswabbed(remove=["lm_padding_3"]))),
    _m("no_swab_lm_flags", "does not byte-swap lm_flags from a foreign-endian peer",
       "HDR-SWAB-1", F, cc(unswabbed=_unswabbed(add=["lm_flags"]))),
    _m("no_swab_lm_opc", "does not byte-swap lm_opc", "HDR-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["lm_opc"]))),
    _m("no_swab_lm_repsize", "does not byte-swap lm_repsize", "HDR-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["lm_repsize"]))),
    _m("no_swab_lm_cksum", "does not byte-swap lm_cksum", "HDR-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["lm_cksum"]))),
    _m("no_swab_lm_secflvr", "does not byte-swap lm_secflvr", "HDR-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["lm_secflvr"]))),
    _m("no_swab_buflens", "swaps the header words but not the lm_buflens[] array", "HDR-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["lm_buflens"]))),
    _m("rejects_secflvr", "rejects a message whose lm_secflvr is not the null flavour (a service's check)",
       "HDR-FIELDS-1", F, cc(decode_checks=_checks(
           wrap={_codec.unpack_header: (_codec.unpack_header, _reject_nonzero_secflvr)}))),
    # padding
    _m("no_header_pad", "header size 32 + 4*bufcount, never rounded up to 8 (decode and encode)",
       "PAD-HEADER-1", F, cc(mc.mislaid(pad_header=False), decode_checks=_checks(
           wrap={_codec.check_buflens_room: mc.named(mc.header_unpadded, "check_buflens_room")}))),
    _m("buflens_unrounded", "places buffers without rounding their lengths up to 8",
       "PAD-BUFFER-1", F, cc(decode_checks=_checks(wrap={
           _codec.check_buflens: mc.named(mc.buflens_unrounded, "check_buflens"),
           _codec.check_total: mc.named(lambda st: mc.total(st, rounded=False), "check_total")}))),
    _m("rejects_nonzero_pad", "rejects a message whose pad bytes are not zero",
       "PAD-CONTENT-1", F, cc(decode_checks=_checks(
           wrap={_codec.check_total: (_codec.check_total, _reject_nonzero_pad)}))),
    _m("rejects_trailing_bytes", "rejects bytes after the last buffer (requires an exact length)",
       "PAD-TRAILING-1", F, cc(decode_checks=_checks(
           wrap={_codec.check_total: (_codec.check_total, _reject_trailing_bytes)}))),
    _m("encoder_pad_ff", "the encoder fills pads with 0xFF", "ENC-CANON-1", F, cc(mc.mislaid(pad_byte=0xFF))),
    _m("encoder_no_buffer_pad", "the encoder does not pad buffers to 8", "ENC-LENGTH-1", F,
       cc(mc.mislaid(pad_buffers=False))),
    _m("encoder_padded_buflens", "the encoder writes buflens rounded up to 8", "ENC-LENGTH-1", F,
       cc(mc.mislaid(padded_buflens=True))),
    # the body
    _m("body_151_accepted", "buffer 0 of 151 bytes passes as a ptlrpc_body (< instead of <=)",
       "BODY-SIZE-1", F, cc(min_body=151)),
    _m("body_needs_v3", "requires a 184-byte ptlrpc_body_v3: 152..183-byte bodies refused",
       "BODY-SIZE-1", F, cc(min_body=C("PTLRPC_BODY_V3_SIZE"))),
    _m("body_transno_committed_swapped", "pb_transno and pb_last_committed read at each other's offset",
       "BODY-FIELDS-1", F, cc(body_layout=_body_fields_swapped("pb_transno", "pb_last_committed"))),
    _m("jobid_32_chars", "an unterminated pb_jobid reads as all 32 bytes", "BODY-JOBID-1", F,
       cc(jobid_chars=32)),
    _m("version_unchecked", "pb_version is not checked", "BODY-VERSION-1", F,
       cc(decode_checks=_checks(without=[_codec.check_version]))),
    _m("version_service_bits_checked", "all 32 bits of pb_version compared with 3: service bits refused",
       "BODY-VERSION-1", F, cc(version_mask=0xFFFFFFFF)),
    _m("reply_accepts_request_type", "a reply may carry PTL_RPC_MSG_REQUEST", "BODY-TYPE-1", F,
       cc(reply_types=frozenset({_REQUEST, _REPLY, _ERR}))),
    _m("reply_refuses_err", "a reply must be PTL_RPC_MSG_REPLY: ERR replies refused", "BODY-TYPE-1", F,
       cc(reply_types=frozenset({_REPLY}))),
    _m("request_any_type", "requests are not checked for PTL_RPC_MSG_REQUEST (any message type passes)",
       "BODY-TYPE-2", F, cc(request_types=frozenset({_REQUEST, _REPLY, _ERR}))),
    _m("swabs_pb_handle", "byte-swaps pb_handle, an opaque cookie", "BODY-SWAB-1", F,
       cc(unswabbed=_unswabbed(remove=["pb_handle"]))),
    _m("swabs_pb_padding64", "byte-swaps pb_padding64_0", "BODY-SWAB-1", F,
       cc(unswabbed=_unswabbed(remove=["pb_padding64_0"]))),
    _m("swabs_pb_jobid", "byte-swaps pb_jobid as four __u64 words", "BODY-SWAB-1", F,
       cc(decode_checks=_checks(wrap={_codec.unpack_body: mc.then(_codec.unpack_body, mc.jobid_swabbed)}))),
    _m("no_swab_pb_transno", "does not byte-swap pb_transno", "BODY-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["pb_transno"]))),
    _m("no_swab_pb_conn_cnt", "does not byte-swap pb_conn_cnt", "BODY-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["pb_conn_cnt"]))),
    _m("no_swab_pre_versions", "does not byte-swap pb_pre_versions[]", "BODY-SWAB-1", F,
       cc(unswabbed=_unswabbed(add=["pb_pre_versions"]))),
    _m("status_unsigned", "pb_status reported unsigned (4294967294, not -2)", "BODY-STATUS-1", F,
       cc(signed=frozenset())),
    _m("cksum_final_inversion", "the checksum is inverted at the end (plain crc32)", "CKSUM-1", F,
       cc(cksum=_crc_without_final_xor)),
    _m("cksum_v2_body_only", "the checksum covers only the first 152 bytes of buffer 0", "CKSUM-1", F,
       cc(cksum=_crc_of_v2_body)),
    # full-width values, in decoders that declare no encoder (issue 24)
    _m("transno_32_bits", "keeps pb_transno in a 32-bit variable: its high word is lost (decode only)",
       "BODY-FIELDS-1", F, _decode_only_mutant(decode_checks=_checks(
           wrap={_codec.unpack_body: mc.then(_codec.unpack_body, mc.narrow("pb_transno", 32))}))),
    _m("status_16_bits", "keeps pb_status in a signed 16-bit variable (decode only)", "BODY-STATUS-1", F,
       _decode_only_mutant(decode_checks=_checks(
           wrap={_codec.unpack_body: mc.then(_codec.unpack_body, mc.narrow("pb_status", 16))}))),
    _m("version_low_byte_checked", "checks only the low byte of pb_version: 0x0103 passes (decode only)",
       "BODY-VERSION-1", F, _decode_only_mutant(version_mask=0xFF)),
    _m("jobid_blanks_stripped", "strips blanks from the end of pb_jobid (decode only)", "BODY-JOBID-1", F,
       _decode_only_mutant(decode_checks=_checks(
           wrap={_codec.unpack_body: mc.then(_codec.unpack_body, mc.jobid_rstripped)}))),
    _m("cksum_with_pad", "checksums buffer 0 with its pad bytes (decode only)", "CKSUM-1", F,
       _decode_only_mutant(mc.CksumWithPad)),
    # the testee protocol
    _m("unknown_op_einval", "an unknown operation is answered EINVAL instead of EOPNOTSUPP", "PROTO-OPS-1", P,
       mc.UnknownOpEinval),
    # structures
    _m("struct_field_shifted", "obdo.o_size read 8 bytes too far (where o_mtime is)", "STRUCT-LAYOUT-1", S,
       _struct_mutant(_layout_field_moved("obdo", "o_size", 8))),
    _m("struct_swabs_handle_cookie", "byte-swaps a lustre_handle's cookie like any __u64 (it is opaque)",
       "STRUCT-SWAB-1", S, _struct_mutant(_swab_rule("lustre_handle", lambda r: r["opaque"].remove("cookie")))),
    _m("struct_no_swab_o_size", "does not byte-swap obdo.o_size", "STRUCT-SWAB-1", S,
       _struct_mutant(_swab_rule("obdo", lambda r: r["opaque"].append("o_size")))),
    _m("struct_union_always_oi", "ost_id always swabbed as {oi_id, oi_seq}", "STRUCT-UNION-1", S,
       _struct_mutant(lambda base: {}, mc.UnionAlwaysOi)),
    _m("struct_ocd_always_swabbed", "obd_connect_data's optional fields swabbed whatever the connect flags",
       "STRUCT-OCD-1", S, _struct_mutant(_swab_rule("obd_connect_data", lambda r: r.pop("when")))),
    _m("struct_short_zero_filled", "a structure shorter than its size is decoded as if zero-filled",
       "STRUCT-TRUNC-1", S, _struct_mutant(lambda base: {}, mc.ShortZeroFilled)),
    _m("struct_no_aliases", "seed-document structure names are not known", "STRUCT-ALIAS-1", S,
       _struct_mutant(_no_aliases)),
    _m("struct_reply_format_of_request", "a reply's buffers are decoded with the request's format",
       "STRUCT-MSG-1", S, _struct_mutant(_reply_formats_as_request)),
    _m("valid_size_under_flid", "obdo.o_size counted meaningful under OBD_MD_FLID", "VALID-OBDO-1", S,
       _struct_mutant(_valid_bits("obdo", lambda t: t["o_size"].append(["OBD_MD_FLID", C("OBD_MD_FLID")])))),
    _m("valid_mdt_lazy_size_forgotten", "mdt_body.mbo_size not meaningful under OBD_MD_FLLAZYSIZE",
       "VALID-MDT-1", S, _struct_mutant(_valid_bits("mdt_body", lambda t: t["mbo_size"].pop()))),
    _m("valid_omitted_is_zero", "the encoder writes an omitted o_valid as 0", "VALID-ENC-1", S,
       _struct_mutant(lambda base: {}, mc.OmittedValid)),
    _m("valid_omitted_is_every_bit", "the encoder writes an omitted o_valid as every known bit", "VALID-ENC-1", S,
       _struct_mutant(lambda base: {}, mc.OmittedValidEveryBit)),
    _m("valid_unknown_bits_dropped", "o_valid/mbo_valid bits no flag defines are dropped", "VALID-UNKNOWN-1", S,
       _struct_mutant(lambda base: {}, mc.ValidBitsDropped)),
    # the target: drops, ERR vs REPLY, statuses
    _m("target_replies_to_undecodable", "an undecodable request gets ERR instead of being dropped",
       "TGT-DROP-1", T, _target_mutant(mt.RepliesToUndecodable)),
    _m("target_early_rejection_as_reply", "early rejections (-ENOTCONN, -EPROTO, ...) sent as REPLY",
       "TGT-ERR-1", T, _target_mutant(mt.EarlyRejectionsAsReply)),
    _m("target_handler_error_as_err", "a handler's failure (-ENOENT, -EPERM) sent as ERR",
       "TGT-ERR-2", T, _target_mutant(mt.HandlerErrorsAsErr)),
    _m("target_punch_without_size_blocks", "OST_PUNCH without both FLSIZE and FLBLOCKS is served",
       "TGT-ERR-2", T, _target_mutant(mt.PunchWithoutSizeBlocks)),
    _m("target_err_status_positive", "ERR replies carry a positive status", "TGT-ERR-3", T,
       _target_mutant(mt.ErrStatusPositive)),
    _m("target_honours_ungranted_rdonly", "a client that asked for OBD_CONNECT_RDONLY gets -EROFS on mutable "
       "requests though the connect never granted it", "TGT-ERR-2", T,
       _target_mutant(mt.HonoursUngrantedRdonly)),
    _m("target_rdonly_unenforced", "grants OBD_CONNECT_RDONLY but serves mutable requests on that export",
       "TGT-ERR-2", T, _target_mutant(mt.RdonlyUnenforced, grant_rdonly=True)),
    _m("target_timeout_drop_first", "drops a pb_timeout 0 request before ptlrpc_check_req: a replay outside "
       "recovery is dropped instead of ERR -ENODEV and eviction", "RCV-OUTSIDE-1", T,
       _target_mutant(mt.TimeoutDropFirst)),
    # transnos and commits
    _m("target_transno_reused", "the transno counter is not incremented: a transno issued twice",
       "TGT-TRANSNO-1", T, _target_mutant(mt.TransnoReused)),
    _m("target_transno_on_getattr", "a successful OST_GETATTR gets a transno", "TGT-TRANSNO-2", T,
       _target_mutant(mt.TransnoOnGetattr)),
    _m("target_transno_on_failure", "a failed transaction (-ENOENT, -EPERM) still gets a transno",
       "TGT-TRANSNO-2", T, _target_mutant(mt.TransnoOnFailure)),
    _m("target_last_committed_backwards", "every other reply reports an older last_committed",
       "TGT-TRANSNO-3", T, _target_mutant(mt.LastCommittedBackwards)),
    _m("target_last_committed_ahead", "last_committed is above the highest transno issued",
       "TGT-TRANSNO-3", T, _target_mutant(mt.LastCommittedAhead)),
    # resends
    _m("target_resend_runs_again_reconstruct", "a resent request is run again (no reply reconstruction), "
       "under the profile that requires reconstruction", "TGT-RESEND-2", T,
       _target_mutant(mt.NoSavedReplies),
       profile="lustre-2.17.57-reconstruct"),
    _m("target_resend_new_transno", "a resend is answered with its saved reply under a new transno "
       "(half reconstructed, half run again)", "TGT-RESEND-1", T,
       _target_mutant(mt.ResendNewTransno)),
    _m("target_err_opc_zero", "ERR replies carry pb_opc 0 instead of the request's opcode", "TGT-REPLY-1", T,
       _target_mutant(mt.ErrOpcZero)),
    # connections
    _m("target_handle_in_replies", "non-connect replies carry the export cookie in pb_handle", "TGT-CONN-1", T,
       _target_mutant(mt.HandleInReplies)),
    _m("target_no_reconnect_flag", "a reconnect reply lacks MSG_CONNECT_RECONNECT", "TGT-CONN-1", T,
       _target_mutant(mt.NoReconnectFlag)),
    _m("target_no_ealready", "a reconnect with the stored pb_conn_cnt or another client handle is accepted",
       "TGT-CONN-2", T, _target_mutant(mt.NoEalready)),
    _m("target_connect_data_any_size", "a connect whose connect data is longer than 8 structures is taken",
       "TGT-CONN-3", T, _target_mutant(mt.ConnectDataAnySize)),
    _m("target_uuid_any_length", "a connect's target or client UUID is taken whatever its length",
       "TGT-CONN-4", T, _target_mutant(mt.UuidAnyLength)),
    _m("target_unknown_handle_served", "a request naming no export is served instead of -ENOTCONN",
       "TGT-CONN-2", T, _target_mutant(mt.UnknownHandleServed)),
    _m("target_stale_conn_cnt_served", "a request with a pb_conn_cnt below the export's is served",
       "TGT-CONN-2", T, _target_mutant(mt.StaleConnCntServed)),
    # objects
    _m("target_setattr_ignores_valid", "OST_SETATTR applies every attribute whatever o_valid says",
       "TGT-OBJ-1", T, _target_mutant(mt.SetattrIgnoresValid)),
    _m("target_create_eexist", "OST_CREATE creates only the id it names (no precreate up to it) and answers "
       "-EEXIST when that id exists", "TGT-OBJ-1", T, _target_mutant(mt.CreateEexist)),
    _m("target_create_applies_attrs", "a new object takes the times, mode and owner the create request carries",
       "TGT-OBJ-1", T, _target_mutant(mt.CreateAppliesAttrs)),
    _m("target_zeroed_objects", "new objects get permission bits 0 instead of S_ISUID|S_ISGID|S_ISVTX|0666",
       "TGT-OBJ-1", T, _target_mutant(mt.ZeroedObjects)),
    _m("target_uid_keeps_suid", "setting an object's uid does not clear its S_ISUID bit",
       "TGT-OBJ-1", T, _target_mutant(mt.UidKeepsSuid)),
    _m("target_punch_sets_ids", "OST_PUNCH applies uid/gid/projid unconditionally, as OST_SETATTR does",
       "TGT-OBJ-1", T, _target_mutant(mt.PunchSetsIds)),
    # recovery
    _m("target_replay_outside_recovery", "a replay outside recovery is executed (no -ENODEV, no eviction)",
       "RCV-OUTSIDE-1", T, _target_mutant(mt.ReplayOutsideRecovery)),
    _m("target_replay_new_transno", "a replay is answered with a new transno instead of its own",
       "RCV-REPLAY-1", R, _target_mutant(mt.ReplayNewTransno)),
    _m("target_replays_in_arrival_order", "replays run as they arrive, not in transno order",
       "RCV-ORDER-1", R, _target_mutant(mt.ReplaysInArrivalOrder)),
    _m("target_no_epoch_jump", "transnos after recovery stay in the old epoch", "RCV-EPOCH-1", R,
       _target_mutant(mt.NoEpochJump)),
    _m("target_restart_keeps_uncommitted", "uncommitted changes survive a restart", "RCV-STATE-1", R,
       _target_mutant(mt.RestartKeepsUncommitted)),
    _m("target_restart_loses_committed", "a restart loses committed changes too", "RCV-STATE-1", R,
       _target_mutant(mt.RestartLosesCommitted)),
    _m("target_no_recovering_flag", "reconnects during recovery do not say MSG_CONNECT_RECOVERING", "RCV-CONN-1", R,
       _target_mutant(mt.NoRecoveringFlag)),
    _m("target_new_client_during_recovery", "a new client is let in during recovery instead of -EBUSY",
       "RCV-CONN-1", R, _target_mutant(mt.NewClientDuringRecovery)),
    _m("target_no_recovery_filter", "GETATTR and STATFS are served during recovery instead of -EAGAIN",
       "RCV-FILTER-1", R, _target_mutant(mt.NoRecoveryFilter)),
    _m("target_no_vbr_check", "replays run whatever their pre-versions say (no -EOVERFLOW)", "RCV-VBR-1", R,
       _target_mutant(mt.NoVbrCheck)),
    _m("target_runs_queued_duplicate_replay", "a replay of a transno that a still-queued replay holds is queued "
       "and run too instead of being dropped", "RCV-CLAIMED-1", R, _target_mutant(mt.RunsQueuedDuplicateReplay)),
    _m("target_claimed_always_dropped", "a replay of a transno another client already replayed is dropped "
       "instead of run", "RCV-CLAIMED-1", R, _target_mutant(mt.ClaimedAlwaysDropped)),
    _m("target_version_on_every_change", "every change sets the object's VBR version, not only size changes "
       "(replays with the right pre-version get -EOVERFLOW)", "RCV-VBR-1", R,
       _target_mutant(mt.VersionOnEveryChange)),
]

BY_ID: dict[str, Mutant] = {m.id: m for m in MUTANTS}
assert len(BY_ID) == len(MUTANTS), "mutant ids must be unique"


def __getattr__(name: str):
    """`--iut python:ptlrpc_conformance.mutants:ID` loads mutant ID's factory."""
    try:
        return BY_ID[name].factory
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} (no such mutant)") from None
