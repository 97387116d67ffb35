"""`ptlrpc-conformance bench --quick` runs every section and prints its figures (the
figures themselves are not judged: this is a smoke test of the command).  The bench skips,
with the reason, a section whose tool is missing; the project's tests have the tools
(conftest.require_tool), so the full run must measure every section, and the skipped rows are
checked with the tools hidden from PATH."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


def _c_testee_sources(tmp_path):
    src = tmp_path / "c-testee"      # a private build: never races the C testee's own tests
    src.mkdir()
    for f in (ROOT / "examples" / "c-testee").iterdir():
        if f.suffix in (".c", ".h") or f.name == "Makefile":
            shutil.copy(f, src / f.name)
    return src


@pytest.mark.needs_tool("cc", "make", "tshark")
def test_bench_quick_prints_every_section(tmp_path):
    src = _c_testee_sources(tmp_path)
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "bench", "--quick", "--json", str(out),
                           "--c-testee", str(src), "--workload-ceiling"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert "Traceback" not in text + proc.stderr
    sections = re.findall(r"^\[([a-z-]+)\]", text, re.M)
    assert sections == ["in-process", "exec", "tshark", "lnet", "suite", "plugin"]
    rate = r"[\d,]+/s"
    assert re.search(rf"^  reference \(in-process\) +{rate} +{rate}$", text, re.M)
    for label in ("echo, no decoding \\(raw pipe limit\\)", "reference \\(python -m ptlrpc_conformance.reference\\)",
                  "C example \\(examples/c-testee\\)"):
        row = re.search(rf"^  {label} +(.*)$", text, re.M)
        assert row, label
        assert re.fullmatch(rf"{rate} +{rate} +[\d.]+x +\d+%", row.group(1)), row.group(0)
    tshark = text.split("[tshark]")[1].split("[suite]")[0]     # installed: measured, never skipped
    assert re.search(rf"adapter \(tshark\): {rate} one at a time, {rate} pipelined", tshark), tshark
    assert re.search(rf"tshark's own rate: {rate} \(\d+ messages in one capture, start-up [\d.]+ s "
                     r"subtracted\); the adapter reaches \d+% of it", tshark), tshark
    assert re.search(rf"^  OST_STATFS from 127.0.0.2@tcp to serve --iut reference at 127.0.0.1@tcp: {rate} one at a "
                     rf"time, {rate} with 8 in flight \([\d.]+x\)$", text, re.M), text
    assert figures_line_follows(text)
    assert re.search(r"^  serial +[\d.]+ s +1 cases   \(round 1\)$", text, re.M)
    assert re.search(r"^  -n auto +skipped: --quick", text, re.M)
    assert re.search(r"^  median serial: [\d.]+ s$", text, re.M)
    assert re.search(r"^  start-up of the serial runs \(process start to the first case's first request\): "
                     r"median [\d.]+ s \([\d.]+\)$", text, re.M), text
    assert re.search(r"^  one-test project, 3 runs each: with the plugin \d+ ms, without \(-p no:ptlrpc_conformance\) "
                     r"\d+ ms \(medians\); difference [-+]\d+ ms, spread of the runs \d+ ms: (within|more than) the noise$",
                     text, re.M), text
    assert re.search(r"^  import of ptlrpc_conformance.plugin \(python -X importtime, cumulative\): [\d.]+ ms; with the "
                     r"option table and the fixtures a run registers, pytest loaded: [\d.]+ ms$", text, re.M), text
    assert re.search(r"^  two whole serial certifications at once against one after the other: [\d.]+x "
                     r"\(median of [\d.]+; about the most a perfect two-way split of this work could gain here; "
                     r"--quick: one short case, mostly start-up\)$", text, re.M), text
    figures = json.loads(out.read_text())
    assert figures["format"] == "ptlrpc-conformance-bench/1" and figures["quick"] is True
    assert [r["label"] for r in figures["exec"]][:3] == ["echo, no decoding (raw pipe limit)",
                                                         "reference (python -m ptlrpc_conformance.reference)",
                                                         "C example (examples/c-testee)"]
    assert figures["in_process"]["pipelined"] > 0 and figures["exec"][0]["ratio"] > 0
    assert {r["mode"] for r in figures["suite"]["runs"]} == {"serial", "-n auto"}
    assert set(figures["suite"]["median_s"]) == {"serial"} and figures["suite"]["ceiling"] == []   # --quick: one round
    workload = figures["suite"]["workload_ceiling"]
    assert len(workload) == 1 and workload[0]["exit_statuses"] == [0, 0, 0, 0] and workload[0]["speedup"] > 0
    assert figures["suite"]["workload_ceiling_speedup"] == workload[0]["speedup"]
    assert figures["tshark"]["pipelined"] > 0 and figures["tshark"]["tshark_own"] > 0
    assert figures["lnet"]["one_at_a_time"] > 0 and figures["lnet"]["in_flight"] > 0
    serial = [r for r in figures["suite"]["runs"] if r["mode"] == "serial"]
    assert 0 < serial[0]["startup_s"] < serial[0]["wall_s"] and 0 < serial[0]["startup_cpu_s"] <= serial[0]["cpu_s"]
    assert figures["suite"]["median_startup_s"] == serial[0]["startup_s"]
    plugin = figures["plugin_overhead"]
    assert len(plugin["with_s"]) == len(plugin["without_s"]) == len(plugin["with_cpu_s"]) == 3
    assert plugin["difference_ms"] == round(1000 * (plugin["median_with_s"] - plugin["median_without_s"]), 1)
    assert plugin["within_noise"] == (abs(plugin["difference_ms"]) <= plugin["noise_ms"])
    assert 0 < plugin["import_ms"] < plugin["registration_import_ms"]


def figures_line_follows(text: str) -> bool:
    """The [lnet] section's second line: the in-process rate of the same requests."""
    return bool(re.search(r"^  the same requests to the reference in-process: [\d,]+/s; over LNet one at a time "
                          r"reaches \d+% of it$", text, re.M))


