"""`--iut tshark`: Wireshark's Lustre dissector as an implementation under test (decode only).

How a decode request reaches Wireshark.  Wireshark dissects a Lustre message only inside an
LNet PUT on a portal it registers for Lustre, and it tells a request from a reply by the
body's `pb_type`, remembering the opcode of each request per (address pair, match bits) to
dissect the reply's buffers.  So the adapter writes each message as socklnd (TCP port 988)
traffic with `harness.capture`: a request is a PUT from client 127.0.0.2 to OST_REQUEST_PORTAL
28, a reply a PUT back to OSC_REPLY_PORTAL 4, preceded by a minimal request with the same
match bits and the reply's opcode (`pb_opc`, read where a little-endian header would put it;
OBD_PING when it cannot be read).  Every message gets match bits of its own and its own TCP
segments (large ones are split at the MSS; tshark reassembles them), so its fields are
printed on one frame, the one that completes it.

One tshark process serves the adapter: it reads an unbounded pcap stream on its standard
input (`tshark -l -r - -T ek -e ...`, a personal configuration directory of its own so user
preferences cannot change the dissection) and prints one JSON line per frame.  A batch
(`call_many`) is appended to the stream in one write and its lines are read back; starting
tshark costs about 0.25 s, so one process per batch would cap the rate below 1,000
messages/s and one per message at 4/s.  The process is restarted after a crash, a timeout,
unreadable output (not JSON, or fields of a shape the adapter does not expect), or 100,000
packets (to bound its memory); the cases of a batch it failed on get a crash, timeout or
protocol outcome, and the run goes on.  Every new tshark, restarted ones too, gets
STARTUP_TIMEOUT for its first line; one that cannot be started again gives the cases of
that batch a crash outcome.

What an answer means (the rejection rule; errno-agnostic, so every rejection is EINVAL):

  R1  no Lustre layer in the frame (the dissector was not reached: an empty LNet payload)
  R2  `_ws.malformed`: the dissector raised an exception (it read past the end of the
      message) or added an expert item of group Malformed
  R3  an expert item of severity Error, such as LNet's `lnet.bad_buflen` ("Buffer length
      mis-match": the Lustre dissector consumed more or fewer bytes than the LNet payload
      holds) or Lustre's `lustre.bad_buflen`
  R4  `lustre.bad_magic`: the magic is not one Wireshark knows (it reads little-endian only,
      so a byte-swapped sender's message lands here), nothing was decoded
  R5  no `lustre_msg_v2` header was decoded (Wireshark took it for a lustre_msg_v1)

Any of these is a rejection (`ok: false`, EINVAL, the markers in `detail`).  Otherwise the
message was accepted; warnings and notes (opcode mismatch with the conversation, unknown or
deprecated opcode) do not reject.

What an accepted message is mapped to (MESSAGE, docs/testee-protocol.md 2.2): only what
Wireshark decoded, under the current Lustre names.
  byte_order   "little" (Wireshark reads every field little-endian)
  header       lustre.lustre_msg_v2.{lm_bufcount, lm_secflvr, lm_magic, lm_repsize, lm_cksum,
               lm_flags, lm_padding_3}; lm_opc from lm_padding_2, Wireshark's name for the
               same 32 bits at offset 24
  buflens      every lustre.lustre_msg_v2.lm_buflens
  body         lustre.ptlrpc_body.* by the same names; pb_handle from the first
               lustre.lustre_handle.cookie (the body's handle comes first); pb_pre_versions
               from the four pb_pre_version; pb_tag, pb_padding0 and pb_projid from
               pb_last_seen, Wireshark's u64 over those 8 bytes at offset 32 (bits 0-15,
               16-31, 32-63); pb_version as Wireshark shows it (its field masks the high 16
               bits away)
Not mapped, because Wireshark does not decode them: pb_mbits, pb_padding64_0,
pb_padding64_1, pb_uid and pb_gid (bytes 120-151, shown as undecoded "Pb Padding"), the
buffers' bytes, and computed_cksum.  A MESSAGE without them is incomplete; the suite
reports that as a failure of the case, which is a finding about Wireshark.
"""
from __future__ import annotations

import io
import json
import os
import queue
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time

from ptlrpc_conformance.harness.capture import pcap, socklnd
from ptlrpc_conformance.harness.transport.adapter import DEFAULT_TIMEOUT, Adapter, IUTStartError, UsageError
from ptlrpc_conformance.harness.transport.exec import kill_and_reap
from ptlrpc_conformance.harness.transport.protocol import Hello, HelloError, Outcome, parse_hello

