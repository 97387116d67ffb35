"""The Hypothesis internals the suite relies on (fixtures/stateful.py) exist, with the shape it
uses, in the installed Hypothesis, and the installed version is in pyproject.toml's range: a
Hypothesis that moved one fails here (and the suite's use of it raises), instead of the suite
quietly drawing other examples from the same seed, paying for a database key each run, or
giving another verdict on a slower machine."""
import inspect
import math
import pathlib
import re
import time
import tomllib

import hypothesis
from hypothesis import given, settings, strategies as st

import fast_clock
from ptlrpc_conformance.fixtures.stateful import fixed_constants, no_database_key, untimed_shrinking, whole_block_draws

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def test_the_installed_hypothesis_is_in_the_declared_range():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("hypothesis"))
    low, high = re.fullmatch(r"hypothesis>=([\d.]+),<([\d.]+)", spec).groups()
    assert _version(low) <= _version(hypothesis.__version__) < _version(high), (hypothesis.__version__, spec)


def test_the_local_constants_pool_is_where_fixed_constants_empties_it():
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants
    get = providers._get_local_constants
    assert callable(get) and not inspect.signature(get).parameters
    assert callable(providers.CONSTANTS_CACHE.cache.clear)
    empty = Constants()
    assert not any(empty.integers | empty.floats | empty.bytes | empty.strings)
    with fixed_constants():
        inside = providers._get_local_constants()
        assert isinstance(inside, Constants) and not any(inside.integers | inside.floats | inside.bytes | inside.strings)
    assert providers._get_local_constants is get           # put back


def test_hypothesis_reads_the_database_key_no_database_key_sets(monkeypatch):
    """With the key preset to None Hypothesis does not work one out of the test's source; without
    it, it does (so the attribute is still the one it reads)."""
    import hypothesis.core
    digests = []
    real = hypothesis.core.function_digest
    monkeypatch.setattr(hypothesis.core, "function_digest", lambda f: digests.append(f) or real(f))

    def make():
        @settings(max_examples=2, database=None, derandomize=False)     # CI=true: Hypothesis's ci profile derandomizes from the digest
        @given(st.integers())
        def run(x):
            assert isinstance(x, int)
        return run

    no_database_key(make())()
    assert digests == []
    make()()
    assert digests


def test_a_moved_internal_is_an_error_not_a_silent_fallback(monkeypatch):
    """A Hypothesis without the pool's function (moved or renamed) stops the run with an error:
    the suite never goes on drawing examples that depend on what else is loaded."""
    import pytest
    from hypothesis.internal.conjecture import providers
    monkeypatch.delattr(providers, "_get_local_constants")
    with pytest.raises(AttributeError):
        with fixed_constants():
            pass


def test_untimed_shrinking_lifts_the_shrinking_limit_in_seconds():
    from hypothesis.internal.conjecture import engine
    limit = engine.MAX_SHRINKING_SECONDS
    assert isinstance(limit, (int, float)) and limit < math.inf
    with untimed_shrinking():
        assert engine.MAX_SHRINKING_SECONDS == math.inf
    assert engine.MAX_SHRINKING_SECONDS == limit           # put back


def test_a_property_checks_the_same_examples_and_gives_the_same_verdict_however_fast_time_runs(monkeypatch):
    """A property case (check_property) whose check fails on some examples: the examples it
    checks, in order, and its verdict are the same when each read of the clock is 11 s after the
    one before (tests/fast_clock.py) as with the real clock.  Hypothesis's limits in seconds
    (more bugs looked for during ten seconds after the first, five minutes of shrinking) would
    end the search or the shrinking at once; the stateful parts' counterpart is
    tests/test_target_suite.py's run of two workers with that clock."""
    from ptlrpc_conformance.harness.verdicts import judge
    from ptlrpc_conformance.suites.test_properties import check_property

    def run():
        checked, verdicts = [], []

        def check(example):
            checked.append(example)
            if sum(example) > 1000:
                return judge.Judgement(judge.FAIL, f"sum of {example} over 1000")
            return judge.Judgement(judge.PASS)
        check_property(st.lists(st.integers(0, 600)), check, 7, 100, verdicts.append, "toy")
        return checked, [(v.status, v.message) for v in verdicts]

    real = run()
    assert [status for status, _ in real[1]] == [judge.FAIL]
    monkeypatch.setattr(time, "monotonic", fast_clock.fast(time.monotonic))
    monkeypatch.setattr(time, "perf_counter", fast_clock.fast(time.perf_counter))
    assert run() == real


def test_a_block_drawn_whole_is_the_block_drawn_byte_by_byte():
    """whole_block_draws draws a fixed-size block of bytes in one call: for every size the
    strategies use and others, from the same generator state, the same bytes as Hypothesis's
    own byte-by-byte draw, leaving the generator in the same state; other sizes and ranges are
    Hypothesis's own draw."""
    import random

    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.conjecture.data import draw_choice
    own = providers.HypothesisProvider.draw_bytes
    for seed_ in range(40):
        for lo, hi in [(1, 1), (3, 3), (17, 17), (64, 64), (213, 213), (1000, 1000), (0, 0), (0, 8), (2, 40)]:
            mine, theirs = random.Random(seed_), random.Random(seed_)
            with whole_block_draws():
                assert providers.HypothesisProvider.draw_bytes is not own
                got = draw_choice("bytes", {"min_size": lo, "max_size": hi}, random=mine)
            want = draw_choice("bytes", {"min_size": lo, "max_size": hi}, random=theirs)
            assert got == want and lo <= len(got) <= hi, (seed_, lo, hi)
            assert mine.getstate() == theirs.getstate(), (seed_, lo, hi)
    assert providers.HypothesisProvider.draw_bytes is own      # put back


def test_a_property_draws_the_same_examples_and_shrinks_alike_with_whole_block_draws():
    """A property over the suite's one-block strategies (fixtures/strategies.py): the examples
    it checks, in order, and its shrunk counterexample are the same with blocks drawn whole as
    byte by byte (a Hypothesis that moved the internal fails here, or raises in the run)."""
    from ptlrpc_conformance.fixtures.strategies import drawn_as_one, number, raw_bytes, subsets_block

    def run(whole: bool):
        checked = []

        @settings(max_examples=40, database=None, derandomize=False, deadline=None)
        @given(drawn_as_one(number(1 << 40), raw_bytes(48), subsets_block(range(20))))
        def prop(example):
            checked.append(example)
            assert example[0] < 1 << 30 or len(example[2]) < 3

        try:
            with fixed_constants(), (whole_block_draws() if whole else untimed_shrinking()):
                no_database_key(hypothesis.seed(11)(prop))()
        except AssertionError:
            pass
        return checked

    byte_by_byte = run(False)
    assert len(byte_by_byte) > 20 and byte_by_byte[-1][0] >= 1 << 30      # failed, shrunk, replayed
    assert run(True) == byte_by_byte
