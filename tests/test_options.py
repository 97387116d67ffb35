"""The option table (harness/options.py): the certify parser, the subsets of the other
commands, the plugin's pytest options, the arguments the CLI passes to pytest and the
report's `reproduce` command all come from it; the default per-call timeout is one value."""
import argparse
import inspect
import os
import re

import pytest

from conftest import USER_VECTOR
from ptlrpc_conformance import cli, plugin
from ptlrpc_conformance.cli.certify import certify_parser
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.options import DEFAULT_TIMEOUT, OPTIONS
from ptlrpc_conformance.harness.outputs import report
from ptlrpc_conformance.harness.transport import adapter, exec as exec_transport, loader, tshark

PLUGIN_ROWS = [o for o in OPTIONS if o.pytest and o.plugin]


def _squeeze(text: str) -> str:
    """Help text without its line wrapping."""
    return "".join(text.split())


def _actions(parser: argparse.ArgumentParser) -> dict:
    return {tuple(a.option_strings): a for a in parser._actions if a.option_strings}


def test_table_is_consistent():
    dests = [o.dest for o in OPTIONS]
    assert len(dests) == len(set(dests))
    names = [n for o in OPTIONS for n in o.cli]
    assert len(names) == len(set(names))
    pytest_names = [o.pytest for o in OPTIONS if o.pytest]
    assert len(pytest_names) == len(set(pytest_names))
    for o in OPTIONS:
        assert o.cli or o.pytest, o.dest
        assert o.help and "{" not in o.help_text(), o.dest
        assert not o.reproduce or o.cli, o.dest
        assert o.plugin or not o.pytest.startswith("--"), o.dest   # only pytest's own short options are foreign


def test_certify_parser_is_the_table():
    parser = certify_parser()
    actions = _actions(parser)
    assert set(actions) - {("-h", "--help")} == {o.cli for o in options.certify_options()}
    help_text = _squeeze(parser.format_help())
    for o in options.certify_options():
        a = actions[o.cli]
        assert a.dest == o.dest and a.choices == o.choices and a.metavar == o.metavar and a.type is o.type
        if o.action != "store_true":
            assert a.const == o.const and a.nargs == o.nargs
        assert a.default == (list(o.default or ()) if o.action == "append" else
                             False if o.action == "store_true" else o.default)
        assert _squeeze(o.help_text()) in help_text, o.dest
    defaults = parser.parse_args([])
    assert defaults.iut == "reference" and defaults.iut_timeout == DEFAULT_TIMEOUT
    assert defaults.seed == options.DEFAULT_SEED and defaults.examples == options.DEFAULT_EXAMPLES


def test_certify_help_on_the_command_line_lists_every_option(run_cli):
    run = run_cli("certify", "--help", out=False)
    assert run.rc == 0
    text = _squeeze(run.stdout)
    for o in options.certify_options():
        for name in o.cli:
            assert name in run.stdout, name
        assert _squeeze(o.help_text()) in text, o.dest


@pytest.mark.parametrize("command, dests", [
    ("list", {"requirement", "area", "level", "profile", "vectors"}),
    ("decode", {"iut", "iut_timeout"}),
    ("requirements", {"profile"}),
    ("export", {"profile", "vectors"}),
])
def test_other_commands_take_their_subset(command, dests):
    assert {o.dest for o in options.command_options(command)} == dests
    p = options.Parser(prog=command)
    options.add_arguments(p, options.command_options(command))
    certify = _actions(certify_parser())
    for names, a in _actions(p).items():
        if names != ("-h", "--help"):
            b = certify[names]
            assert (a.dest, a.default, a.type, a.choices, a.help) == (b.dest, b.default, b.type, b.choices, b.help)


