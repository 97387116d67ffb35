"""No number typed twice: every count the README states about the suite (cases, vectors,
derived cases, properties, scenarios, structures, mutants, bench inputs) is computed here
from the code and the data, and must be the README's figure.  When the data changes, this
test names the sentence to update."""
import collections
import re

import pytest

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}


def stated(pattern: str) -> tuple:
    """The figures the README's sentence matching `pattern` (\\s+ between words) states."""
    m = re.search(pattern.replace(" ", r"\s+"), README)
    assert m, f"the README no longer has a sentence matching {pattern!r}: update this test with it"
    return tuple(WORDS.get(g, None) or int(g.replace(",", "")) for g in m.groups())


def framing_vectors():
    from ptlrpc_conformance.harness.data.vectors import bundled_files, load_file
    return [v for name, text in bundled_files() if name == "vectors/framing.yaml" for v in load_file(name, text)]


def test_golden_vectors_and_the_cases_derived_from_them():
    from ptlrpc_conformance.harness.verdicts.derive import derive
    vectors = framing_vectors()
    derived = derive([v for v in vectors if v.op == "decode"])
    assert stated(r"as (\d+) hand-written golden vectors \(`vectors/framing.yaml`\), (\d+) cases the suite "
                  r"derives from them") == (len(vectors), len(derived))


def test_properties():
    from ptlrpc_conformance.suites import test_properties
    cases = [m for fn in vars(test_properties).values() if callable(fn)
             for m in getattr(fn, "pytestmark", []) if m.name == "conformance"]
    assert stated(r"and (\w+) Hypothesis properties") == (len(cases),)


def test_scenario_vectors():
    from ptlrpc_conformance.harness.ost import scenario
    scenarios = scenario.load_all()
    kinds = collections.Counter(s.id.split(".")[0] for s in scenarios)
    assert set(kinds) == {"target", "recovery"}
    assert stated(r"(\d+) bundled scenario vectors \((\d+) target, (\d+) recovery\)") == \
        (len(scenarios), kinds["target"], kinds["recovery"])


def test_structures():
    from ptlrpc_conformance.spec import layouts
    seeds = set(layouts.seed_structs())
    nested = set(layouts.seed_closure()) - seeds
    assert stated(r"the layouts of all (\d+) structures the protocol documents name and the (\d+) nested") == \
        (len(seeds), len(nested))


def test_mutants():
    from ptlrpc_conformance import mutants
    assert stated(r"it certifies each of (\d+) mutants of the reference") == (len(mutants.MUTANTS),)


def test_bench_inputs():
    from ptlrpc_conformance.harness.tools import bench
    sizes = [len(bytes.fromhex(r["data"])) for r in bench._inputs()]
    assert stated(r"Inputs are the (\d+) valid bundled messages up to 4 KiB \((\d+) to (\d+) bytes") == \
        (len(sizes), min(sizes), max(sizes))
    assert bench.MAX_INPUT == 4096


def test_cases(run_cli):
    """The number of cases `ptlrpc-conformance list` prints (and a certification runs)."""
    run = run_cli("list", out=False)
    assert run.rc == 0, run.stderr
    total = int(re.search(r"^(\d+) cases$", run.stdout, re.M).group(1))
    assert stated(r"`ptlrpc-conformance list` prints the (\d+) cases") == (total,)


@pytest.mark.parametrize("pattern", [r"\((\d+) cases\)", r"(\d+) messages of \d+ to \d+ bytes"])
def test_no_other_count_of_cases_is_typed(pattern):
    """A count that would drift stays out of the README (the bench table says 'every case')."""
    assert not re.search(pattern, README), f"the README types a count {pattern!r} no test checks"


def test_the_benchmark_figures_live_in_docs_performance():
    """The README says what `bench` measures and links the figures; the figures, bench after
    bench, are in docs/performance.md, not in the README."""
    section = README.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    assert "(docs/performance.md)" in section
    assert "|---" not in section and not re.search(r"\d\.\d+×", section)
    perf = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "ptlrpc-conformance bench" in perf and perf.count("|---") >= 4
