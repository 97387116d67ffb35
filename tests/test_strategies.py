"""The one-draw strategies (fixtures/strategies.py) and the order xdist workers run cases in."""
import subprocess
import sys
import types

import pytest
from hypothesis import HealthCheck, find, given, settings

from ptlrpc_conformance.plugin import hooks
from ptlrpc_conformance.fixtures.strategies import (a_few, arbitrary_messages, canonical_messages, choice, drawn_as_one,
                                                    full_width_messages, joined, list_of, number, one_of, packed_ints,
                                                    raw_bytes, subsets, up_to)

OPTIONS = [f"o{i}" for i in range(12)]
QUIET = settings(max_examples=300, database=None, suppress_health_check=list(HealthCheck))


def test_subsets_are_ordered_sublists_sparse_and_dense():
    seen = []

    @QUIET
    @given(subsets(OPTIONS))
    def run(chosen):
        assert chosen == [o for o in OPTIONS if o in chosen]     # in the options' order, no repeats
        seen.append(len(chosen))
    run()
    assert min(seen) == 0 and max(seen) >= len(OPTIONS) // 2 and any(n == 1 for n in seen)


def test_subsets_shrink_to_the_first_option():
    assert find(subsets(OPTIONS), lambda chosen: len(chosen) >= 1) == [OPTIONS[0]]


def test_a_few_are_distinct_and_at_most_most():
    seen = set()

    @QUIET
    @given(a_few(OPTIONS, 3))
    def run(chosen):
        assert len(chosen) <= 3 and len(set(chosen)) == len(chosen) and set(chosen) <= set(OPTIONS)
        seen.update(chosen)
    run()
    assert OPTIONS[-1] in seen and OPTIONS[0] in seen        # any option, not only the first ones


def test_packed_ints_stay_in_range_and_reach_the_edges():
    """A top is 2 selector values in 256: 300 random examples missed one of the tops in about
    a third of the runs, so this test draws 2,000, derandomized (the same examples every run)."""
    tops = (0, 1, 255, (1 << 34) - (1 << 31), (1 << 32) - 2)
    seen = [set() for _ in tops]

    @settings(QUIET, max_examples=2000, derandomize=True)
    @given(packed_ints(*tops))
    def run(values):
        assert len(values) == len(tops)
        for v, top, s in zip(values, tops, seen):
            assert 0 <= v <= top
            s.add(v)
    run()
    for top, s in zip(tops, seen):
        assert 0 in s and top in s, (top, sorted(s)[:5])
    assert any(v < 256 for v in seen[3]) and any(v >= 1 << 16 for v in seen[3])     # small and large


def test_packed_ints_shrink_towards_zero():
    assert find(packed_ints(1000, 1000, 1000), lambda t: t[1] > 0) == (0, 1, 0)


def block_parts():
    return choice("abc"), number(1000, 10), up_to(5), list_of(choice([7, 8]), 3), one_of(choice(["x"]), number(9)), \
        raw_bytes(2)


def test_blocks_read_what_they_say_and_zero_bytes_as_the_simplest_value():
    """Each block of a one-draw strategy reads its own bytes: all zero bytes are its simplest
    value (what a failing example shrinks to), and every value stays in range."""
    block = joined(*block_parts())
    assert block.read(bytes(block.size)) == ("a", 10, b"", [], "x", b"\0\0")
    seen = set()

    @settings(QUIET, max_examples=500, derandomize=True)
    @given(drawn_as_one(*block_parts()))
    def run(values):
        letter, n, short, items, either, pair = values
        assert letter in "abc" and 10 <= n <= 1000 and len(short) <= 5 and len(items) <= 3
        assert set(items) <= {7, 8} and (either == "x" or 0 <= either <= 9) and len(pair) == 2
        seen.update({("letter", letter), ("n", n), ("len", len(short)), ("items", len(items)), ("either", either)})
    run()
    assert {("letter", c) for c in "abc"} <= seen and {("n", 10), ("n", 11), ("n", 1000), ("n", 999)} <= seen
    assert {("len", 0), ("len", 5), ("items", 0), ("items", 3), ("either", "x")} <= seen
    assert any(k == "n" and 300 < v < 999 for k, v in seen)         # not only edges and small values


