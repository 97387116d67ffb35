"""--iut tshark: Wireshark's Lustre dissector as a decoder (harness/transport/tshark.py).

The rule and mapping tests need no tshark; the tests that run it fail, with the install hint,
where tshark is not installed (tools/setup-system.sh installs it, and CI runs that script;
conftest.require_tool)."""
import json
import pathlib
import queue
import stat
import struct
import sys
import tempfile

import pytest

from conftest import require_tool
from ptlrpc_conformance.harness.transport import tshark as ts
from ptlrpc_conformance.harness.transport.adapter import IUTStartError, UsageError
from ptlrpc_conformance.harness.transport.loader import load_adapter
from ptlrpc_conformance.harness.data.vectors import load_all

needs_tshark = pytest.mark.needs_tool("tshark")
VECTORS = {v.id: v for v in load_all() if v.op == "decode"}
ERROR, WARN, MALFORMED, PROTOCOL = "8388608", "6291456", "117440512", "150994944"


def layers(**fields):
    """tshark -T ek layers: dotted names become underscores, every value a list of strings."""
    return {k.replace(".", "_"): v if isinstance(v, list) else [v] for k, v in fields.items()}


V2 = {"lustre": "Lustre V2 OBD_PING request ", "lustre.lustre_msg_v2.lm_bufcount": "1",
      "lustre.lustre_msg_v2.lm_secflvr": "0x00000000", "lustre.lustre_msg_v2.lm_magic": "0x0bd00bd3",
      "lustre.lustre_msg_v2.lm_repsize": "0", "lustre.lustre_msg_v2.lm_cksum": "0",
      "lustre.lustre_msg_v2.lm_flags": "0x00000000", "lustre.lustre_msg_v2.lm_padding_2": "17",
      "lustre.lustre_msg_v2.lm_padding_3": "0", "lustre.lustre_msg_v2.lm_buflens": ["184"],
      "lustre.lustre_handle.cookie": ["0x1122334455667788", "0x99"],
      "lustre.ptlrpc_body.pb_type": "4711", "lustre.ptlrpc_body.pb_version": "3",
      "lustre.ptlrpc_body.pb_status": "-2", "lustre.ptlrpc_body.pb_last_seen": str((7 << 32) | (9 << 16) | 3),
      "lustre.ptlrpc_body.pb_pre_version": ["1", "2", "3", "4"], "lustre.ptlrpc_body.pb_jobid": "dd.500"}


# ------------------------------------------------------------------------------------
# the rejection rule and the MESSAGE mapping, on tshark output written by hand
# ------------------------------------------------------------------------------------

def test_mapping_of_an_accepted_message():
    out = ts.interpret(layers(**V2))
    assert out.ok
    m = out.result
    assert m["byte_order"] == "little"
    assert m["header"] == {"lm_bufcount": 1, "lm_secflvr": 0, "lm_magic": 0x0BD00BD3, "lm_repsize": 0,
                           "lm_cksum": 0, "lm_flags": 0, "lm_opc": 17, "lm_padding_3": 0}
    assert m["buflens"] == [184]
    b = m["body"]
    assert b["pb_handle"] == 0x1122334455667788            # the first handle is the body's
    assert (b["pb_tag"], b["pb_padding0"], b["pb_projid"]) == (3, 9, 7)
    assert b["pb_status"] == -2 and b["pb_pre_versions"] == [1, 2, 3, 4] and b["pb_jobid"] == "dd.500"
    assert not set(ts.NOT_DECODED) & set(b) and "buffers" not in m   # never invented


@pytest.mark.parametrize("extra,rule", [
    ({"lustre": None}, "R1"),
    ({"_ws.malformed": ["[Malformed Packet: lustre]", "_ws.malformed"],
      "_ws.expert.message": "Malformed Packet (Exception occurred)", "_ws.expert.severity": ERROR,
      "_ws.expert.group": MALFORMED}, "R2"),
    ({"_ws.malformed": "_ws.malformed", "lnet.bad_buflen": "1",
      "_ws.expert.message": "Capture:330 offset:320 (length:0) msg_type:1 ib_type:00",
      "_ws.expert.severity": ERROR, "_ws.expert.group": MALFORMED}, "R3"),
    ({"lustre.bad_magic": "1", "_ws.expert.message": "BAD Magic Value", "_ws.expert.severity": WARN,
      "_ws.expert.group": PROTOCOL}, "R4"),
    ({"lustre.lustre_msg_v2.lm_bufcount": None, "lustre.lustre_msg_v1.lm_magic": "0x0bd00bd0"}, "R5"),
])
def test_rejection_rule(extra, rule):
    fields = dict(V2, **extra)
    out = ts.interpret(layers(**{k: v for k, v in fields.items() if v is not None}))
    assert out.rejected and out.error == "EINVAL", out
    assert rule in out.detail