def test_bench_lnet_section_measures_exchanges_over_loopback(capsys):
    """The [lnet] section as main() calls it: the engine connects to an in-process serve of the
    reference on 127.0.0.1 and every OST_STATFS gets its final reply, one at a time and 8 in
    flight; the figures are positive (their size is not judged)."""
    from ptlrpc_conformance.harness.tools import bench
    row = bench._lnet_section(0.3, 1, 10.0)
    assert "skipped" not in row and "failed" not in row, row
    assert row["one_at_a_time"] > 0 and row["in_flight"] > 0 and row["in_process"] > 0, row
    assert row["xids_in_flight"] == 8 and row["in_flight_ratio"] > 0 and row["share_of_in_process"] > 0
    bench._print_lnet(row)
    printed = capsys.readouterr().out
    assert re.search(r"^  OST_STATFS from 127.0.0.2@tcp to serve --iut reference at 127.0.0.1@tcp: [\d,]+/s one at "
                     r"a time, [\d,]+/s with 8 in flight", printed, re.M), printed
    assert figures_line_follows(printed), printed


def test_bench_finds_the_c_example_of_a_source_checkout(tmp_path, monkeypatch):
    """No --c-testee: the C example beside the package directory (this checkout), from any
    working directory; under the working directory when the package has none beside it."""
    from ptlrpc_conformance.harness.tools import bench
    monkeypatch.chdir(tmp_path)
    src, places = bench.c_testee_source()
    assert src == (ROOT / "examples" / "c-testee").resolve() and src in places
    monkeypatch.setattr(bench, "__file__", str(tmp_path / "site" / "ptlrpc_conformance" / "harness" / "tools" / "bench.py"))
    assert bench.c_testee_source()[0] is None
    (tmp_path / "examples" / "c-testee").mkdir(parents=True)
    (tmp_path / "examples" / "c-testee" / "Makefile").write_text("all:\n")
    assert bench.c_testee_source()[0] == (tmp_path / "examples" / "c-testee").resolve()


def test_bench_skips_the_c_example_without_its_tools_and_reports_a_failing_tshark_run(tmp_path):
    """No cc or make on PATH: the C example's row says `skipped:` with the reason, and the rest
    of the bench still measures.  tshark's own run on the capture file exits with status 2 (a
    stand-in tshark, given by path): the section says it failed and why, instead of printing a
    rate computed from a run that did nothing.  One run for both; the suite and plugin
    sections are the whole run's (test_bench_quick_prints_every_section)."""
    from test_tshark import _fake_tshark
    src = _c_testee_sources(tmp_path)
    fake = _fake_tshark(tmp_path)
    empty = tmp_path / "no-tools"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    env["PATH"] = str(empty)
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "bench", "--quick", "--no-suite",
                           "--no-plugin", "--c-testee", str(src), "--tshark", f"tshark:{fake}", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert "Traceback" not in text + proc.stderr
    assert re.search(r"^  C example \(examples/c-testee\) +skipped: (make|cc) is not installed", text, re.M), text
    assert re.search(r"^  reference \(python -m ptlrpc_conformance.reference\) +[\d,]+/s", text, re.M), text
    tshark = text.split("[tshark]")[1].split("[suite]")[0]
    assert re.search(r"adapter \(tshark:.*\): [\d,]+/s one at a time", tshark), tshark
    assert "tshark's own rate: failed: `fake-tshark -r one.pcap` exited with status 2: " \
           "fake tshark: cannot read capture files" in tshark, tshark
    assert "tshark_own" not in json.loads(out.read_text())["tshark"]


def test_bench_skips_the_tshark_section_when_tshark_is_missing(tmp_path, monkeypatch, capsys):
    """No tshark on PATH: the section says `skipped:` with the reason (the section's own
    functions, as main() calls them; the run above shows main() going on after a section)."""
    from ptlrpc_conformance.harness.tools import bench
    monkeypatch.setenv("PATH", str(tmp_path))
    row = bench._tshark_section("tshark", bench._inputs(), 0.1, 10.0, 1)
    assert set(row) == {"iut", "skipped"} and "tshark is not installed" in row["skipped"], row
    bench._print_tshark(row)
    printed = capsys.readouterr().out
    assert re.fullmatch(r"  skipped: cannot start: .+tshark is not installed.*\n", printed, re.S), printed


@pytest.mark.parametrize("args, text", [
    (["--seconds", "0"], "argument --seconds: 0 is not a positive number of seconds"),
    (["--seconds", "nan"], "argument --seconds: nan is not a positive number of seconds"),
    (["--seconds", "inf"], "argument --seconds: inf is not a positive number of seconds"),
    (["--iut-timeout", "inf"], "argument --iut-timeout: inf is not a positive number of seconds"),
    (["--json", "/no/such/dir/x.json"], "no such directory"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
])
def test_bench_usage_errors_exit_2(args, text, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "bench", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)    # --seconds nan once looped
    assert proc.returncode == 2 and text in proc.stderr and "Traceback" not in proc.stderr


def test_bench_suite_rounds_must_be_positive():
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "bench", "--suite-rounds", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "argument --suite-rounds: 0 is not at least 1" in proc.stderr
    assert "Traceback" not in proc.stderr
