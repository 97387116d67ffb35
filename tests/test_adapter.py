"""The adapter interface: batches, pipelining, restarts, capability gating."""
import json
import sys

import pytest

from conftest import TESTS
from ptlrpc_conformance.harness.transport.adapter import (MAX_DEPTH, InProcessAdapter, IUTStartError, NotApplicable,
                                                          UsageError, as_sent, plain_copy, too_deep)
from ptlrpc_conformance.harness.transport.exec import ExecAdapter
from ptlrpc_conformance.harness.transport.loader import load_adapter
from ptlrpc_conformance.harness.data.vectors import load_all

HOSTILE = [sys.executable, str(TESTS / "testees" / "hostile.py")]
VECTORS = {v.id: v for v in load_all() if v.op == "decode"}


def decode_req(vid):
    v = VECTORS[vid]
    return {"op": "decode", "data": v.data.hex(), "direction": v.direction}


def test_batch_through_exec_keeps_order_and_survives_a_crash():
    adapter = ExecAdapter(HOSTILE + ["crash"], timeout=5)
    with adapter:
        batch = [decode_req("framing.magic.v2-native"), decode_req("framing.magic.zero"),
                 decode_req("framing.bufcount.zero"), decode_req("framing.body.rich-request")] * 3
        outcomes = adapter.call_many(batch)
    kinds = [o.kind for o in outcomes]
    assert kinds == ["ok", "crash", "error", "ok"] * 3
    assert adapter.restarts == 3
    assert outcomes[2].error == "EINVAL"
    assert outcomes[3].result["body"]["pb_opc"] == 1


def test_pipelined_batch_is_large_and_in_order():
    adapter = load_adapter(f"exec:{sys.executable} -m ptlrpc_conformance.reference")
    with adapter:
        vids = sorted(VECTORS)
        outcomes = adapter.call_many([decode_req(v) for v in vids] * 50)
    assert len(outcomes) == 50 * len(vids)
    for i, o in enumerate(outcomes):
        expected = VECTORS[vids[i % len(vids)]].verdict
        assert o.kind == ("ok" if expected == "valid" else "error") or expected == "acceptable"


def test_undeclared_capability_is_never_sent():
    class Spy:
        seen = []

        def handle(self, request):
            self.seen.append(request["op"])
            return {"ok": True, "result": {"name": "spy", "version": "0", "capabilities": ["decode", "x-future"],
                                           "protocol": 1}}
    spy = Spy()
    adapter = InProcessAdapter(spy)
    assert adapter.start().capabilities == frozenset({"decode"})      # unknown names ignored
    with pytest.raises(NotApplicable, match="capability 'encode'"):
        adapter.call({"op": "encode", "message": {}})
    with pytest.raises(NotApplicable, match="capability 'target'"):
        adapter.call({"op": "exchange", "data": "", "xid": 1, "client": "c"})
    assert spy.seen == ["hello"]
    assert adapter.call({"op": "frobnicate"}, probe=True).kind == "ok"   # probes bypass the gate


def test_in_process_responses_go_through_json():
    class NotJson:
        def handle(self, request):
            if request["op"] == "hello":
                return {"ok": True, "result": {"name": "n", "version": "0", "capabilities": ["decode"], "protocol": 1}}
            return {"ok": True, "result": {"data": b"bytes are not JSON"}}
    with InProcessAdapter(NotJson()) as a:
        o = a.call(decode_req("framing.magic.v2-native"))
    assert o.kind == "crash" and "not JSON serializable" in o.detail


def test_an_in_process_iut_gets_the_request_a_process_would_read():
    """What the IUT gets equals the JSON round trip of the request, is never the suite's own
    object (the IUT may change it), and nested or non-JSON-native parts are converted as a
    process would see them (tuples as lists, integer keys as strings)."""
    flat = {"op": "decode", "direction": "request", "data": "00ff", "id": 7, "strict": True, "note": None,
            "big": 1 << 70, "odd": "\udc80"}
    nested = {"op": "exchange", "pair": (1, 2), "fields": {3: "x", "y": [4, (5,)]}, "ratio": 0.5}
    for request in (flat, nested, {}):
        sent = as_sent(request)
        assert sent == json.loads(json.dumps(request)) and sent is not request
    assert as_sent(nested) == {"op": "exchange", "pair": [1, 2], "fields": {"3": "x", "y": [4, [5]]}, "ratio": 0.5}

    class Mutating:
        def handle(self, request):
            if request["op"] == "hello":
                return Batched.HELLO
            request["data"] = "changed"
            return {"ok": False, "error": "EPROTO"}
    request = decode_req("framing.magic.v2-native")
    before = dict(request)
    with InProcessAdapter(Mutating()) as a:
        assert a.call(request).kind == "error"
    assert request == before


