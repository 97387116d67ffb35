"""The bundled reference codec for lustre_msg_v2 messages and their ptlrpc_body.

Standard library only.  Every limit, layout table and check is taken from a `CodecConfig`,
so a variant of the codec is built by passing a different configuration, never by patching
this module; the broken codecs of the mutant zoo (mutants.py) replace decode checks or
subclass `Codec`, the reference has no setting that makes it wrong.

Decoding follows the order in which Lustre's receive path checks a message
(docs/rules.md, HDR-1..9, then BODY-2, BODY-3, BODY-5/6); the first failing check decides the
errno class.  Encoding is canonical: little-endian, zero padding, no trailing bytes.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Callable

from .. import spec

LITTLE, BIG = "little", "big"
REQUEST, REPLY = "request", "reply"


class CodecError(Exception):
    """A rejection: `errno` is the class name (EINVAL, EFAULT, EPROTO), `detail` says why."""

    def __init__(self, errno: str, detail: str):
        super().__init__(f"{errno}: {detail}")
        self.errno = errno
        self.detail = detail


def round_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


# --------------------------------------------------------------------------------------
# decode state and checks
# --------------------------------------------------------------------------------------

@dataclass
class DecodeState:
    data: bytes
    direction: str
    config: "CodecConfig"
    order: str = LITTLE            # byte order of the sender
    bufcount: int = 0
    buflens: list[int] = field(default_factory=list)
    header_size: int = 0
    offsets: list[int] = field(default_factory=list)
    header: dict = field(default_factory=dict)
    body: dict = field(default_factory=dict)

    def u32(self, offset: int, order: str | None = None) -> int:
        return int.from_bytes(self.data[offset:offset + 4], order or self.order)

    def reject(self, errno: str, detail: str):
        raise CodecError(errno, detail)


def check_min_length(st: DecodeState) -> None:
    """HDR-1/HDR-2: the fixed 32-byte header must be there."""
    need = st.config.header_fixed
    if len(st.data) < need:
        st.reject("EINVAL", f"message is {len(st.data)} bytes, the fixed header needs {need}")


def detect_byte_order(st: DecodeState) -> None:
    """HDR-3: only the byte-swapped V2 magic means the sender had the other byte order."""
    magic_le = st.u32(st.config.header_layout.field("lm_magic").offset, LITTLE)
    st.order = BIG if magic_le == st.config.magic_swabbed else LITTLE


def check_bufcount(st: DecodeState) -> None:
    """HDR-6: 1 <= lm_bufcount <= PTLRPC_MAX_BUFCOUNT."""
    st.bufcount = st.u32(st.config.header_layout.field("lm_bufcount").offset)
    low, high = st.config.min_bufcount, st.config.max_bufcount
    if not low <= st.bufcount <= high:
        st.reject("EINVAL", f"lm_bufcount {st.bufcount} outside {low}..{high}")


def check_buflens_room(st: DecodeState) -> None:
    """HDR-7 / PAD-1: the message must hold lm_buflens[] and the header pad."""
    base = st.config.header_layout.field("lm_buflens").offset
    st.header_size = round_up(base + 4 * st.bufcount, st.config.alignment)
    if len(st.data) < st.header_size:
        st.reject("EINVAL", f"message is {len(st.data)} bytes, a header with {st.bufcount} buffers needs {st.header_size}")


def check_buflens(st: DecodeState) -> None:
    """HDR-8: each buflen rounded up to 8 must not exceed PTLRPC_MAX_BUFLEN.

    Lustre rounds in 32-bit arithmetic, so 0xFFFFFFF9..0xFFFFFFFF wrap to 0 and slip
    through; this codec rejects them (docs/divergences.md) unless configured otherwise.
    """
    base = st.config.header_layout.field("lm_buflens").offset
    align = st.config.alignment
    st.buflens = []
    order = LITTLE if "lm_buflens" in st.config.unswabbed else st.order
    for i in range(st.bufcount):
        n = st.u32(base + 4 * i, order)
        rounded = round_up(n, align)
        if rounded > 0xFFFFFFFF:
            if st.config.reject_wrapped_buflen:
                st.reject("EINVAL", f"lm_buflens[{i}] = {n:#x} wraps past 2^32 when rounded up to {align}")
            rounded &= 0xFFFFFFFF
        if rounded > st.config.max_buflen:
            st.reject("EINVAL", f"lm_buflens[{i}] = {n} exceeds PTLRPC_MAX_BUFLEN {st.config.max_buflen} when rounded")
        st.buflens.append(n)


def _rounded(st: DecodeState, n: int) -> int:
    return round_up(n, st.config.alignment) & 0xFFFFFFFF


def check_total(st: DecodeState) -> None:
    """HDR-9 / PAD-2: header + sum of rounded buffers fits the data and PTLRPC_MAX_BUFLEN."""
    offset = st.header_size
    st.offsets = []
    for n in st.buflens:
        st.offsets.append(offset)
        offset += _rounded(st, n)
    if offset > len(st.data):
        st.reject("EINVAL", f"header and buffers need {offset} bytes, message has {len(st.data)}")
    if offset > st.config.max_buflen:
        st.reject("EINVAL", f"message needs {offset} bytes, more than PTLRPC_MAX_BUFLEN {st.config.max_buflen}")


def unpack_header(st: DecodeState) -> None:
    """HDR-3: swab every header word except the ones Lustre leaves alone."""
    for f in st.config.header_layout.fields:
        if f.flexible:
            continue
        order = LITTLE if f.name in st.config.unswabbed else st.order
        st.header[f.name] = st.u32(f.offset, order)


def check_magic(st: DecodeState) -> None:
    """HDR-4/HDR-5: anything but LUSTRE_MSG_MAGIC_V2 (after swabbing) is refused."""
    if st.header["lm_magic"] != st.config.magic:
        st.reject("EINVAL", f"lm_magic {st.header['lm_magic']:#010x} is not LUSTRE_MSG_MAGIC_V2 {st.config.magic:#010x}")


def check_body_size(st: DecodeState) -> None:
    """BODY-2: buffer 0 must hold a ptlrpc_body_v2 (152 bytes)."""
    if not st.buflens:
        st.reject("EFAULT", "the message has no buffer 0 for the ptlrpc_body")
    if st.buflens[0] < st.config.min_body:
        st.reject("EFAULT", f"lm_buflens[0] = {st.buflens[0]}, a ptlrpc_body needs at least {st.config.min_body}")


def unpack_body(st: DecodeState) -> None:
    """BODY-8/BODY-9: the body, swabbed field by field; jobid only in a 184-byte buffer 0."""
    start, size = st.offsets[0], st.buflens[0]
    buf = st.data[start:start + size]
    for f in st.config.body_layout.fields:
        if f.end > size or (f.name == "pb_jobid" and size < st.config.jobid_body):
            continue
        if f.name == "pb_jobid":                 # a string of bytes, never swabbed
            st.body[f.name] = buf[f.offset:f.end].split(b"\0", 1)[0][: st.config.jobid_chars].decode("latin-1")
            continue
        order = LITTLE if f.name in st.config.unswabbed else st.order
        if f.count:
            st.body[f.name] = [int.from_bytes(buf[f.offset + i * f.elem_size: f.offset + (i + 1) * f.elem_size], order)
                               for i in range(f.count)]
        else:
            value = int.from_bytes(buf[f.offset:f.end], order)
            bits = 8 * f.size
            if f.name in st.config.signed and value >= 1 << (bits - 1):
                value -= 1 << bits
            st.body[f.name] = value


def check_version(st: DecodeState) -> None:
    """BODY-3: the low 16 bits of pb_version must be PTLRPC_MSG_VERSION."""
    version = st.body["pb_version"]
    if version & st.config.version_mask != st.config.msg_version:
        st.reject("EINVAL", f"pb_version {version:#010x}: low 16 bits are not PTLRPC_MSG_VERSION {st.config.msg_version}")


def check_type(st: DecodeState) -> None:
    """BODY-5/BODY-6: a request must be PTL_RPC_MSG_REQUEST; a reply REPLY or ERR."""
    allowed = st.config.request_types if st.direction == REQUEST else st.config.reply_types
    if st.body["pb_type"] not in allowed:
        st.reject("EPROTO", f"pb_type {st.body['pb_type']} is not allowed in a {st.direction} (allowed {sorted(allowed)})")


DEFAULT_DECODE_CHECKS: tuple[Callable[[DecodeState], None], ...] = (
    check_min_length, detect_byte_order, check_bufcount, check_buflens_room, check_buflens,
    check_total, unpack_header, check_magic, check_body_size, unpack_body, check_version, check_type,
)


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CodecConfig:
    min_bufcount: int = 1
    max_bufcount: int = spec.constant("PTLRPC_MAX_BUFCOUNT")
    max_buflen: int = spec.constant("PTLRPC_MAX_BUFLEN")
    header_fixed: int = spec.constant("LUSTRE_MSG_HEADER_FIXED")
    min_body: int = spec.constant("PTLRPC_BODY_V2_SIZE")
    jobid_body: int = spec.constant("PTLRPC_BODY_V3_SIZE")
    alignment: int = spec.constant("BUFFER_ALIGNMENT")
    magic: int = spec.constant("LUSTRE_MSG_MAGIC_V2")
    magic_swabbed: int | None = spec.constant("LUSTRE_MSG_MAGIC_V2_SWABBED")   # None: never swab
    msg_version: int = spec.constant("PTLRPC_MSG_VERSION")
    request_types: frozenset = frozenset({spec.constant("PTL_RPC_MSG_REQUEST")})
    reply_types: frozenset = frozenset({spec.constant("PTL_RPC_MSG_REPLY"), spec.constant("PTL_RPC_MSG_ERR")})
    header_layout: spec.Layout = spec.layout("lustre_msg_v2")
    body_layout: spec.Layout = spec.layout("ptlrpc_body_v3")
    # fields read in the receiver's byte order whatever the sender's (header and body field
    # names, and "lm_buflens" for the array)
    unswabbed: frozenset = frozenset(spec.facts()["unswabbed"]["lustre_msg_v2"]
                                     + spec.facts()["unswabbed"]["ptlrpc_body_v3"])
    signed: frozenset = frozenset(spec.facts()["signed"]["ptlrpc_body_v3"])
    version_mask: int = 0xFFFF           # the pb_version bits checked against msg_version
    jobid_chars: int = spec.constant("LUSTRE_JOBID_SIZE") - 1   # an unterminated pb_jobid reads this many
    reject_wrapped_buflen: bool = True   # False: as Lustre's code reads literally (docs/divergences.md)
    decode_checks: tuple = DEFAULT_DECODE_CHECKS
    cksum: Callable[[bytes], int] = staticmethod(lambda b: zlib.crc32(b) ^ 0xFFFFFFFF)

    def but(self, **changes) -> "CodecConfig":
        """A copy with some settings changed: the seam for variants (and, with other decode
        checks or other constants, for mutants)."""
        return replace(self, **changes)


# --------------------------------------------------------------------------------------
# the codec
# --------------------------------------------------------------------------------------

HEADER_FIELDS = ("lm_bufcount", "lm_secflvr", "lm_magic", "lm_repsize", "lm_cksum", "lm_flags", "lm_opc",
                 "lm_padding_3")


class Codec:
    def __init__(self, config: CodecConfig | None = None):
        self.config = config or CodecConfig()

    # decode -------------------------------------------------------------------------
    def decode(self, data: bytes, direction: str) -> dict:
        if direction not in (REQUEST, REPLY):
            raise CodecError("EINVAL", f"direction must be 'request' or 'reply', not {direction!r}")
        st = DecodeState(bytes(data), direction, self.config)
        for check in self.config.decode_checks:
            check(st)
        buffers = [st.data[o:o + n] for o, n in zip(st.offsets, st.buflens)]
        if not buffers:
            raise CodecError("EFAULT", "the message has no buffer 0")
        return {
            "byte_order": st.order,
            "header": {k: st.header[k] for k in HEADER_FIELDS if k in st.header},
            "buflens": list(st.buflens),
            "body": st.body,
            "buffers": [b.hex() for b in buffers],
            "computed_cksum": self.config.cksum(self._cksum_input(st, buffers[0])),
        }

    def _cksum_input(self, st: DecodeState, buffer0: bytes) -> bytes:
        """The bytes the checksum covers: buffer 0, without its pad."""
        return buffer0

    # encode -------------------------------------------------------------------------
    def encode(self, message: dict) -> bytes:
        cfg = self.config
        if not isinstance(message, dict):
            raise CodecError("EINVAL", "message must be an object")
        header_in = _obj(message.get("header"), "header")
        body_in = _obj(message.get("body"), "body")
        for name in header_in:
            if name not in HEADER_FIELDS:
                raise CodecError("EINVAL", f"header has no field {name!r}")
        body_names = cfg.body_layout.names()
        for name in body_in:
            if name not in body_names:
                raise CodecError("EINVAL", f"body has no field {name!r}")

        buffers_in = message.get("buffers")
        if buffers_in is None:
            buffers_in = [None]
        if not isinstance(buffers_in, list) or not buffers_in:
            raise CodecError("EINVAL", "buffers must be a non-empty list")
        buflens_in = message.get("buflens")
        if buflens_in is not None:
            if not isinstance(buflens_in, list) or len(buflens_in) != len(buffers_in):
                raise CodecError("EINVAL", f"buflens has {len(buflens_in) if isinstance(buflens_in, list) else '?'} "
                                           f"entries, there are {len(buffers_in)} buffers")
            for i, n in enumerate(buflens_in):
                _uint(n, 32, f"buflens[{i}]")

        buffers: list[bytes] = []
        for i, b in enumerate(buffers_in):
            if b is None:
                if i != 0:
                    raise CodecError("EINVAL", f"buffers[{i}] is null; only buffer 0 may be packed from body")
                size = buflens_in[0] if buflens_in is not None else cfg.jobid_body
                b = self.pack_body(body_in, size)
            else:
                b = _hex(b, f"buffers[{i}]")
            if buflens_in is not None and buflens_in[i] != len(b):
                raise CodecError("EINVAL", f"buflens[{i}] = {buflens_in[i]} but buffers[{i}] has {len(b)} bytes")
            buffers.append(b)

        if "lm_bufcount" in header_in and _uint(header_in["lm_bufcount"], 32, "lm_bufcount") != len(buffers):
            raise CodecError("EINVAL", f"lm_bufcount {header_in['lm_bufcount']} but {len(buffers)} buffers")

        out = bytearray()
        for f in cfg.header_layout.fields:
            if f.flexible:
                continue
            if f.name == "lm_bufcount":
                value = len(buffers)
            elif f.name == "lm_magic":
                value = _uint(header_in.get("lm_magic", cfg.magic), 32, "lm_magic")
            else:
                value = _uint(header_in.get(f.name, 0), 32, f.name)
            out += value.to_bytes(4, LITTLE)
        for b in buffers:
            out += len(b).to_bytes(4, LITTLE)
        out += bytes(round_up(len(out), cfg.alignment) - len(out))          # zero pads
        for b in buffers:
            out += b + bytes(round_up(len(b), cfg.alignment) - len(b))
        return bytes(out)

    def pack_body(self, body: dict, size: int) -> bytes:
        """A ptlrpc_body of `size` bytes, little-endian; fields beyond `size` are cut off."""
        cfg = self.config
        full = bytearray(max(size, cfg.body_layout.size))
        for f in cfg.body_layout.fields:
            if f.name not in body:
                continue
            value = body[f.name]
            if f.name == "pb_jobid":
                if not isinstance(value, str):
                    raise CodecError("EINVAL", "pb_jobid must be a string")
                try:
                    raw = value.encode("latin-1")
                except UnicodeEncodeError:
                    raise CodecError("EINVAL", "pb_jobid has a character outside ISO-8859-1") from None
                if len(raw) > f.size - 1:
                    raise CodecError("EINVAL", f"pb_jobid is {len(raw)} characters, at most {f.size - 1} fit")
                full[f.offset:f.offset + len(raw)] = raw
            elif f.count:
                if not isinstance(value, list) or len(value) != f.count:
                    raise CodecError("EINVAL", f"{f.name} must be a list of {f.count} integers")
                for i, v in enumerate(value):
                    full[f.offset + i * f.elem_size: f.offset + (i + 1) * f.elem_size] = \
                        _uint(v, 8 * f.elem_size, f"{f.name}[{i}]").to_bytes(f.elem_size, LITTLE)
            else:
                signed = f.name in cfg.signed
                v = _uint(value, 8 * f.size, f.name, signed=signed)
                full[f.offset:f.end] = (v & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, LITTLE)
        return bytes(full[:size])

    def checksum(self, buffer0: bytes) -> int:
        return self.config.cksum(buffer0)


def _obj(value, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CodecError("EINVAL", f"{what} must be an object")
    return value


def _uint(value, bits: int, what: str, signed: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError("EINVAL", f"{what} must be an integer, not {value!r}")
    low = -(1 << (bits - 1)) if signed else 0
    if not low <= value < (1 << bits):
        raise CodecError("EINVAL", f"{what} = {value} does not fit {bits} bits")
    return value


def _hex(value, what: str) -> bytes:
    if not isinstance(value, str):
        raise CodecError("EINVAL", f"{what} must be a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise CodecError("EINVAL", f"{what} is not valid hex") from None
