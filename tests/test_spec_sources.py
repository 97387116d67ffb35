"""The spec sources live in the repository (spec-sources/), so a plain clone regenerates and
tests its data from its own files, and no test reads anything outside the repository.
`tools/regen.py --from-shared DIR` refreshes the copy from the shared spec, and with --check
compares them (a maintainer's command, spec-sources/README.md; tested here on copies)."""
import importlib
import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SPEC_SOURCES

sys.path.insert(0, str(ROOT / "tools"))
regen = importlib.import_module("regen")


def refresh(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "regen.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_the_repository_carries_every_file_the_generators_read():
    assert regen.SPEC_SOURCES == SPEC_SOURCES
    readme = (SPEC_SOURCES / "README.md").read_text()
    for name in regen.SPEC_FILES:
        assert (SPEC_SOURCES / name).is_file() and (SPEC_SOURCES / name).stat().st_size > 0, name
        assert f"`{name}`" in readme, name
    assert "python3 tools/regen.py --from-shared ../shared/spec" in readme
    for tool in ("gen_facts", "gen_layouts"):
        assert importlib.import_module(tool).DEFAULT_SPEC == SPEC_SOURCES, tool


@pytest.mark.parametrize("name", ["facts.json", "layouts.json"])
def test_generated_files_name_sources_in_the_repository(name):
    meta = json.loads((ROOT / "ptlrpc_conformance" / "spec" / name).read_text())["meta"]
    files = [s for s in meta["sources"] if s.endswith(".yaml")]
    assert len(files) >= 2
    for source in files:
        assert (ROOT / source).is_file(), source


def test_refresh_copies_then_checks(tmp_path):
    shared, copy = tmp_path / "shared", tmp_path / "copy"
    shared.mkdir()
    for name in regen.SPEC_FILES:
        shutil.copy(SPEC_SOURCES / name, shared / name)
    shutil.copytree(shared, copy)
    (shared / "flags.yaml").write_text((shared / "flags.yaml").read_text() + "# changed upstream\n")

    proc = refresh("--from-shared", shared, "--to", copy, "--check")
    assert proc.returncode == 1
    assert "flags.yaml differs" in proc.stderr and "wire_facts.yaml" not in proc.stderr
    assert (copy / "flags.yaml").read_bytes() != (shared / "flags.yaml").read_bytes()   # --check writes nothing

    proc = refresh("--from-shared", shared, "--to", copy)
    assert proc.returncode == 0, proc.stderr
    assert "copied flags.yaml" in proc.stdout and "(1 of 3 files changed)" in proc.stdout
    for name in regen.SPEC_FILES:
        assert (copy / name).read_bytes() == (shared / name).read_bytes(), name

    proc = refresh("--from-shared", shared, "--to", copy, "--check")
    assert proc.returncode == 0 and "equals" in proc.stdout


def test_refresh_from_a_directory_that_is_not_the_shared_spec(tmp_path):
    (tmp_path / "wire_facts.yaml").write_text("meta: {}\n")
    proc = refresh("--from-shared", tmp_path, "--to", tmp_path / "copy")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"regen: {tmp_path} has no flags.yaml, seed_mapping.yaml "
                                   "(is it the shared spec directory?)")
    assert "Traceback" not in proc.stderr and not (tmp_path / "copy").exists()
