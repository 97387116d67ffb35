"""A testee that serves like the reference but misbehaves on one input.

usage: hostile.py MODE [N]
  crash     exit(7) when asked to decode a message whose lm_magic is 0
  crashsay  the same, after a line on stderr saying so
  hang      stop answering (sleep) on that message
  hangall   answer the hello and the unknown-op probe, then stop answering every request
  gone DIR  hang on that message; every start after the first (a file in DIR says which) exits
            at once, before its hello
  garbage   write a line that is not JSON for that message
  wrongid   answer that message with the wrong id
  bigline   answer that message with a 10 MiB line that is not JSON (an unterminated object)
  toolong   answer that message with a 20 MiB line, longer than the harness accepts
  exitafter N  exit (status 0) right after writing N answers, the hello included,
            whatever is still unread on stdin: in a pipelined batch, mid-batch
  deep      answer that message with a result nested 100,000 arrays deep (JSON too deep to read)
  nested    answer that message with a result nested 200 arrays deep (readable, too deep to judge)
  othercaps DIR  exit(7) on that message like crash; every start after the first (a file in
            DIR says which) declares other capabilities; each start appends its pid to DIR/pids
  stderr    write 1 MiB to stderr before every answer (must never block the harness)
  hellohang DIR  append its pid to DIR/pids, then never answer, not even the hello
  nohello   answer hello with protocol 2
  silent    exit at once without reading anything
  acceptsall  answer unknown operations as if they succeeded (breaks the protocol smoke check)
  ok        behave
A mode may end in @N (crash@N, hang@N, garbage@N, wrongid@N, bigline@N): the testee then
misbehaves on the Nth request after its hello, whatever it is (a decode, an encode, an
exchange, a restart), instead of on that message; each (re)started process counts anew, so
the fault comes back every N requests, inside a property's or a stateful part's examples.
"""
import json
import os
import sys
import time

from ptlrpc_conformance.reference import make_testee

MODE, _, AT = (sys.argv[1] if len(sys.argv) > 1 else "ok").partition("@")
AT = int(AT) if AT else None
EXIT_AFTER = int(sys.argv[2]) if MODE == "exitafter" else None
STATE = sys.argv[2] if MODE in ("othercaps", "gone", "hellohang") else None
TRIGGER_MAGIC = "00000000"   # lm_magic bytes of the framing.magic.zero vector


def main():
    if MODE == "silent":
        return 0
    testee = make_testee()
    out = sys.stdout
    restarted = False
    if STATE is not None:
        with open(os.path.join(STATE, "pids"), "a") as f:
            f.write(f"{os.getpid()}\n")
        restarted = os.path.exists(os.path.join(STATE, "started"))
        open(os.path.join(STATE, "started"), "w").close()
    answered = 0
    served = 0          # requests after the hello
    if MODE == "gone" and restarted:
        return 0
    if MODE == "hellohang":
        time.sleep(3600)
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
        if req.get("op") == "hello" and restarted:
            resp["result"]["capabilities"] = ["decode"]
        data = req.get("data", "")
        if req.get("op") != "hello":
            served += 1
        if AT is not None:
            triggered = served == AT
        else:
            triggered = req.get("op") == "decode" and data[16:24] == TRIGGER_MAGIC and len(data) > 64
        if MODE == "stderr":
            sys.stderr.write("x" * (1 << 20) + "\n")
            sys.stderr.flush()
        if triggered and MODE == "crashsay":
            sys.stderr.write(f"about to crash on request {req.get('id')}\n")
            sys.stderr.flush()
            os._exit(7)
        if triggered and MODE in ("crash", "othercaps"):
            sys.exit(7)
        if triggered and MODE in ("deep", "nested"):
            depth = 100000 if MODE == "deep" else 200
            out.write('{"id": %d, "ok": true, "result": ' % req["id"] + "[" * depth + "]" * depth + "}\n")
            out.flush()
            continue
        if (triggered and MODE in ("hang", "gone")) or (MODE == "hangall" and req.get("op") in ("decode", "encode")):
            time.sleep(3600)
        if triggered and MODE == "garbage":
            out.write("this is not json {\n")
            out.flush()
            continue
        if triggered and MODE == "wrongid":
            resp["id"] = -1
        if triggered and MODE == "bigline":
            out.write('{"id": %d, "ok": true, "result": "' % req["id"] + "x" * (10 << 20) + "\n")
            out.flush()
            continue
        if triggered and MODE == "toolong":
            out.write(json.dumps(dict(resp, padding="x" * (20 << 20))) + "\n")
            out.flush()
            continue
        out.write(json.dumps(resp) + "\n")
        out.flush()
        answered += 1
        if answered == EXIT_AFTER:
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
