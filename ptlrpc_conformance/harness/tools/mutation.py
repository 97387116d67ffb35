"""`ptlrpc-conformance mutants`: run the suite against every mutant of the zoo
(ptlrpc_conformance/mutants/) and report which cases killed each one.

Each mutant runs in a process of its own - `certify --iut
python:ptlrpc_conformance.mutants:ID --area AREA ...` with a small `--examples` - several at
a time (`--jobs`); where the platform can fork, each is forked from one server process that
imported the command line once (`_run`), else a new interpreter.  A run does not stop at the first failure, so the table can name every
case that killed a mutant.  The stateful Hypothesis cases of a target (target.stateful.exchange,
recovery.stateful.restart) spend seconds shrinking a failure, so they run in a second round,
only for a mutant whose own requirement no other case of its areas failed (`--thorough`: one
round with every case).  A mutant is *killed* when a round fails (exit status 1: each run is
`--strict`, so a failing SHOULD case fails it too) and its report names failing cases (verdict fail, or error: an
IUT that crashes fails the case at hand); `failing_requirements` are the requirements the
reports charged, which the zoo's tests require to include the mutant's own; `failed` names
each failing case's requirements and `errored` the cases of verdict error, so the tests can
check which cases charged the mutant's requirement from the --json file alone.  It *survives*
when every case passed (exit status 0, or 5 when no MUST case of a capability applied); a run
that ends otherwise (a usage error, an IUT that could not start, no report, a timeout) is a
harness *error*, never counted as killed.

Exit status: 0 every selected mutant was killed; 1 one survived or its run went wrong; 2
usage error.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

from ptlrpc_conformance import mutants
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.options import Parser, positive_int

KILLED, SURVIVED, ERROR = "killed", "survived", "error"
DEFAULT_EXAMPLES = 20
DEFAULT_TIMEOUT = 600.0
SHOWN_KILLERS = 3          # case ids shown per mutant in the console table
SLOW_KEYWORD = "stateful"  # -k keyword of the stateful cases (the second round)
SLOW_AREAS = {"target", "recovery"}
NO_SHRINK_PLUGIN = "ptlrpc_conformance.harness.tools.noshrink"   # verdicts unchanged, failures faster


@dataclass
class Result:
    id: str
    requirement: str
    area: str
    description: str
    status: str                       # killed, survived, error
    killed_by: list = field(default_factory=list)   # case ids that failed (or errored)
    failing_requirements: list = field(default_factory=list)   # what the report charged them to
    failed: dict = field(default_factory=dict)      # case id (verdict fail) -> the requirements it failed
    errored: list = field(default_factory=list)     # case ids of verdict error (the IUT misbehaved)
    seconds: float = 0.0
    cases_run: int = 0
    exit_status: int | None = None
    detail: str = ""                  # why a run is an error


class _Usage(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="ptlrpc-conformance mutants",
                description="Run the suite against every mutant of the reference (ptlrpc_conformance/mutants/) "
                            "and print which cases killed each, with the mutation score.")
    p.add_argument("--jobs", "-j", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                   help="mutants run at once, each in a subprocess (default: the number of CPUs)")
    p.add_argument("--mutant", action="append", default=[], metavar="ID", help="only this mutant (repeatable)")
    p.add_argument("--requirement", action="append", default=[], metavar="ID",
                   help="only the mutants of this requirement (repeatable)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--markdown", default=None, metavar="FILE", help="write the table and scores as Markdown")
    p.add_argument("--examples", type=positive_int, default=DEFAULT_EXAMPLES, metavar="N",
                   help=f"examples per property case (default {DEFAULT_EXAMPLES})")
    p.add_argument("--seed", type=int, default=None, help="seed of the property cases (default: the suite's)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"a mutant's run that takes longer is an error (default {DEFAULT_TIMEOUT:.0f})")
    p.add_argument("--thorough", action="store_true",
                   help="run every case of a mutant's areas in one round (slower: the stateful cases shrink "
                        "every failure); by default they run only for mutants that survive the other cases")
    p.add_argument("--list", action="store_true", help="print the zoo; run nothing")
    return p


def select(ids: list[str], requirements: list[str]):
    chosen = list(mutants.MUTANTS)
    unknown = [i for i in ids if i not in mutants.BY_ID]
    if unknown:
        raise _Usage(f"no mutant named {', '.join(unknown)} (see ptlrpc-conformance mutants --list)")
    if ids:
        chosen = [m for m in chosen if m.id in ids]
    if requirements:
        chosen = [m for m in chosen if m.requirement in requirements]
        if not chosen:
            raise _Usage(f"no mutant violates {', '.join(requirements)}")
    return chosen


def command(m, out_dir: pathlib.Path, examples: int, seed: int | None, keyword: str | None = None) -> list[str]:
    # --strict: a failing SHOULD case fails the run too (a mutant of a SHOULD requirement,
    # CKSUM-1, is killed by its cases like any other)
    cmd = [sys.executable, "-m", "ptlrpc_conformance.cli", "certify",
           "--iut", m.iut, "--out", str(out_dir),
           "--examples", str(examples), "-q", "--strict", "--no-html"]
    for area in m.areas:
        cmd += ["--area", area]
    if m.profile:
        cmd += ["--profile", m.profile]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if keyword:
        cmd += ["-k", keyword]
    return cmd + ["--", "-p", NO_SHRINK_PLUGIN]


def rounds(m, thorough: bool) -> list[str | None]:
    """The -k expression of each round of a mutant's run (None: every case of its areas)."""
    if thorough or not set(m.areas) & SLOW_AREAS:
        return [None]
    return [f"not {SLOW_KEYWORD}", SLOW_KEYWORD]