def test_warnings_and_notes_do_not_reject():
    fields = dict(V2, **{"_ws.expert.message": ["Mismatched: PTLRPC:OBD_PING != Conversation:OST_REPLY",
                                                "Deprecated Opcode"],
                         "_ws.expert.severity": [WARN, "4194304"], "_ws.expert.group": [PROTOCOL, "234881024"]})
    assert ts.interpret(layers(**fields)).ok


def test_a_value_that_is_no_number_is_a_protocol_error():
    out = ts.interpret(layers(**dict(V2, **{"lustre.ptlrpc_body.pb_opc": "OBD_PING"})))
    assert out.kind == "protocol"


def test_the_request_put_before_a_reply_carries_its_opcode():
    reply = VECTORS["structs.message.ost-statfs-reply"].data
    assert ts.reply_opcode(reply) == 13
    assert ts.reply_opcode(b"\x00" * 8) == ts.OBD_PING
    req = ts.minimal_request(13)
    assert len(req) == 224 and struct.unpack_from("<III", req, 48) == (4711, 3, 13)


# ------------------------------------------------------------------------------------
# starting: a clear error when tshark is missing or broken
# ------------------------------------------------------------------------------------

def test_missing_tshark_is_a_clear_start_error(tmp_path):
    adapter = load_adapter(f"tshark:{tmp_path / 'no-such-tshark'}")
    with pytest.raises(IUTStartError, match=r"tshark is not installed.*setup-system\.sh"):
        adapter.start()
    with pytest.raises(UsageError, match="needs a path"):
        load_adapter("tshark:")


def test_missing_tshark_exits_3(run_cli, tmp_path):
    run = run_cli("--iut", f"tshark:{tmp_path / 'no-such-tshark'}", out=False)
    assert run.rc == 3
    assert "tshark is not installed" in run.stderr and "Traceback" not in run.stderr


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_program_that_is_not_tshark(tmp_path):
    fake = _script(tmp_path, "fake", "#!/bin/sh\necho 'something else 1.0'\n")
    with pytest.raises(IUTStartError, match="does not look like tshark"):
        load_adapter(f"tshark:{fake}").start()


def test_a_tshark_that_prints_garbage_fails_to_start(tmp_path):
    fake = _script(tmp_path, "fake", f"#!{sys.executable}\nimport sys\n"
                   "if '--version' in sys.argv: print('TShark (Wireshark) 9.9.9 (fake)'); sys.exit(0)\n"
                   "print('not json', flush=True)\nsys.stdin.buffer.read()\n")
    with pytest.raises(IUTStartError, match="did not decode a well-formed Lustre request: protocol"):
        load_adapter(f"tshark:{fake}").start()


def test_a_tshark_that_hangs_fails_to_start(tmp_path, monkeypatch):
    monkeypatch.setattr(ts, "STARTUP_TIMEOUT", 1.0)
    fake = _script(tmp_path, "fake", f"#!{sys.executable}\nimport sys, time\n"
                   "if '--version' in sys.argv: print('TShark (Wireshark) 9.9.9 (fake)'); sys.exit(0)\n"
                   "time.sleep(60)\n")
    with pytest.raises(IUTStartError, match="timeout"):
        load_adapter(f"tshark:{fake}", timeout=0.5).start()


# ------------------------------------------------------------------------------------
# with the real tshark
# ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wireshark():
    require_tool("tshark")
    with load_adapter("tshark") as adapter:
        yield adapter


@needs_tshark
def test_hello(wireshark):
    h = wireshark.hello
    assert h.name == "Wireshark" and h.capabilities == {"decode"} and h.errno_agnostic
    assert h.version[0].isdigit() and "TShark (Wireshark)" in h.raw["tshark"]


@needs_tshark
def test_decodes_a_known_good_request(wireshark):
    v = VECTORS["framing.body.rich-request"]
    out = wireshark.call(v.decode_request())
    assert out.ok, out.describe()
    assert {k: out.result["header"][k] for k in v.expect["header"]} == v.expect["header"]
    assert set(out.result["header"]) == {"lm_bufcount", "lm_secflvr", "lm_magic", "lm_repsize", "lm_cksum",
                                         "lm_flags", "lm_opc", "lm_padding_3"}
    body, want = out.result["body"], v.expect["body"]
    for name, value in want.items():
        if name in ts.NOT_DECODED:
            assert name not in body
        elif name == "pb_version":      # Wireshark's field masks the service bits away
            assert body[name] == value & 0xFFFF
        else:
            assert body[name] == value, name


