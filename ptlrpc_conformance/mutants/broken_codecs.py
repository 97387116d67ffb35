"""Broken codecs for the mutant zoo (mutants/__init__.py): decode checks that replace the reference
codec's (CodecConfig.decode_checks), and subclasses of the reference `Codec`, `StructCodec` and
`ReferenceTestee` that override the one method where their bug lives.  The reference has no setting that makes
it wrong; each bug here is its own code."""
from __future__ import annotations

from ..reference import ReferenceTestee
from ..reference import codec as _codec
from ..reference.codec import Codec
from ..reference.structs import StructCodec
from ..spec import layouts


def header_unpadded(st) -> None:
    """(a bug) the header is 32 + 4 * lm_bufcount bytes, never rounded up to 8."""
    st.header_size = st.config.header_layout.field("lm_buflens").offset + 4 * st.bufcount
    if len(st.data) < st.header_size:
        st.reject("EINVAL", f"message is {len(st.data)} bytes, a header with {st.bufcount} buffers "
                            f"needs {st.header_size}")


def buflens_unrounded(st) -> None:
    """(a bug) each lm_buflens[] is checked against PTLRPC_MAX_BUFLEN as it is, not rounded up."""
    base = st.config.header_layout.field("lm_buflens").offset
    order = _codec.LITTLE if "lm_buflens" in st.config.unswabbed else st.order
    st.buflens = [st.u32(base + 4 * i, order) for i in range(st.bufcount)]
    for i, n in enumerate(st.buflens):
        if n > st.config.max_buflen:
            st.reject("EINVAL", f"lm_buflens[{i}] = {n} exceeds PTLRPC_MAX_BUFLEN {st.config.max_buflen}")


def total(st, *, rounded=True, covers="padded") -> None:
    """check_total, with buffers placed without rounding (`rounded` False), or with less than
    every padded buffer required in the message (`covers`: "unpadded" leaves the last pad out,
    "nothing" requires nothing)."""
    offset = st.header_size
    st.offsets = []
    for n in st.buflens:
        st.offsets.append(offset)
        offset += _codec.round_up(n, st.config.alignment) & 0xFFFFFFFF if rounded else n
    need = offset
    if st.buflens and covers == "unpadded":
        need = st.offsets[-1] + st.buflens[-1]
    if need > len(st.data) and covers != "nothing":
        st.reject("EINVAL", f"header and buffers need {need} bytes, message has {len(st.data)}")
    if offset > st.config.max_buflen:
        st.reject("EINVAL", f"message needs {offset} bytes, more than PTLRPC_MAX_BUFLEN {st.config.max_buflen}")


def named(check, name: str):
    check.__name__ = name
    return check


def then(check, after, name: str | None = None):
    """`check`, then `after(st)` on what it decoded."""
    def both(st):
        check(st)
        after(st)
    both.__name__ = name or check.__name__
    return both


def narrow(name: str, bits: int):
    """(a bug) body field `name` kept in a `bits`-bit variable (signed if the field is)."""
    def narrow(st):
        if name in st.body:
            value = st.body[name] & ((1 << bits) - 1)
            if name in st.config.signed and value >= 1 << (bits - 1):
                value -= 1 << bits
            st.body[name] = value
    return narrow


def jobid_rstripped(st) -> None:
    """(a bug) blanks stripped from the end of pb_jobid (Lustre keeps them)."""
    if "pb_jobid" in st.body:
        st.body["pb_jobid"] = st.body["pb_jobid"].rstrip()


def jobid_utf8(st) -> None:
    """(a bug) pb_jobid decoded as UTF-8: a byte >= 0x80 that is no UTF-8 crashes the decoder."""
    if "pb_jobid" in st.body:
        st.body["pb_jobid"] = st.body["pb_jobid"].encode("latin-1").decode("utf-8")


def jobid_swabbed(st) -> None:
    """(a bug) pb_jobid from a foreign-endian peer byte-swapped as four __u64 words."""
    if "pb_jobid" in st.body and st.order == _codec.BIG:
        f = st.config.body_layout.field("pb_jobid")
        raw = st.data[st.offsets[0] + f.offset:st.offsets[0] + f.end]
        raw = b"".join(raw[i:i + 8][::-1] for i in range(0, len(raw), 8))
        st.body["pb_jobid"] = raw.split(b"\0", 1)[0][:st.config.jobid_chars].decode("latin-1")


