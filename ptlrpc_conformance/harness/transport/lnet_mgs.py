"""The minimal MGS `serve` plays beside the target it serves, so that a client can start from
the MGS as a mount does: connect, find the OST in the client config log, go to the OST.

Its facts are spec/mgs.yaml's (Lustre 2.17.57).  It answers, on the MGS request portal:

- MGS_CONNECT (the asked flags masked with MGS_CONNECT_SUPPORTED and MGS_CONNECT_SUPPORTED2, a
  new export handle),
  MGS_DISCONNECT and OBD_PING;
- the config llog reads of ptlrpc/llog_client.c: LLOG_ORIGIN_HANDLE_CREATE (by name, or by the
  logid it handed out), LLOG_ORIGIN_HANDLE_READ_HEADER and LLOG_ORIGIN_HANDLE_NEXT_BLOCK, of one
  log, FSNAME-client, whose records are those mgs_write_log_osc_to_lov writes for the one OST
  (its NID, its OSC, lov_add_obd);
- every other opcode ERR -EOPNOTSUPP (MGS_CONFIG_READ, LDLM_ENQUEUE of the config lock, ...).

It is the suite's small model, not an implementation under test: nothing judges its answers.
The FSNAME-client log names no MDT, so a kernel client cannot mount from it; a client that
reads its targets from the log (ktest's) finds the OST and nothing else.
"""
from __future__ import annotations

import itertools
import re
import time

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture.pcap import round8     # the capture reader's, which serve uses too
from ptlrpc_conformance.harness.transport.lnet_engine.wire import Nid

_MGS = spec.mgs()
MGS_REQUEST_PORTAL = _MGS["portals"]["MGS_REQUEST_PORTAL"]["value"]
MGC_REPLY_PORTAL = _MGS["portals"]["MGC_REPLY_PORTAL"]["value"]
_K = {name: row["value"] for name, row in _MGS["constants"].items()}
CHUNK = _K["LLOG_MIN_CHUNK_SIZE"]
_OPC = {spec.constant(name): name for name in _MGS["replies"] if name != "cite"}
_BODY, _HDR = spec.layout("ptlrpc_body_v3"), spec.layout("lustre_msg_v2")
_REPLY_STATUSES = {spec.errno_value(n) for n in spec.target()["reply_statuses"]}
_UUID = re.compile(r"^(?P<fsname>[A-Za-z0-9_]{1,8})-OST(?P<index>[0-9a-f]{4})_UUID$")


# -- the lustre_msg_v2 reads and writes serve and this MGS make on the bytes they carry (not a
# codec that judges: a message they cannot read is None; the suites never use them) --

MSG_MAGIC = spec.constant("LUSTRE_MSG_MAGIC_V2")



def buffers(data: bytes) -> tuple[list[bytes], str] | None:
    """The buffers of a lustre_msg_v2 and its byte order, or None when the bytes are not one
    (read as the lnet-tcp firewall reads a request: live_safety.parse)."""
    from ptlrpc_conformance.harness.transport.live_safety import parse
    msg = parse(data)
    return None if msg is None else ([data[at:at + n] for at, n in msg.spans], msg.order)


def pack_struct(name: str, **values) -> bytearray:
    """A little-endian structure of layouts.json, its named top-level fields set (an int, or
    bytes placed at the field's offset), the rest zero."""
    lay = spec.layout(name)
    out = bytearray(lay.size)
    for key, value in values.items():
        f = lay.field(key)
        if isinstance(value, (bytes, bytearray)):
            out[f.offset:f.offset + len(value)] = value
        else:
            out[f.offset:f.end] = (value & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, "little")
    return out


def message(bufs: list[bytes]) -> bytes:
    """A little-endian reply, lustre_msg_v2 around `bufs` (pack_generic.c: lustre_init_msg_v2).
    Its lm_flags stay 0: only a request's are set (niobuf.c: ptl_send_rpc)."""
    lens = _HDR.field("lm_buflens")
    out = pack_struct("lustre_msg_v2", lm_bufcount=len(bufs), lm_magic=MSG_MAGIC)[:lens.offset]
    out += b"".join(len(b).to_bytes(lens.elem_size, "little") for b in bufs)
    out += bytes(round8(len(out)) - len(out))
    for b in bufs:
        out += b + bytes(round8(len(b)) - len(b))
    return bytes(out)


_pack, _round8 = pack_struct, round8


def _zeroed(opc_name: str) -> list[bytes]:
    """The buffers after ptlrpc_body of `opc_name`'s reply (spec/mgs.yaml `replies`), zero: what
    an error reply of a handler that packed its reply first carries."""
    return [bytes(CHUNK if b == "eadata" else spec.layout(b).size) for b in _MGS["replies"][opc_name]]