def test_plugin_options_are_the_table(pytester):
    out = pytester.runpytest_subprocess("--help").stdout.str()
    group = out[out.index("PtlRPC conformance suite:"):]
    group = group[:group.index("\n\n")]
    text = _squeeze(group)
    for o in PLUGIN_ROWS:
        shown = o.pytest if o.action == "store_true" or not o.metavar else f"{o.pytest}={o.metavar}"
        assert shown in group, shown
        assert _squeeze(o.help_text()) in text, o.dest
    # the group holds exactly the table's plugin options, in the table's order
    listed = re.findall(r"^  (--[\w-]+)", group, re.M)
    assert listed == [o.pytest for o in PLUGIN_ROWS]


def test_plugin_defaults_and_types_are_the_table(pytester):
    config = pytester.parseconfig()
    for o in PLUGIN_ROWS:
        expected = (o.pytest_default if o.pytest_default is not options._SAME else o.default)
        if o.action == "append":
            expected = list(expected or ())
        elif o.action == "store_true":
            expected = False
        assert config.getoption(o.config_dest) == expected, o.dest
    assert config.getoption("iut") is None                # the plugin tells an explicit --iut apart
    assert config.getoption("iut_timeout") == DEFAULT_TIMEOUT
    config = pytester.parseconfig("--iut-timeout", "2.5", "--conformance-max-fail", "3", "--conformance-seed", "7")
    assert (config.getoption("iut_timeout"), config.getoption("conformance_max_fail"),
            config.getoption("conformance_seed")) == (2.5, 3, 7)


GIVEN = ["--iut", "reference", "--profile", "lustre-2.17.57-literal", "--seed", "7", "--examples", "3",
         "--vectors", "vecs", "--vectors", "more/vecs.yaml", "--ignore-errno-class", "--iut-timeout", "2.5",
         "--requirement", "HDR-MAGIC-1", "--area", "framing", "--area", "structs",
         "--case", "framing.magic.zero.decode", "--level", "MUST", "-k", "magic",
         "--known-failures", "kf.yaml", "--update-known-failures", "loosen", "--io-log", "io.log",
         "--max-fail", "4", "--time-budget", "9.5", "-n", "2"]


def test_cli_values_reach_pytest_unchanged(pytester, monkeypatch, tmp_path):
    """What certify passes to pytest, parsed by pytest, holds the values certify parsed."""
    monkeypatch.chdir(tmp_path)
    args = certify_parser().parse_args(GIVEN)
    pargs = options.pytest_args(args, [o for o in options.certify_options() if o.dest != "list"])
    config = pytester.parseconfig(*pargs)
    for o in options.certify_options():
        if not o.pytest or o.dest == "list":
            continue
        value = getattr(args, o.dest)
        if o.path:
            value = [os.path.abspath(v) for v in value] if o.action == "append" else os.path.abspath(value)
        if o.dest == "jobs":
            value = int(value)                  # xdist's own type
        assert config.getoption(o.config_dest) == value, o.dest


def test_certify_passes_on_what_the_table_says(monkeypatch, tmp_path):
    """`certify` and `certify --list` build their pytest arguments from the table."""
    calls = []
    monkeypatch.setattr(pytest, "main", lambda pargs, **kw: calls.append(list(pargs)) or 0)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vecs").mkdir()
    (tmp_path / "vecs" / "mine.yaml").write_text(USER_VECTOR)
    given = GIVEN[:GIVEN.index("--vectors")] + ["--vectors", "vecs"] + GIVEN[GIVEN.index("--ignore-errno-class"):]
    assert cli.main(["certify", *given, "--out", str(tmp_path / "out")]) == 0
    pargs = calls[-1]
    args = certify_parser().parse_args(given)
    for o in options.certify_options():
        if o.pytest and o.dest != "list":
            part = o.argv(o.pytest, getattr(args, o.dest))
            assert any(pargs[i:i + len(part)] == part for i in range(len(pargs))), (o.dest, part)
    assert "--conformance-list" not in pargs

    listed = ["--area", "framing", "--level", "MUST", "--vectors", "v", "--profile", "lustre-2.17.57",
              "--requirement", "HDR-MAGIC-1"]
    assert cli.main(["list", *listed]) == 0
    assert cli.main(["certify", "--list", *listed, "--case", "ignored", "--seed", "3"]) == 0
    assert calls[-1] == calls[-2]
    assert "--conformance-list" in calls[-1] and os.path.abspath("v") in calls[-1]
    assert "--conformance-case" not in calls[-1] and "--conformance-seed" not in calls[-1]


