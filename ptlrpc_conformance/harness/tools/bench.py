"""`ptlrpc-conformance bench`: how fast the harness drives implementations, on this machine.

A benchmark, not a test: it prints figures, it judges nothing.  In one run it measures

  in-process   decode calls/s of the bundled reference through the adapter interface
               (`--iut reference`: a JSON round trip per call, no process)
  exec         decode calls/s through `exec:` one request at a time (`call`) and pipelined
               (`call_many`, batches of 256), for the echo testee (answers without decoding:
               the raw pipe limit), the Python reference testee, the C example testee (built
               with make; skipped with the reason when it cannot be built) and every
               `--iut SPEC` given; the ratio pipelined / one at a time, and each testee's
               share of the pipe limit
  tshark       the tshark adapter's messages/s against tshark's own dissection rate (the
               same messages as a capture file, dissected by one tshark run with the same
               fields, its start-up time subtracted); skipped with the reason when tshark
               or the adapter is missing, reported failed with the reason when tshark's
               own run fails (an exit status other than 0, or no end within 600 s)
  lnet         exchanges/s over LNet on loopback: the LNet engine (a client node on
               127.0.0.2) sends OST_STATFS requests as PUTs to an in-process `serve --iut
               reference` (a listener on 127.0.0.1, a free port, accept_all) and waits for
               each final reply; one at a time, and with LNET_IN_FLIGHT exchanges in flight
               at once (as many threads on the one connection, each with its own XIDs),
               beside the same requests to the reference in-process (no LNet)
  suite        wall time of `certify --iut reference`, serial and with `-n auto`, in turn,
               --suite-rounds times (medians reported), beside this machine's own speed-up
               on two CPU-bound processes at the time (on a shared machine both move); with
               --workload-ceiling also two whole serial certifications at once against one
               after the other: about the most a perfect split of this work in two could gain
               (the medians' CPU-ceiling serial figure, `ceiling[].serial_s`, is the yardstick
               of the serial run: `serial_ratio`); and the start-up of each serial run: from
               the process's start to the first case's call (the first case's first request)
  plugin       what the installed pytest plugin costs a project that does not use it: the
               wall time of a one-test pytest project with the plugin and without it (`-p
               no:ptlrpc_conformance`), in turn, --plugin-rounds times (medians, and their
               spread), and the plugin module's import time (`python -X importtime`)

Inputs: the valid bundled decode vectors up to 4 KiB (messages of a few hundred bytes, each
decoded to a MESSAGE of about 1 KB; the run prints how many; the 1 MB vectors would measure
JSON and hex throughput, not decoding), round robin.  The echo testee's fixed answer is a MESSAGE of the same size, so
its rate is the transport's limit for these inputs.  `--quick` shortens every measurement and
runs the suite section on one case, serially only (a smoke run; its figures mean little).

The C example is built from --c-testee, else from examples/c-testee of the source checkout
the package runs from (beside the package directory), else of the current directory.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture import pcap, socklnd
from ptlrpc_conformance.harness.data.vectors import load_all
from ptlrpc_conformance.harness.options import Parser, positive_float, positive_int
from ptlrpc_conformance.harness.tools import firstcase
from ptlrpc_conformance.harness.ost import wire as ost_wire
from ptlrpc_conformance.harness.ost.client import Client
from ptlrpc_conformance.harness.transport import tshark as tshark_adapter
from ptlrpc_conformance.harness.transport.adapter import IUTStartError, NotApplicable, UsageError
from ptlrpc_conformance.harness.transport.lnet_engine.node import LnetSetupError, Node
from ptlrpc_conformance.harness.transport.lnet_engine.wire import Nid
from ptlrpc_conformance.harness.transport.lnet_serve import REPLY_PORTAL, Server
from ptlrpc_conformance.harness.transport.loader import load_adapter

BATCH = 256
MAX_INPUT = 4096
QUICK_SUITE_ARGS = ["--case", "framing.magic.zero.decode", "--examples", "1"]
FIRST_CASE_PLUGIN = firstcase.__name__


def _inputs() -> list[dict]:
    return [v.decode_request() for v in load_all()
            if v.op == "decode" and v.verdict == "valid" and len(v.data) <= MAX_INPUT]


def _measure(adapter, requests: list[dict], seconds: float, batch: int) -> tuple[float | None, str | None]:
    """(calls per second, None), or (None, why) when the IUT misbehaved or cannot decode."""
    n = 0
    chunks = [[requests[(k * batch + i) % len(requests)] for i in range(batch)] for k in range(len(requests))]
    try:
        adapter.call_many(chunks[0])              # warm-up (and the hello)
        start = time.perf_counter()
        while True:
            elapsed = time.perf_counter() - start
            if elapsed >= seconds and n:
                break
            chunk = chunks[(n // batch) % len(chunks)]
            if batch == 1:
                outcomes = [adapter.call(chunk[0])]
            else:
                outcomes = adapter.call_many(chunk)
            bad = next((o for o in outcomes if o.trouble), None)
            if bad is not None:
                return None, f"the IUT failed: {bad.describe()}"
            n += len(outcomes)
        return n / (time.perf_counter() - start), None
    except NotApplicable as e:
        return None, str(e)


def _rate_pair(spec: str, requests, seconds: float, timeout: float, rounds: int = 3) -> dict:
    """One at a time and pipelined, alternately, `rounds` times `seconds / rounds` each; the
    best round of each counts (other load on the machine only ever makes a round slower)."""
    row: dict = {"iut": spec}
    try:
        adapter = load_adapter(spec, timeout=timeout)
        adapter.start()
    except (UsageError, IUTStartError) as e:
        row["skipped"] = f"cannot start: {e}"
        return row
    try:
        row["name"] = f"{adapter.hello.name} {adapter.hello.version}"
        for _ in range(rounds):
            for key, batch in (("one_at_a_time", 1), ("pipelined", BATCH)):
                rate, why = _measure(adapter, requests, seconds / rounds, batch)
                if why:
                    row["skipped"] = why
                    return row
                row[key] = max(row.get(key, 0), round(rate, 1))
        row["ratio"] = round(row["pipelined"] / row["one_at_a_time"], 2)
        row["restarts"] = adapter.restarts
    finally:
        adapter.close()
    return row


def c_testee_source(given: str | None = None) -> tuple[pathlib.Path | None, list[pathlib.Path]]:
    """(the C example's source directory, the places looked at): `given`, else examples/c-testee
    beside the package directory (a source checkout, an editable install), else under the
    current directory; None when none of them has a Makefile (a wheel ships no examples)."""
    if given:
        return pathlib.Path(given), [pathlib.Path(given)]
    package = pathlib.Path(__file__).resolve().parents[2]          # .../ptlrpc_conformance
    places = [package.parent / "examples" / "c-testee", pathlib.Path.cwd() / "examples" / "c-testee"]
    places = list(dict.fromkeys(p.resolve() for p in places))
    return next((p for p in places if (p / "Makefile").is_file()), None), places


def _build_c_testee(src: pathlib.Path) -> tuple[str | None, str | None]:
    """(the exec: spec of the built C testee, None) or (None, why it was skipped)."""
    if not (src / "Makefile").is_file():
        return None, f"{src} has no Makefile (the C example ships with a source checkout, not with the wheel)"
    for tool in ("make", os.environ.get("CC", "cc")):
        if shutil.which(tool) is None:
            return None, f"{tool} is not installed (the C testee is built with make and a C compiler)"
    proc = subprocess.run(["make", "-C", str(src), "ptlrpc-testee"], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"make -C {src} failed: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return "exec:" + shlex.quote(str(src / "ptlrpc-testee")), None


# ------------------------------------------------------------------------------------
# tshark
# ------------------------------------------------------------------------------------

OWN_RUN_TIMEOUT = 600.0


class _SectionFailed(Exception):
    """A measurement that could not be made; the message says why."""


def _tshark_section(spec: str, requests, seconds: float, timeout: float, rounds: int) -> dict:
    row = _rate_pair(spec, requests, seconds, max(timeout, 30.0), rounds)
    if "skipped" in row:
        return row
    program = tshark_adapter.find_tshark(spec.partition(":")[2] or None)
    if program is None:
        row["own_skipped"] = "tshark program not found"
        return row
    # tshark's own rate: the same requests (as request-direction PUTs) in one capture file,
    # dissected by one tshark run printing the adapter's fields; start-up subtracted
    messages = [bytes.fromhex(r["data"]) for r in requests if r.get("direction") == "request"]
    with tempfile.TemporaryDirectory(prefix="ptlrpc-bench-") as tmp:
        def capture(name: str, count: int) -> str:
            path = os.path.join(tmp, name)
            pcap.write_pcap(path, [{"client": "c1", "xid": i + 1, "request": messages[i % len(messages)],
                                    "reply": None} for i in range(count)])
            return path

        fields = getattr(tshark_adapter, "FIELDS", ())
        argv = [program, "-n", "-T", "ek"] + [x for f in fields for x in ("-e", f)]
        env = dict(os.environ, WIRESHARK_CONFIG_DIR=tmp)

        def run(path: str) -> float:
            start = time.perf_counter()
            what = f"`{os.path.basename(program)} -r {os.path.basename(path)}`"
            try:
                proc = subprocess.run(argv + ["-r", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      env=env, check=False, timeout=OWN_RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise _SectionFailed(f"{what} did not finish within {OWN_RUN_TIMEOUT:g} s") from None
            except OSError as e:
                raise _SectionFailed(f"{what} could not run: {e.strerror or e}") from None
            if proc.returncode != 0:
                err = proc.stderr.decode("utf-8", "replace").strip()[-300:]
                raise _SectionFailed(f"{what} exited with status {proc.returncode}" + (f": {err}" if err else ""))
            return time.perf_counter() - start

        count = max(1000, int(row["pipelined"] * seconds))
        one, many = capture("one.pcap", 1), capture("many.pcap", count)
        try:
            startup = min(run(one) for _ in range(2))
            whole = min(run(many) for _ in range(rounds))
        except _SectionFailed as e:
            row["own_failed"] = str(e)
            return row
    row["tshark_startup_s"] = round(startup, 3)
    row["tshark_own"] = round(count / max(whole - startup, 1e-6), 1)
    row["tshark_messages"] = count
    row["share_of_own"] = round(row["pipelined"] / row["tshark_own"], 2)
    return row


# ------------------------------------------------------------------------------------
# suite wall time
# ------------------------------------------------------------------------------------

LOOP = "s = 0\nfor i in range(4_000_000):\n    s += i\n"


LNET_IN_FLIGHT = 8
LNET_SERVER, LNET_CLIENT = "127.0.0.1@tcp", "127.0.0.2@tcp"
# where osc_statfs sends OST_STATFS (spec/target.yaml `portals`)
STATFS_PORTAL = next(p for p, row in spec.target()["portals"]["requests"].items() if row["name"] == "OST_CREATE_PORTAL")


def _lnet_section(seconds: float, rounds: int, timeout: float) -> dict:
    """Exchanges/s through the LNet engine to an in-process `serve --iut reference`: one at a
    time, and LNET_IN_FLIGHT at once; the same requests to the reference in-process beside
    them.  The best round of each counts."""
    out: dict = {"server": LNET_SERVER, "client": LNET_CLIENT, "request": "OST_STATFS", "xids_in_flight": LNET_IN_FLIGHT}
    try:
        adapter = load_adapter("reference", timeout=timeout)
        adapter.start()
    except (UsageError, IUTStartError) as e:
        out["skipped"] = f"cannot start the reference: {e}"
        return out
    server = node = None
    try:
        server = Server(adapter, LNET_SERVER, "127.0.0.1", 0, accept_all=True).start()
        node = Node(Nid.parse(LNET_CLIENT))
        dialled = node.connect("127.0.0.1", LNET_SERVER, server.address[1], privileged=False)
        if not dialled.ok:
            out["skipped"] = f"the engine could not connect to serve on 127.0.0.1: {dialled.kind}: {dialled.detail}"
            return out
        conn = dialled.connection
        client, lock = Client("bench-lnet", 0x1000), threading.Lock()
        xid, data = client.connect()
        first = conn.exchange(socklnd.OST_REQUEST_PORTAL, xid, data, reply_portal=REPLY_PORTAL, timeout=timeout)
        if first.kind != "reply":
            out["skipped"] = f"OST_CONNECT over LNet: {first.kind}: {first.detail}"
            return out
        client.cookie = ost_wire.parse(first.reply.payload, "reply").body["pb_handle"]
        failures: list[str] = []

        def statfs() -> tuple[int, bytes]:
            with lock:
                return client.request("OST_STATFS")

        def over_lnet(until: float, counts: list, i: int) -> None:
            while time.perf_counter() < until and not failures:
                x, d = statfs()
                r = conn.exchange(STATFS_PORTAL, x, d, reply_portal=REPLY_PORTAL, timeout=timeout)
                if r.kind != "reply":
                    failures.append(f"{r.kind}: {r.detail}")
                    return
                counts[i] += 1

        def in_process(until: float, counts: list, i: int) -> None:
            while time.perf_counter() < until and not failures:
                x, d = statfs()
                r = adapter.call({"op": "exchange", "data": d.hex(), "xid": x, "client": "bench-in-process"})
                if r.trouble:
                    failures.append(r.describe())
                    return
                counts[i] += 1

        def rate(work, threads: int) -> float:
            counts = [0] * threads
            start = time.perf_counter()
            until = start + seconds / rounds
            workers = [threading.Thread(target=work, args=(until, counts, i), daemon=True) for i in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(seconds / rounds + 2 * timeout)
            return sum(counts) / (time.perf_counter() - start)

        for _ in range(rounds):
            for key, work, threads in (("in_process", in_process, 1), ("one_at_a_time", over_lnet, 1),
                                       ("in_flight", over_lnet, LNET_IN_FLIGHT)):
                got = rate(work, threads)
                if failures:
                    out["failed"] = f"{key.replace('_', ' ')}: {failures[0]}"
                    return out
                out[key] = max(out.get(key, 0), round(got, 1))
        out["share_of_in_process"] = round(out["one_at_a_time"] / out["in_process"], 3)
        out["in_flight_ratio"] = round(out["in_flight"] / out["one_at_a_time"], 2)
        return out
    except (OSError, LnetSetupError) as e:
        out["skipped"] = f"cannot use 127.0.0.1: {e}"
        return out
    finally:
        if node is not None:
            node.close()
        if server is not None:
            server.close()
        adapter.close()


def _print_lnet(t: dict) -> None:
    for key in ("skipped", "failed"):
        if key in t:
            print(f"  {key}: {t[key]}")
            return
    print(f"  {t['request']} from {t['client']} to serve --iut reference at {t['server']}: "
          f"{_fmt(t['one_at_a_time'])} one at a time, {_fmt(t['in_flight'])} with {t['xids_in_flight']} in flight "
          f"({t['in_flight_ratio']:.1f}x)")
    print(f"  the same requests to the reference in-process: {_fmt(t['in_process'])}; over LNet one at a time "
          f"reaches {100 * t['share_of_in_process']:.0f}% of it")


def _ceiling() -> dict:
    """How much faster two CPU-bound Python processes run at once than one after the other on
    this machine now: the most any -n auto run can gain.  On a shared machine it moves from run
    to run, so the suite's speed-up is printed beside it."""
    def procs(together: bool) -> float:
        start = time.perf_counter()
        if together:
            ps = [subprocess.Popen([sys.executable, "-c", LOOP]) for _ in range(2)]
            for proc in ps:
                proc.wait()
        else:
            for _ in range(2):
                subprocess.run([sys.executable, "-c", LOOP], check=False)
        return time.perf_counter() - start
    serial, together = procs(False), procs(True)
    return {"serial_s": round(serial, 2), "together_s": round(together, 2), "speedup": round(serial / together, 2)}


def _certify_argv(tmp: str, name: str, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "ptlrpc_conformance.cli", "certify", "--iut", "reference",
            "--out", os.path.join(tmp, name), "-q"] + extra


def _workload_ceiling(extra: list[str], together_first: bool) -> dict:
    """Two whole serial certifications, one after the other, and two at once.  Neither of the
    two at once waits for the other or pays a start-up the other avoids, so their speed-up
    estimates the most a perfect split of this very work in two (no overhead, halves of equal
    weight) could gain on this machine now; unlike the loop of _ceiling, it runs the suite's
    code on its data.  It is noisy: the machine's speed may change between the two halves
    (a figure above the number of cores can only come from that), so the rounds alternate
    which half goes first (`together_first`)."""
    with tempfile.TemporaryDirectory(prefix="ptlrpc-bench-") as tmp:
        def one_after_the_other() -> tuple[float, list[int]]:
            start = time.perf_counter()
            statuses = [subprocess.run(_certify_argv(tmp, f"after{i}", extra), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, cwd=tmp, check=False).returncode for i in range(2)]
            return time.perf_counter() - start, statuses

        def at_once() -> tuple[float, list[int]]:
            start = time.perf_counter()
            procs = [subprocess.Popen(_certify_argv(tmp, f"together{i}", extra), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd=tmp) for i in range(2)]
            statuses = [proc.wait() for proc in procs]
            return time.perf_counter() - start, statuses

        if together_first:
            (together, s1), (serial, s2) = at_once(), one_after_the_other()
        else:
            (serial, s1), (together, s2) = one_after_the_other(), at_once()
    return {"serial_s": round(serial, 2), "together_s": round(together, 2), "speedup": round(serial / together, 2),
            "together_first": together_first, "exit_statuses": s1 + s2}


def _suite_section(quick: bool, rounds: int = 3, workload: bool = False) -> dict:
    """`rounds` runs of the certification, serial and with -n auto in turn, each followed by a
    measure of the machine's own two-process ceiling (and, with `workload`, of the same for
    two whole certifications); the medians are the figures."""
    extra = QUICK_SUITE_ARGS if quick else []
    out: dict = {"command": "ptlrpc-conformance certify --iut reference" + (" " + " ".join(extra) if extra else ""),
                 "runs": [], "ceiling": []}
    have_xdist = importlib.util.find_spec("xdist") is not None
    for round_no in range(1, (1 if quick else rounds) + 1):
        for jobs in (None, "auto"):
            label = "serial" if jobs is None else f"-n {jobs}"
            if jobs and not have_xdist:
                out["runs"].append({"mode": label, "round": round_no, "skipped": "pytest-xdist is not installed"})
                continue
            if jobs and quick:
                out["runs"].append({"mode": label, "round": round_no,
                                    "skipped": "--quick (starting workers costs more than one case)"})
                continue
            with tempfile.TemporaryDirectory(prefix="ptlrpc-bench-") as tmp:
                first_case = os.path.join(tmp, "first-case")
                argv = _certify_argv(tmp, "out", extra + (["-n", jobs] if jobs else ["--", "-p", FIRST_CASE_PLUGIN]))
                launched = time.time()
                proc, wall, cpu = _timed(argv, cwd=tmp, env=dict(os.environ, **{firstcase.ENV: first_case}))
                run = {"mode": label, "round": round_no, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                       "exit_status": proc.returncode}
                if not jobs:
                    try:
                        when, cpu_then = map(float, pathlib.Path(first_case).read_text().split())
                        run["startup_s"], run["startup_cpu_s"] = round(when - launched, 3), round(cpu_then, 3)
                    except (OSError, ValueError):
                        run["startup_s"] = None
                try:
                    report = json.loads(pathlib.Path(tmp, "out", "report.json").read_text())
                    run["cases"] = report["summary"]["total"]
                except (OSError, ValueError, KeyError):
                    run["cases"] = None
            out["runs"].append(run)
        if not quick and have_xdist:
            out["ceiling"].append(_ceiling())
        if workload:
            out.setdefault("workload_ceiling", []).append(_workload_ceiling(extra, together_first=round_no % 2 == 0))
    medians = {}
    for mode in ("serial", "-n auto"):
        walls = [r["wall_s"] for r in out["runs"] if r["mode"] == mode and "wall_s" in r]
        if walls:
            medians[mode] = statistics.median(walls)
    out["median_s"] = medians
    startups = [r["startup_s"] for r in out["runs"] if r.get("startup_s") is not None]
    if startups:
        out["median_startup_s"] = statistics.median(startups)
    if len(medians) == 2:
        out["speedup"] = round(medians["serial"] / medians["-n auto"], 2)
    if out["ceiling"]:
        out["ceiling_speedup"] = statistics.median(c["speedup"] for c in out["ceiling"])
        # the serial certification against the ceiling's serial figure (its fixed loop, twice in
        # turn): a speed of the suite that the speed of the machine at the time divides out
        out["ceiling_serial_s"] = statistics.median(c["serial_s"] for c in out["ceiling"])
        if "serial" in medians:
            out["serial_ratio"] = round(medians["serial"] / out["ceiling_serial_s"], 2)
    clean = [c["speedup"] for c in out.get("workload_ceiling", ()) if not any(c["exit_statuses"])]
    if clean:       # a round whose certifications did not all pass measures something else
        out["workload_ceiling_speedup"] = statistics.median(clean)
    return out


# ------------------------------------------------------------------------------------
# the plugin in a project that does not use it
# ------------------------------------------------------------------------------------

ONE_TEST = ("import sys\n\n\ndef test_one():\n"
            "    with open('plugin-loaded', 'w') as f:\n"
            "        f.write(str('ptlrpc_conformance.plugin' in sys.modules))\n")
PLUGIN = "ptlrpc_conformance.plugin"
# what a pytest run loads of the package when it does not use the suite: the plugin, the option
# table, the fixtures (tests/test_plugin.py checks that it loads no more)
REGISTRATION = ("ptlrpc_conformance.plugin", "ptlrpc_conformance.harness.options", "ptlrpc_conformance.fixtures.core")


def _import_us(code: str, modules: tuple[str, ...]) -> int | None:
    """The cumulative import time (µs, `python -X importtime`) of `modules` in a fresh process
    running `code`: the sum of their lines' cumulative figures, a module imported while another
    of them was being imported counted in that one's figure only."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    total, seen, inside = 0, set(), None
    # importtime prints a module after the modules it imported, one space deeper each level:
    # read backwards, a counted module's subtree is what follows it deeper
    for line in reversed(proc.stderr.splitlines()):
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].strip()
        depth = len(parts[2]) - len(parts[2].lstrip())
        if inside is not None and depth > inside:
            seen.add(name)
            continue
        inside = None
        if name in modules and name not in seen:
            seen.add(name)
            total += int(parts[1])
            inside = depth
    return total if proc.returncode == 0 and set(modules) <= seen else None


def _timed(argv: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float, float]:
    """subprocess.run(argv) with its wall time and its CPU time (user and system, of the process
    and its children): on a shared machine the CPU time moves far less than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _mad(values: list[float]) -> float:
    """The median absolute deviation from the median: the runs' spread, robust to one outlier."""
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def _plugin_section(rounds: int) -> dict:
    """A one-test project run with the plugin and with `-p no:ptlrpc_conformance`, in turn
    (the order alternating), `rounds` times each; and the import time of the plugin module
    alone (a fresh `python -c "import ptlrpc_conformance.plugin"`) and of what a pytest run loads
    with it (pytest loaded first, as in a run).  The difference of the medians is the plugin's
    cost; the spread of the runs (median absolute deviation) is the noise it is measured in."""
    out: dict = {"project": "one test, `python -m pytest -q -p no:cacheprovider test_one.py`",
                 "rounds": rounds, "with_s": [], "without_s": []}
    with tempfile.TemporaryDirectory(prefix="ptlrpc-bench-") as tmp:
        pathlib.Path(tmp, "test_one.py").write_text(ONE_TEST)
        pathlib.Path(tmp, "pytest.ini").write_text("[pytest]\n")     # the project's own root
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"]
        runs = (("with_s", [], "True"), ("without_s", ["-p", "no:ptlrpc_conformance"], "False"))
        for k in range(rounds):
            for key, extra, loaded in (runs if k % 2 == 0 else runs[::-1]):
                proc, wall, cpu = _timed(base + extra, cwd=tmp)
                seen = pathlib.Path(tmp, "plugin-loaded")
                if proc.returncode != 0 or not seen.is_file() or seen.read_text() != loaded:
                    out["skipped"] = (f"the one-test project's run {' '.join(extra) or 'with the plugin'} did not "
                                      f"pass with the plugin {'loaded' if loaded == 'True' else 'left out'} "
                                      f"(is the package installed, with its pytest11 entry point?): "
                                      + (proc.stdout + proc.stderr).strip()[-300:])
                    return out
                seen.unlink()
                out[key].append(round(wall, 3))
                out.setdefault(key.replace("_s", "_cpu_s"), []).append(round(cpu, 3))
    out["median_with_s"] = statistics.median(out["with_s"])
    out["median_without_s"] = statistics.median(out["without_s"])
    out["difference_ms"] = round(1000 * (out["median_with_s"] - out["median_without_s"]), 1)
    out["noise_ms"] = round(1000 * max(_mad(out["with_s"]), _mad(out["without_s"])), 1)
    out["within_noise"] = abs(out["difference_ms"]) <= out["noise_ms"]
    out["difference_cpu_ms"] = round(1000 * (statistics.median(out["with_cpu_s"])
                                             - statistics.median(out["without_cpu_s"])), 1)
    out["noise_cpu_ms"] = round(1000 * max(_mad(out["with_cpu_s"]), _mad(out["without_cpu_s"])), 1)
    imports = [_import_us(f"import {PLUGIN}", (PLUGIN,)) for _ in range(3)]
    loaded = [_import_us("import pytest; import " + ", ".join(REGISTRATION), REGISTRATION) for _ in range(3)]
    if None not in imports:
        out["import_ms"] = round(statistics.median(imports) / 1000, 1)
    if None not in loaded:
        out["registration_import_ms"] = round(statistics.median(loaded) / 1000, 1)
    return out


# ------------------------------------------------------------------------------------
# output
# ------------------------------------------------------------------------------------

def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _fmt(rate) -> str:
    return f"{rate:,.0f}/s" if rate is not None else "-"


def _print_exec(rows: list[dict], echo: dict | None) -> None:
    print(f"  {'testee':<52} {'one at a time':>14} {'pipelined':>12} {'ratio':>7} {'of pipe limit':>14}")
    limit = echo.get("pipelined") if echo else None
    for r in rows:
        label = r["label"]
        if "skipped" in r:
            print(f"  {label:<52} skipped: {r['skipped']}")
            continue
        share = f"{100 * r['pipelined'] / limit:.0f}%" if limit and r is not echo else ("100%" if r is echo else "-")
        print(f"  {label:<52} {_fmt(r['one_at_a_time']):>14} {_fmt(r['pipelined']):>12} {r['ratio']:>6.1f}x "
              f"{share:>14}")


def _print_tshark(t: dict) -> None:
    if "skipped" in t:
        print(f"  skipped: {t['skipped']}")
        return
    print(f"  adapter ({t['iut']}): {_fmt(t['one_at_a_time'])} one at a time, {_fmt(t['pipelined'])} pipelined")
    if "own_skipped" in t:
        print(f"  tshark's own rate: skipped: {t['own_skipped']}")
    elif "own_failed" in t:
        print(f"  tshark's own rate: failed: {t['own_failed']}")
    else:
        print(f"  tshark's own rate: {_fmt(t['tshark_own'])} ({t['tshark_messages']} messages in one capture, "
              f"start-up {t['tshark_startup_s']:.2f} s subtracted); the adapter reaches "
              f"{100 * t['share_of_own']:.0f}% of it")


def main(argv: list[str] | None = None, prog: str = "ptlrpc-conformance bench") -> int:
    p = Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=positive_float, default=3.0, help="length of each measurement (default 3)")
    p.add_argument("--quick", action="store_true",
                   help="short measurements and a subset of the suite (a smoke run; figures mean little)")
    p.add_argument("--iut", action="append", default=[], metavar="SPEC",
                   help="also measure this IUT (exec:COMMAND, python:..., ...); repeatable")
    p.add_argument("--c-testee", default=None, metavar="DIR",
                   help="source directory of the C example testee, built with make (default examples/c-testee of "
                        "the source checkout, else of the current directory)")
    p.add_argument("--tshark", default="tshark", metavar="SPEC",
                   help="the tshark adapter's --iut value (default tshark)")
    p.add_argument("--no-tshark", action="store_true", help="skip the tshark section")
    p.add_argument("--no-lnet", action="store_true", help="skip the LNet loopback section")
    p.add_argument("--no-suite", action="store_true", help="skip the suite wall-time section")
    p.add_argument("--no-plugin", action="store_true", help="skip the plugin section")
    p.add_argument("--plugin-rounds", type=positive_int, default=7, metavar="N",
                   help="runs of the one-test project with and without the plugin, each (default 7; --quick 3)")
    p.add_argument("--suite-rounds", type=positive_int, default=3, metavar="N",
                   help="certification runs of each kind in the suite section, medians reported (default 3)")
    p.add_argument("--workload-ceiling", action="store_true",
                   help="after each round also run two serial certifications one after the other and at once: "
                        "about the most a perfect two-way split of the suite could gain here (about 3 runs' time "
                        "a round)")
    p.add_argument("--iut-timeout", type=positive_float, default=10.0, help="per-call timeout (default 10)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the figures as JSON to FILE")
    args = p.parse_args(argv)
    if args.workload_ceiling and args.no_suite:
        p.error("--workload-ceiling measures in the suite section, which --no-suite skips")
    if args.json and not pathlib.Path(args.json).resolve().parent.is_dir():
        p.error(f"--json {args.json}: no such directory")
    seconds = min(args.seconds, 0.3) if args.quick else args.seconds
    rounds = 1 if args.quick else 3
    requests = _inputs()
    cores = os.cpu_count()
    load = _loadavg()
    result: dict = {"format": "ptlrpc-conformance-bench/1",
                    "machine": {"cores": cores, "python": platform.python_version(), "platform": platform.platform(),
                                "load_before": load},
                    "seconds": seconds, "rounds": rounds, "quick": args.quick, "batch": BATCH,
                    "inputs": {"requests": len(requests), "max_bytes": MAX_INPUT}}
    print(f"ptlrpc-conformance bench: {cores} cores, Python {platform.python_version()}, {platform.platform()}"
          + (f"; load average {load:.2f}" if load is not None else ""))
    print(f"inputs: {len(requests)} decode requests (the valid bundled vectors up to {MAX_INPUT} bytes), round robin; "
          f"{seconds:g} s per figure, best of {rounds} rounds; pipelined = call_many, batches of {BATCH}"
          + ("; --quick" if args.quick else ""))

    print("\n[in-process] decode calls/s through the adapter interface (JSON round trip, no process)")
    ref = _rate_pair("reference", requests, seconds, args.iut_timeout, rounds)
    ref["label"] = "reference (in-process)"
    result["in_process"] = ref
    if "skipped" in ref:
        print(f"  reference: skipped: {ref['skipped']}")
    else:
        print(f"  {'':<52} {'one at a time':>14} {'call_many':>12}")
        print(f"  {'reference (in-process)':<52} {_fmt(ref['one_at_a_time']):>14} {_fmt(ref['pipelined']):>12}")

    print("\n[exec] decode calls/s through exec: (a testee process on stdin/stdout)")
    py = shlex.quote(sys.executable)
    rows = []
    echo = _rate_pair(f"exec:{py} -m ptlrpc_conformance.harness.transport.echo_testee", requests, seconds, args.iut_timeout,
                      rounds)
    echo["label"] = "echo, no decoding (raw pipe limit)"
    rows.append(echo)
    r = _rate_pair(f"exec:{py} -m ptlrpc_conformance.reference", requests, seconds, args.iut_timeout, rounds)
    r["label"] = "reference (python -m ptlrpc_conformance.reference)"
    rows.append(r)
    src, places = c_testee_source(args.c_testee)
    if src is None:
        spec, why = None, ("no examples/c-testee with a Makefile in " + " or ".join(str(p.parent.parent) for p in places)
                           + " (the C example ships with a source checkout, not with the wheel; --c-testee DIR)")
    else:
        spec, why = _build_c_testee(src)
    if spec is None:
        rows.append({"iut": "c-testee", "label": "C example (examples/c-testee)", "skipped": why})
    else:
        r = _rate_pair(spec, requests, seconds, args.iut_timeout, rounds)
        r["label"] = "C example (examples/c-testee)"
        rows.append(r)
    for extra in args.iut:
        r = _rate_pair(extra, requests, seconds, args.iut_timeout, rounds)
        r["label"] = extra if len(extra) <= 52 else extra[:49] + "..."
        rows.append(r)
    _print_exec(rows, echo if "skipped" not in echo else None)
    result["exec"] = rows

    print("\n[tshark] the tshark adapter against tshark's own dissection rate")
    if args.no_tshark:
        result["tshark"] = {"iut": args.tshark, "skipped": "--no-tshark"}
    else:
        result["tshark"] = _tshark_section(args.tshark, requests, seconds, args.iut_timeout, rounds)
    _print_tshark(result["tshark"])

    print("\n[lnet] exchanges/s over LNet on loopback (the engine to serve --iut reference, in-process)")
    if args.no_lnet:
        result["lnet"] = {"skipped": "--no-lnet"}
    else:
        result["lnet"] = _lnet_section(seconds, rounds, args.iut_timeout)
    _print_lnet(result["lnet"])

    print("\n[suite] wall time of the whole certification run")
    if args.no_suite:
        result["suite"] = {"skipped": "--no-suite"}
        print("  skipped: --no-suite")
    else:
        s = _suite_section(args.quick, args.suite_rounds, args.workload_ceiling)
        result["suite"] = s
        print(f"  command: {s['command']}")
        for run in s["runs"]:
            if "skipped" in run:
                print(f"  {run['mode']:<10} skipped: {run['skipped']}")
            else:
                status = "" if run["exit_status"] == 0 else f"  (exit status {run['exit_status']})"
                print(f"  {run['mode']:<10} {run['wall_s']:>8.1f} s   {run['cases']} cases{status}   (round {run['round']})")
        for mode, wall in s["median_s"].items():
            print(f"  median {mode}: {wall:.1f} s")
        if "median_startup_s" in s:
            print(f"  start-up of the serial runs (process start to the first case's first request): "
                  f"median {s['median_startup_s']:.2f} s ("
                  + ", ".join(f"{r['startup_s']:.2f}" for r in s["runs"] if r.get("startup_s") is not None) + ")")
        if "serial_ratio" in s:
            print(f"  serial certification / the ceiling's serial figure ({s['ceiling_serial_s']:.2f} s, a fixed "
                  f"pure-Python loop run twice in turn): {s['serial_ratio']:.2f}x")
        if "speedup" in s:
            print(f"  speed-up with -n auto (medians): {s['speedup']:.2f}x")
        if "ceiling_speedup" in s:
            print(f"  this machine's own two-process speed-up meanwhile: {s['ceiling_speedup']:.2f}x (median of "
                  + ", ".join(f"{c['speedup']:.2f}" for c in s["ceiling"])
                  + "; a pure-Python loop run twice, one after the other and at once)")
        if s.get("workload_ceiling"):
            rounds_text = ", ".join(f"{c['speedup']:.2f}" + (" (failed)" if any(c["exit_statuses"]) else "")
                                    for c in s["workload_ceiling"])
            median = f"{s['workload_ceiling_speedup']:.2f}x" if "workload_ceiling_speedup" in s else "none"
            print(f"  two whole serial certifications at once against one after the other: {median} (median of "
                  + rounds_text + "; about the most a perfect two-way split of this work could gain here"
                  + ("; --quick: one short case, mostly start-up)" if args.quick else ")"))
            if any(any(c["exit_statuses"]) for c in s["workload_ceiling"]):
                print("  (a round marked failed had a certification end with a non-zero exit status: not in the median)")

    print("\n[plugin] the pytest plugin in a project that does not use it")
    if args.no_plugin:
        result["plugin_overhead"] = {"skipped": "--no-plugin"}
        print("  skipped: --no-plugin")
    else:
        rounds = min(args.plugin_rounds, 3) if args.quick else args.plugin_rounds
        po = result["plugin_overhead"] = _plugin_section(rounds)
        if "skipped" in po:
            print(f"  skipped: {po['skipped']}")
        else:
            print(f"  one-test project, {rounds} runs each: with the plugin {1000 * po['median_with_s']:.0f} ms, "
                  f"without (-p no:ptlrpc_conformance) {1000 * po['median_without_s']:.0f} ms (medians); "
                  f"difference {po['difference_ms']:+.0f} ms, spread of the runs {po['noise_ms']:.0f} ms: "
                  + ("within the noise" if po["within_noise"] else "more than the noise"))
            print(f"  CPU time (user and system) of the same runs: difference {po['difference_cpu_ms']:+.0f} ms, "
                  f"spread {po['noise_cpu_ms']:.0f} ms")
            if "import_ms" in po:
                print(f"  import of ptlrpc_conformance.plugin (python -X importtime, cumulative): {po['import_ms']:.1f} ms"
                      + (f"; with the option table and the fixtures a run registers, pytest loaded: "
                         f"{po['registration_import_ms']:.1f} ms" if "registration_import_ms" in po else ""))

    result["machine"]["load_after"] = _loadavg()
    if args.json:
        try:
            pathlib.Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        except OSError as e:
            print(f"{prog}: cannot write {args.json}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"\nfigures written to {args.json}")
    return 0
