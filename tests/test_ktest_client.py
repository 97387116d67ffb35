"""The ktest shim (examples/ktest-client): the testee of ktest's user-space Lustre client,
tested against a stand-in module written here with the API the shim uses (CI has no ktest
file); the real certification only where the file is given ($KTEST_LUSTRE_CLIENT)."""
import hashlib
import importlib.util
import json
import os
import struct
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

SHIM = ROOT / "examples" / "ktest-client" / "ktest_testee.py"

# The names and calling conventions of ktest's API that the shim uses, implemented here from
# scratch with simple, distinctive behaviour: the tests check that the shim passes ktest's
# decisions and values through, not that the stand-in is a good Lustre client.
STANDIN = '''
import struct

LUSTRE_MSG_MAGIC_V2 = 0x0BD00BD3
LUSTRE_MSG_HDR = struct.Struct("<8I")
PTL_RPC_MSG_REQUEST, PTL_RPC_MSG_ERR, PTL_RPC_MSG_REPLY = 4711, 4712, 4713
LUSTRE_OBD_VERSION, OBD_PING = 0x00010000, 400
OST_REQUEST_PORTAL, OST_CONNECT, OST_DISCONNECT = 28, 8, 9
LU_FID = struct.Struct("<QII")


class WireStruct:
    def __init__(self, fmt, names):
        self.struct = struct.Struct(fmt)
        self.names = names
        self.size = self.struct.size

    def pack(self, **kw):
        unknown = set(kw) - set(self.names)
        if unknown:
            raise TypeError(f"unknown members: {', '.join(sorted(unknown))}")
        return self.struct.pack(*[kw.get(n, b"" if c == "s" else 0) for n, c in zip(self.names, self.codes())])

    def codes(self):
        import re
        out = []
        for count, code in re.findall(r"(\\d*)([a-zA-Z])", self.struct.format):
            out += [code] if code == "s" else [code] * int(count or 1)
        return out

    def unpack(self, data):
        return dict(zip(self.names, self.struct.unpack(bytes(data[:self.size]).ljust(self.size, b"\\0"))))


PTLRPC_BODY = WireStruct("<QIIIiQHHIQQIIIIIIQ4QQQQII32s", (
    "pb_handle", "pb_type", "pb_version", "pb_opc", "pb_status", "pb_last_xid", "pb_tag", "pb_padding0",
    "pb_projid", "pb_last_committed", "pb_transno", "pb_flags", "pb_op_flags", "pb_conn_cnt", "pb_timeout",
    "pb_service_time", "pb_limit", "pb_slv", "pb_pre_versions0", "pb_pre_versions1", "pb_pre_versions2",
    "pb_pre_versions3", "pb_mbits", "pb_padding64_0", "pb_padding64_1", "pb_uid", "pb_gid", "pb_jobid"))
OBDO = WireStruct("<Q16sQ28s", ("o_valid", "o_oi", "o_handle", "o_layout"))
OBD_CONNECT_DATA = WireStruct("<QI", ("ocd_connect_flags", "ocd_version"))
OBD_STATFS = WireStruct("<Q40sI", ("os_type", "os_fsid", "os_failure_domain"))
MDT_BODY = WireStruct("<16sQQ", ("mb_fid1", "mb_open_handle", "mb_valid"))


class ProtocolError(ValueError):
    pass


class RpcError(Exception):
    def __init__(self, opc, status):
        super().__init__(f"opcode {opc} failed: {status}")
        self.status = status


class MsgBufs(list):
    def __getitem__(self, i):
        try:
            return super().__getitem__(i)
        except IndexError:
            raise ProtocolError(f"no buffer {i}") from None


def lustre_msg_pack(bufs, flags=3, repsize=8192):
    hdr = LUSTRE_MSG_HDR.pack(len(bufs), 0, LUSTRE_MSG_MAGIC_V2, repsize, 0, flags, 0, 0)
    hdr += struct.pack(f"<{len(bufs)}I", *[len(b) for b in bufs])
    pad = lambda b: b + bytes(-len(b) % 8)
    return pad(hdr) + b"".join(pad(b) for b in bufs)


def lustre_msg_unpack(data):
    if len(data) < 32:
        raise ProtocolError("stand-in: too short")
    count, _, magic = LUSTRE_MSG_HDR.unpack_from(data)[:3]
    if magic == 0xBAD:
        raise KeyError("stand-in: an exception that is not ProtocolError")
    if magic != LUSTRE_MSG_MAGIC_V2:
        raise ProtocolError(f"stand-in: magic {magic:#x}")
    lens = struct.unpack_from(f"<{count}I", data, 32)
    off = (32 + 4 * count + 7) & ~7
    bufs = MsgBufs()
    for n in lens:
        bufs.append(data[off:off + n])
        off += (n + 7) & ~7
    return bufs


class Target:
    def __init__(self, name, portal, connect_opc, disconnect_opc, ocd_flags):
        self.name, self.portal, self.handle, self.conn_cnt = name, portal, 0, 1


class LustreClient:
    def __init__(self, lnd, cluuid=None):
        self.lnd = lnd

    def rpc(self, target, version, opc, bufs=(), op_flags=0, portal=None):
        self.lnd.put(target.portal, 7, lustre_msg_pack([PTLRPC_BODY.pack(pb_type=PTL_RPC_MSG_REQUEST, pb_opc=opc)]))
        rbufs = lustre_msg_unpack(self.lnd.wait_put(7))
        rpb = PTLRPC_BODY.unpack(rbufs[0])
        if rpb["pb_type"] not in (PTL_RPC_MSG_REPLY, PTL_RPC_MSG_ERR):
            raise ProtocolError(f"unexpected reply type {rpb['pb_type']}")
        if rpb["pb_status"] < 0 or rpb["pb_type"] == PTL_RPC_MSG_ERR:
            raise RpcError(opc, rpb["pb_status"])
        return rpb, rbufs
'''