class MislaidCodec(Codec):
    """(bugs) an encoder that lays the message out otherwise than canonically: the canonical
    message re-laid with its header unpadded, its buffers unpadded, its pads of `pad_byte`,
    or its buflens rounded up."""
    pad_header, pad_buffers, pad_byte, padded_buflens = True, True, 0, False

    def encode(self, message: dict) -> bytes:
        data, cfg = super().encode(message), self.config
        align, base = cfg.alignment, cfg.header_layout.field("lm_buflens").offset
        count = int.from_bytes(data[cfg.header_layout.field("lm_bufcount").offset:][:4], "little")
        lens = [int.from_bytes(data[base + 4 * i:base + 4 * i + 4], "little") for i in range(count)]
        at, buffers = _codec.round_up(base + 4 * count, align), []
        for n in lens:
            buffers.append(data[at:at + n])
            at += _codec.round_up(n, align)
        pad = bytes([self.pad_byte])
        out = bytearray(data[:base])
        for b in buffers:
            out += (_codec.round_up(len(b), align) if self.padded_buflens else len(b)).to_bytes(4, "little")
        if self.pad_header:
            out += pad * (_codec.round_up(len(out), align) - len(out))
        for b in buffers:
            out += b + (pad * (_codec.round_up(len(b), align) - len(b)) if self.pad_buffers else b"")
        return bytes(out)


def mislaid(**bugs) -> type[Codec]:
    return type("MislaidCodec", (MislaidCodec,), bugs)


class CksumWithPad(Codec):
    """(a bug) buffer 0 checksummed with its pad bytes."""

    def _cksum_input(self, st, buffer0):
        return st.data[st.offsets[0]:st.offsets[0] + _codec.round_up(len(buffer0), self.config.alignment)]


# ---- broken structure codecs --------------------------------------------------------------------

def known_bits(codec: StructCodec, name: str) -> int:
    """Every bit the valid-bits table of structure `name` knows."""
    bits = 0
    for pairs in codec.config.valid_bits[name]["fields"].values():
        for _, b in pairs:
            bits |= b
    return bits


class ShortZeroFilled(StructCodec):
    """(a bug) a structure shorter than its size is decoded as if zero-filled."""

    def decode(self, type_name, data, byte_order="little"):
        size = self.entry(self.canonical(type_name))["size"]
        return super().decode(type_name, bytes(data) + bytes(max(0, size - len(data))), byte_order)


class UnionAlwaysOi(StructCodec):
    """(a bug) an ost_id is always swabbed as {oi_id, oi_seq}, whatever its sequence."""

    @staticmethod
    def _union_member(union_by, buf, base):
        return "oi"


class ValidBitsDropped(StructCodec):
    """(a bug) the o_valid/mbo_valid bits no flag defines are dropped, decoding and encoding."""

    def decode(self, type_name, data, byte_order="little"):
        out = super().decode(type_name, data, byte_order)
        self._mask(out["type"], out["fields"])
        if "valid" in out:
            out["valid"] = self.valid_view(out["type"], out["fields"])
        return out

    def _mask(self, name: str, fields: dict) -> None:
        if name in self.config.valid_bits:
            mask_field = next(f for f in fields if f.endswith("_valid"))
            if isinstance(fields.get(mask_field), int):
                fields[mask_field] &= layouts.defined_valid_bits()
        for f in self.entry(name)["fields"]:
            if f["type"].startswith("struct ") and isinstance(fields.get(f["name"]), dict):
                self._mask(f["type"][len("struct "):], fields[f["name"]])

    def _write(self, name, fields, buf, base, path):
        mask_field = next((f for f in fields if f.endswith("_valid")), None) if name in self.config.valid_bits else None
        if mask_field is not None and isinstance(fields[mask_field], int):
            fields = dict(fields, **{mask_field: fields[mask_field] & layouts.defined_valid_bits()})
        return super()._write(name, fields, buf, base, path)


class OmittedValid(StructCodec):
    """(bugs) an omitted o_valid/mbo_valid is written as `omitted(codec, name)`, not as the bits
    of the fields given."""
    omitted = staticmethod(lambda codec, name: 0)

    def _write(self, name, fields, buf, base, path):
        table = self.config.valid_bits.get(name)
        if table is not None and isinstance(fields, dict):
            mask_field = next(f["name"] for f in self.entry(name)["fields"] if f["name"].endswith("_valid"))
            if mask_field not in fields:
                fields = dict(fields, **{mask_field: self.omitted(self, name)})
        return super()._write(name, fields, buf, base, path)


class OmittedValidEveryBit(OmittedValid):
    omitted = staticmethod(known_bits)


# ---- a broken testee-protocol server ------------------------------------------------------------

class UnknownOpEinval(ReferenceTestee):
    """(a bug) an operation the testee does not support is answered EINVAL, not EOPNOTSUPP."""

    @staticmethod
    def unsupported(op) -> dict:
        return dict(ReferenceTestee.unsupported(op), error="EINVAL")
