#!/usr/bin/env python3
"""A testee (docs/testee-protocol.md, protocol v1) for ktest's user-space Lustre client.

ktest's `tools/lustre_tcp_client.py` (https://github.com/tim-day-387/ktest, GPL-2.0) is
not part of this repository: this shim loads it from the path the user gives

    python3 examples/ktest-client/ktest_testee.py --ktest /path/to/lustre_tcp_client.py
    KTEST_LUSTRE_CLIENT=/path/to/lustre_tcp_client.py python3 examples/ktest-client/ktest_testee.py

and answers the harness through ktest's own code:

  decode          replies only (ktest has no code that receives a request): the bytes are
                  handed to `LustreClient.rpc()` as the reply its LNet layer received, so
                  `lustre_msg_unpack()`, `PTLRPC_BODY.unpack()` and the reply-type check run
                  exactly as for a real server's reply
  encode          `lustre_msg_pack()` with the body packed by `PTLRPC_BODY.pack()`
  decode_struct,  ktest's `WireStruct` classes (obdo, ost_body, obd_connect_data,
  encode_struct   obd_statfs, mdt_body, ptlrpc_body) and its `LU_FID` struct

Everything the shim itself decides is marked `SHIM DECISION n` below and listed in the
example's README; the certification lists those decisions apart from ktest's results.
The shim never re-checks or repairs what ktest does: a refusal is ktest raising its
`ProtocolError`, an acceptance is ktest returning.  Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import struct
import sys

KNOWN_SHA256 = {  # the file this shim was written against
    "1c2b41bfb89c322e027976f88822bb22d942b5d133b2eb8ae39776620f158dd8": "d61568a",
}
ENV = "KTEST_LUSTRE_CLIENT"
HEADER_NAMES = ("lm_bufcount", "lm_secflvr", "lm_magic", "lm_repsize", "lm_cksum", "lm_flags", "lm_opc",
                "lm_padding_3")
PB_HANDLES = {"pb_handle", "o_handle", "mb_open_handle"}          # lustre_handle members ktest keeps as a u64
# ktest name -> Lustre 2.17.57 name; mb_xattr_absent is a later Lustre's name (LU-17238) for
# mdt_body bytes 200-207, which v2_17_57 calls mbo_padding_9
RENAMED = {"os_failure_domain": "os_spare3", "mb_xattr_absent": "mbo_padding_9"}
JOBID_OFFSET, BODY_V3 = 152, 184
STRUCT_OF_REPLY = {  # reply opcode -> (buffer, structure) ktest's own code reads from that reply
    1: (1, "ost_body"),            # LustreClient.object_size(): OBDO.unpack(rbufs[1])
    13: (1, "obd_statfs"),         # LustreClient.statfs(): OBD_STATFS.unpack(rbufs[1])
    41: (1, "obd_statfs"),
    8: (1, "obd_connect_data"),    # LustreClient.connect(): OBD_CONNECT_DATA.unpack(rbufs[1])
    38: (1, "obd_connect_data"),
    250: (1, "obd_connect_data"),
    33: (1, "mdt_body"),           # dir_stripes(), getattr_fid(): MDT_BODY.unpack(rbufs[1])
    34: (1, "mdt_body"),
    40: (1, "mdt_body"),
}
ALIASES = {"ptlrpc_body": "ptlrpc_body_v3", "lustre_fid": "lu_fid"}


class ShimError(Exception):
    """A request the shim cannot hand to ktest (bad hex, a missing member)."""


def load_ktest(path: str):
    """Import ktest's file as a module of its own; (module, sha256)."""
    try:
        data = open(path, "rb").read()
    except OSError as e:
        raise SystemExit(f"ktest_testee: cannot read {path}: {e.strerror or e}") from None
    spec = importlib.util.spec_from_file_location("ktest_lustre_tcp_client", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, hashlib.sha256(data).hexdigest()


class _ReceivedReply:
    """Stands in for ktest's SockLND inside `LustreClient.rpc()`: the request ktest sends is
    dropped, and the reply it waits for is the message under test."""

    def __init__(self, reply: bytes):
        self.reply = reply

    def put(self, portal, match_bits, payload, hdr_data=0):
        pass

    def wait_put(self, match_bits, timeout=None):
        return self.reply

    def take_bulk(self, match_bits):
        return b""


class KtestTestee:
    def __init__(self, ktest, sha256: str):
        self.k = ktest
        self.sha256 = sha256
        self.wire = {"ost_body": ktest.OBDO, "obdo": ktest.OBDO, "obd_connect_data": ktest.OBD_CONNECT_DATA,
                     "obd_statfs": ktest.OBD_STATFS, "mdt_body": ktest.MDT_BODY,
                     "ptlrpc_body_v3": ktest.PTLRPC_BODY}

    # ---- hello --------------------------------------------------------------------------
    def hello(self) -> dict:
        known = KNOWN_SHA256.get(self.sha256)
        return {"name": "ktest lustre_tcp_client.py",
                "version": known or f"unknown ({self.sha256[:12]})",
                "capabilities": ["decode", "encode", "structs"], "protocol": 1,
                # SHIM DECISION 1: ktest has no code that receives a request
                "decode_directions": ["reply"],
                # SHIM DECISION 2: ktest refuses everything with one exception, ProtocolError
                "errno_agnostic": True,
                "source": "github.com/tim-day-387/ktest tools/lustre_tcp_client.py"
                          + (f" at commit {known}" if known else ""),
                "sha256": self.sha256,
                "shim": "examples/ktest-client/ktest_testee.py"}

    # ---- decode -------------------------------------------------------------------------
    def decode(self, data: bytes, direction: str) -> dict:
        k = self.k
        if direction != "reply":
            raise ShimError(f"direction {direction!r}: ktest decodes replies only")
        client = k.LustreClient(_ReceivedReply(data), cluuid="ptlrpc-conformance")
        target = k.Target(name="ptlrpc-conformance", portal=k.OST_REQUEST_PORTAL, connect_opc=k.OST_CONNECT,
                          disconnect_opc=k.OST_DISCONNECT, ocd_flags=0)
        try:
            rpb, rbufs = client.rpc(target, k.LUSTRE_OBD_VERSION, k.OBD_PING)
        except k.RpcError:
            # SHIM DECISION 3: rpc() raises RpcError for a reply of type PTL_RPC_MSG_ERR or with a
            # negative pb_status, after unpacking it: the message was received, and the values are
            # those of the same two calls rpc() made
            rbufs = k.lustre_msg_unpack(data)
            rpb = k.PTLRPC_BODY.unpack(rbufs[0])
        return self.message(data, rpb, rbufs)

    def message(self, data: bytes, rpb: dict, rbufs) -> dict:
        k = self.k
        # SHIM DECISION 4: ktest's receive path reads only lm_bufcount and lm_magic; the
        # header is reported through ktest's own header layout, LUSTRE_MSG_HDR
        header = dict(zip(HEADER_NAMES, k.LUSTRE_MSG_HDR.unpack_from(data)))
        buffers = [bytes(b) for b in rbufs]
        body = {}
        for name, value in rpb.items():
            if name.startswith("pb_pre_versions"):
                body.setdefault("pb_pre_versions", []).append(value)
            elif name == "pb_jobid":
                # SHIM DECISION 5: ktest zero-fills a short buffer 0; the jobid is reported only when
                # buffer 0 holds its 32 bytes, as a string up to the first NUL (31 at most)
                if len(buffers[0]) >= BODY_V3:
                    body[name] = _cstring(value, 31)
            else:
                body[name] = value
        out = {"byte_order": "little", "header": header, "buflens": [len(b) for b in buffers], "body": body,
               "buffers": [b.hex() for b in buffers]}
        # SHIM DECISION 6: structs are the reply buffers ktest's own code reads for the opcode
        where = STRUCT_OF_REPLY.get(rpb.get("pb_opc"))
        if where is not None and where[0] < len(buffers):
            index, name = where
            out["structs"] = {str(index): {"type": name, "fields": self.struct_fields(name, buffers[index])}}
        return out

    # ---- encode -------------------------------------------------------------------------
    def encode(self, message) -> bytes:
        k = self.k
        if not isinstance(message, dict):
            raise ShimError("message is not an object")
        header = message.get("header") or {}
        buffers = message.get("buffers")
        buflens = message.get("buflens")
        if not isinstance(header, dict) or (buffers is not None and not isinstance(buffers, list)):
            raise ShimError("header must be an object and buffers a list")
        bufs = [_hex(b, f"buffers[{i}]") if b is not None else None for i, b in enumerate(buffers or [None])]
        if bufs[0] is None:
            fields = {}
            for name, value in (message.get("body") or {}).items():
                if name == "pb_pre_versions" and isinstance(value, list):
                    fields.update({f"pb_pre_versions{i}": v for i, v in enumerate(value)})
                elif name == "pb_jobid" and isinstance(value, str):
                    fields[name] = value.encode("latin-1")
                else:
                    fields[name] = value
            body = k.PTLRPC_BODY.pack(**fields)
            # SHIM DECISION 7: ktest always packs a 184-byte body; the protocol's buflens[0] cuts or
            # zero-extends it
            if isinstance(buflens, list) and buflens and isinstance(buflens[0], int):
                body = body[:buflens[0]].ljust(buflens[0], b"\0")
            bufs[0] = body
        # SHIM DECISION 8: lustre_msg_pack() takes the buffers, lm_flags and lm_repsize (0 when left
        # out, as the protocol says, not ktest's defaults); every other header word is what it
        # writes, and it computes lm_bufcount and lm_buflens itself
        return k.lustre_msg_pack(bufs, flags=header.get("lm_flags", 0), repsize=header.get("lm_repsize", 0))

    # ---- structures ---------------------------------------------------------------------
    def struct_type(self, name) -> str:
        name = ALIASES.get(name, name)
        if name != "lu_fid" and name not in self.wire:
            raise KeyError(name)
        return name

    def struct_fields(self, name: str, data: bytes) -> dict:
        """ktest's unpack of the structure, under Lustre's current field names."""
        if name == "lu_fid":
            return self._fid(data)
        if name == "ost_body":
            return {"oa": self.struct_fields("obdo", data)}
        fields = {}
        for member, value in self.wire[name].unpack(data).items():
            self._put(fields, member, value)
        return fields

    def _fid(self, raw: bytes) -> dict:
        seq, oid, ver = self.k.LU_FID.unpack(bytes(raw[:16]).ljust(16, b"\0"))
        return {"f_seq": seq, "f_oid": oid, "f_ver": ver}

    def _put(self, fields: dict, member: str, value) -> None:
        # SHIM DECISION 9: names, and the members ktest keeps as raw bytes (see the README)
        name = RENAMED.get(member, "mbo_" + member[3:] if member.startswith("mb_") else member)
        if member.startswith("pb_pre_versions"):
            fields.setdefault("pb_pre_versions", []).append(value)
        elif member in PB_HANDLES:
            fields[name] = {"cookie": value}
        elif member in ("mb_fid1", "mb_fid2"):
            fields[name] = self._fid(value)
        elif member == "o_oi":
            oi_id, oi_seq = struct.unpack("<QQ", value)        # as ktest's ostidstr() reads an ost_id
            fields[name] = {"oi": {"oi_id": oi_id, "oi_seq": oi_seq}, "oi_fid": self._fid(value)}
        elif member == "pb_jobid":
            fields[name] = _cstring(value, 32)
        elif isinstance(value, bytes):                          # os_fsid, o_layout: no ktest reader
            fields[name] = list(value)
        else:
            fields[name] = value

    def encode_struct(self, name: str, given) -> bytes:
        if not isinstance(given, dict):
            raise ShimError("fields is not an object")
        if name == "lu_fid":
            return self.k.LU_FID.pack(*(given.get(f, 0) for f in ("f_seq", "f_oid", "f_ver")))
        if name == "ost_body":
            oa = given.get("oa", {})
            if set(given) - {"oa"}:
                raise TypeError(f"unknown members: {', '.join(sorted(set(given) - {'oa'}))}")
            return self.encode_struct("obdo", oa)
        wire = self.wire[name]
        by_name = {RENAMED.get(m, "mbo_" + m[3:] if m.startswith("mb_") else m): m for m in wire.names}
        kw = {}
        for fname, value in given.items():
            if fname == "pb_pre_versions" and isinstance(value, list):
                kw.update({f"pb_pre_versions{i}": v for i, v in enumerate(value)})
                continue
            member = by_name.get(fname, fname)              # an unknown name goes to ktest as it is
            if member in PB_HANDLES and isinstance(value, dict):
                value = value.get("cookie", 0)
            elif member in ("mb_fid1", "mb_fid2") and isinstance(value, dict):
                value = self.k.LU_FID.pack(value.get("f_seq", 0), value.get("f_oid", 0), value.get("f_ver", 0))
            elif member == "o_oi" and isinstance(value, dict):
                if "oi" in value:                               # as ktest's llog_open_by_id() packs one
                    value = struct.pack("<QQ", value["oi"].get("oi_id", 0), value["oi"].get("oi_seq", 0))
                else:
                    f = value.get("oi_fid", {})
                    value = self.k.LU_FID.pack(f.get("f_seq", 0), f.get("f_oid", 0), f.get("f_ver", 0))
            elif isinstance(value, str):
                value = value.encode("latin-1")
            elif isinstance(value, list):
                value = bytes(value)
            kw[member] = value
        return wire.pack(**kw)

    # ---- dispatch -----------------------------------------------------------------------
    def handle(self, request: dict) -> dict:
        op = request.get("op")
        k = self.k
        # An exception ktest raises while receiving (anything but its ProtocolError) is not a
        # refusal: it goes up and ends the process, which the harness records as a crash.
        try:
            if op == "hello":
                return {"ok": True, "result": self.hello()}
            if op == "decode":
                try:
                    return {"ok": True, "result": self.decode(_hex(request.get("data"), "data"),
                                                              request.get("direction"))}
                except k.ProtocolError as e:
                    return {"ok": False, "error": "EPROTO", "detail": f"ProtocolError: {e}"}
            if op in ("decode_struct", "encode_struct"):
                try:
                    name = self.struct_type(request.get("type"))
                except (KeyError, TypeError):
                    return {"ok": False, "error": "EOPNOTSUPP",
                            "detail": f"ktest has no WireStruct for {request.get('type')!r}"}
                if op == "decode_struct":
                    # SHIM DECISION 10: ktest reads every structure little-endian; byte_order is not used
                    data = _hex(request.get("data"), "data")
                    return {"ok": True, "result": {"type": name, "fields": self.struct_fields(name, data)}}
            if op in ("encode", "encode_struct"):
                try:
                    data = (self.encode(request.get("message")) if op == "encode"
                            else self.encode_struct(name, request.get("fields")))
                except (TypeError, struct.error, OverflowError, UnicodeEncodeError, ValueError) as e:
                    # ktest's packing refused the input (WireStruct.pack's unknown members, struct.error)
                    return {"ok": False, "error": "EINVAL", "detail": f"{type(e).__name__}: {e}"}
                return {"ok": True, "result": {"data": data.hex()}}
        except ShimError as e:
            return {"ok": False, "error": "EINVAL", "detail": str(e)}
        return {"ok": False, "error": "EOPNOTSUPP", "detail": f"unknown op {op!r}"}


def _hex(value, where: str) -> bytes:
    if not isinstance(value, str):
        raise ShimError(f"{where} is not a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise ShimError(f"{where} is not hex") from None


def _cstring(raw: bytes, limit: int) -> str:
    return bytes(raw).split(b"\0", 1)[0][:limit].decode("latin-1")


def serve(testee: KtestTestee, stdin=None, stdout=None) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("id"), int) \
                or isinstance(request.get("id"), bool):
            response = {"id": None, "ok": False, "error": "EINVAL", "detail": "not a request"}
        else:
            response = dict(testee.handle(request), id=request["id"])
        stdout.write(json.dumps(response) + "\n")
        stdout.flush()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ktest", default=os.environ.get(ENV),
                    help=f"path to ktest's tools/lustre_tcp_client.py (default: ${ENV})")
    args = ap.parse_args(argv)
    if not args.ktest:
        ap.error(f"give the path of ktest's lustre_tcp_client.py with --ktest or ${ENV}")
    module, sha = load_ktest(args.ktest)
    return serve(KtestTestee(module, sha))


if __name__ == "__main__":
    sys.exit(main())