def test_a_choice_of_more_than_256_options_reaches_the_last():
    options = list(range(300))
    assert choice(options).size == 2
    assert find(choice(options).strategy(), lambda v: v >= 290) >= 290


def test_message_strategies_shrink_to_their_simplest_message():
    """A failing example shrinks towards zero bytes: the simplest request of each strategy."""
    direction, message = find(canonical_messages(), lambda ex: True)
    assert direction == "request" and message["buflens"] == [184] and message["body"]["pb_jobid"] == ""
    direction, order, message = find(full_width_messages(), lambda ex: True)
    assert (direction, order, message["buflens"]) == ("request", "little", [184])
    assert message["body"]["pb_version"] == 3 and message["body"]["pb_status"] == 0
    data, direction = find(arbitrary_messages(), lambda ex: True)
    assert direction == "request" and len(data) == 32          # a header with no buffers, then nothing


def _item(name: str, long: bool):
    return types.SimpleNamespace(name=name, fixturenames=["iut", "conformance_examples"] if long else ["iut"])


@pytest.mark.parametrize("workers", [2, 3])
def test_long_cases_lead_each_workers_run(workers):
    """worksteal gives worker k the k-th run of len // workers-left items: each run starts with
    its share of the long cases, and every item is kept once."""
    items = [_item(f"c{i}", long=i % 7 == 3) for i in range(40)]
    long = [i.name for i in items if "conformance_examples" in i.fixturenames]
    hooks.long_cases_first(items, workers)
    assert sorted(i.name for i in items) == sorted(f"c{i}" for i in range(40))
    at, left = 0, len(items)
    for k in range(workers):
        size = left // (workers - k)
        left -= size
        share = long[k::workers]
        run = items[at:at + size]
        assert [i.name for i in run[:len(share)]] == share
        assert all("conformance_examples" not in i.fixturenames for i in run[len(share):])
        at += size


def test_certify_with_jobs_asks_for_worksteal(monkeypatch, tmp_path):
    import pytest as pytest_module
    from ptlrpc_conformance import cli
    seen = []
    monkeypatch.setattr(pytest_module, "main", lambda args, plugins=(): seen.append(list(args)) or 0)
    cli.main(["certify", "--out", str(tmp_path / "o"), "-n", "2", "-q"])
    cli.main(["certify", "--out", str(tmp_path / "o"), "-n", "2", "-q", "--", "--dist", "load"])
    cli.main(["certify", "--out", str(tmp_path / "o"), "-q"])
    first, chosen, serial = seen
    assert first[first.index("--dist") + 1] == "worksteal"
    assert chosen.count("--dist") == 1 and chosen[chosen.index("--dist") + 1] == "load"
    assert "--dist" not in serial


def test_xdist_workers_run_their_long_cases_first(pytester):
    """Under `-n 2 --dist worksteal` each worker starts with long cases (the check that a
    worker knows the scheduling: its own config.option.dist is "no")."""
    log = pytester.path / "order.log"
    pytester.makepyfile(test_order=f"""
        import os
        import pytest

        def _log(name):
            with open({str(log)!r}, "a") as f:
                f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + " " + name + "\\n")

        @pytest.mark.parametrize("k", range(30))
        def test_short(k):
            _log("short")

        @pytest.mark.parametrize("k", range(4))
        def test_long(k, conformance_examples):
            _log("long")
    """)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "worksteal", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-2000:]
    runs: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        worker, kind = line.split()
        runs.setdefault(worker, []).append(kind)
    assert sorted(runs) == ["gw0", "gw1"]
    for worker, kinds in runs.items():
        assert kinds[:2] == ["long", "long"], (worker, kinds[:6])


