"""record-trace: the traffic between the suite's clients and a target, as the JSON Lines trace
check-trace reads (docs/check-trace.md).

`Recorder(adapter)` stands in for an adapter and writes down what goes through it: every
`exchange` becomes a record {"client", "xid", "request", "reply"} in the order the target
received the requests; `restart` and `end_recovery` become {"event": "restart"} and
{"event": "recovery_expiry"} lines (an end_recovery is one expiry of the recovery window: the
target may extend the window and go on with the clients left, so the recorder cannot tell
that recovery ended; the checker works it out).  A reply the target sends later (listed in `replies` of a
later exchange, or of end_recovery) is filled into its request's record, with
`"replied_at"`: the line of the record (or event) during which it was sent, so that the
checker orders it where it was sent.  `reset` starts a new target: a trace is of one
target's life, so a second reset is refused (record one scenario per trace).
"""
from __future__ import annotations

import json

from ptlrpc_conformance.harness.ost import scenario as scenario_module


class RecordError(Exception):
    pass


class Recorder:
    """An adapter that records the target traffic of the adapter it wraps (module docstring)."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.lines: list[dict] = []
        self.waiting: dict[tuple[str, int], int] = {}     # (client, xid) -> index of its record
        self.resets = 0

    def __getattr__(self, name):
        return getattr(self.adapter, name)

    def call(self, request: dict, probe: bool = False):
        outcome = self.adapter.call(request, probe=probe)
        self._note(request, outcome)
        return outcome

    def call_many(self, requests, probe: bool = False):
        outcomes = self.adapter.call_many(requests, probe=probe)
        for request, outcome in zip(requests, outcomes):
            self._note(request, outcome)
        return outcomes

    def _note(self, request: dict, outcome) -> None:
        op = request.get("op")
        if op == "reset":
            self.resets += 1
            if self.resets > 1:
                raise RecordError("a second reset: a trace records one target's life (one scenario)")
            return
        if not outcome.ok or not isinstance(outcome.result, dict):
            return                  # nothing reached the wire that the trace could show
        if op == "exchange":
            data = outcome.result.get("data")
            self.lines.append({"client": request["client"], "xid": request["xid"], "request": request["data"],
                               "reply": data if isinstance(data, str) else None})
            if data is None:
                self.waiting[(request["client"], request["xid"])] = len(self.lines) - 1
        elif op == "restart":
            self.lines.append({"event": "restart"})
            self.waiting.clear()    # the replies of requests before a crash are never sent
        elif op == "end_recovery":
            self.lines.append({"event": "recovery_expiry"})
        else:
            return
        for client, xid, data in scenario_module.deferred_replies(outcome.result.get("replies")):
            at = self.waiting.pop((client, xid), None)
            if at is not None and data is not None:
                self.lines[at]["reply"] = data.hex()
                self.lines[at]["replied_at"] = len(self.lines)      # the 1-based line it was sent during

    def text(self) -> str:
        """The trace, one JSON object a line."""
        return "".join(json.dumps(line) + "\n" for line in self.lines)


def record(scenario, adapter, release: str | None = None, reconstruct: bool = False) -> tuple[str, list[str]]:
    """Replay `scenario` on `adapter`, recording it: (the trace's text, the scenario's problems),
    judged as the certification's target cases are under a profile of Lustre `release` (None:
    the default profile's) and its resend rule (`reconstruct`: a resend must be answered with
    the original reply).  The caller resolves the profile (harness/settings.py)."""
    recorder = Recorder(adapter)
    problems, _ = scenario_module.run(scenario, recorder, release=release, reconstruct=reconstruct)
    return recorder.text(), problems