def _shim_module():
    spec = importlib.util.spec_from_file_location("ktest_testee_under_test", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


K = _shim_module()


@pytest.fixture
def standin(tmp_path):
    path = tmp_path / "lustre_tcp_client.py"
    path.write_text(STANDIN)
    return path


@pytest.fixture
def testee(standin):
    return K.KtestTestee(*K.load_ktest(str(standin)))


def reply(body_len=184, pb_type=4713, status=0, opc=400, extra=(), jobid=b"job.1", secflvr=0x10):
    body = struct.pack("<QIIIiQ", 0xABCD, pb_type, 3, opc, status, 9).ljust(152, b"\0")[:body_len]
    if body_len >= 184:
        body = body[:152] + jobid.ljust(32, b"\0") + body[184:]
    bufs = [body] + list(extra)
    hdr = struct.pack("<8I", len(bufs), secflvr, 0x0BD00BD3, 77, 5, 6, 7, 8) + struct.pack(f"<{len(bufs)}I",
                                                                                       *map(len, bufs))
    pad = lambda b: b + bytes(-len(b) % 8)
    return pad(hdr) + b"".join(pad(b) for b in bufs)


def call(testee, **request):
    return testee.handle(json.loads(json.dumps(request)))


def test_hello_declares_replies_only_and_no_errno_classes(testee, standin):
    hello = call(testee, op="hello")["result"]
    assert hello["decode_directions"] == ["reply"] and hello["errno_agnostic"] is True
    assert hello["capabilities"] == ["decode", "encode", "structs"] and hello["protocol"] == 1
    sha = hashlib.sha256(standin.read_bytes()).hexdigest()
    assert hello["sha256"] == sha and hello["version"] == f"unknown ({sha[:12]})"   # not the certified file
    assert "at commit" not in hello["source"]


def test_decode_reports_what_ktest_unpacked(testee):
    data = reply(extra=[b"\x01\x02\x03"])
    out = call(testee, op="decode", data=data.hex(), direction="reply")
    assert out["ok"], out
    msg = out["result"]
    assert msg["byte_order"] == "little"
    assert msg["header"] == {"lm_bufcount": 2, "lm_secflvr": 0x10, "lm_magic": 0x0BD00BD3, "lm_repsize": 77,
                             "lm_cksum": 5, "lm_flags": 6, "lm_opc": 7, "lm_padding_3": 8}
    assert msg["buflens"] == [184, 3] and msg["buffers"][1] == "010203"
    assert msg["body"]["pb_handle"] == 0xABCD and msg["body"]["pb_last_xid"] == 9
    assert msg["body"]["pb_pre_versions"] == [0, 0, 0, 0] and msg["body"]["pb_jobid"] == "job.1"
    assert "computed_cksum" not in msg and "structs" not in msg      # ktest computes none; OBD_PING has none


def test_decode_jobid_only_when_buffer_0_holds_it(testee):
    short = call(testee, op="decode", data=reply(body_len=152).hex(), direction="reply")["result"]
    assert "pb_jobid" not in short["body"] and short["buflens"] == [152]
    tiny = call(testee, op="decode", data=reply(body_len=100).hex(), direction="reply")
    # 100 bytes: accepted, the missing bytes zero-filled (the stand-in does what ktest's WireStruct does)
    assert tiny["ok"] and tiny["result"]["body"]["pb_type"] == 4713 and tiny["result"]["body"]["pb_uid"] == 0
    long = call(testee, op="decode", data=reply(jobid=b"x" * 32).hex(), direction="reply")["result"]
    assert long["body"]["pb_jobid"] == "x" * 31


def test_refusals_are_ktest_protocol_errors(testee):
    out = call(testee, op="decode", data=reply(pb_type=4711).hex(), direction="reply")
    assert out == {"ok": False, "error": "EPROTO", "detail": "ProtocolError: unexpected reply type 4711"}
    bad_magic = bytearray(reply())
    bad_magic[8:12] = struct.pack("<I", 0x1234)
    assert call(testee, op="decode", data=bad_magic.hex(), direction="reply")["detail"] == \
        "ProtocolError: stand-in: magic 0x1234"
    # a decode ktest has no code for, and a request that is not hex: the shim's own EINVAL
    assert call(testee, op="decode", data=reply().hex(), direction="request")["error"] == "EINVAL"
    assert call(testee, op="decode", data="zz", direction="reply")["error"] == "EINVAL"


def test_rpc_errors_are_decoded_messages(testee):
    """rpc() raises RpcError for an ERR reply or a negative status after unpacking it: the
    message was received (SHIM DECISION 3)."""
    for kwargs in ({"pb_type": 4712, "status": -107}, {"status": -2}):
        out = call(testee, op="decode", data=reply(**kwargs).hex(), direction="reply")
        assert out["ok"] and out["result"]["body"]["pb_status"] == kwargs["status"], out


def test_an_unexpected_exception_is_a_crash_not_a_refusal(testee):
    bad = bytearray(reply())
    bad[8:12] = struct.pack("<I", 0xBAD)
    with pytest.raises(KeyError):
        call(testee, op="decode", data=bad.hex(), direction="reply")


def test_structures_under_lustre_names(testee):
    fid = struct.pack("<QII", 0x200000401, 5, 1)
    mdt = fid + struct.pack("<QQ", 0x77, 0x1001)
    got = call(testee, op="decode_struct", type="mdt_body", data=mdt.hex(), byte_order="big")["result"]
    assert got == {"type": "mdt_body", "fields": {
        "mbo_fid1": {"f_seq": 0x200000401, "f_oid": 5, "f_ver": 1}, "mbo_open_handle": {"cookie": 0x77},
        "mbo_valid": 0x1001}}
    oi = struct.pack("<QQ", 12, 0)
    obdo = struct.pack("<Q", 3) + oi + struct.pack("<Q", 9) + bytes(range(28))
    got = call(testee, op="decode_struct", type="ost_body", data=obdo.hex(), byte_order="little")["result"]
    oa = got["fields"]["oa"]
    assert oa["o_oi"] == {"oi": {"oi_id": 12, "oi_seq": 0}, "oi_fid": {"f_seq": 12, "f_oid": 0, "f_ver": 0}}
    assert oa["o_handle"] == {"cookie": 9} and oa["o_layout"] == list(range(28))     # no ktest reader: raw
    statfs = call(testee, op="decode_struct", type="obd_statfs", data=bytes(52).hex(), byte_order="little")
    assert set(statfs["result"]["fields"]) == {"os_type", "os_fsid", "os_spare3"}
    assert call(testee, op="decode_struct", type="lustre_fid", data=fid.hex(), byte_order="little")["result"] == \
        {"type": "lu_fid", "fields": {"f_seq": 0x200000401, "f_oid": 5, "f_ver": 1}}
    for name in ("ost_layout", "obd_uuid", "no_such_struct"):
        out = call(testee, op="decode_struct", type=name, data="00", byte_order="little")
        assert out["error"] == "EOPNOTSUPP" and name in out["detail"]


def test_message_structs_are_the_buffers_ktest_reads(testee):
    ocd = struct.pack("<QI", 0x1234, 0x02110000)
    msg = call(testee, op="decode", data=reply(opc=8, extra=[ocd]).hex(), direction="reply")["result"]
    assert msg["structs"] == {"1": {"type": "obd_connect_data",
                                    "fields": {"ocd_connect_flags": 0x1234, "ocd_version": 0x02110000}}}


def test_encode_through_lustre_msg_pack(testee):
    out = call(testee, op="encode", message={"header": {"lm_flags": 2, "lm_repsize": 512, "lm_secflvr": 9},
                                             "buflens": [152, 2], "body": {"pb_type": 4711, "pb_opc": 400},
                                             "buffers": [None, "abcd"]})
    data = bytes.fromhex(out["result"]["data"])
    hdr = struct.unpack_from("<8I", data)
    # lm_flags and lm_repsize as given; lm_secflvr is what lustre_msg_pack() writes (0)
    assert hdr == (2, 0, 0x0BD00BD3, 512, 0, 2, 0, 0) and struct.unpack_from("<2I", data, 32) == (152, 2)
    assert struct.unpack_from("<QII", data, 40)[1] == 4711 and data[40 + 152:40 + 154] == b"\xab\xcd"
    left_out = call(testee, op="encode", message={"body": {}})
    assert struct.unpack_from("<8I", bytes.fromhex(left_out["result"]["data"]))[3:6] == (0, 0, 0)
    bad = call(testee, op="encode", message={"body": {"pb_nonsense": 1}})
    assert bad["error"] == "EINVAL" and "unknown members: pb_nonsense" in bad["detail"]


def test_encode_struct_through_wirestruct_pack(testee):
    out = call(testee, op="encode_struct", type="mdt_body",
               fields={"mbo_fid1": {"f_seq": 1, "f_oid": 2, "f_ver": 3}, "mbo_open_handle": {"cookie": 4}})
    assert bytes.fromhex(out["result"]["data"]) == struct.pack("<QIIQQ", 1, 2, 3, 4, 0)   # mbo_valid not made up
    out = call(testee, op="encode_struct", type="ost_body", fields={"oa": {"o_oi": {"oi": {"oi_id": 5, "oi_seq": 6}}}})
    assert bytes.fromhex(out["result"]["data"])[8:24] == struct.pack("<QQ", 5, 6)
    assert call(testee, op="encode_struct", type="obdo", fields={"o_bogus": 1})["error"] == "EINVAL"


def test_the_process_speaks_the_protocol(standin, tmp_path):
    lines = [{"id": 1, "op": "hello"}, {"id": 2, "op": "decode", "data": reply().hex(), "direction": "reply"},
             {"id": 3, "op": "frobnicate"}]
    env = dict(os.environ, KTEST_LUSTRE_CLIENT=str(standin))
    proc = subprocess.run([sys.executable, str(SHIM)], input="".join(json.dumps(x) + "\n" for x in lines) + "oops\n",
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [o["id"] for o in out] == [1, 2, 3, None]
    assert out[1]["ok"] and out[2]["error"] == "EOPNOTSUPP" and out[3]["error"] == "EINVAL"
    # no path: a usage error, not a traceback
    proc = subprocess.run([sys.executable, str(SHIM)], input="", capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "KTEST_LUSTRE_CLIENT"}, timeout=60)
    assert proc.returncode == 2 and "--ktest" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, str(SHIM), "--ktest", str(tmp_path / "missing.py")], input="",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "cannot read" in proc.stderr and "Traceback" not in proc.stderr
    # an exception ktest raises while receiving ends the process: the harness's crash
    bad = bytearray(reply())
    bad[8:12] = struct.pack("<I", 0xBAD)
    proc = subprocess.run([sys.executable, str(SHIM)], input=json.dumps(
        {"id": 1, "op": "decode", "data": bad.hex(), "direction": "reply"}) + "\n", capture_output=True, text=True,
        env=env, timeout=60)
    assert proc.returncode != 0 and proc.stdout == "" and "KeyError" in proc.stderr


KTEST = os.environ.get("KTEST_LUSTRE_CLIENT")


@pytest.mark.skipif(not KTEST, reason="not run: $KTEST_LUSTRE_CLIENT does not name ktest's lustre_tcp_client.py, "
                                      "which the real certification needs (examples/ktest-client/README.md)")
def test_real_ktest_decodes_every_accepted_reply_exactly(run_cli):
    run = run_cli("--iut", f"exec:{sys.executable} {SHIM} --ktest {KTEST}", "-k", "framing")
    assert run.report["iut"]["hello"]["version"] == "d61568a", "not the file the certification is of"
    decoded = [c for c in run.report["cases"] if c["id"].endswith(".decode") and c["verdict"] == "pass"]
    assert decoded, "no reply was decoded and compared: the test would prove nothing"
    for c in run.report["cases"]:
        if c["verdict"] == "fail":
            sig = (c.get("notes") or {}).get("signature", "")
            assert not sig.startswith("field:") or c["id"].startswith("framing.roundtrip"), (c["id"], sig)
