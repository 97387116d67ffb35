"""`exec:COMMAND`: a testee process speaking testee protocol v1 on stdin/stdout.

One process serves many requests, pipelined; it is restarted after a crash, a timeout or a
protocol violation, so a misbehaving IUT fails the case at hand and never ends the run.
"""
from __future__ import annotations

import atexit
import collections
import json
import math
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from typing import Sequence

from ptlrpc_conformance.harness.transport.adapter import (
    DEFAULT_TIMEOUT, MAX_DEPTH, Adapter, IUTStartError, UsageError, too_deep)
from ptlrpc_conformance.harness.transport.protocol import Hello, HelloError, Outcome, check_response, parse_hello

MAX_LINE = 16 * 1024 * 1024   # the protocol asks for at least 4 MiB; we accept 16 MiB
READ_CHUNK = 64 * 1024        # stdout is read in chunks of this size
DEFAULT_WINDOW = 128          # requests in flight (written, not yet answered) in a pipelined batch
POLL_SLICE = 60.0             # seconds: the longest single poll(2), whatever the timeout


_LIVE: set = set()            # _Process objects not yet killed: their groups die with the harness


@atexit.register
def _kill_live_testees() -> None:
    """A harness that exits without closing its adapters (an unhandled error, sys.exit in a
    plugin) must not leave testees and their helpers running: each testee leads a process
    group of its own, which nothing else would end."""
    for p in list(_LIVE):
        if p.owner != os.getpid():      # a forked child exiting: its parent's testees are not its own
            continue
        try:
            os.killpg(p.proc.pid, signal.SIGKILL)
        except OSError:
            pass
    _LIVE.clear()


def kill_and_reap(proc: subprocess.Popen, streams) -> None:
    """Kill a child process, wait for it (at most 5 s) and close the given pipes."""
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for stream in streams:
        try:
            stream.close()
        except OSError:
            pass


