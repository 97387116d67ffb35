"""The JSON Schema of testee protocol v1 is valid, agrees with the layout facts, and the
reference testee's actual traffic validates against it."""
import json
import subprocess
import sys
from importlib import resources

import jsonschema
import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.vectors import load_all

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
