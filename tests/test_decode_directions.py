"""Direction-scoped decoding (docs/testee-protocol.md §2.1.1): a hello may declare
`decode_directions`; decode cases of the other direction are not applicable, and the
harness never sends such a decode."""
import json
from importlib import resources

import jsonschema
import pytest

from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter, NotApplicable
from ptlrpc_conformance.harness.transport.protocol import DECODE_DIRECTIONS, HelloError, parse_hello
from ptlrpc_conformance.reference import make_testee

HELLO = {"name": "x", "version": "1", "capabilities": ["decode", "encode"], "protocol": 1}


class OneDirection:
    """The reference testee, declaring one decode direction.  A decode of the other
    direction is answered with an error no verdict accepts, so a case that sent one fails."""

    def __init__(self, direction):
        self.inner = make_testee(capabilities=("decode", "encode"), name=f"{direction} only")
        self.direction = direction
        self.wrong = []

    def handle(self, request):
        if request.get("op") == "hello":
            out = self.inner.handle(request)
            out["result"]["decode_directions"] = [self.direction]
            return out
        if request.get("op") == "decode" and request.get("direction") != self.direction:
            self.wrong.append(request)
            return {"ok": False, "error": "ENOSYS", "detail": "a decode of an undeclared direction was sent"}
        return self.inner.handle(request)


def reply_only():
    return OneDirection("reply")


def request_only():
    return OneDirection("request")


def test_parse_hello_default_is_both_directions():
    hello = parse_hello(dict(HELLO))
    assert hello.decode_directions == DECODE_DIRECTIONS == {"request", "reply"}
    assert hello.decodes("request") and hello.decodes("reply")
    assert "decode_directions" not in hello.as_dict()


@pytest.mark.parametrize("declared", [["reply"], ["request"], ["request", "reply"], ["reply", "reply"]])
def test_parse_hello_declared_directions(declared):
    hello = parse_hello(dict(HELLO, decode_directions=declared))
    assert hello.decode_directions == frozenset(declared)
    for d in ("request", "reply"):
        assert hello.decodes(d) == (d in declared)
    assert hello.as_dict()["decode_directions"] == declared        # reported as the testee said it
    assert hello.decodes("sideways") and hello.decodes(None)         # not a direction: the testee's to refuse


@pytest.mark.parametrize("bad", ["reply", [], ["replies"], ["reply", 1], None, {"reply": True}])
def test_parse_hello_rejects_malformed_directions(bad):
    with pytest.raises(HelloError, match="'decode_directions' must be a non-empty list"):
        parse_hello(dict(HELLO, decode_directions=bad))


def test_schema_describes_decode_directions():
    schema = json.loads(resources.files("ptlrpc_conformance.schemas").joinpath("testee-protocol-v1.json")
                        .read_text())
    hello = jsonschema.Draft202012Validator(dict(schema["$defs"]["hello_result"], **{"$defs": schema["$defs"]}))
    hello.validate(dict(HELLO, decode_directions=["reply"]))
    hello.validate(dict(HELLO, decode_directions=["request", "reply"]))
    for bad in ([], ["replies"], "reply"):
        assert not hello.is_valid(dict(HELLO, decode_directions=bad)), bad


def test_adapter_refuses_a_decode_of_an_undeclared_direction_before_sending():
    testee = reply_only()
    adapter = InProcessAdapter(testee)
    adapter.require("decode", "reply")
    adapter.require("decode")                    # no direction: the capability alone
    adapter.require("encode", "request")         # the list scopes decode only
    with pytest.raises(NotApplicable, match="decodes reply messages only .*not request messages"):
        adapter.require("decode", "request")
    batch = [{"op": "decode", "data": "00", "direction": "reply"},
             {"op": "decode", "data": "00", "direction": "request"}]
    with pytest.raises(NotApplicable):
        adapter.call_many(batch)
    assert testee.wrong == []                     # nothing of the batch was sent
    assert adapter.call(batch[0]).rejected        # the declared direction goes through
    # a probe is sent as it is (the smoke check's business)
    assert adapter.call(batch[1], probe=True).error == "ENOSYS"


