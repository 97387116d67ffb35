"""A client under test, run against the suite (`certify --client CMD`, docs/client-rules.md,
"Running a client under test").

The suite serves the reference target as an OST, with the minimal MGS, on 127.0.0.1 at a free
port (harness/transport/lnet_serve.py: `Server`), replaces `{addr}`, `{port}` and `{nid}` in
the client's command, starts it, and lets it run its own workload under a fault schedule drawn
from the run's seed (`schedule`): serve's faults put on the replies to chosen requests of the
workload (drop, a delay past the client's timeout, early replies, a reset of the connection,
an eviction of the client's export, an -EINPROGRESS answer) and restarts of the target with a new incarnation after chosen requests.  When the client
exits, or its run time is up (it is killed), the conversation serve recorded is the client
judge's input (client_judge.py).
"""
from __future__ import annotations

import random
import shlex
import subprocess
from dataclasses import dataclass, field

from ptlrpc_conformance.harness.ost import client_judge as cj

RUN_TIME = 60.0              # the longest a client under test runs before it is killed
CLIENT_TIMEOUT_MS = 1000     # the delay that outlasts the model client's timeout (0.5 s); a Lustre
                             # client waits 5 s or more (adaptive timeouts: at_est2timeout adds 5 s),
                             # so the late reply may reach it: the judge allows either (Sent.late)
DELAY_MS = 3 * CLIENT_TIMEOUT_MS
SCHEDULE_SPAN = 40           # faults fall on the first requests of the workload
FAULT_CHANCE = 0.2
# serve's faults (lnet_serve.Fault) as `--fault` writes them; the delay outlasts the client's timeout
# (`evict` evicts the export: the request and every later one on its handle are answered ERR
# -ENOTCONN by the target itself, and the reconnect gets a new export)
FAULT_KINDS = ("drop", f"delay={DELAY_MS}", "early", "reset", "evict", "error=EINPROGRESS")
RESTARTS = 2


class ClientStartError(Exception):
    """The client's command could not be started."""


def schedule(seed: int) -> dict:
    """The fault schedule of a run: {"faults": {n: kind}, "restarts": [n, ...]}, the n-th
    request of the workload (from 0; connects and replays are not counted).  The same seed
    gives the same schedule."""
    rng = random.Random(f"client-schedule-{seed}")
    faults = {n: rng.choice(FAULT_KINDS) for n in range(SCHEDULE_SPAN) if rng.random() < FAULT_CHANCE}
    restarts = sorted(rng.sample(range(3, SCHEDULE_SPAN // 2), RESTARTS))
    return {"faults": faults, "restarts": restarts}


@dataclass
class ClientRun:
    command: str
    seed: int
    schedule: dict
    conversation: list = field(default_factory=list)     # lnet_serve's entries and restarts
    exit_status: int | None = None                         # None: killed at the end of its run time
    output: str = ""                                       # the tail of what it printed

    def events(self) -> list:
        """The conversation as the judge reads it: the requests of the client's node (the NID
        that sent the most; a user-space process on an unprivileged port is a new LNet process
        on each connection: lnet_serve's `client_id`) with the restarts between them."""
        node = self.node()
        out = []
        for e in self.conversation:
            if "restart" in e:
                out.append(cj.Restart())
            elif _nid(e["client"]) == node:
                out.append(cj.Sent(e["xid"], e["data"], e["reply"], e["fault"], e.get("late_reply")))
        return out

    def node(self) -> str | None:
        counts: dict[str, int] = {}
        for e in self.conversation:
            if "client" in e:
                counts[_nid(e["client"])] = counts.get(_nid(e["client"]), 0) + 1
        return max(sorted(counts), key=counts.get) if counts else None

    def exchanges(self) -> list[dict]:
        """The conversation as the report shows it (the reproducer's exchanges)."""
        return [{"restart": e["restart"]} if "restart" in e else
                {"client": e["client"], "xid": e["xid"], "request": e["data"].hex(),
                 "reply": e["reply"].hex() if e["reply"] is not None else None, "fault": e["fault"],
                 **({"late_reply": e["late_reply"].hex()} if e.get("late_reply") is not None else {})}
                for e in self.conversation]

    def reproducer(self) -> dict:
        return {"client": self.command, "seed": self.seed, "schedule": self.described_schedule(),
                "exit_status": self.exit_status, "exchanges": self.exchanges()}

    def described_schedule(self) -> dict:
        return {"faults": {str(n): k for n, k in sorted(self.schedule["faults"].items())},
                "restarts": list(self.schedule["restarts"])}


def _nid(client: str) -> str:
    return client.split("-", 1)[1]


def run_client(command: str, seed: int, run_time: float = RUN_TIME) -> ClientRun:
    """Serve the reference target, run `command` against it under the schedule of `seed`, and
    return what was seen."""
    from ptlrpc_conformance.harness.transport import lnet_serve
    from ptlrpc_conformance.harness.transport.loader import load_adapter
    plan = schedule(seed)
    run = ClientRun(command, seed, plan)
    faults = {n: lnet_serve.Fault.parse(kind) for n, kind in plan["faults"].items()}
    target = load_adapter("reference")
    target.start()
    server = lnet_serve.Server(target, lnet_serve.default_nid("127.0.0.1"), "127.0.0.1", 0, accept_all=True,
                               mgs=lnet_serve.DEFAULT_TARGET_UUID, plan=faults, restarts=plan["restarts"],
                               record=True)
    try:
        server.start()
        host, port = server.address[:2]
        argv = [a.replace("{addr}", host).replace("{port}", str(port)).replace("{nid}", str(server.node.nid))
                for a in shlex.split(command)]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as e:
            raise ClientStartError(f"--client {command!r}: cannot start: {e}") from None
        try:
            out, _ = proc.communicate(timeout=run_time)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate(timeout=10)
        run.exit_status = proc.returncode if proc.returncode >= 0 else None
        run.output = out.decode("utf-8", "replace")[-4000:]
        run.conversation = list(server.conversation)
    finally:
        server.close()
        target.close()
    return run