class _Process:
    """One running testee process.  stdin and stdout are driven from the calling thread
    through non-blocking pipes and poll(2): requests are written in chunks while responses
    are read, with no thread hand-off between a response and the harness.  stdout is read
    in chunks of READ_CHUNK bytes and cut into lines with a cap: a line longer than
    `max_line` is reported once and skipped, never buffered whole, so memory stays bounded
    (at most one line of `max_line` bytes plus one chunk).  stderr is drained by a thread
    that keeps only the last few kilobytes, so a testee writing heavily to stderr never
    blocks.  The testee runs in its own process group, so a kill reaches its children."""

    def __init__(self, argv: list[str], max_line: int = MAX_LINE):
        self.argv = argv
        self.max_line = max_line
        if not hasattr(select, "poll"):
            raise IUTStartError("exec: testees need a POSIX system (the harness drives their pipes with poll(2))")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, cwd=os.getcwd(), env=os.environ.copy(),
                                         bufsize=0, start_new_session=True)
        except OSError as e:
            raise IUTStartError(f"cannot start {shlex.join(argv)}: {e.strerror or e}") from None
        self.owner = os.getpid()
        _LIVE.add(self)
        self.written = 0                   # request bytes written so far
        self.fd_in = self.proc.stdin.fileno()
        self.fd_out = self.proc.stdout.fileno()
        os.set_blocking(self.fd_in, False)
        os.set_blocking(self.fd_out, False)
        self.poller = select.poll()
        self.poller.register(self.fd_out, select.POLLIN)
        self.pending = bytearray()         # request bytes not yet written
        self.write_failed = False          # the testee closed its stdin
        self._polling_in = False           # fd_in registered for POLLOUT
        self.ready: collections.deque = collections.deque()   # ("line", bytes) / ("toolong", None)
        self.partial = bytearray()         # the start of a line whose end has not arrived
        self.skipping = False              # inside an over-long line: discard up to its newline
        self.eof = False
        self.stderr_tail = bytearray()
        self._stderr_lock = threading.Lock()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    # stderr ----------------------------------------------------------------------------
    def _read_stderr(self):
        stream = self.proc.stderr
        fd = stream.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                with self._stderr_lock:
                    self.stderr_tail += chunk
                    del self.stderr_tail[:-8192]
        except (OSError, ValueError):
            pass
        try:
            stream.close()     # only this thread reads stderr, so only it closes it
        except OSError:
            pass

    def stderr_text(self, settle: float = 0.0) -> str:
        """The last of what the testee wrote to stderr; `settle` seconds at most are given to
        the reader to take in what a testee that has exited wrote last (its EOF)."""
        if settle:
            self._stderr_reader.join(settle)
        with self._stderr_lock:
            text = self.stderr_tail.decode("utf-8", "replace").strip()
        return text[-2000:]

    # stdin -----------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        """Queue request bytes; they are written while the harness waits for responses."""
        if self.write_failed:
            return
        self.pending += data
        self._flush()

    def _flush(self) -> None:
        while self.pending and not self.write_failed:
            try:
                n = os.write(self.fd_in, self.pending)
            except BlockingIOError:
                break
            except (OSError, ValueError):      # EPIPE: the testee closed its stdin or exited
                self.write_failed = True
                self.pending.clear()
                break
            del self.pending[:n]
            self.written += n
        want = bool(self.pending) and not self.write_failed
        if want != self._polling_in:
            if want:
                self.poller.register(self.fd_in, select.POLLOUT)
            else:
                self.poller.unregister(self.fd_in)
            self._polling_in = want

    # stdout ----------------------------------------------------------------------------
    def _feed(self, data: bytes) -> None:
        start = 0
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return
            start, self.skipping = nl + 1, False
        nl = data.find(b"\n", start)
        if nl < 0:
            self._keep_partial(data[start:])
            return
        if self.partial:
            self.partial += data[start:nl]
            first, self.partial = bytes(self.partial), bytearray()
        else:
            first = data[start:nl]
        self._line(first)
        parts = data[nl + 1:].split(b"\n")
        for part in parts[:-1]:
            self._line(part)
        self._keep_partial(parts[-1])

    def _line(self, content: bytes) -> None:
        if len(content) > self.max_line:
            self.ready.append(("toolong", None))
        else:
            self.ready.append(("line", content))

    def _keep_partial(self, tail: bytes) -> None:
        if not tail:
            return
        self.partial += tail
        if len(self.partial) > self.max_line:
            self.partial = bytearray()      # drop it now: the rest is skipped as it arrives
            self.skipping = True
            self.ready.append(("toolong", None))

    def read_line(self, deadline: float) -> tuple[str, bytes | None]:
        """The next response line (without its newline): ("line", bytes), ("toolong", None),
        ("eof", None) or ("timeout", None) when `deadline` (time.monotonic()) passes.
        Pending request bytes are written meanwhile."""
        while True:
            if self.ready:
                return self.ready.popleft()
            if self.eof:
                return ("eof", None)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ("timeout", None)
            try:       # in slices: poll(2) takes at most ~24 days, and --iut-timeout may be larger
                events = self.poller.poll(max(1, math.ceil(min(remaining, POLL_SLICE) * 1000)))
            except InterruptedError:      # pragma: no cover - PEP 475 retries poll itself
                continue
            for fd, ev in events:
                if fd == self.fd_out:
                    try:
                        data = os.read(self.fd_out, READ_CHUNK)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if data:
                        self._feed(data)
                    else:
                        self.eof = True
                        self.poller.unregister(self.fd_out)
                        if self.partial:      # a last line without its newline
                            self._line(bytes(self.partial))
                            self.partial = bytearray()
                elif fd == self.fd_in:
                    self._flush()

    # lifetime --------------------------------------------------------------------------
    def exit_description(self, wait: float = 0.5) -> str:
        try:
            code = self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return "closed its stdout but is still running"
        if code < 0:
            try:
                name = f" ({signal.Signals(-code).name})"
            except ValueError:
                name = ""
            return f"was killed by signal {-code}{name}"
        return f"exited with status {code}"

    def kill(self):
        _LIVE.discard(self)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # the testee and whatever it started
        except OSError:
            pass
        kill_and_reap(self.proc, (self.proc.stdin, self.proc.stdout))   # stderr is closed by its reader

    def close(self, grace: float = 2.0):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _line(request: dict, rid: int) -> bytes:
    """One request line, the id first: {"id":N,"op":...}."""
    if request and "id" not in request:
        return b'{"id":%d,' % rid + _ENCODE(request)[1:].encode() + b"\n"
    return _ENCODE(dict(request, id=rid)).encode() + b"\n"