def test_adapter_without_the_member_decodes_both():
    adapter = InProcessAdapter(make_testee(capabilities=("decode",)))
    for d in ("request", "reply"):
        adapter.require("decode", d)
        assert adapter.call({"op": "decode", "data": "00", "direction": d}).error == "EINVAL"


@pytest.mark.parametrize("direction", ["reply", "request"])
def test_a_one_direction_run(run_cli, direction):
    """Every decode case of the other direction is not applicable, the rest pass, and the
    testee never receives a decode of the other direction (it would fail the case)."""
    run = run_cli("--iut", f"python:test_decode_directions:{direction}_only", "-k", "framing")
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    other = "request" if direction == "reply" else "reply"
    cases = {c["id"]: c for c in run.report["cases"]}
    vectors = {v.id: v for v in __import__("ptlrpc_conformance.harness.data.vectors",
                                           fromlist=["load_all"]).load_all() if v.op == "decode"}
    mine = [vid for vid, v in vectors.items() if v.direction == direction and f"{vid}.decode" in cases]
    theirs = [vid for vid, v in vectors.items() if v.direction == other and f"{vid}.decode" in cases]
    assert mine and theirs
    for vid in theirs:
        c = cases[f"{vid}.decode"]
        assert c["verdict"] == "not-applicable", (vid, c)
        assert f"not {other} messages" in c["message"]
    assert {cases[f"{vid}.decode"]["verdict"] for vid in mine} == {"pass"}
    derived = [c for cid, c in cases.items() if cid.endswith(".decode") and cid[:-len(".decode")] not in vectors
               and cid.rsplit(".", 2)[0] in vectors]
    assert derived
    for c in derived:
        origin = vectors[c["id"].rsplit(".", 2)[0]]
        assert c["verdict"] == ("pass" if origin.direction == direction else "not-applicable"), c["id"]
    # properties run on the declared direction's examples and pass
    for prop in ("framing.arbitrary-bytes.decode", "framing.mutations.decode", "framing.roundtrip.encode-decode"):
        assert cases[prop]["verdict"] == "pass", cases[prop]
    assert run.report["summary"]["fail"] == 0 and run.report["summary"]["error"] == 0
    assert run.report["iut"]["hello"]["decode_directions"] == [direction]
    # the other direction's own rule is exercised by no case: its examples were never sent
    theirs_only = {"reply": "BODY-TYPE-2", "request": "BODY-TYPE-1"}[direction]
    assert run.report["requirements"][theirs_only]["verdict"] != "pass"
    assert run.report["requirements"][theirs_only]["exercised_by"] == []
    for prop in ("framing.arbitrary-bytes.decode", "framing.mutations.decode"):
        assert theirs_only not in cases[prop]["exercised"] and theirs_only in cases[prop]["not_exercised"]


def test_a_property_none_of_whose_examples_applies_is_not_applicable():
    from hypothesis import strategies as st

    from ptlrpc_conformance.harness.verdicts import judge
    from ptlrpc_conformance.suites.test_properties import check_property

    concluded = []

    def check(example):
        raise NotApplicable("the IUT decodes reply messages only (hello decode_directions), not request messages")

    check_property(st.integers(), check, 1, 10, concluded.append, "every example a request")
    assert [(j.status, j.message) for j in concluded] == [
        (judge.NOT_APPLICABLE, "the IUT decodes reply messages only (hello decode_directions), not request messages")]

    seen = []

    def half(example):       # the examples that apply are judged; the others are drawn again
        if example % 2:
            raise NotApplicable("odd")
        seen.append(example)
        return judge.Judgement(judge.PASS)

    concluded.clear()
    check_property(st.integers(), half, 1, 10, concluded.append, "half")
    assert concluded == [] and len(seen) >= 10 and all(x % 2 == 0 for x in seen)