@needs_tshark
def test_decodes_a_reply_after_its_request(wireshark):
    v = VECTORS["structs.message.ost-statfs-reply"]
    out = wireshark.call(v.decode_request())
    assert out.ok, out.describe()
    assert out.result["body"]["pb_type"] == 4713 and out.result["body"]["pb_opc"] == 13
    assert out.result["buflens"] == v.expect.get("buflens", out.result["buflens"])


@needs_tshark
@pytest.mark.parametrize("vector,rule", [
    ("framing.length.empty", "R1"),
    ("framing.length.short-31", "R2"),
    ("framing.trailing.bytes", "R3"),
    ("framing.magic.zero", "R4"),
    ("framing.magic.v1", "R5"),
])
def test_verdicts_on_framing_vectors(wireshark, vector, rule):
    v = VECTORS[vector]
    out = wireshark.call(v.decode_request())
    assert out.rejected and out.error == "EINVAL", out.describe()
    assert rule in out.detail


@needs_tshark
def test_a_batch_with_a_message_split_over_many_segments(wireshark):
    big = VECTORS["framing.buflen.total-at-max"]
    small = VECTORS["framing.body.reply"]
    outs = wireshark.call_many([small.decode_request(), big.decode_request(), small.decode_request()])
    assert [o.ok for o in outs] == [True, False, True]
    # Wireshark saw the whole reassembled LNet payload: 96 header bytes + the message
    assert f"Capture:{96 + len(big.data)}" in outs[1].detail


@needs_tshark
def test_adapter_answers_other_ops_itself(wireshark):
    assert wireshark.call({"op": "x-unknown"}, probe=True).error == "EOPNOTSUPP"
    assert wireshark.call({"op": "hello"}, probe=True).ok
    assert wireshark.call({"op": "decode", "data": "zz", "direction": "request"}).error == "EINVAL"


@needs_tshark
def test_tshark_dying_mid_run_is_a_crash_outcome_then_a_restart(tmp_path):
    # real tshark, but it stops after 7 packets: the handshake, the hellos and one message
    wrapper = _script(tmp_path, "tshark-7", f"#!/bin/sh\nexec {require_tool('tshark')} \"$@\" -c 7\n")
    with load_adapter(f"tshark:{wrapper}") as adapter:
        v = VECTORS["framing.header.ignored-fields"].decode_request()     # a request: one message
        outs = adapter.call_many([v, v, v])
        assert {o.kind for o in outs} <= {"ok", "crash"} and outs[-1].kind == "crash"
        assert adapter.restarts >= 1
        assert adapter.call(v).ok          # a fresh tshark serves the next call


@needs_tshark
def test_decode_command_through_tshark(run_cli):
    v = VECTORS["framing.body.reply"]
    run = run_cli("decode", v.data.hex(), "--direction", "reply", "--iut", "tshark", out=False)
    assert run.rc == 0, run.stdout + run.stderr
    assert "Wireshark (reply): accepted" in run.stdout and '"pb_type": 4713' in run.stdout
    bad = run_cli("decode", VECTORS["framing.magic.zero"].data.hex(), "--iut", "tshark", out=False)
    assert bad.rc == 1 and "rejected with EINVAL (R3" in bad.stdout and "R4: BAD Magic Value" in bad.stdout


# ------------------------------------------------------------------------------------
# a tshark that misbehaves, restarts, or cannot be restarted: outcomes, never exceptions
# ------------------------------------------------------------------------------------

