"""The exit statuses are stated once, as data (harness/options.py, EXIT_STATUSES): the
command's --help and the tables of README.md and docs/report.md are written from it."""
from __future__ import annotations

import pathlib
import re

from ptlrpc_conformance import cli
from ptlrpc_conformance.harness import options

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "docs/report.md")
BLOCK = re.compile(r"<!-- exit statuses: [^\n]*-->\n(.*?)\n<!-- end exit statuses -->", re.S)


def test_every_exit_status_constant_has_one_meaning():
    constants = {name: value for name, value in vars(options).items()
                 if name.startswith("EXIT_") and isinstance(value, int)}
    codes = [code for code, _ in options.EXIT_STATUSES]
    assert codes == sorted(set(codes)), codes
    assert set(codes) == set(constants.values()), (codes, constants)
    assert all(meaning.strip() for _, meaning in options.EXIT_STATUSES)


def test_the_documents_show_the_table():
    want = options.exit_status_table()
    for name in DOCUMENTS:
        blocks = BLOCK.findall((ROOT / name).read_text(encoding="utf-8"))
        assert len(blocks) == 1, f"{name}: expected one exit-status block, found {len(blocks)}"
        assert blocks[0].strip() == want, f"{name}: the exit-status table differs; write in its place:\n{want}"


def test_the_table_has_a_row_per_status():
    rows = options.exit_status_table().splitlines()[2:]
    assert [int(r.split("|")[1]) for r in rows] == [code for code, _ in options.EXIT_STATUSES]


def test_help_ends_with_the_exit_statuses(capsys):
    assert cli.main(["--help"]) == options.EXIT_OK
    out = capsys.readouterr().out
    assert out.rstrip().endswith(options.exit_status_text())
    for code, _ in options.EXIT_STATUSES:
        assert re.search(rf"(Exit status: |; ){code} ", " ".join(out.split())), code
