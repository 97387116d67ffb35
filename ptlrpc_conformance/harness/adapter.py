"""The adapter interface: the only way the suites reach an implementation under test.

An `Adapter` carries testee-protocol requests (plain dicts, see docs/testee-protocol.md)
to an IUT and brings back one `Outcome` per request.  `call_many` takes a batch, so a
transport that pipelines (a subprocess) or works in batches (tshark) fits the same
interface.  Capabilities are read once from the IUT's `hello`; asking for an operation
whose capability the IUT did not declare raises `NotApplicable` before anything is sent.

Loaders:
  reference                       the bundled reference, in-process
  python:package.module:factory   factory() returns an object with handle(request) -> response
  exec:COMMAND                    a process speaking the protocol on stdin/stdout
"""
from __future__ import annotations

import importlib
import json
import os
import queue
import shlex
import subprocess
import threading
import time
import traceback
from typing import Any, Sequence

from .protocol import CAPABILITY_OF_OP, Hello, HelloError, Outcome, check_response, parse_hello

DEFAULT_TIMEOUT = 5.0
MAX_LINE = 16 * 1024 * 1024   # the protocol asks for at least 4 MiB; we accept 16 MiB


class NotApplicable(Exception):
    """The IUT did not declare the capability an operation needs."""


class IUTStartError(Exception):
    """The IUT could not be started, or its hello was missing, invalid or not protocol 1."""


class UsageError(Exception):
    """An --iut value that names no loader, or a loader that cannot be resolved."""


class Adapter:
    """Base class: subclasses implement `_start()`, `_exchange(batch)` and `close()`."""

    description = "adapter"

    def __init__(self):
        self.hello: Hello | None = None
        self.restarts = 0
        self.io_log = None            # a text file: every protocol line, "> " sent, "< " received

    def log(self, direction: str, line: str) -> None:
        if self.io_log is not None:
            self.io_log.write(f"{direction} {line.rstrip()}\n")
            self.io_log.flush()

    # public API ----------------------------------------------------------------------
    def start(self) -> Hello:
        if self.hello is None:
            self.hello = self._start()
        return self.hello

    def supports(self, capability: str) -> bool:
        return capability in self.start().capabilities

    def require(self, op: str) -> None:
        cap = CAPABILITY_OF_OP.get(op)
        if cap is not None and not self.supports(cap):
            raise NotApplicable(f"the IUT did not declare capability {cap!r} (needed for op {op!r})")

    def call(self, request: dict, probe: bool = False) -> Outcome:
        return self.call_many([request], probe=probe)[0]

    def call_many(self, requests: Sequence[dict], probe: bool = False) -> list[Outcome]:
        self.start()
        if not probe:
            for r in requests:
                self.require(r.get("op", ""))
        if not requests:
            return []
        return self._exchange(list(requests))

    def close(self) -> None:
        pass

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # for subclasses ------------------------------------------------------------------
    def _start(self) -> Hello:
        raise NotImplementedError

    def _exchange(self, requests: list[dict]) -> list[Outcome]:
        raise NotImplementedError


# ------------------------------------------------------------------------------------
# in-process
# ------------------------------------------------------------------------------------