def _read(name: str, data: bytes, key: str, order: str = "little") -> int:
    f = spec.layout(name).field(key)
    return int.from_bytes(data[f.offset:f.end], order)


def _cfg_record(index: int, command: int, bufs: list[bytes], nid: int = 0) -> bytes:
    """One llog record holding a lustre_cfg (obd_config.c: lustre_cfg_rec_new)."""
    cfg = _pack("lustre_cfg", lcfg_version=_K["LUSTRE_CFG_VERSION"], lcfg_command=command, lcfg_nid=nid,
                lcfg_bufcount=len(bufs))
    cfg += b"".join(len(b).to_bytes(4, "little") for b in bufs)
    cfg += bytes(_round8(len(cfg)) - len(cfg))
    for b in bufs:
        cfg += b + bytes(_round8(len(b)) - len(b))
    head, tail = spec.layout("llog_rec_hdr").size, spec.layout("llog_rec_tail").size
    length = head + len(cfg) + tail
    return (bytes(_pack("llog_rec_hdr", lrh_len=length, lrh_index=index, lrh_type=spec.constant("OBD_CFG_REC")))
            + bytes(cfg) + bytes(_pack("llog_rec_tail", lrt_len=length, lrt_index=index)))


def client_log(fsname: str, target: str, uuid: str, index: int, nid: Nid, now: int = 0) -> tuple[bytes, bytes]:
    """The FSNAME-client log as spec/mgs.yaml lays it out: (its llog_log_hdr, its records)."""
    fill = dict(fsname=fsname, target=target, uuid=uuid, index=str(index), nid=str(nid))
    records = []
    for i, row in enumerate(_MGS["client_log"]["records"], start=1):
        command = spec.constant(row["command"])
        if "marker" in row:
            m = row["marker"]
            flags = 0
            for name in m["flags"]:
                flags |= _K[name]
            marker = _pack("cfg_marker", cm_step=1, cm_flags=flags, cm_vers=_K["OCD_VERSION"], cm_createtime=now,
                           cm_tgtname=m["target"].format(**fill).encode(), cm_comment=m["comment"].format(**fill).encode())
            bufs = [b"", bytes(marker)]
        else:
            bufs = [s.format(**fill).encode() + b"\0" if s else b"" for s in row["bufs"]]
        records.append(_cfg_record(i, command, bufs, nid.nid4 if row.get("nid") else 0))
    body = b"".join(records)
    if len(body) > CHUNK:
        raise ValueError(f"spec/mgs.yaml: the client log's records take {len(body)} bytes, more than one chunk")
    lay = spec.layout("llog_log_hdr")
    bitmap = lay.field("llh_bitmap")
    bits = (1 << (len(records) + 1)) - 1            # bit 0: the header itself
    hdr = _pack("llog_log_hdr", llh_hdr=bytes(_pack("llog_rec_hdr", lrh_len=CHUNK, lrh_type=spec.constant("LLOG_HDR_MAGIC"))),
                llh_timestamp=now, llh_count=len(records) + 1, llh_bitmap_offset=bitmap.offset,
                llh_size=min(_read("llog_rec_hdr", r, "lrh_len") for r in records),
                llh_flags=spec.constant("LLOG_F_IS_PLAIN"), llh_tgtuuid=_MGS["client_log"]["header_uuid"].encode(),
                llh_bitmap=bits.to_bytes(_round8(len(records) + 1) // 8, "little"),
                llh_tail=bytes(_pack("llog_rec_tail", lrt_len=CHUNK, lrt_index=len(records))))
    return bytes(hdr), body


def ost_of(target_uuid: str) -> tuple[str, int]:
    """(the file system's name, the OST's index) of an OST's UUID, FSNAME-OSTxxxx_UUID;
    ValueError with the reason."""
    m = _UUID.match(target_uuid)
    if m is None:
        raise ValueError(f"{target_uuid!r} is not an OST's UUID (FSNAME-OSTxxxx_UUID)")
    return m["fsname"], int(m["index"], 16)


class Mgs:
    """The MGS of one file system with one OST (`target_uuid`, FSNAME-OSTxxxx_UUID) at `nid`.
    `handle(request)` answers one request's bytes with the reply's, or None (not a message)."""

    def __init__(self, nid: Nid, target_uuid: str):
        self.fsname, self.index = ost_of(target_uuid)
        self.target_uuid, self.nid = target_uuid, nid
        self.log_name = _MGS["client_log"]["name"].format(fsname=self.fsname)
        self.header, self.records = client_log(self.fsname, target_uuid[:-len("_UUID")], target_uuid, self.index,
                                               nid, int(time.time()))
        self.last_index = len(_MGS["client_log"]["records"])
        # the log's id: object 1 of the named-llog sequence (an ost_id in its oi_id, oi_seq form)
        self.logid = bytes(_pack("llog_logid", lgl_oi=(1).to_bytes(8, "little")
                                 + _K["FID_SEQ_LLOG_NAME"].to_bytes(8, "little")))
        self._cookies = itertools.count(0x5e7e_0000_0001)
        self._grant, self._grant2 = (sum(spec.constant(n) for n in _MGS["connect_supported"][k])
                                     for k in ("flags", "flags2"))

    def handle(self, request: bytes) -> bytes | None:
        msg = buffers(request)
        if msg is None or not msg[0] or len(msg[0][0]) < _BODY.size:
            return None                 # not a request Lustre could unpack: dropped
        bufs, order = msg
        body = bufs[0]
        opc = _read("ptlrpc_body_v3", body, "pb_opc", order)
        name = _OPC.get(opc)
        handle = body[:_BODY.field("pb_handle").size]
        if name is None:
            return self._answer(body, order, opc, handle, [], "unsupported")
        replies, status = getattr(self, "_" + name.lower())(bufs, order)
        if name == "MGS_CONNECT" and status is None:
            handle = next(self._cookies).to_bytes(8, "little")
        return self._answer(body, order, opc, handle, replies, status)

    def _answer(self, body, order, opc, handle, buffers, status: str | None) -> bytes:
        errno = spec.errno_value(_MGS["statuses"][status]["errno"]) if status else 0
        kind = "PTL_RPC_MSG_REPLY" if errno == 0 or errno in _REPLY_STATUSES else "PTL_RPC_MSG_ERR"
        reply = _pack("ptlrpc_body_v3", pb_handle=handle, pb_type=spec.constant(kind),
                      pb_version=_read("ptlrpc_body_v3", body, "pb_version", order), pb_opc=opc, pb_status=-errno,
                      pb_conn_cnt=_read("ptlrpc_body_v3", body, "pb_conn_cnt", order))
        return message([bytes(reply)] + (buffers if status != "unsupported" else []))

    # -- the handlers: (the buffers after ptlrpc_body, the status's name or None) --------

    def _mgs_connect(self, bufs, order):
        ocd = bufs[4] if len(bufs) > 4 and len(bufs[4]) >= spec.layout("obd_connect_data").size else None
        flags = _read("obd_connect_data", ocd, "ocd_connect_flags", order) & self._grant if ocd else 0
        flags2 = (_read("obd_connect_data", ocd, "ocd_connect_flags2", order) & self._grant2
                  if flags & spec.constant("OBD_CONNECT_FLAGS2") else 0)
        return [bytes(_pack("obd_connect_data", ocd_connect_flags=flags, ocd_connect_flags2=flags2,
                            ocd_version=_K["OCD_VERSION"]))], None

    def _mgs_disconnect(self, bufs, order):
        return [], None

    def _obd_ping(self, bufs, order):
        return [], None

    def _found(self, bufs, order, by_name: bool) -> bool:
        """Whether the request's llogd_body (and, when it names no logid, its name) is this log."""
        if len(bufs) < 2 or len(bufs[1]) < spec.layout("llogd_body").size:
            return False
        logid = bufs[1][:len(self.logid)]
        if int.from_bytes(logid[:8], order):          # ostid_id > 0: the logid decides
            return logid == self.logid
        return by_name and len(bufs) > 2 and bufs[2].split(b"\0", 1)[0] == self.log_name.encode()

    def _llog_origin_handle_create(self, bufs, order):
        if not self._found(bufs, order, by_name=True):
            return _zeroed("LLOG_ORIGIN_HANDLE_CREATE"), "no_such_log"
        return [bytes(_pack("llogd_body", lgd_logid=self.logid))], None

    def _llog_origin_handle_read_header(self, bufs, order):
        if not self._found(bufs, order, by_name=False):
            return _zeroed("LLOG_ORIGIN_HANDLE_READ_HEADER"), "no_such_log"
        return [self.header], None

    def _llog_origin_handle_next_block(self, bufs, order):
        empty = _zeroed("LLOG_ORIGIN_HANDLE_NEXT_BLOCK")
        if not self._found(bufs, order, by_name=False):
            return empty, "no_such_log"
        asked = bufs[1]
        if _read("llogd_body", asked, "lgd_index", order) > self.last_index:
            return empty, "past_the_end"
        # the request's llogd_body, in this MGS's order, with where the block ends
        # (llog_server.c: llog_origin_handle_next_block copies it and llog_next_block moves on)
        fields = {f.name: _read("llogd_body", asked, f.name, order) for f in spec.layout("llogd_body").fields[1:]}
        fields.update(lgd_saved_index=self.last_index, lgd_cur_offset=CHUNK + len(self.records))
        reply = _pack("llogd_body", lgd_logid=self.logid, **fields)
        return [bytes(reply), self.records + bytes(CHUNK - len(self.records))], None
