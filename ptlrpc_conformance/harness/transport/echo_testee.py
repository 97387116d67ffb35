"""A testee that answers without decoding: the raw pipe limit, for `ptlrpc-conformance bench`.

    python -m ptlrpc_conformance.harness.transport.echo_testee

It speaks testee protocol v1 (docs/testee-protocol.md) like any testee — one response line
per request, in order, stdout flushed after each — but answers every `decode` with the same
valid MESSAGE (a one-buffer request, decoded once at start by the reference), whatever the
data.  What remains is the cost of the transport: the harness encoding requests and parsing
responses, the pipe, and this process reading lines.  `bench` compares real testees with it.
It is not an implementation: certifying it fails most cases.  Standard library and the
reference (for its one decode at start) only.
"""
from __future__ import annotations

import json
import os
import struct
import sys

from ptlrpc_conformance.reference import make_testee

PREFIX = b'{"id":'


def sample_message() -> dict:
    """A typical decode result: a well-formed one-buffer request, decoded by the reference."""
    body = bytearray(184)
    struct.pack_into("<III", body, 8, 4711, 3, 400)            # pb_type REQUEST, pb_version 3, OBD_PING
    data = struct.pack("<8I", 1, 0, 0x0BD00BD3, 0, 0, 0, 0, 0) + struct.pack("<II", 184, 0) + bytes(body)
    return make_testee().decode_message(data, "request")


def _id_of(line: bytes):
    """The request's id: read directly when the line starts with it (as the harness writes
    it), else from the parsed JSON.  None for a line that is not a request."""
    if line.startswith(PREFIX):
        end = line.find(b",", len(PREFIX))
        digits = line[len(PREFIX):end]
        if end > 0 and digits.isdigit():
            return int(digits), None
    try:
        request = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(request, dict):
        return None, None
    return request.get("id"), request


def serve(fd_in: int = 0, fd_out: int = 1) -> int:
    """Answer until end of input.  Input is read in chunks and the answers to every complete
    line of a chunk are written in one write: each response is out before the process waits
    for more input, which is what flushing after each response guarantees."""
    hello = {"name": "ptlrpc-conformance echo (no decoding)", "version": "1", "capabilities": ["decode"],
             "protocol": 1}
    result = sample_message()
    decoded = b',"ok":true,"result":' + json.dumps(result, separators=(",", ":")).encode() + b"}\n"
    partial = b""
    while True:
        chunk = os.read(fd_in, 1 << 16)
        if not chunk:
            break
        lines = (partial + chunk).split(b"\n")
        partial = lines.pop()
        out = []
        for raw in lines:
            line = raw.strip()
            if line:
                out.append(_answer(line, hello, result, decoded))
        if out:
            data = memoryview(b"".join(out))
            while data:
                data = data[os.write(fd_out, data):]
    if partial.strip():
        os.write(fd_out, _answer(partial.strip(), hello, result, decoded))
    return 0


def _answer(line: bytes, hello: dict, result: dict, decoded: bytes) -> bytes:
    rid, request = _id_of(line)
    if request is None and rid is not None and b'"op":"decode"' in line:
        return PREFIX + str(rid).encode() + decoded
    if request is None:
        try:
            request = json.loads(line)
        except ValueError:
            request = None
    if not isinstance(request, dict):
        response = {"id": None, "ok": False, "error": "EINVAL", "detail": "unreadable request"}
    elif request.get("op") == "hello":
        response = {"id": request.get("id"), "ok": True, "result": hello}
    elif request.get("op") == "decode":
        return PREFIX + json.dumps(request.get("id")).encode() + decoded
    else:
        response = {"id": request.get("id"), "ok": False, "error": "EOPNOTSUPP",
                    "detail": f"operation {request.get('op')!r} is not supported"}
    return json.dumps(response, separators=(",", ":")).encode() + b"\n"


def main() -> int:
    return serve()


if __name__ == "__main__":
    sys.exit(main())