class InProcessAdapter(Adapter):
    """Drives a Python object with `handle(request: dict) -> dict` (and optionally
    `handle_batch(list) -> list`).  Requests and responses go through a JSON round trip,
    so the object sees exactly what a process would see.  An exception raised by the
    object is a `crash` outcome for that request.  In-process calls cannot be timed out."""

    def __init__(self, target: Any, description: str = "python"):
        super().__init__()
        if not callable(getattr(target, "handle", None)):
            raise UsageError(f"{description}: the factory returned {type(target).__name__}, "
                             "which has no handle(request) method")
        self.target = target
        self.description = description

    def _one(self, request: dict) -> Outcome:
        text = json.dumps(request)
        self.log(">", text)
        wire = json.loads(text)
        try:
            response = self.target.handle(wire)
            response = json.loads(json.dumps(response))
        except Exception as e:  # the IUT misbehaved: a failed case, never a broken run
            tb = traceback.format_exception_only(type(e), e)[-1].strip()
            self.log("!", f"raised {tb}")
            return Outcome.crash(f"the implementation raised {tb}")
        self.log("<", json.dumps(response))
        if isinstance(response, dict) and "id" not in response:
            response = dict(response, id=None)
        return check_response(response, expected_id=None)

    def _start(self) -> Hello:
        outcome = self._one({"op": "hello"})
        if not outcome.ok:
            raise IUTStartError(f"{self.description}: hello failed: {outcome.describe()}")
        try:
            return parse_hello(outcome.result)
        except HelloError as e:
            raise IUTStartError(f"{self.description}: {e}") from None

    def _exchange(self, requests: list[dict]) -> list[Outcome]:
        batch = getattr(self.target, "handle_batch", None)
        if batch is None:
            return [self._one(r) for r in requests]
        try:
            responses = json.loads(json.dumps(batch(json.loads(json.dumps(requests)))))
        except Exception as e:
            return [Outcome.crash(f"the implementation raised {type(e).__name__}: {e}")] * len(requests)
        if not isinstance(responses, list) or len(responses) != len(requests):
            return [Outcome.protocol("handle_batch did not return one response per request")] * len(requests)
        return [check_response(dict(r, id=None) if isinstance(r, dict) and "id" not in r else r, None)
                for r in responses]


# ------------------------------------------------------------------------------------
# subprocess (exec:)
# ------------------------------------------------------------------------------------