FAKE_TSHARK = '''#!{python}
"""A stand-in for tshark: reads the adapter's pcap stream and prints, for each LNet PUT,
an ek line with its frame number, its match bits and the fields of an accepted message.
A message whose first 8 bytes are a tag gets output of an unexpected shape."""
import json, os, struct, sys
if "--version" in sys.argv:
    print("TShark (Wireshark) 9.9.9 (fake)")
    if os.environ.get("FAKE_TSHARK_VANISH"):
        os.remove(sys.argv[0])                    # the next start fails
    sys.exit(0)
if sys.argv[sys.argv.index("-r") + 1] != "-":
    print("fake tshark: cannot read capture files", file=sys.stderr)
    sys.exit(2)
LAYERS = json.loads({layers!r})
f = sys.stdin.buffer
f.read(24)
n = 0
while True:
    rh = f.read(16)
    if len(rh) < 16:
        break
    data = f.read(struct.unpack("<IIII", rh)[2])
    n += 1
    p = data[54:]
    if len(p) < 96 or p[:4] != b"\\xc1\\0\\0\\0":
        continue
    layers = dict(LAYERS, frame_number=[str(n)], lnet_msg_dst_match_bits=[str(struct.unpack_from("<Q", p, 72)[0])])
    tag = p[96:104]
    if tag == b"BADBITS!":
        layers["lnet_msg_dst_match_bits"] = ["zz"]
    elif tag == b"NOTSTRS!":
        layers.update(_ws_malformed=["_ws.malformed"], _ws_expert_message=[5], _ws_expert_severity=[1],
                      _ws_expert_group=[2])
    elif tag == b"INTFIELD":
        layers["lustre_lustre_msg_v2_lm_bufcount"] = [1]
    elif tag == b"DEEPDEEP":
        print("[" * 100000 + "]" * 100000, flush=True)
        continue
    print(json.dumps({{"index": {{"_index": "packets"}}}}))
    print(json.dumps({{"layers": layers}}), flush=True)
'''


def _fake_tshark(tmp_path):
    return _script(tmp_path, "fake-tshark", FAKE_TSHARK.format(python=sys.executable, layers=json.dumps(layers(**V2))))


GOOD = {"op": "decode", "data": ts.minimal_request(ts.OBD_PING).hex(), "direction": "request"}


def _tagged(tag: bytes) -> dict:
    return {"op": "decode", "data": (tag + bytes(216)).hex(), "direction": "request"}


@pytest.mark.parametrize("tag", [b"BADBITS!", b"NOTSTRS!", b"INTFIELD", b"DEEPDEEP"])
def test_unreadable_tshark_output_is_a_protocol_outcome_then_a_restart(tmp_path, tag):
    """Match bits that are no number, fields that are no strings, JSON nested too deep."""
    with load_adapter(f"tshark:{_fake_tshark(tmp_path)}") as adapter:
        outs = adapter.call_many([GOOD, _tagged(tag), GOOD])
        assert outs[0].ok and outs[1].kind == "protocol", [o.describe() for o in outs]
        assert adapter.restarts == 1
        assert adapter.call(GOOD).ok           # a fresh tshark serves the next call


def test_a_restarted_tshark_gets_the_start_up_time(tmp_path, monkeypatch):
    waits = []

    class Spy(queue.Queue):
        def get(self, block=True, timeout=None):
            waits.append(timeout)
            return super().get(block, timeout)

    class Tshark(ts._Tshark):
        def __init__(self, *args):
            super().__init__(*args)
            waits.append("start")
            old, self.lines = self.lines, Spy()
            while not old.empty():                  # (nothing printed yet: tshark reads first)
                self.lines.put(old.get())
    monkeypatch.setattr(ts, "_Tshark", Tshark)
    with load_adapter(f"tshark:{_fake_tshark(tmp_path)}", timeout=0.5) as adapter:
        assert adapter.call(GOOD).ok
        monkeypatch.setattr(ts, "RESTART_AFTER_PACKETS", 0)      # the next call recycles tshark
        assert adapter.call(GOOD).ok
    starts = [i for i, w in enumerate(waits) if w == "start"]
    assert len(starts) == 2
    for s in starts:                  # the first wait of each tshark: the start-up time
        assert waits[s + 1] > 10, waits
    assert all(w <= 0.5 for i, w in enumerate(waits) if w != "start" and i - 1 not in starts), waits


def test_a_tshark_that_cannot_be_restarted_gives_crash_outcomes(tmp_path, monkeypatch):
    fake = _fake_tshark(tmp_path)
    with load_adapter(f"tshark:{fake}") as adapter:
        assert adapter.call(GOOD).ok
        pathlib.Path(fake).unlink()
        monkeypatch.setattr(ts, "RESTART_AFTER_PACKETS", 0)
        outs = adapter.call_many([GOOD, GOOD])
        assert [o.kind for o in outs] == ["crash", "crash"]
        assert "tshark could not be restarted" in outs[0].detail and "cannot start" in outs[0].detail


def test_a_start_that_fails_leaves_no_directory_behind(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("FAKE_TSHARK_VANISH", "1")       # --version works, the dissecting run cannot start
    with pytest.raises(IUTStartError, match="cannot start"):
        with load_adapter(f"tshark:{_fake_tshark(tmp_path)}"):
            pass
    assert list(tmp.iterdir()) == []