def _old_reproduce(get):
    """The reproduce command as report.py wrote it before the option table (the format to keep)."""
    argv = ["ptlrpc-conformance", "certify", "--iut", get("iut") or "reference",
            "--profile", get("conformance_profile") or "lustre-2.17.57",
            "--seed", str(get("conformance_seed")), "--examples", str(get("conformance_examples"))]
    for v in get("conformance_vectors") or ():
        argv += ["--vectors", os.path.abspath(v)]
    if get("ignore_errno_class"):
        argv.append("--ignore-errno-class")
    argv += ["--iut-timeout", str(get("iut_timeout"))]
    for opt in ("requirement", "area", "case"):
        for v in get(f"conformance_{opt}") or ():
            argv += [f"--{opt}", v]
    if get("conformance_level"):
        argv += ["--level", get("conformance_level")]
    if get("keyword"):
        argv += ["-k", get("keyword")]
    return argv


@pytest.mark.parametrize("args", [
    [],
    GIVEN,
    ["--iut", "exec:./t --x", "--vectors", "a", "--case", "c.d", "--level", "SHOULD"],
    ["--profile", "lustre-2.17.57-reconstruct", "--seed", "0", "--examples", "1", "--iut-timeout", "0.25"],
])
def test_reproduce_command_keeps_its_format(pytester, args):
    pargs = options.pytest_args(certify_parser().parse_args(args),
                                [o for o in options.certify_options() if o.dest != "list"])
    config = pytester.parseconfig(*pargs)
    profile = config.getoption("conformance_profile") or registry.default_profile()
    new = options.reproduce_argv(config.getoption, {"profile": profile})
    assert new == _old_reproduce(config.getoption)
    assert new[new.index("--profile") + 1] == profile


def test_reproduce_of_a_run_parses_back_to_its_options(run_cli, tmp_path):
    vectors = tmp_path / "mine.yaml"
    vectors.write_text(USER_VECTOR)
    given = ["--iut", "reference", "--seed", "11", "--examples", "2", "--vectors", str(vectors),
             "--ignore-errno-class", "--iut-timeout", "7.5", "--requirement", "HDR-MAGIC-3", "--area", "framing",
             "--case", "framing.magic.zero.decode", "--level", "MUST", "-k", "magic"]
    run = run_cli(*given)
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-2000:]
    reproduce = run.report["reproduce"]
    assert reproduce[:2] == ["ptlrpc-conformance", "certify"]
    again = certify_parser().parse_args(reproduce[2:])
    want = certify_parser().parse_args(given)
    for o in options.certify_options():
        if o.reproduce:
            expected = getattr(want, o.dest)
            if o.dest == "profile":
                expected = registry.default_profile()     # written out, so a later default cannot change it
            assert getattr(again, o.dest) == expected, o.dest
    assert run.report["summary"]["total"] == 1


def test_one_default_timeout():
    assert options.BY_DEST["iut_timeout"].default is DEFAULT_TIMEOUT is adapter.DEFAULT_TIMEOUT
    for fn in (loader.load_adapter, exec_transport.ExecAdapter.__init__, tshark.TsharkAdapter.__init__, tshark.make):
        assert inspect.signature(fn).parameters["timeout"].default is DEFAULT_TIMEOUT, fn
    assert certify_parser().parse_args([]).iut_timeout is DEFAULT_TIMEOUT
    p = options.Parser(prog="decode")
    options.add_arguments(p, options.command_options("decode"))
    assert p.parse_args([]).iut_timeout is DEFAULT_TIMEOUT


def test_no_timeout_or_profile_literal_left():
    """The default timeout and the default profile are typed nowhere else."""
    for module in (cli, plugin, report, options):
        source = inspect.getsource(module)
        assert "5.0" not in source and "lustre-2.17.57" not in source, module.__name__
