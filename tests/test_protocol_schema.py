"""The JSON Schema of testee protocol v1 is valid, agrees with the layout facts, and the
reference testee's actual traffic validates against it."""
import json
import subprocess
import sys
from importlib import resources

import jsonschema
import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.data.vectors import load_all

SCHEMA = json.loads(resources.files("ptlrpc_conformance.schemas").joinpath("testee-protocol-v1.json").read_text())


def sub(name):
    return dict(SCHEMA["$defs"][name], **{"$defs": SCHEMA["$defs"]})


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_schema_body_and_header_match_the_facts():
    body = SCHEMA["$defs"]["body"]
    assert set(body["properties"]) == set(spec.layout("ptlrpc_body_v3").names())
    assert set(body["required"]) == set(spec.layout("ptlrpc_body_v2").names())
    header = SCHEMA["$defs"]["header"]
    assert set(header["properties"]) == {f.name for f in spec.layout("lustre_msg_v2").fields if not f.flexible}


def test_reference_testee_traffic_validates():
    requests = [{"id": 1, "op": "hello"}, {"id": 2, "op": "nope"}]
    for i, v in enumerate(v for v in load_all() if v.op == "decode"):
        requests.append(dict(v.decode_request(), id=10 + i))
        if v.canonical:
            requests.append(dict(v.encode_request(), id=1000 + i))
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.reference"],
                          input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(l) for l in proc.stdout.splitlines()]
    assert [l["id"] for l in lines] == [r["id"] for r in requests]
    line_validator = jsonschema.Draft202012Validator(SCHEMA)
    for r in requests:
        line_validator.validate(r)
    message = jsonschema.Draft202012Validator(sub("message"))
    encode_result = jsonschema.Draft202012Validator(sub("encode_result"))
    hello = jsonschema.Draft202012Validator(sub("hello_result"))
    for req, resp in zip(requests, lines):
        line_validator.validate(resp)
        if req["op"] == "hello":
            hello.validate(resp["result"])
        elif req["op"] == "decode" and resp["ok"]:
            message.validate(resp["result"])
        elif req["op"] == "encode":
            assert resp["ok"], resp
            encode_result.validate(resp["result"])
        elif req["op"] == "nope":
            assert resp["error"] == "EOPNOTSUPP"


def test_schema_rejects_a_bad_message():
    bad = {"byte_order": "middle", "header": {}, "buflens": [], "body": {}, "buffers": []}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(sub("message")).validate(bad)


# ---- one description of the MESSAGE shape -----------------------------------------------------

def test_published_schema_is_generated_from_the_message_description():
    from ptlrpc_conformance.harness.transport import protocol_schema
    committed = resources.files("ptlrpc_conformance.schemas").joinpath("testee-protocol-v1.json").read_text()
    assert committed == protocol_schema.text(), "stale: run python tools/gen_schemas.py"