def test_the_projects_own_tests_run_long_ones_first_under_xdist():
    """conftest.py: `-n` without --dist is work stealing, each worker starting with its share of
    the tests listed as long (LONG_TESTS), and each listed test exists."""
    import ast
    import conftest
    for table in (conftest.LONG_TESTS, conftest.WAITING_TESTS, conftest.ZOO_TEST):
        for name, functions in table.items():
            tree = ast.parse((conftest.TESTS / name).read_text())
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert set(functions) - {"*"} <= defined, (name, sorted(set(functions) - {"*"} - defined))
    for given, dist in (({"numprocesses": 2, "dist": "no"}, "worksteal"), ({"numprocesses": "auto", "dist": "no"},
                        "worksteal"), ({"numprocesses": 2, "dist": "load"}, "load"),
                        ({"numprocesses": None, "dist": "no"}, "no"), ({"numprocesses": 2, "dist": "no",
                                                                        "distload": True}, "no")):
        config = types.SimpleNamespace(option=types.SimpleNamespace(**given))
        conftest.pytest_cmdline_main(config)
        assert config.option.dist == dist, given


def _project_items(names):
    import conftest
    return [types.SimpleNamespace(path=conftest.TESTS / f, originalname=n, fixturenames=[]) for f, n in names]


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_the_zoo_leads_one_worker_and_the_waiting_tests_the_last(workers):
    """conftest.py deal_long_tests: the zoo leads the first worker's run and the tests that
    mostly wait (WAITING_TESTS) the last one's, alone on it from three workers on (the worker
    `-n auto` adds for them); the other long tests are shared out among the other workers after
    their leads, and every test is kept once."""
    import conftest
    [zoo] = [(f, n) for f, names in conftest.ZOO_TEST.items() for n in names]
    short = [("test_adapter.py", f"test_{i}") for i in range(16)]
    long = [("test_bench.py", "test_bench_quick_prints_every_section"),
            ("test_cli.py", "test_errno_agnostic_mode_judges_accept_reject_and_reports_the_class"),
            ("test_cli.py", "test_a_client_reporting_eproto_for_every_bad_reply_passes_framing")]
    waiting = [("test_hostile_testees.py", "test_a_testee_that_hangs_on_everything_stops_the_run_in_seconds"),
               ("test_lnet_engine.py", "test_any_test_of_the_file")]
    items = _project_items(short[:3] + long[:1] + waiting[:1] + short[3:] + [zoo] + long[1:]
                           + waiting[1:])
    before = sorted((i.path.name, i.originalname) for i in items)
    config = types.SimpleNamespace(workerinput={"workercount": workers, "conformance_dist": "worksteal"})
    conftest.pytest_collection_modifyitems(config, items)
    got = [(i.path.name, i.originalname) for i in items]
    assert sorted(got) == before
    runs, at, left = [], 0, len(got)
    for k in range(workers):
        size = left // (workers - k)
        left -= size
        runs.append(got[at:at + size])
        at += size
    if workers == 1:
        assert runs[0][:6] == [zoo, *waiting, *long]
        return
    assert runs[0][0] == zoo
    assert runs[-1][:len(waiting)] == waiting
    assert not [w for run in runs[:-1] for w in run if w in waiting]
    with_long = [k for k, run in enumerate(runs) if any(n in long for n in run)]
    assert with_long == list(range(min(len(long), workers if workers == 2 else workers - 1))), with_long
    for run in runs:                         # its leads, then its long tests, then the short ones
        kinds = ["short" if n in short else "long" if n in long else "lead" for n in run]
        assert kinds == sorted(kinds, key=["lead", "long", "short"].index), run


def test_n_auto_adds_a_worker_for_the_waiting_tests(monkeypatch):
    """conftest.py: `-n auto` is a worker per core and one for the waiting tests, unless
    PYTEST_XDIST_AUTO_NUM_WORKERS is set (then xdist's own rule gives the number)."""
    import conftest
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(conftest.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert conftest.pytest_xdist_auto_num_workers(None) == 3
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "2")
    assert conftest.pytest_xdist_auto_num_workers(None) is None


def test_the_projects_tests_run_without_xdist():
    """The hook above is xdist's: a run of the project's tests with -p no:xdist still runs."""
    import conftest
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-p", "no:cacheprovider",
                           "tests/test_layers.py::test_every_part_is_in_the_table"],
                          cwd=conftest.TESTS.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
