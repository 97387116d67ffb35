"""docs/ci.md's CI recipe (examples/ci/github-actions.yml and examples/ci/certify.sh) stays in
step with the command line: the page shows both files verbatim, every `ptlrpc-conformance`
command in them uses options its subcommand has, the workflow's certify command runs, and the
folder the workflow uploads is the one certify writes.  Also: .gitignore covers the default
output folders."""
import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import json

import pytest
import yaml

from conftest import ROOT
from ptlrpc_conformance.harness import options

WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
SCRIPT = ROOT / "examples" / "ci" / "certify.sh"
DOC = ROOT / "docs" / "ci.md"
SEPARATORS = {"||", "&&", ";", "|"}


def _included(rel: str) -> str:
    m = re.search(rf"<!-- include: {re.escape(rel)} [^>]*-->\n```\w+\n(.*?)```\n<!-- end include -->",
                  DOC.read_text(), re.S)
    assert m, f"docs/ci.md does not include {rel} between the markers"
    return m.group(1)


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _step(name: str) -> dict:
    steps = [s for s in _workflow()["jobs"]["certify"]["steps"] if s.get("name") == name]
    assert len(steps) == 1, name
    return steps[0]


def _argv(line: str) -> list[str]:
    argv = shlex.split(line, comments=True)
    for i, token in enumerate(argv):
        if token in SEPARATORS:
            return argv[:i]
    return argv


def _commands(text: str) -> list[list[str]]:
    """The `ptlrpc-conformance ...` command lines of a script, a run: step or a page."""
    text = text.replace("\\\n", " ")
    return [_argv(line.strip()) for line in text.splitlines() if line.strip().startswith("ptlrpc-conformance ")]


def _workflow_commands() -> list[list[str]]:
    return [c for s in _workflow()["jobs"]["certify"]["steps"] if "run" in s for c in _commands(s["run"])]


@functools.lru_cache(maxsize=None)
def _help(sub: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", sub, "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"ptlrpc-conformance {sub} --help: {proc.stderr}"
    return proc.stdout


def _check_against_help(argv: list[str]) -> None:
    assert argv[0] == "ptlrpc-conformance" and len(argv) > 1, argv
    text = _help(argv[1])
    known = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))
    for token in argv[2:]:
        if token.startswith("-") and token != "-":
            assert token.split("=")[0] in known, f"{shlex.join(argv)}: {token} is not an option of {argv[1]}"


def test_the_page_shows_both_files_verbatim():
    assert _included("examples/ci/github-actions.yml") == WORKFLOW.read_text()
    assert _included("examples/ci/certify.sh") == SCRIPT.read_text()


def test_every_command_uses_options_the_cli_has():
    found = {"workflow": _workflow_commands(), "script": _commands(SCRIPT.read_text()),
             "page": _commands(DOC.read_text())}
    assert [c[1] for c in found["workflow"]] == ["certify"]
    assert [c[1] for c in found["script"]] == ["certify"]
    assert any("--update-known-failures" in c for c in found["page"])     # the bootstrap run
    for commands in found.values():
        for argv in commands:
            _check_against_help(argv)


