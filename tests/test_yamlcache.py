"""The cache of parsed YAML (harness/data/yamlcache.py): a shortcut that never changes what is
read, and never fails a run."""
import os
import time

import pytest
import yaml

from ptlrpc_conformance.harness.data import vectors, yamlcache

TEXT = "format: x\nvalues: [1, -2, 'three', {a: null, 4: true}]\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv(yamlcache.ENV, str(d))
    return d


def test_a_text_parses_the_same_from_the_cache(cache):
    first = yamlcache.load(TEXT)
    entries = list(cache.iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".marshal"
    assert yamlcache.load(TEXT) == first == yaml.safe_load(TEXT)
    # another text is another entry
    assert yamlcache.load(TEXT + "more: 1\n")["more"] == 1
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_entry_is_parsed_again(cache):
    yamlcache.load(TEXT)
    (entry,) = cache.iterdir()
    entry.write_bytes(b"\xff not marshal")
    assert yamlcache.load(TEXT) == yaml.safe_load(TEXT)


def test_bad_yaml_raises_as_safe_load_does_and_is_not_cached(cache):
    with pytest.raises(yaml.YAMLError):
        yamlcache.load("a: [1, 2\n")
    assert not cache.exists() or not list(cache.iterdir())


def test_off_and_unwritable_caches_are_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv(yamlcache.ENV, "off")
    assert yamlcache.cache_dir() is None
    assert yamlcache.load(TEXT) == yaml.safe_load(TEXT)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(yamlcache.ENV, str(blocker / "cache"))       # cannot be created
    assert yamlcache.load(TEXT) == yaml.safe_load(TEXT)
    yamlcache.mark("a", "b")
    assert not yamlcache.known("a", "b")


def test_marks_are_per_text_and_per_schema(cache):
    assert not yamlcache.known("vector-schema", "S1", TEXT)
    yamlcache.mark("vector-schema", "S1", TEXT)
    assert yamlcache.known("vector-schema", "S1", TEXT)
    assert not yamlcache.known("vector-schema", "S2", TEXT)
    assert not yamlcache.known("vector-schema", "S1", TEXT + " ")


def test_a_vector_file_is_checked_against_the_schema_until_it_passed(cache, tmp_path, monkeypatch):
    """A file that broke the schema is checked (and reported) every time; one that passed is
    not checked again while neither it nor the schema changes."""
    good = tmp_path / "good.yaml"
    good.write_text(vectors.bundled_files()[0][1], encoding="utf-8")
    calls = []
    real = vectors.vector_schema.problems
    monkeypatch.setattr(vectors.vector_schema, "problems", lambda data, name: calls.append(name) or real(data, name))
    first = vectors.load_file(good)
    assert calls == [str(good)]
    assert vectors.load_file(good) == first and calls == [str(good)]          # known valid: not checked again
    monkeypatch.setattr(vectors.vector_schema, "fingerprint", lambda: "another schema")
    vectors.load_file(good)
    assert calls == [str(good)] * 2                                          # a new schema: checked again
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("verdict: valid", "verdict: maybe", 1), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(vectors.VectorError) as e:
            vectors.load_file(bad)
        assert "verdict" in str(e.value)
    assert calls.count(str(bad)) == 2


def test_the_cache_directory_defaults_under_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(yamlcache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert yamlcache.cache_dir() == tmp_path / "ptlrpc-conformance"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(yamlcache.cache_dir()) == os.path.join(os.path.expanduser("~"), ".cache", "ptlrpc-conformance")


def test_a_directory_others_may_write_to_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(yamlcache.ENV, str(shared))
    assert yamlcache.load(TEXT) == yaml.safe_load(TEXT)
    assert list(shared.iterdir()) == []                     # nothing read from it, nothing written
    yamlcache.mark("a")
    assert not yamlcache.known("a") and list(shared.iterdir()) == []
    fresh = tmp_path / "fresh" / "cache"
    monkeypatch.setenv(yamlcache.ENV, str(fresh))
    yamlcache.load(TEXT)
    assert fresh.stat().st_mode & 0o777 == 0o700


def test_a_file_level_schema_problem_is_never_remembered_as_a_pass(cache, tmp_path):
    """A problem with the file itself (not with one of its vectors) is reported on every load."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(vectors.bundled_files()[0][1].replace("\nvectors:", "\narea: 5\nvectors:", 1), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(vectors.VectorError) as e:
            vectors.load_file(bad)
        assert "area" in str(e.value)


def test_a_computation_is_remembered_for_its_inputs_and_the_package_as_it_is(cache, monkeypatch):
    """remember(): computed once for the same inputs; other inputs, or any change to the
    package's files (their fingerprint), compute it again; a damaged entry is computed again."""
    calls = []

    def compute(value):
        return lambda: calls.append(value) or {"value": value, "data": b"\x00\x01"}

    assert yamlcache.remember("t", b"in", compute(1)) == {"value": 1, "data": b"\x00\x01"}
    assert yamlcache.remember("t", b"in", compute(2)) == {"value": 1, "data": b"\x00\x01"} and calls == [1]
    assert yamlcache.remember("t", b"other", compute(3))["value"] == 3
    assert yamlcache.remember("u", b"in", compute(4))["value"] == 4
    monkeypatch.setattr(yamlcache, "_fingerprint", ["a changed package"])
    assert yamlcache.remember("t", b"in", compute(5))["value"] == 5
    for entry in cache.glob("*.pickle"):
        entry.write_bytes(b"\x80\x05 damaged")
    assert yamlcache.remember("t", b"in", compute(6))["value"] == 6 and calls == [1, 3, 4, 5, 6]


def test_the_package_fingerprint_follows_its_files(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(yamlcache, "_PACKAGE", tmp_path)
    monkeypatch.setattr(yamlcache, "_fingerprint", [])
    first = yamlcache.package_fingerprint()
    assert yamlcache.package_fingerprint() == first          # once a process
    monkeypatch.setattr(yamlcache, "_fingerprint", [])
    (tmp_path / "m.py").write_text("x = 22\n")
    assert yamlcache.package_fingerprint() != first


def test_kept_bytes_are_per_kind_key_and_package(cache, monkeypatch):
    """keep()/recall(): bytes by kind and key, for the package as it is; nothing when off."""
    assert yamlcache.recall("k", "a") is None
    yamlcache.keep("k", "a", b"\x00one")
    assert yamlcache.recall("k", "a") == b"\x00one"
    assert yamlcache.recall("k", "b") is None and yamlcache.recall("j", "a") is None
    monkeypatch.setattr(yamlcache, "_fingerprint", ["a changed package"])
    assert yamlcache.recall("k", "a") is None
    monkeypatch.setenv(yamlcache.ENV, "off")
    yamlcache.keep("k", "c", b"x")
    assert yamlcache.recall("k", "c") is None


def test_report_templates_compiled_once_render_the_same_page(cache, tmp_path):
    """The HTML report's templates, compiled by one process and kept, give the same page in
    the next; damaged kept code is compiled again, never an error."""
    import json
    import subprocess
    import sys

    report = tmp_path / "report.json"
    report.write_text(json.dumps({"format": "ptlrpc-conformance-report/1", "cases": [], "requirements": {},
                                  "summary": {"total": 0}, "iut": {"spec": "reference"}}))
    script = ("import json, sys; from ptlrpc_conformance.harness.outputs import html; "
              "sys.stdout.write(html.render(json.load(open(sys.argv[1]))))")
    env = dict(os.environ, **{yamlcache.ENV: str(cache)})

    def page() -> str:
        proc = subprocess.run([sys.executable, "-c", script, str(report)], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    first = page()
    kept = list(cache.glob("*.bytes"))
    assert len(kept) == 2                                   # the page's template and its macros
    assert page() == first
    for entry in kept:
        entry.write_bytes(entry.read_bytes()[:40])
    assert page() == first


def test_the_cache_is_pruned_to_its_limit_oldest_first_when_an_entry_is_written(cache, monkeypatch):
    """Each change of the code adds its computations (about 8 MB): writing an entry deletes the
    oldest ones past MAX_BYTES, never the newest, never a file that is not the cache's own, and
    half-written files left long ago; reading prunes nothing."""
    cache.mkdir(mode=0o700)
    now = time.time()
    old = [cache / f"{i:064x}.pickle" for i in range(6)]
    for age, path in enumerate(old):                     # old[0] is the newest of them
        path.write_bytes(b"x" * 1000)
        os.utime(path, (now - 1000 - 10 * age, now - 1000 - 10 * age))
    stranger = cache / "notes.txt"
    stranger.write_bytes(b"y" * 5000)
    os.utime(stranger, (1, 1))
    stale, fresh = cache / ".tmp-dead", cache / ".tmp-writing"
    stale.write_bytes(b"z")
    fresh.write_bytes(b"z")
    os.utime(stale, (1, 1))
    monkeypatch.setattr(yamlcache, "MAX_BYTES", 3500)
    assert yamlcache.remember("kind", b"inputs", lambda: 1) == 1     # read first: a miss, then written
    pickles = sorted(p.name for p in cache.iterdir() if p.suffix == ".pickle")
    new = [p for p in pickles if p not in {o.name for o in old}]
    assert len(new) == 1
    # the new entry (a few bytes) and the three newest old ones fit in 3500 bytes
    assert set(pickles) == {new[0], old[0].name, old[1].name, old[2].name}
    assert stranger.exists() and fresh.exists() and not stale.exists()
    # a hit reads without pruning, even past the limit
    monkeypatch.setattr(yamlcache, "MAX_BYTES", 0)
    assert yamlcache.remember("kind", b"inputs", lambda: 2) == 1
    assert len([p for p in cache.iterdir() if p.suffix == ".pickle"]) == 4