CLIENT_IP = "127.0.0.2"
OBD_PING = 400
RESTART_AFTER_PACKETS = 100_000
STARTUP_TIMEOUT = 30.0           # seconds for the first answer of a new tshark (it loads ~3000 dissectors)

_V2 = "lustre.lustre_msg_v2."
_PB = "lustre.ptlrpc_body."
HEADER_MAP = {"lm_bufcount": _V2 + "lm_bufcount", "lm_secflvr": _V2 + "lm_secflvr", "lm_magic": _V2 + "lm_magic",
              "lm_repsize": _V2 + "lm_repsize", "lm_cksum": _V2 + "lm_cksum", "lm_flags": _V2 + "lm_flags",
              "lm_opc": _V2 + "lm_padding_2", "lm_padding_3": _V2 + "lm_padding_3"}
BODY_MAP = {name: _PB + name for name in (
    "pb_type", "pb_version", "pb_opc", "pb_status", "pb_last_xid", "pb_last_committed", "pb_transno",
    "pb_flags", "pb_op_flags", "pb_conn_cnt", "pb_timeout", "pb_service_time", "pb_limit", "pb_slv")}
FIELDS = (["frame.number", "lnet.msg_dst_match_bits", "lustre", "lustre.lustre_msg_v1.lm_magic",
           _V2 + "lm_buflens", "lustre.lustre_handle.cookie", _PB + "pb_last_seen", _PB + "pb_pre_version",
           _PB + "pb_jobid", "_ws.malformed", "_ws.expert.message", "_ws.expert.severity", "_ws.expert.group",
           "lustre.bad_magic", "lustre.bad_buflen", "lnet.bad_buflen"]
          + list(HEADER_MAP.values()) + list(BODY_MAP.values()))
PI_ERROR = 0x00800000
PI_MALFORMED = 0x07000000
NOT_DECODED = ("pb_mbits", "pb_padding64_0", "pb_padding64_1", "pb_uid", "pb_gid")


def _key(field: str) -> str:
    return field.replace(".", "_")


def _int(text: str) -> int:
    """A number as tshark prints it: decimal (maybe negative, maybe with leading zeros) or 0x-hex."""
    t = text.strip()
    return int(t, 16) if t[:2].lower() == "0x" else int(t, 10)


def find_tshark(path: str | None = None) -> str | None:
    """The tshark program: `path` if given, else $PTLRPC_TSHARK, else tshark on PATH."""
    candidate = path or os.environ.get("PTLRPC_TSHARK") or "tshark"
    return shutil.which(candidate) or (candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK)
                                       else None)


def minimal_request(opc: int) -> bytes:
    """A well-formed one-buffer request (184-byte ptlrpc_body, pb_type 4711, pb_version 3)."""
    body = bytearray(184)
    struct.pack_into("<III", body, 8, 4711, 3, opc)
    return struct.pack("<8I", 1, 0, 0x0BD00BD3, 0, 0, 0, 0, 0) + struct.pack("<II", 184, 0) + bytes(body)


def reply_opcode(data: bytes) -> int:
    """The pb_opc a little-endian reader finds in a reply, or OBD_PING if there is none."""
    if len(data) >= 4:
        count = struct.unpack_from("<I", data, 0)[0]
        if 1 <= count <= 32:
            at = ((32 + 4 * count + 7) & ~7) + 16
            if len(data) >= at + 4:
                return struct.unpack_from("<I", data, at)[0]
    return OBD_PING