class _Process:
    """One running testee process with threads that drain stdout and stderr."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, cwd=os.getcwd(), env=os.environ.copy(),
                                         bufsize=-1)   # buffered: readline on a raw pipe reads byte by byte
        except OSError as e:
            raise IUTStartError(f"cannot start {shlex.join(argv)}: {e.strerror or e}") from None
        self.lines: queue.Queue = queue.Queue()
        self.stderr_tail = bytearray()
        self._stderr_lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        stream = self.proc.stdout
        try:
            while True:
                line = stream.readline(MAX_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    # skip the rest of an over-long line, report it once
                    while True:
                        rest = stream.readline(MAX_LINE)
                        if not rest or rest.endswith(b"\n"):
                            break
                    self.lines.put(("toolong", None))
                    continue
                self.lines.put(("line", line))
        except (OSError, ValueError):
            pass
        self.lines.put(("eof", None))

    def _read_stderr(self):
        try:
            for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
                with self._stderr_lock:
                    self.stderr_tail += chunk
                    del self.stderr_tail[:-8192]
        except (OSError, ValueError):
            pass

    def stderr_text(self) -> str:
        with self._stderr_lock:
            text = self.stderr_tail.decode("utf-8", "replace").strip()
        return text[-2000:]

    def write(self, data: bytes) -> bool:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def exit_description(self, wait: float = 0.5) -> str:
        try:
            code = self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return "closed its stdout but is still running"
        if code < 0:
            return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def kill(self):
        try:
            self.proc.kill()
        except OSError:
            pass
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

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


class ExecAdapter(Adapter):
    """A testee process started once, serving many requests; restarted after a crash,
    a timeout or a protocol violation, so one misbehaving case never ends the run.

    Requests of a batch are written ahead (pipelined, up to `window` in flight) by a
    writer thread; responses are read in order, each within `timeout` seconds."""

    def __init__(self, command: str | Sequence[str], timeout: float = DEFAULT_TIMEOUT, window: int = 64):
        super().__init__()
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise UsageError("exec: needs a command")
        self.description = "exec:" + shlex.join(self.argv)
        self.timeout = timeout
        self.window = max(1, window)
        self._proc: _Process | None = None
        self._next_id = 0

    def _spawn_and_greet(self) -> Hello:
        self._proc = _Process(self.argv)
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
            return "the restarted testee declared other capabilities"
        return None

    def _roundtrip_one(self, request: dict) -> Outcome:
        return self._pipeline([request])[0]

    def _pipeline(self, requests: list[dict]) -> list[Outcome]:
        """Send `requests`, read their responses; stop at the first transport failure and
        return only the outcomes obtained so far plus that failure."""
        proc = self._proc
        ids = []
        lines = []
        for r in requests:
            self._next_id += 1
            ids.append(self._next_id)
            lines.append(json.dumps(dict(r, id=self._next_id), separators=(",", ":")).encode() + b"\n")
            self.log(">", lines[-1].decode())
        acked = threading.Semaphore(self.window)
        stop = threading.Event()

        def writer():
            for line in lines:
                acked.acquire()
                if stop.is_set() or not proc.write(line):
                    break

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        outcomes: list[Outcome] = []
        for rid in ids:
            deadline = time.monotonic() + self.timeout
            outcome = None
            while outcome is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    outcome = Outcome.timeout(f"no response within {self.timeout:g} s")
                    break
                try:
                    kind, line = proc.lines.get(timeout=remaining)
                except queue.Empty:
                    continue
                if kind == "eof":
                    stderr = proc.stderr_text()
                    outcome = Outcome.crash(f"the testee {proc.exit_description()} without answering"
                                            + (f"; stderr: {stderr[-500:]}" if stderr else ""))
                elif kind == "toolong":
                    outcome = Outcome.protocol(f"response line longer than {MAX_LINE} bytes")
                elif not line.strip():
                    continue   # blank lines are tolerated
                else:
                    self.log("<", line.decode("utf-8", "replace"))
                    try:
                        response = json.loads(line)
                    except ValueError:
                        snippet = line[:120].decode("utf-8", "replace").rstrip()
                        outcome = Outcome.protocol(f"response is not JSON: {snippet!r}")
                    else:
                        outcome = check_response(response, expected_id=rid)
            if outcome is not None and outcome.trouble:
                self.log("!", f"{outcome.kind}: {outcome.detail}")
            outcomes.append(outcome)
            acked.release()
            if outcome.kind in Outcome.TROUBLE:
                stop.set()
                acked.release()
                break
        return outcomes

    def _exchange(self, requests: list[dict]) -> list[Outcome]:
        results: list[Outcome] = []
        pending = list(requests)
        while pending:
            if self._proc is None:
                why = self._restart()
                if why is not None:
                    results += [Outcome.crash(f"testee could not be restarted: {why}")] * len(pending)
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


# ------------------------------------------------------------------------------------
# loaders
# ------------------------------------------------------------------------------------

def load_adapter(spec: str | None, timeout: float = DEFAULT_TIMEOUT, io_log: str | None = None) -> Adapter:
    """Build the adapter an --iut value names (not started yet); `io_log` names a file that
    records every protocol line exchanged."""
    adapter = _load(spec, timeout)
    if io_log:
        adapter.io_log = open(io_log, "a", encoding="utf-8")
    return adapter


def _load(spec: str | None, timeout: float) -> Adapter:
    spec = (spec or "reference").strip()
    if spec == "reference":
        from ..reference import make_testee
        return InProcessAdapter(make_testee(), description="reference")
    if spec.startswith("python:"):
        target = spec[len("python:"):]
        module_name, sep, attr = target.partition(":")
        if not sep or not module_name or not attr:
            raise UsageError(f"--iut {spec!r}: expected python:package.module:factory")
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            raise UsageError(f"--iut {spec!r}: cannot import {module_name}: {type(e).__name__}: {e}") from None
        factory = getattr(module, attr, None)
        if factory is None or not callable(factory):
            raise UsageError(f"--iut {spec!r}: {module_name} has no callable {attr!r}")
        try:
            obj = factory()
        except Exception as e:
            raise IUTStartError(f"--iut {spec!r}: the factory raised {type(e).__name__}: {e}") from None
        return InProcessAdapter(obj, description=spec)
    if spec.startswith("exec:"):
        command = spec[len("exec:"):].strip()
        try:
            return ExecAdapter(command, timeout=timeout)
        except ValueError as e:   # shlex: unbalanced quotes
            raise UsageError(f"--iut {spec!r}: {e}") from None
    raise UsageError(f"--iut {spec!r}: expected 'reference', 'python:package.module:factory' or 'exec:COMMAND'")