def test_an_in_process_response_is_read_as_a_process_would_send_it():
    """A response of plain JSON values is copied, equal to its JSON round trip; anything else
    (tuples, floats, integer keys, bytes, nesting past MAX_DEPTH) goes through JSON itself, so the
    outcome is what it was: lists for tuples, a crash for bytes, a protocol failure for depth."""
    plain = {"ok": True, "result": {"fields": {"a": [1, -2, {"b": None}], "s": "\udc80"}, "valid": []}}
    copied = plain_copy(plain)
    assert copied == json.loads(json.dumps(plain)) and copied is not plain
    assert copied["result"]["fields"]["a"] is not plain["result"]["fields"]["a"]
    for other in ({"a": (1,)}, {"a": 1.5}, {1: "x"}, {"a": b"x"}):
        assert plain_copy(other) is None

    def nested(k):
        v = 0
        for _ in range(k):
            v = [v]
        return v
    for k in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1):
        v = nested(k)
        assert (plain_copy(v) is None) == too_deep(json.dumps(v), v), k

    answers = {"tuple": {"ok": True, "result": {"fields": (1, 2)}},
               "bytes": {"ok": True, "result": {"data": b"x"}},
               "deep": {"ok": True, "result": nested(MAX_DEPTH + 5)}}

    class Answers:
        def handle(self, request):
            if request["op"] == "hello":
                return Batched.HELLO
            return answers[request["data"]]
    with InProcessAdapter(Answers()) as a:
        tup, raw, deep = (a.call({"op": "decode", "direction": "request", "data": k}) for k in answers)
    assert tup.ok and tup.result == {"fields": [1, 2]}
    assert raw.kind == "crash" and "not JSON serializable" in raw.detail
    assert deep.kind == "protocol" and f"more than {MAX_DEPTH} deep" in deep.detail


class Batched:
    """An in-process IUT with handle_batch: answers every decode with `answer`, or raises."""
    HELLO = {"ok": True, "result": {"name": "b", "version": "0", "capabilities": ["decode"], "protocol": 1}}

    def __init__(self, answer=None, raises=None, short=False):
        self.answer, self.raises, self.short, self.batches = answer, raises, short, []

    def handle(self, request):
        return self.HELLO if request["op"] == "hello" else self.handle_batch([request])[0]

    def handle_batch(self, requests):
        self.batches.append(len(requests))
        if self.raises:
            raise self.raises
        return [self.answer] * (len(requests) - self.short)


def test_in_process_batches_are_judged_and_logged_like_single_calls(tmp_path):
    """handle_batch gets the whole batch; each request and answer is in the io-log, as a
    process would have been sent and have answered; a batch that raises, or answers with the
    wrong count, fails each of its requests and is logged too."""
    requests = [decode_req("framing.magic.v2-native"), decode_req("framing.magic.zero")]
    rejected = {"ok": False, "error": "EPROTO"}
    cases = [(Batched(answer=rejected), "error", "EPROTO", ["<", "<"]),
             (Batched(raises=ValueError("boom")), "crash", "the implementation raised ValueError: boom", ["!"]),
             (Batched(answer=rejected, short=True), "protocol", "handle_batch did not return one response per "
                                                                "request", ["<"])]
    for target, kind, detail, after in cases:
        log = tmp_path / "io.log"
        adapter = InProcessAdapter(target)
        adapter.io_log = open(log, "w", encoding="utf-8")
        with adapter:
            outcomes = adapter.call_many(requests)
        adapter.io_log.close()
        assert target.batches == [2], kind                        # one call of handle_batch for the batch
        assert [o.kind for o in outcomes] == [kind, kind]
        assert all(detail in (o.error if kind == "error" else o.detail) for o in outcomes), outcomes
        lines = log.read_text().splitlines()
        assert [x[:1] for x in lines] == [">", "<", ">", ">"] + after, lines   # the hello, then the batch
        assert [json.loads(x[2:]) for x in lines[2:4]] == requests


def test_loader_errors():
    with pytest.raises(UsageError):
        load_adapter("exec:")
    with pytest.raises(IUTStartError, match="has no callable 'path'"):
        load_adapter("python:os:path")        # not callable: the IUT cannot start, as an exec: one
    with pytest.raises(IUTStartError, match="cannot import no_such_module_xyz"):
        load_adapter("python:no_such_module_xyz:make")
    with pytest.raises(UsageError, match="no handle"):
        load_adapter("python:builtins:object")


def test_a_timeout_beyond_what_poll_takes_still_works():
    """poll(2) takes at most ~24 days: an infinite or huge timeout is waited in slices."""
    for timeout in (float("inf"), 1e12):
        with ExecAdapter(HOSTILE + ["ok"], timeout=timeout) as adapter:
            assert adapter.call(decode_req("framing.magic.v2-native")).ok


def test_io_log_records_a_request_once_written_and_never_twice(tmp_path):
    """Window 4, the testee crashes on the second request: only the 4 requests written
    before the crash are logged then; the 8 re-sent to the restarted testee after it.  Every
    answer comes after its request."""
    log = tmp_path / "io.log"
    batch = [decode_req("framing.magic.v2-native"), decode_req("framing.magic.zero")] + \
        [decode_req("framing.bufcount.zero")] * 8
    adapter = ExecAdapter(HOSTILE + ["crash"], timeout=5, window=4)
    adapter.io_log = open(log, "w", encoding="utf-8")
    with adapter:
        outcomes = adapter.call_many(batch)
    adapter.io_log.close()
    assert [o.kind for o in outcomes] == ["ok", "crash"] + ["error"] * 8
    lines = log.read_text().splitlines()
    sent = [json.loads(x[2:]) for x in lines if x.startswith("> ")]
    decodes = [r for r in sent if r["op"] == "decode"]
    assert len(decodes) == 4 + 8
    crash = next(i for i, x in enumerate(lines) if x.startswith("! crash"))
    assert sum(1 for x in lines[:crash] if x.startswith("> ") and '"decode"' in x) == 4
    seen = set()
    for x in lines:
        if x.startswith("> "):
            seen.add(json.loads(x[2:])["id"])
        elif x.startswith("< "):
            assert json.loads(x[2:])["id"] in seen, x