def interpret(layers: dict) -> Outcome:
    """The outcome one frame's fields (tshark -T ek layers) stand for: the rejection rule
    and the MESSAGE mapping of this module's docstring."""
    def all_of(field):
        v = layers.get(_key(field))
        return v if isinstance(v, list) else ([] if v is None else [v])

    def one(field):
        v = all_of(field)
        return v[0] if v else None

    if one("lustre") is None:
        return Outcome("error", error="EINVAL", detail="R1: Wireshark dissected no Lustre message in the LNet PUT")
    markers = []
    experts = list(zip(all_of("_ws.expert.message"), all_of("_ws.expert.severity"), all_of("_ws.expert.group")))
    if one("_ws.malformed") is not None:
        exc = [m for m, s, g in experts if m.startswith("Malformed Packet")]
        if exc or not any(_int(s) == PI_ERROR for m, s, g in experts if re.fullmatch(r"\d+", s)):
            markers.append("R2: malformed" + (f": {exc[0]}: the dissector read past the end of the message"
                                              if exc else ""))
    for message, severity, group in experts:
        try:
            sev, grp = _int(severity), _int(group)
        except ValueError:
            continue
        if sev == PI_ERROR and not message.startswith("Malformed Packet"):
            markers.append(f"R3: expert error: {message}")
        elif grp == PI_MALFORMED and sev != PI_ERROR:
            markers.append(f"R2: expert item of group Malformed: {message}")
    if one("lustre.bad_magic") is not None:
        markers.append("R4: BAD Magic Value (lustre.bad_magic)")
    if one(HEADER_MAP["lm_bufcount"]) is None:
        markers.append("R5: no lustre_msg_v2 header decoded"
                       + (" (decoded as lustre_msg_v1)" if one("lustre.lustre_msg_v1.lm_magic") is not None else ""))
    if markers:
        return Outcome("error", error="EINVAL", detail="; ".join(dict.fromkeys(markers)))
    try:
        header = {name: _int(one(field)) for name, field in HEADER_MAP.items() if one(field) is not None}
        body = {name: _int(one(field)) for name, field in BODY_MAP.items() if one(field) is not None}
        cookie = one("lustre.lustre_handle.cookie")
        if cookie is not None:
            body["pb_handle"] = _int(cookie)
        seen = one(_PB + "pb_last_seen")
        if seen is not None:
            v = _int(seen)
            body.update(pb_tag=v & 0xFFFF, pb_padding0=(v >> 16) & 0xFFFF, pb_projid=v >> 32)
        pre = all_of(_PB + "pb_pre_version")
        if pre:
            body["pb_pre_versions"] = [_int(x) for x in pre]
        jobid = one(_PB + "pb_jobid")
        if jobid is not None:
            body["pb_jobid"] = jobid
        buflens = [_int(x) for x in all_of(_V2 + "lm_buflens")]
    except (TypeError, ValueError) as e:
        return Outcome.protocol(f"tshark printed a value that is not a number: {e}")
    return Outcome("ok", result={"byte_order": "little", "header": header, "buflens": buflens, "body": body})


class _Tshark:
    """One tshark process reading a pcap stream on stdin and printing JSON lines."""

    def __init__(self, program: str, config_dir: str):
        env = dict(os.environ, WIRESHARK_CONFIG_DIR=config_dir)
        argv = [program, "-l", "-n", "-r", "-", "-T", "ek"] + [x for f in FIELDS for x in ("-e", f)]
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=env, bufsize=-1)   # buffered reads
        except OSError as e:
            raise IUTStartError(f"tshark: cannot start {program}: {e.strerror or e}") from None
        self.lines: queue.Queue = queue.Queue()
        self.stderr_tail = bytearray()
        self.writes: queue.Queue = queue.Queue()
        self.write_failed = threading.Event()
        self.buffer = io.BytesIO()
        self.pcap = pcap.PcapWriter(self.buffer)
        self.conn = self.pcap.connection(CLIENT_IP)
        self.match_bits = 0
        for target in (self._read_stdout, self._read_stderr, self._write_stdin):
            threading.Thread(target=target, daemon=True).start()

    def _read_stdout(self):
        try:
            for line in iter(self.proc.stdout.readline, b""):
                self.lines.put(line)
        except (OSError, ValueError):
            pass
        self.lines.put(None)

    def _read_stderr(self):
        try:
            for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
                self.stderr_tail += chunk
                del self.stderr_tail[:-4096]
        except (OSError, ValueError):
            pass

    def _write_stdin(self):
        while True:
            data = self.writes.get()
            if data is None:
                break
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (OSError, ValueError):
                self.write_failed.set()
                break
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def stderr_text(self) -> str:
        text = bytes(self.stderr_tail).decode("utf-8", "replace")
        return "\n".join(line for line in text.splitlines() if "Running as user" not in line
                         and "This could be dangerous" not in line).strip()[-1500:]

    def queue_message(self, data: bytes, direction: str) -> tuple[int, int]:
        """Append one message to the pending pcap bytes; (its last packet number, match bits)."""
        self.match_bits += 1
        mb = self.match_bits
        if direction == "reply":
            self.conn.put(True, socklnd.OST_REQUEST_PORTAL, mb, minimal_request(reply_opcode(data)))
            frames = self.conn.put(False, socklnd.OSC_REPLY_PORTAL, mb, data)
        else:
            frames = self.conn.put(True, socklnd.OST_REQUEST_PORTAL, mb, data)
        if not frames:          # cannot happen: the socklnd and LNet headers are never empty
            raise AssertionError("a message produced no packet")
        return frames[-1], mb

    def flush(self) -> None:
        data = self.buffer.getvalue()
        self.buffer.seek(0)
        self.buffer.truncate()
        if data:
            self.writes.put(data)

    def kill(self):
        self.writes.put(None)
        kill_and_reap(self.proc, (self.proc.stdout, self.proc.stderr))

    def close(self):
        self.writes.put(None)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