def test_gen_schemas_check_says_up_to_date():
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, str(root / "tools" / "gen_schemas.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("is up to date") == 2


def _decoded():
    from ptlrpc_conformance.reference import make_testee
    v = next(v for v in load_all() if v.id == "framing.magic.v2-native")
    out = make_testee().handle(v.decode_request())
    assert out["ok"], out
    return out["result"]


def _set(path, value):
    def change(msg):
        *head, last = path
        for k in head:
            msg = msg[k]
        if value is KeyError:
            del msg[last]
        else:
            msg[last] = value
    return change


MUTATIONS = {
    "byte_order": (_set(["byte_order"], "middle"), "byte_order is 'middle', not 'little' or 'big'"),
    "header-missing": (_set(["header", "lm_opc"], KeyError), "header.lm_opc is missing"),
    "header-extra": (_set(["header", "lm_nope"], 0), "header.lm_nope is not a lustre_msg_v2 header field"),
    "header-float": (_set(["header", "lm_flags"], 1.0), "header.lm_flags = 1.0 is not an unsigned 32-bit integer"),
    "header-bool": (_set(["header", "lm_flags"], True), "header.lm_flags = True is not an unsigned 32-bit integer"),
    "body-missing": (_set(["body", "pb_uid"], KeyError), "body.pb_uid is missing"),
    "body-extra": (_set(["body", "pb_nope"], 0), "body.pb_nope is not a ptlrpc_body field"),
    "body-wide": (_set(["body", "pb_opc"], 1 << 40), "body.pb_opc = 1099511627776 is not an unsigned 32-bit integer"),
    "body-16": (_set(["body", "pb_tag"], 1 << 16), "body.pb_tag = 65536 is not an unsigned 16-bit integer"),
    "body-signed": (_set(["body", "pb_status"], 1 << 31), "body.pb_status = 2147483648 is not a signed 32-bit integer"),
    "body-list": (_set(["body", "pb_pre_versions"], [0, 0]), "body.pb_pre_versions is not a list of 4 unsigned integers"),
    "jobid": (_set(["body", "pb_jobid"], "j" * 32), "body.pb_jobid is not a string of at most 31 characters"),
    "buflens-empty": (_set(["buflens"], []), "buflens is not a list of 1 to 32 unsigned 32-bit integers"),
    "buflens-33": (_set(["buflens"], [0] * 33), "buflens is not a list of 1 to 32 unsigned 32-bit integers"),
    "buffers-missing": (_set(["buffers"], KeyError), "buffers is not a list of hex strings"),
    "buffers-spaces": (_set(["buffers", 0], "00 00"), "buffers[0] is not hex"),
    "cksum": (_set(["computed_cksum"], -1), "computed_cksum = -1 is not an unsigned 32-bit integer"),
}


def test_reference_result_has_the_described_shape():
    from ptlrpc_conformance.harness.transport.protocol import message_shape_problems
    msg = _decoded()
    assert message_shape_problems(msg) == []
    jsonschema.Draft202012Validator(sub("message")).validate(msg)


@pytest.mark.parametrize("name", MUTATIONS)
def test_check_and_schema_reject_the_same_messages(name):
    """message_shape_problems and the generated schema come from one description: a result
    one refuses, the other refuses too; the check's line says what is wrong."""
    import copy

    from ptlrpc_conformance.harness.data.vector_schema import validator_class   # integers without a fraction
    Validator = validator_class()
    from ptlrpc_conformance.harness.transport.protocol import message_shape_problems
    change, line = MUTATIONS[name]
    msg = copy.deepcopy(_decoded())
    change(msg)
    assert line in message_shape_problems(msg)
    assert not Validator(sub("message")).is_valid(msg)


# what the judge charges each mutation's line to (verdicts/charges.py shape_requirement), when
# the case lists that requirement: the field's own, or DEC-ROBUST-1 for a malformed result
CHARGED = {
    "byte_order": "DEC-ROBUST-1", "header-missing": "HDR-FIELDS-1", "header-extra": "DEC-ROBUST-1",
    "header-float": "HDR-FIELDS-1", "header-bool": "HDR-FIELDS-1", "body-missing": "BODY-FIELDS-1",
    "body-extra": "DEC-ROBUST-1", "body-wide": "BODY-FIELDS-1", "body-16": "BODY-FIELDS-1",
    "body-signed": "BODY-STATUS-1", "body-list": "BODY-FIELDS-1", "jobid": "BODY-JOBID-1",
    "buflens-empty": "DEC-ROBUST-1", "buflens-33": "DEC-ROBUST-1", "buffers-missing": "DEC-ROBUST-1",
    "buffers-spaces": "PAD-BUFFER-1", "cksum": "CKSUM-1",
}


def test_each_shape_problem_is_charged_to_the_requirement_of_what_it_is_about():
    """The judge charges a malformed result by what each problem is about (ShapeProblem.about),
    never by its wording; a requirement the case does not list falls back to DEC-ROBUST-1."""
    import copy

    from ptlrpc_conformance.harness.data import registry
    from ptlrpc_conformance.harness.transport.protocol import message_shape_problems
    from ptlrpc_conformance.harness.verdicts.charges import shape_requirement
    assert set(CHARGED) == set(MUTATIONS)
    every = set(registry.requirements())
    for name, (change, line) in MUTATIONS.items():
        msg = copy.deepcopy(_decoded())
        change(msg)
        problem = next(p for p in message_shape_problems(msg) if p == line)
        assert shape_requirement(problem, every) == CHARGED[name], name
        assert shape_requirement(problem, every - {CHARGED[name]}) == "DEC-ROBUST-1", name
    msg = _decoded()
    short = dict(msg, buflens=[152], body={k: v for k, v in msg["body"].items() if k != "pb_jobid"},
                 buffers=[msg["buffers"][0][:304]])
    for bad, wanted in ((dict(short, body=msg["body"]), ["BODY-JOBID-1"]),       # pb_jobid in a short body
                        (dict(msg, buffers=short["buffers"]), ["PAD-BUFFER-1"]),  # a buffer shorter than its buflen
                        (dict(msg, buflens=[184, 0]),                             # buflens against lm_bufcount,
                         ["HDR-BUFCOUNT-1", "PAD-BUFFER-1"]),                     # and fewer buffers than buflens
                        (dict(msg, buffers=msg["buffers"] * 2), ["PAD-BUFFER-1"])):   # more buffers than buflens
        assert [shape_requirement(p, every) for p in message_shape_problems(bad)] == wanted, bad


def test_cross_member_rules_of_the_check():
    """What the schema cannot say, the check still does."""
    from ptlrpc_conformance.harness.transport.protocol import message_shape_problems
    msg = _decoded()
    short = dict(msg, buflens=[152], body={k: v for k, v in msg["body"].items() if k != "pb_jobid"},
                 buffers=[msg["buffers"][0][:304]])
    assert message_shape_problems(short) == []             # a 152-byte body: no pb_jobid
    assert "body.pb_jobid must be present exactly when lm_buflens[0] >= 184 (lm_buflens[0] = 152, pb_jobid present)" \
        in message_shape_problems(dict(short, body=msg["body"]))
    assert "buffers[0] has 152 bytes, lm_buflens[0] is 184" in message_shape_problems(dict(msg, buffers=short["buffers"]))
    assert message_shape_problems(dict(msg, buffers=short["buffers"]), partial_buffers=True) == []
    assert "buflens has 2 entries, lm_bufcount is 1" in message_shape_problems(dict(msg, buflens=[184, 0]))
    assert "2 buffers for 1 buflens" in message_shape_problems(dict(msg, buffers=msg["buffers"] * 2))


def test_docs_name_every_member_and_field_of_the_description():
    """docs/testee-protocol.md describes the MESSAGE in prose; it names everything the
    description has, with the same widths."""
    import pathlib
    import re

    from ptlrpc_conformance.harness.transport import protocol as P
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "testee-protocol.md").read_text()
    section = doc[doc.index("**MESSAGE**"):doc.index("### 2.3")]
    layouts = doc[doc.index("## 4. Layouts"):]
    for m in P.MESSAGE:
        assert f"`{m.name}`" in section, m.name
    offsets = {f.name: f.offset for s in ("lustre_msg_v2", "ptlrpc_body_v3") for f in spec.layout(s).fields}
    for name in [*P.HEADER, *P.BODY]:
        assert re.search(rf"\b{name}\b", section), name
        assert re.search(rf"`{name}`\s+{offsets[name]}\b", layouts), name
    assert f"exactly** these {['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight'][len(P.HEADER)]}" \
        f" members" in section
    jobid = P.BODY["pb_jobid"]
    assert f"at most {jobid.count} characters" in section
    assert f"only\n  when `lm_buflens[0]` ≥ {P.BODY_FULL_SIZE}" in section
    signed = [k for k, v in P.BODY.items() if v.kind == "int"]
    assert signed == ["pb_status"] and f"except `pb_status`, which is signed {P.BODY['pb_status'].bits}-bit" in section