class ExecAdapter(Adapter):
    """A testee process started once, serving many requests; restarted after a crash,
    a timeout or a protocol violation, so one misbehaving case never ends the run.

    Requests of a batch are written ahead (pipelined, up to `window` in flight, written in
    chunks); responses are read in order, each within `timeout` seconds of the harness
    starting to wait for it.  When the testee fails mid-batch, the responses read before
    the failure are kept, the request in flight gets the failure, and the rest of the batch
    is sent again to a restarted testee.  Response lines longer than `max_line` bytes are
    a protocol failure (docs/testee-protocol.md §1)."""

    def __init__(self, command: str | Sequence[str], timeout: float = DEFAULT_TIMEOUT, window: int = DEFAULT_WINDOW,
                 max_line: int = MAX_LINE):
        super().__init__()
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise UsageError("exec: needs a command")
        self.description = "exec:" + shlex.join(self.argv)
        self.timeout = timeout
        self.window = max(1, window)
        self.max_line = max_line
        self._proc: _Process | None = None
        self._next_id = 0
        self._unlogged: collections.deque = collections.deque()    # (end offset, line) queued, not yet logged

    def _spawn_and_greet(self) -> Hello:
        self._proc = _Process(self.argv, self.max_line)
        outcome = self._roundtrip_one({"op": "hello"})
        if not outcome.ok:
            stderr = self._proc.stderr_text() if self._proc else ""
            self._kill()
            raise IUTStartError(f"{self.description}: no valid hello: {outcome.describe()}"
                                + (f"\nstderr:\n{stderr}" if stderr else ""))
        try:
            return parse_hello(outcome.result)
        except HelloError as e:
            self._kill()
            raise IUTStartError(f"{self.description}: {e}") from None

    def _start(self) -> Hello:
        return self._spawn_and_greet()

    def _kill(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc = None

    def _restart(self) -> str | None:
        """Start a fresh testee; None on success, else why it failed."""
        self._kill()
        self.restarts += 1
        try:
            hello = self._spawn_and_greet()
        except IUTStartError as e:
            return str(e)
        if hello.capabilities != self.hello.capabilities:
            self._kill()          # never serve the next request from it
            return "the restarted testee declared other capabilities"
        return None

    def _roundtrip_one(self, request: dict) -> Outcome:
        return self._pipeline([request])[0]

    def _pipeline(self, requests: list[dict]) -> list[Outcome]:
        """Send `requests`, read their responses; stop at the first transport failure and
        return only the outcomes obtained so far plus that failure."""
        proc = self._proc
        first = self._next_id + 1
        self._next_id += len(requests)
        lines = [_line(r, first + i) for i, r in enumerate(requests)]
        n, sent, window = len(lines), 0, self.window
        refill = max(1, window // 2)
        outcomes: list[Outcome] = []
        self._unlogged.clear()
        for i in range(n):
            if sent < n and sent - i < refill:      # keep the window full, in chunks
                upto = min(n, i + window)
                if self.io_log is not None:         # logged once written (see _log_written)
                    end = proc.written + len(proc.pending)
                    for line in lines[sent:upto]:
                        end += len(line)
                        self._unlogged.append((end, line))
                proc.send(b"".join(lines[sent:upto]))
                sent = upto
                self._log_written(proc)
            outcome = self._read_response(proc, first + i)
            outcomes.append(outcome)
            if outcome.trouble:
                self._log_written(proc)
                self.log("!", f"{outcome.kind}: {outcome.detail}")
                break
        self._unlogged.clear()                      # never written: the testee stopped reading
        return outcomes

    def _log_written(self, proc: _Process) -> None:
        """Log ("> ") the request lines written to the testee so far, and only those: a line
        still queued when the testee fails is never logged as sent."""
        while self._unlogged and self._unlogged[0][0] <= proc.written:
            self.log(">", self._unlogged.popleft()[1].decode())

    def _read_response(self, proc: _Process, rid: int) -> Outcome:
        deadline = time.monotonic() + self.timeout
        while True:
            kind, line = proc.read_line(deadline)
            if kind == "line":
                if not line.strip():
                    continue   # blank lines are tolerated
                if self.io_log is not None:
                    self._log_written(proc)      # its request was written before it was answered
                    self.log("<", line.decode("utf-8", "replace"))
                try:
                    response = json.loads(line.decode("utf-8"))
                except RecursionError:
                    return Outcome.protocol(f"response nests arrays and objects too deep to read ({len(line)} bytes)")
                except ValueError:      # UnicodeDecodeError included
                    snippet = line[:120].decode("utf-8", "replace").rstrip()
                    return Outcome.protocol(f"response is not JSON: {snippet!r}"
                                            + (f" ({len(line)} bytes)" if len(line) > 120 else ""))
                if too_deep(line, response):
                    return Outcome.protocol(f"response nests arrays and objects more than {MAX_DEPTH} deep")
                return check_response(response, expected_id=rid)
            if kind == "timeout":
                return Outcome.timeout(f"no response within {self.timeout:g} s")
            if kind == "toolong":
                return Outcome.protocol(f"response line longer than {self.max_line} bytes")
            how = proc.exit_description()          # waits for the exit: its stderr is then complete
            stderr = proc.stderr_text(settle=1.0)
            return Outcome.crash(f"the testee {how} without answering"
                                 + (f"; stderr: {stderr[-500:]}" if stderr else ""))

    def _exchange(self, requests: list[dict]) -> list[Outcome]:
        results: list[Outcome] = []
        pending = list(requests)
        while pending:
            if self._proc is None:
                why = self._restart()
                if why is not None:
                    results += [Outcome.crash(f"testee could not be restarted: {why}")] * len(pending)
                    if "no valid hello" in why:
                        self.lost = f"it did not answer its hello after a restart ({why.splitlines()[0]})"
                    break
            got = self._pipeline(pending)
            results += got
            pending = pending[len(got):]
            if got and got[-1].kind in Outcome.TROUBLE:
                self._kill()   # restart before the next request
        return results

    def close(self) -> None:
        if self._proc is not None:
            self._proc.close()
            self._proc = None


