"""The adapter interface: the only way the suites reach an implementation under test.

An `Adapter` carries testee-protocol requests (plain dicts, see docs/testee-protocol.md)
to an IUT and brings back one `Outcome` per request.  `call_many` takes a batch, so a
transport that pipelines (a subprocess) or works in batches (tshark) fits the same
interface.  Capabilities are read once from the IUT's `hello`; asking for an operation
whose capability the IUT did not declare, or for a decode in a direction its hello's
`decode_directions` leaves out, raises `NotApplicable` before anything is sent.

This module holds the interface and the in-process adapter; `exec.py` the subprocess
adapter, `tshark.py` Wireshark's dissector, and `loader.py` turns an --iut value into one.
"""
from __future__ import annotations

import contextlib
import json
import traceback
from typing import Any, Sequence

from ptlrpc_conformance.harness.transport import DEFAULT_TIMEOUT
from ptlrpc_conformance.harness.transport.protocol import CAPABILITY_OF_OP, Hello, HelloError, Outcome, check_response, parse_hello

MAX_DEPTH = 64                # a response nesting arrays/objects deeper is a protocol failure


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
        self.timeouts_in_a_row = 0    # requests left unanswered one after the other (reset by any answer)
        self.lost: str | None = None  # why the IUT can no longer be reached (a restart it did not answer)
        self.troubles: list | None = None   # (request, outcome) of each trouble while watched (watch_trouble)

    def stopped_answering(self, max_timeouts: int) -> str | None:
        """Why the IUT has stopped answering, or None: `max_timeouts` requests in a row timed
        out, or a restart got no hello.  A crash is an answer of sorts: it never counts."""
        if self.lost:
            return f"the IUT stopped answering: {self.lost}"
        if self.timeouts_in_a_row >= max_timeouts:
            return (f"the IUT stopped answering: {self.timeouts_in_a_row} requests in a row timed out "
                    f"(--max-timeouts {max_timeouts})")
        return None

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

    def require(self, op: str, direction: str | None = None) -> None:
        """Raise NotApplicable unless the IUT declared what `op` needs: its capability and,
        for a decode, the `direction` among its hello's decode_directions."""
        cap = CAPABILITY_OF_OP.get(op)
        if cap is not None and not self.supports(cap):
            raise NotApplicable(f"the IUT did not declare capability {cap!r} (needed for op {op!r})")
        if op == "decode" and not self.start().decodes(direction):
            declared = " and ".join(sorted(self.hello.decode_directions))
            raise NotApplicable(f"the IUT decodes {declared} messages only (hello decode_directions), "
                                f"not {direction} messages")
        if cap == "structs" and not self.start().implements(op):
            raise NotApplicable(f"the IUT implements {' and '.join(sorted(self.hello.struct_operations))} only "
                                f"(hello struct_operations), not {op}")

    def call(self, request: dict, probe: bool = False) -> Outcome:
        return self.call_many([request], probe=probe)[0]

    def call_many(self, requests: Sequence[dict], probe: bool = False) -> list[Outcome]:
        self.start()
        if not probe:
            for r in requests:
                self.require(r.get("op", ""), r.get("direction"))
        if not requests:
            return []
        outcomes = self._exchange(list(requests))
        for r, o in zip(requests, outcomes):
            self.timeouts_in_a_row = self.timeouts_in_a_row + 1 if o.kind == "timeout" else 0
            if o.trouble and self.troubles is not None:
                self.troubles.append((r, o))
        return outcomes

    @contextlib.contextmanager
    def watch_trouble(self):
        """A list that gets (request, outcome) of every request that meets IUT trouble (a
        crash, a hang, garbage) while the context is on, oldest first: how a property or a
        stateful part learns of trouble anywhere in an example, whatever its code made of
        the outcome."""
        outer, self.troubles = self.troubles, []
        try:
            yield self.troubles
        finally:
            if outer is not None:
                outer.extend(self.troubles)
            self.troubles = outer

    def close(self) -> None:
        pass

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()          # whatever the start left behind (a process, a directory)
            raise
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
        wire = as_sent(request)
        if self.io_log is not None:
            self.log(">", json.dumps(request))
        try:
            response = self.target.handle(wire)
            received = plain_copy(response)
            if received is None:            # anything else goes through JSON, as a process's would
                out = json.dumps(response)
                response = json.loads(out)
            else:
                out, response = None, received
        except Exception as e:  # the IUT misbehaved: a failed case, never a broken run
            return self._raised(e)[0]
        if self.io_log is not None:
            self.log("<", out if out is not None else json.dumps(response))
        if out is not None and too_deep(out, response):
            return Outcome.protocol(f"response nests arrays and objects more than {MAX_DEPTH} deep")
        return self._checked(response)

    def _raised(self, e: Exception, count: int = 1) -> list[Outcome]:
        """The outcomes of requests whose call raised `e`: crashes, logged once."""
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        self.log("!", f"raised {tb}")
        return [Outcome.crash(f"the implementation raised {tb}")] * count

    @staticmethod
    def _checked(response: Any) -> Outcome:
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
        wires = [as_sent(r) for r in requests]
        if self.io_log is not None:         # the io-log gets what a process would be sent
            for r in requests:
                self.log(">", json.dumps(r))
        try:
            out = json.dumps(batch(wires))
            responses = json.loads(out)
        except Exception as e:  # the IUT misbehaved: failed cases, never a broken run
            return self._raised(e, len(requests))
        if not isinstance(responses, list) or len(responses) != len(requests):
            self.log("<", out)
            return [Outcome.protocol("handle_batch did not return one response per request")] * len(requests)
        outcomes = []
        for response in responses:
            if self.io_log is not None:
                self.log("<", json.dumps(response))
            outcomes.append(Outcome.protocol(f"response nests arrays and objects more than {MAX_DEPTH} deep")
                            if too_deep(None, response) else self._checked(response))
        return outcomes


def as_sent(request: dict) -> dict:
    """The request as a process would read it: its JSON round trip (tuples become lists, keys
    strings, ...), and a copy the IUT may change at will; a request of plain JSON values is
    just copied (plain_copy), which gives the same."""
    copied = plain_copy(request)
    return copied if copied is not None else json.loads(json.dumps(request))


class _NotPlain(Exception):
    pass


def plain_copy(value: Any, limit: int = MAX_DEPTH) -> Any:
    """A copy of `value` when it is made of objects with string keys, arrays, strings,
    integers, booleans and nulls only, nested at most `limit` deep: what a JSON round trip gives
    back equal, in about a third of its time.  None for anything else (a tuple, a float, bytes,
    deeper nesting), which the caller sends through the JSON round trip itself."""
    try:
        return _plain(value, limit)
    except _NotPlain:
        return None


def _plain(value: Any, left: int) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if left <= 0:
        raise _NotPlain
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain
            out[k] = _plain(v, left - 1)
        return out
    if kind is list:
        return [_plain(v, left - 1) for v in value]
    raise _NotPlain


def too_deep(text, value, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` (parsed from `text`, if given) nests arrays and objects more than
    `limit` deep.  Such a response could break the code that judges or reports it (Python
    recursion), so it is refused.  A text with fewer than `limit` brackets is not walked."""
    if text is not None:
        brackets = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
        opens = text.count(brackets[0]) + text.count(brackets[1])
        if opens <= limit:
            return False
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        for c in children:
            if isinstance(c, (dict, list)):
                if depth >= limit:
                    return True
                stack.append((c, depth + 1))
    return False