_TIMEOUT = object()
WAIT_SLICE = 60.0                # seconds: the longest single wait, whatever the timeout


def _next_line(proc: "_Tshark", timeout: float):
    """The next line tshark printed, None at its end, or _TIMEOUT after `timeout` seconds
    (waited in slices: a lock's wait takes at most ~49 days)."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _TIMEOUT
        try:
            return proc.lines.get(timeout=min(remaining, WAIT_SLICE))
        except queue.Empty:
            continue


class TsharkAdapter(Adapter):
    """Wireshark's tshark as a decoder; see the module docstring."""

    def __init__(self, program: str | None = None, timeout: float = DEFAULT_TIMEOUT):
        super().__init__()
        self.program_arg = program
        self.program: str | None = None
        self.description = "tshark" + (f":{program}" if program else "")
        self.timeout = timeout
        self._proc: _Tshark | None = None
        self._config_dir: str | None = None
        self._hello: dict | None = None

    # start -------------------------------------------------------------------------
    def _start(self) -> Hello:
        self.program = find_tshark(self.program_arg)
        if self.program is None:
            raise IUTStartError(
                f"{self.description}: tshark is not installed (looked for {self.program_arg or 'tshark'!r}"
                f"{'' if self.program_arg else ' on PATH and in $PTLRPC_TSHARK'}). Install Debian's package: "
                "bash tools/setup-system.sh (or: apt-get install tshark)")
        try:
            out = subprocess.run([self.program, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise IUTStartError(f"{self.description}: `{self.program} --version` failed: {e}") from None
        first = next((line for line in out.stdout.splitlines() if line.strip()), "")
        m = re.match(r"TShark \(Wireshark\) (\S+)", first)
        if out.returncode != 0 or not m:
            raise IUTStartError(f"{self.description}: {self.program} does not look like tshark "
                                f"(--version printed {first[:120]!r}, exit status {out.returncode})")
        self._config_dir = tempfile.mkdtemp(prefix="ptlrpc-tshark-")
        try:
            return self._greet(first, m.group(1))
        except BaseException:
            self._kill()             # a start that fails leaves no process and no directory behind
            self._remove_config()
            raise

    def _greet(self, first: str, version: str) -> Hello:
        self._hello = {"name": "Wireshark", "version": version, "capabilities": ["decode"], "protocol": 1,
                       "errno_agnostic": True, "tshark": first.strip(), "program": self.program,
                       "transport": "LNet PUT over socklnd (TCP port 988): requests on portal 28, "
                                    "replies on portal 4 after a request with the same match bits"}
        probe = self._dissect([(0, minimal_request(OBD_PING), "request")], [None], startup=True)[0]
        if not probe.ok:
            stderr = self._proc.stderr_text() if self._proc else ""
            raise IUTStartError(f"{self.description}: tshark did not decode a well-formed Lustre request: "
                                f"{probe.describe()}" + (f"\nstderr:\n{stderr}" if stderr else ""))
        try:
            return parse_hello(self._hello)
        except HelloError as e:          # cannot happen: the hello is built above
            raise IUTStartError(f"{self.description}: {e}") from None

    # requests ------------------------------------------------------------------------
    def _exchange(self, requests: list[dict]) -> list[Outcome]:
        results: list[Outcome | None] = [None] * len(requests)
        work = []
        for i, r in enumerate(requests):
            self.log(">", json.dumps(r))
            op = r.get("op")
            if op == "hello":
                results[i] = Outcome("ok", result=dict(self._hello))
            elif op != "decode":
                results[i] = Outcome("error", error="EOPNOTSUPP", detail=f"tshark only decodes (op {op!r})")
            elif r.get("direction") not in ("request", "reply"):
                results[i] = Outcome("error", error="EINVAL", detail="direction must be 'request' or 'reply'")
            else:
                try:
                    data = bytes.fromhex(r.get("data"))
                except (TypeError, ValueError):
                    results[i] = Outcome("error", error="EINVAL", detail="data is not hex")
                    continue
                work.append((i, data, r["direction"]))
        if work:
            self._dissect(work, results)
        for o in results:
            self.log("<", json.dumps({"ok": o.ok, "result": o.result} if o.ok else
                                     {"ok": False, "kind": o.kind, "error": o.error, "detail": o.detail}))
        return results

    def _dissect(self, work, results, startup: bool = False) -> list:
        if self._proc is not None and (self._proc.pcap.packets > RESTART_AFTER_PACKETS
                                       or self._proc.proc.poll() is not None or self._proc.write_failed.is_set()):
            self._close_proc()
        fresh = self._proc is None
        if fresh:
            try:
                self._proc = _Tshark(self.program, self._config_dir)
            except IUTStartError as e:
                if startup:
                    raise
                failed = Outcome.crash(f"tshark could not be restarted: {e}")
                for i, _, _ in work:
                    results[i] = failed
                self.restarts += 1
                return results
        proc = self._proc
        expect: dict[int, tuple[int, int]] = {}
        for i, data, direction in work:
            frame, mb = proc.queue_message(data, direction)
            expect[frame] = (i, mb)
        proc.flush()
        last = max(expect)
        # a fresh tshark (the first, or one restarted after trouble or the packet limit)
        # loads its dissectors before it prints anything: its first line gets the start-up time
        timeout = max(self.timeout, STARTUP_TIMEOUT) if fresh else self.timeout
        trouble = None
        while trouble is None:
            line = _next_line(proc, timeout)
            if line is _TIMEOUT:
                trouble = Outcome.timeout(f"tshark printed nothing for {timeout:g} s")
                break
            timeout = self.timeout
            if line is None:
                code = proc.proc.poll()
                stderr = proc.stderr_text()
                trouble = Outcome.crash(f"tshark exited (status {code}) before dissecting the batch"
                                        + (f"; stderr: {stderr[-500:]}" if stderr else ""))
                break
            if not line.strip():
                continue
            try:
                trouble, frame = self._frame_line(line, expect, results)
            except Exception as e:       # output of a shape the adapter does not expect
                trouble, frame = Outcome.protocol(
                    f"tshark printed a line the adapter cannot read ({type(e).__name__}: {e}): {line[:120]!r}"), None
            if trouble is not None or frame >= last:
                break
        if trouble is not None or expect:
            trouble = trouble or Outcome.protocol("tshark skipped frames of the batch")
            for i, _ in expect.values():
                results[i] = trouble
            self._kill()
            self.restarts += 1          # the next batch starts a fresh tshark
        return results

    def _frame_line(self, line: bytes, expect: dict, results: list) -> tuple[Outcome | None, int | None]:
        """Take one line of tshark's output: (trouble or None, the frame it is about).  A
        frame of the batch leaves `expect` as soon as its line is read, so whatever goes
        wrong with the line is that frame's case's outcome."""
        try:
            doc = json.loads(line)
        except RecursionError:
            return Outcome.protocol(f"tshark printed JSON nested too deep to read: {line[:120]!r}"), None
        except ValueError:
            return Outcome.protocol(f"tshark printed a line that is not JSON: {line[:120]!r}"), None
        layers = doc.get("layers") if isinstance(doc, dict) else None
        if layers is None:
            return None, 0                    # the ek index lines
        self.log("#", f"tshark: {line.decode('utf-8', 'replace')}")
        try:
            frame = int(layers["frame_number"][0])
        except (KeyError, IndexError, TypeError, ValueError):
            return Outcome.protocol(f"tshark printed a frame without a number: {line[:120]!r}"), None
        if frame in expect:
            i, mb = expect.pop(frame)
            try:
                got = layers.get("lnet_msg_dst_match_bits")
                if not got or _int(got[0]) != mb:
                    results[i] = Outcome.protocol(f"frame {frame} carries match bits {got}, expected {mb}: "
                                                  "tshark's frames and the adapter's packets disagree")
                    return results[i], frame
                results[i] = interpret(layers)
            except Exception as e:
                results[i] = Outcome.protocol(f"tshark printed fields of frame {frame} the adapter cannot read "
                                              f"({type(e).__name__}: {e})")
                return results[i], frame
        return None, frame

    # shutdown ------------------------------------------------------------------------
    def _kill(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc = None

    def _close_proc(self):
        if self._proc is not None:
            self._proc.close()
            self._proc = None

    def _remove_config(self):
        if self._config_dir:
            shutil.rmtree(self._config_dir, ignore_errors=True)
            self._config_dir = None

    def close(self) -> None:
        self._close_proc()
        self._remove_config()


def make(spec_rest: str | None, timeout: float = DEFAULT_TIMEOUT) -> TsharkAdapter:
    """The adapter for `--iut tshark` or `--iut tshark:/path/to/tshark`."""
    if spec_rest is not None and not spec_rest.strip():
        raise UsageError("--iut tshark:PATH needs a path after the colon (or use --iut tshark)")
    return TsharkAdapter(spec_rest.strip() if spec_rest else None, timeout=timeout)