def test_the_script_is_the_workflow_without_github():
    assert _commands(SCRIPT.read_text()) == _workflow_commands()
    defaults = dict(re.findall(r'^(\w+)=\$\{\1:-"([^"]*)"\}', SCRIPT.read_text(), re.M))
    assert defaults == _workflow()["env"]
    assert 'python3 -m pip install "$SUITE"' in SCRIPT.read_text()
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_workflow_installs_this_suite_and_uploads_always():
    wf = _workflow()
    assert set(wf.get("on", wf.get(True))) == {"push", "pull_request"}      # YAML 1.1 reads `on` as True
    # the suite comes from a checkout kept as a submodule, which the checkout step fetches
    assert wf["env"]["SUITE"] == "./ptlrpc-conformance"
    steps = wf["jobs"]["certify"]["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["submodules"] is True
    python = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python@"))
    assert tuple(map(int, python["with"]["python-version"].split("."))) >= (3, 11)   # requires-python
    assert _step("Install the conformance suite")["run"] == 'python3 -m pip install "$SUITE"'
    upload = _step("Upload the report")
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    certify = _workflow_commands()[0]
    assert certify[certify.index("--out") + 1] == "$REPORT"
    assert upload["with"]["path"].rstrip("/") == "${{ env.REPORT }}"


def test_the_workflow_certifies_and_uploads_what_certify_writes(tmp_path):
    """The Certify step's own command, run by bash as the runner would, with TESTEE the
    bundled reference as an exec: testee and an empty known-failures file."""
    wf = _workflow()
    env = dict(os.environ, **wf["env"])
    env["TESTEE"] = shlex.join([sys.executable, "-m", "ptlrpc_conformance.reference"])
    shim = tmp_path / "bin"          # the console script, whether or not this checkout installed it
    shim.mkdir()
    (shim / "ptlrpc-conformance").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                                             "-m ptlrpc_conformance.cli \"$@\"\n")
    (shim / "ptlrpc-conformance").chmod(0o755)
    env["PATH"] = os.pathsep.join([str(shim), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    work = tmp_path / "repo"
    known = work / env["KNOWN_FAILURES"]
    known.parent.mkdir(parents=True)
    known.write_text("format: ptlrpc-conformance-known-failures/1\nentries: []\n")

    proc = subprocess.run(["bash", "-c", _step("Certify")["run"]], cwd=work, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    uploaded = work / re.sub(r"\$\{\{\s*env\.(\w+)\s*\}\}", lambda m: env[m.group(1)],
                             _step("Upload the report")["with"]["path"])
    assert uploaded.is_dir() and uploaded.resolve() == (work / env["REPORT"]).resolve()
    assert {"report.json", "report.html", "junit.xml"} <= {p.name for p in uploaded.iterdir()}
    report = json.loads((uploaded / "report.json").read_text())
    assert report["summary"]["fail"] == report["summary"]["error"] == 0
    assert report["summary"]["pass"] > 0 and report["iut"]["spec"] == f"exec:{env['TESTEE']}"


def test_gitignore_covers_the_default_output_folders():
    ignored = {line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    default_out = options.BY_DEST["out"].default
    assert default_out == "ptlrpc-conformance-report"
    assert f"{default_out}/" in ignored       # certify's and run's --out (reproducers/ inside it)
    assert "/reproducers/" in ignored         # a plugin run's --conformance-report FILE at the top
    assert "/report/" in ignored              # the README's quick start (--out report)


def test_the_script_installs_the_suite_as_written(tmp_path):
    """certify.sh run as a vendor runs it: from a repository whose ./ptlrpc-conformance is a
    checkout of the suite, in a fresh virtual environment, its install step unchanged; the
    console script it then calls is the one that install put there, not this checkout's.
    Offline: pip builds with the set-up's setuptools and wheel (the `test` extra), not in an
    isolated environment fetched from a package index, and looks at no index; the virtual
    environment runs the set-up's pip (it sees the system's packages), installing into itself."""
    import venv
    for module in ("setuptools", "wheel", "pip"):
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"{module} is not installed: this test builds the suite offline with it "
                        "(python3 -m pip install -e '.[test]')", pytrace=False)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=True).create(env_dir)
    work = tmp_path / "repo"
    (work / "conformance").mkdir(parents=True)
    (work / "conformance" / "known-failures.yaml").write_text(
        "format: ptlrpc-conformance-known-failures/1\nentries: []\n")
    (work / "ptlrpc-conformance").symlink_to(ROOT, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(env_dir / "bin"), env.get("PATH", "")])
    env["TESTEE"] = f"{env_dir / 'bin' / 'python3'} -m ptlrpc_conformance.reference"
    env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
    # no index, no find-links, no configuration file naming one; pip reads "0" here as "do not isolate"
    env.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_NO_BUILD_ISOLATION="0")
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((work / "ptlrpc-conformance-report" / "report.json").read_text())
    assert report["level"]["status"] == "fully conformant" and report["gate"]["ok"]
    assert (work / "ptlrpc-conformance-report.tar.gz").is_file()
    where = subprocess.run([str(env_dir / "bin" / "python3"), "-c",
                            "import ptlrpc_conformance; print(ptlrpc_conformance.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert str(env_dir) in where.stdout, where.stdout + where.stderr      # installed, not this checkout
