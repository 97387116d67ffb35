"""A testee that serves like the reference but misbehaves on one input.

usage: hostile.py MODE
  crash     exit(7) when asked to decode a message whose lm_magic is 0
  hang      stop answering (sleep) on that message
  garbage   write a line that is not JSON for that message
  wrongid   answer that message with the wrong id
  stderr    write 1 MiB to stderr before every answer (must never block the harness)
  nohello   answer hello with protocol 2
  silent    exit at once without reading anything
  acceptsall  answer unknown operations as if they succeeded (breaks the protocol smoke check)
  ok        behave
"""
import json
import sys
import time

from ptlrpc_conformance.reference import make_testee

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
TRIGGER_MAGIC = "00000000"   # lm_magic bytes of the framing.magic.zero vector


def main():
    if MODE == "silent":
        return 0
    testee = make_testee()
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        resp = {"id": req.get("id")}
        resp.update(testee.handle(req))
        if MODE == "acceptsall" and resp.get("error") == "EOPNOTSUPP":
            resp = {"id": req.get("id"), "ok": True, "result": {}}
        if req.get("op") == "hello" and MODE == "nohello":
            resp["result"]["protocol"] = 2
        data = req.get("data", "")
        triggered = req.get("op") == "decode" and data[16:24] == TRIGGER_MAGIC and len(data) > 64
        if MODE == "stderr":
            sys.stderr.write("x" * (1 << 20) + "\n")
            sys.stderr.flush()
        if triggered and MODE == "crash":
            sys.exit(7)
        if triggered and MODE == "hang":
            time.sleep(3600)
        if triggered and MODE == "garbage":
            out.write("this is not json {\n")
            out.flush()
            continue
        if triggered and MODE == "wrongid":
            resp["id"] = -1
        out.write(json.dumps(resp) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