def subprocess_env(pycache: str | None) -> dict:
    """The environment of a mutant's run: this package importable, and (with `pycache`) the
    byte-code of every run kept in one directory, so later runs do not compile again."""
    env = dict(os.environ)
    package_root = str(pathlib.Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    if pycache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


# Each run is a process of its own.  Where the platform can fork, it is forked from a server
# process that has imported the command line, pytest and the package's data modules once
# (multiprocessing's forkserver), instead of a new interpreter importing them again for each of
# the zoo's ~150 runs (a framing mutant's run: about 3.9 CPU-s to 2.5).  The fork is made
# before the run begins, so each run starts from the state of a new interpreter after those
# imports (only modules the command imports before its pytest session).
# Hypothesis, the harness's run-time modules (the report, the judges, the scenario engine), the
# plugin and the suites' modules too: every run collects the suites, and a run with a property
# case or a report imports the rest (about 0.5 s of a run).  pytest takes a suite module that is
# already imported as it is (the suites hold no assert statement for it to rewrite).  Never
# xdist, which keeps sys.path as it was when it was imported, for its workers.  Then
# forkwarm, which reads the package's bundled data once in the server (about 0.1 s a run).
PRELOAD = ["ptlrpc_conformance.cli", "ptlrpc_conformance.cli.certify", "ptlrpc_conformance.cli.session",
           "ptlrpc_conformance.harness.data.vectors", "ptlrpc_conformance.harness.transport.loader",
           "ptlrpc_conformance.mutants", "pytest", "hypothesis",
           "ptlrpc_conformance.harness.outputs.report", "ptlrpc_conformance.harness.outputs.verdict",
           "ptlrpc_conformance.harness.outputs.gate", "ptlrpc_conformance.harness.verdicts.judge",
           "ptlrpc_conformance.harness.ost.scenario", "ptlrpc_conformance.harness.ost.client_judge",
           "ptlrpc_conformance.plugin", "ptlrpc_conformance.fixtures.core",
           *sorted(f"ptlrpc_conformance.suites.{p.stem}"
                   for p in (pathlib.Path(__file__).resolve().parents[2] / "suites").glob("test_*.py")),
           "ptlrpc_conformance.harness.tools.forkwarm",    # the data every run reads (its docstring)
           __name__]       # the last: the forked function's module
_CONTEXT = None
_BASE_PATH: list[str] | None = None


def _interpreter_path(env: dict) -> list[str]:
    """sys.path of a new interpreter here after its first entry (the script's folder, or the
    working directory of `-m`) and without PYTHONPATH's folders: a forked run's path is that,
    after its working directory and its PYTHONPATH, as `python -m` would make it, whatever
    folders the process that started the server had on its own."""
    global _BASE_PATH
    if _BASE_PATH is None:
        clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        probe = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
                               env=clean, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        _BASE_PATH = json.loads(probe.stdout) if probe.returncode == 0 else list(sys.path)
    return _BASE_PATH


def _fork_context():
    global _CONTEXT
    if _CONTEXT is None:
        import multiprocessing
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(PRELOAD)
        else:
            _CONTEXT = False                  # no fork here: a new interpreter for each run
    return _CONTEXT


# A forked child's exit status comes from the fork server down a pipe, and is read once: by
# the first poll of the child (multiprocessing.popen_forkserver.Popen.poll).  Process.start()
# polls every other child it started that is still listed (multiprocessing.process._cleanup),
# so a thread starting a run could read the status another thread's run was waiting for; the
# waiting thread then read the pipe's end and took it for a lost fork server, exit status 255
# (about 1 run in 100, four threads starting quick runs; seen once in the zoo's two at a time).
# Every start and every read of a status here holds this lock; waiting for the child to end
# does not.
_STATUS_LOCK = threading.Lock()
_KILLED_WAIT = 30.0        # seconds for a killed run's status to come back from the fork server


def _run(cmd: list[str], cwd: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """`cmd` (a `python -m MODULE ...` command line: `ptlrpc-conformance certify ...`) run in `cwd` under `env`,
    stdin empty, its output captured, killed after `timeout` seconds (subprocess.TimeoutExpired)."""
    context = _fork_context()
    if not context:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    assert cmd[0] == sys.executable and cmd[1] == "-m", cmd
    from multiprocessing.connection import wait
    outputs = [os.path.join(cwd, ".stdout"), os.path.join(cwd, ".stderr")]
    child = context.Process(target=_forked_cli, args=(cmd[2], cmd[3:], cwd, env, outputs, _interpreter_path(env)),
                            daemon=True)
    with _STATUS_LOCK:
        child.start()
    if not wait([child.sentinel], timeout):
        child.kill()
        wait([child.sentinel], _KILLED_WAIT)
        with _STATUS_LOCK:
            child.join(0)               # its status read, and the child off multiprocessing's list
        raise subprocess.TimeoutExpired(cmd, timeout)
    with _STATUS_LOCK:
        child.join(0)
        status = child.exitcode
    out, err = (pathlib.Path(p).read_text(errors="replace") if os.path.exists(p) else "" for p in outputs)
    return subprocess.CompletedProcess(cmd, status, out, err)


def _forked_cli(cmd_module: str, argv: list[str], cwd: str, env: dict, outputs: list[str],
                base_path: list[str]) -> None:
    """The forked process: what `python -m CMD_MODULE ARGV` does in `cwd` under `env`
    (sys.path: the working directory, PYTHONPATH's folders, then `base_path`, a new
    interpreter's), its stdout and stderr (and the testees' it starts) written to the two
    files of `outputs`."""
    import atexit
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra, *base_path]
    if "hypothesis.configuration" in sys.modules:
        # Hypothesis fixed its folder (.hypothesis in the working directory) when the server
        # imported it: the run's own, as a new interpreter in `cwd` would have it
        from hypothesis.configuration import set_hypothesis_home_dir
        set_hypothesis_home_dir(os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or os.path.join(cwd, ".hypothesis"))
    for fd, path in zip((1, 2), outputs):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    status = 1
    try:
        import runpy
        sys.argv = [sys.argv[0], *argv]      # run_module sets sys.argv[0] as `python -m` does
        runpy.run_module(cmd_module, run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()          # what the interpreter does at exit (exec.py kills its testees)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status if isinstance(status, int) else 1)


def run_one(m, examples: int, seed: int | None, timeout: float, thorough: bool = False,
            env: dict | None = None) -> Result:
    res = Result(m.id, m.requirement, "+".join(m.areas), m.description, ERROR)
    env = env if env is not None else subprocess_env(None)
    start = time.monotonic()
    all_rounds = rounds(m, thorough)
    for number, keyword in enumerate(all_rounds, 1):
        with tempfile.TemporaryDirectory(prefix=f"mutant-{m.id}-") as tmp:
            out = pathlib.Path(tmp) / "report"
            left = timeout - (time.monotonic() - start)
            try:
                proc = _run(command(m, out, examples, seed, keyword), tmp, env, max(left, 1.0))
            except subprocess.TimeoutExpired:
                res.seconds = time.monotonic() - start
                if res.status == KILLED:          # an earlier round killed it: that stands
                    res.detail = f"round {number} took longer than the {timeout:g} s left"
                    return res
                res.status, res.killed_by = ERROR, []
                res.detail = f"the run took longer than {timeout:g} s"
                return res
            res.seconds = time.monotonic() - start
            res.exit_status = proc.returncode
            tail = (proc.stderr.strip() or proc.stdout.strip())[-600:]
            if proc.returncode == 2 and number > 1 and "no case was selected" in proc.stderr:
                break                    # the areas have no stateful case: nothing more to run
            try:
                report = json.loads((out / "report.json").read_text())
                verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
                failed = {c["id"]: sorted(c.get("failed_requirements") or ()) for c in report["cases"]
                          if c["verdict"] == "fail"}
                level = report["level"]
                failing = list(level.get("failing_must") or ()) + list(level.get("failing_should") or ())
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                res.status = ERROR
                res.detail = f"exit status {proc.returncode}, no readable report: {tail}"
                return res
        res.cases_run += sum(1 for v in verdicts.values() if v != "not-applicable")
        killers = sorted(c for c, v in verdicts.items() if v in ("fail", "error"))
        res.killed_by = sorted(set(res.killed_by) | set(killers))
        res.failed = dict(sorted({**res.failed, **failed}.items()))
        res.errored = sorted(set(res.errored) | {c for c, v in verdicts.items() if v == "error"})
        res.failing_requirements = sorted(set(res.failing_requirements) | set(failing))
        # a run in which no MUST case of a capability applied (the protocol area alone) exits 5
        if proc.returncode in (0, 5) and not killers:
            if res.status != KILLED:
                res.status = SURVIVED
        elif proc.returncode == 1 and killers:
            res.status = KILLED
            if m.requirement in res.failing_requirements:
                return res              # else the next round may charge its own requirement
        else:
            res.status = ERROR
            res.detail = (f"exit status {proc.returncode} with {len(res.killed_by)} failing case(s): {tail}"
                          if proc.returncode in (0, 1) else
                          f"the harness ended with exit status {proc.returncode}: {tail}")
            return res
    if res.status == SURVIVED and not res.cases_run:
        res.detail = "no applicable case ran"
    return res


def run_all(chosen, jobs: int, examples: int, seed: int | None, timeout: float, progress=None,
            thorough: bool = False) -> list[Result]:
    """Every mutant in a subprocess, `jobs` at a time; the slowest areas start first."""
    order = sorted(chosen, key=lambda m: (0 if set(m.areas) & SLOW_AREAS else 1))
    results: dict[str, Result] = {}
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="mutants-pycache-") as pycache, \
            concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        env = subprocess_env(pycache)
        futures = {pool.submit(run_one, m, examples, seed, timeout, thorough, env): m for m in order}
        for fut in concurrent.futures.as_completed(futures):
            r = fut.result()
            with lock:
                results[r.id] = r
                if progress:
                    progress(r, len(results), len(order))
    return [results[m.id] for m in chosen]


# ---- scores and tables --------------------------------------------------------------------

def score(results: list[Result], key) -> dict[str, tuple[int, int]]:
    """key -> (mutants killed, mutants) over the results grouped by `key`."""
    out: dict[str, tuple[int, int]] = {}
    for r in results:
        killed, total = out.get(key(r), (0, 0))
        out[key(r)] = (killed + (r.status == KILLED), total + 1)
    return out


def _pct(killed: int, total: int) -> str:
    return f"{killed}/{total} ({100.0 * killed / total:.0f}%)" if total else "0/0"


def _killers(r: Result, limit: int | None) -> str:
    if r.status == SURVIVED:
        return "SURVIVED" + (f" ({r.detail})" if r.detail else "")
    if r.status == ERROR:
        return f"ERROR: {r.detail.splitlines()[0] if r.detail else 'the run went wrong'}"
    shown = r.killed_by if limit is None else r.killed_by[:limit]
    more = len(r.killed_by) - len(shown)
    return ", ".join(shown) + (f" (+{more} more)" if more else "") + _uncharged(r)


def _uncharged(r: Result) -> str:
    """A note for a mutant killed only through other requirements than its own."""
    return "" if r.requirement in r.failing_requirements else f" [{r.requirement} not charged]"


def text_table(results: list[Result]) -> str:
    rows = [("mutant", "requirement", "area", "killed by", "time")]
    rows += [(r.id, r.requirement, r.area, _killers(r, SHOWN_KILLERS), f"{r.seconds:.1f}s") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        lines.append("  ".join(row[i].ljust(widths[i]) for i in range(4)) + "  " + row[4])
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def score_lines(results: list[Result]) -> list[str]:
    killed = sum(r.status == KILLED for r in results)
    lines = [f"mutation score: {_pct(killed, len(results))} killed"]
    by_area = score(results, lambda r: r.area)
    lines.append("by area: " + ", ".join(f"{a} {_pct(*v)}" for a, v in sorted(by_area.items())))
    by_req = score(results, lambda r: r.requirement)
    order = list(registry.requirements())
    reqs = sorted(by_req, key=lambda k: order.index(k) if k in order else len(order))
    lines.append("by requirement: " + ", ".join(f"{k} {_pct(*by_req[k])}" for k in reqs))
    return lines


def markdown(results: list[Result], wall: float, jobs: int, examples: int) -> str:
    killed = sum(r.status == KILLED for r in results)
    out = [f"Mutation score: **{_pct(killed, len(results))}** killed "
           f"({len(results)} mutants, `--jobs {jobs}`, `--examples {examples}`, {wall:.0f} s wall time).", ""]
    out += ["| area | score |", "|---|---|"]
    out += [f"| {a} | {_pct(*v)} |" for a, v in sorted(score(results, lambda r: r.area).items())]
    out += ["", "| mutant | requirement | area | bug | killed by | time |", "|---|---|---|---|---|---|"]
    for r in results:
        killers = _killers(r, SHOWN_KILLERS)
        if r.status == KILLED:
            killers = ", ".join(f"`{c}`" for c in r.killed_by[:SHOWN_KILLERS]) + (
                f" (+{len(r.killed_by) - SHOWN_KILLERS} more)" if len(r.killed_by) > SHOWN_KILLERS else "") \
                + _uncharged(r)
        else:
            killers = f"**{killers}**"
        out.append(f"| `{r.id}` | {r.requirement} | {r.area} | {r.description} | {killers} | {r.seconds:.1f} s |")
    out += ["", "| requirement | score |", "|---|---|"]
    by_req = score(results, lambda r: r.requirement)
    order = list(registry.requirements())
    for k in sorted(by_req, key=lambda k: order.index(k) if k in order else len(order)):
        out.append(f"| {k} | {_pct(*by_req[k])} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        chosen = select(args.mutant, args.requirement)
    except _Usage as e:
        print(f"ptlrpc-conformance mutants: {e}", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.id:<40} {m.requirement:<16} {'+'.join(m.areas):<17} {m.description}")
        print(f"{len(chosen)} mutants")
        return 0
    if args.timeout <= 0:
        print("ptlrpc-conformance mutants: --timeout must be positive", file=sys.stderr)
        return 2
    for opt, path in (("--json", args.json), ("--markdown", args.markdown)):
        if path and not pathlib.Path(path).resolve().parent.is_dir():
            print(f"ptlrpc-conformance mutants: {opt} {path}: no such directory", file=sys.stderr)
            return 2
    print(f"ptlrpc-conformance mutants: {len(chosen)} mutants, {args.jobs} at a time, "
          f"--examples {args.examples}", flush=True)

    def progress(r: Result, done: int, total: int) -> None:
        print(f"[{done:>3}/{total}] {r.status:<8} {r.id} ({r.seconds:.1f} s"
              + (f", {len(r.killed_by)} case(s)" if r.status == KILLED else "") + ")", flush=True)

    start = time.monotonic()
    try:
        results = run_all(chosen, args.jobs, args.examples, args.seed, args.timeout, progress, args.thorough)
    except KeyboardInterrupt:
        print("ptlrpc-conformance mutants: interrupted", file=sys.stderr)
        return 1
    wall = time.monotonic() - start
    print()
    print(text_table(results))
    print()
    for line in score_lines(results):
        print(line)
    print(f"wall time: {wall:.1f} s")
    problems = [r for r in results if r.status != KILLED]
    for r in problems:
        print(f"ptlrpc-conformance mutants: {r.id} {r.status}" + (f": {r.detail}" if r.detail else ""),
              file=sys.stderr)
    try:
        if args.json:
            doc = {"format": "ptlrpc-conformance-mutants/1", "wall_seconds": round(wall, 1), "jobs": args.jobs,
                   "examples": args.examples, "seed": args.seed, "thorough": args.thorough,
                   "score": {"killed": sum(r.status == KILLED for r in results), "total": len(results)},
                   "mutants": [asdict(r) for r in results]}
            pathlib.Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        if args.markdown:
            pathlib.Path(args.markdown).write_text(markdown(results, wall, args.jobs, args.examples))
    except OSError as e:
        print(f"ptlrpc-conformance mutants: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    return 0 if not problems else 1
