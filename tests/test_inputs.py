"""Every input is checked before the first case runs, and bad input is one line naming the
option or the file and line, never a traceback: the command line's options, the plugin's,
the requirement ids cases declare, vector files, `decode`'s hex, `check-trace`'s file.  And
the dumps show signed fields signed."""
import json
import struct

import pytest

from ptlrpc_conformance.harness.capture import pcap
from ptlrpc_conformance.harness.verdicts import hexdump


def refused(run, text: str) -> None:
    """Exit 2, `text` on stderr, no traceback, and no report: nothing ran."""
    assert run.rc == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert text in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr
    assert run.out is None or not (run.out / "report.json").exists()


# ---- the command line ---------------------------------------------------------------------

def test_out_that_is_a_file_or_under_a_file(run_cli, tmp_path):
    (tmp_path / "plain").write_text("x")
    run = run_cli("--out", "plain", out=False)
    refused(run, "--out plain: is a file, not a directory")
    run = run_cli("--out", "plain/sub/dir", out=False)
    refused(run, f"--out plain/sub/dir: cannot be created: {tmp_path / 'plain'} is a file")


def test_an_empty_out_is_refused(run_cli):
    refused(run_cli("--out", "", out=False), "--out: an empty path names no directory")


def test_out_is_checked_without_leaving_anything_behind(run_cli, tmp_path):
    """The check makes the missing folders to try them, and removes them: a run refused for
    another reason leaves no empty folder."""
    run = run_cli("--out", "a/b/c", "--requirement", "NO-SUCH-1", out=False)
    refused(run, "--requirement NO-SUCH-1: unknown requirement id")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("args, text", [
    (["--requirement", "HDR-MAGC-1"], "--requirement HDR-MAGC-1: unknown requirement id (closest: HDR-MAGIC-1"),
    (["--requirement", "hdr-magic-1"], "--requirement hdr-magic-1: unknown requirement id (closest: HDR-MAGIC-1"),
    (["--level", "must"], "argument --level: invalid choice: 'must'"),
    (["--io-log", "no/such/dir/io.log"], "--io-log no/such/dir/io.log: cannot be created:"),
    (["--examples", "0"], "argument --examples: 0 is not at least 1"),
])
def test_options_checked_before_the_iut_starts(run_cli, hostile, tmp_path, args, text):
    """The IUT (a testee that notes each start in a file and never answers) is never started."""
    state = tmp_path / "state"
    state.mkdir()
    run = run_cli("--iut", f"{hostile('hellohang')} {state}", *args)
    refused(run, text)
    assert "certifying" not in run.stdout               # refused before the preflight
    assert not (state / "pids").exists()


@pytest.mark.parametrize("args, text", [
    (["--case", "framing.bufcount.zeroo.decode"],
     "--case framing.bufcount.zeroo.decode: unknown case id (closest: framing.bufcount.zero.decode"),
    (["--area", "framin"], "--area framin: unknown area (closest: framing)"),
    (["-n", "2", "--case", "framing.bufcount.zeroo.decode"],     # found by an xdist worker
     "--case framing.bufcount.zeroo.decode: unknown case id (closest: framing.bufcount.zero.decode"),
])
def test_unknown_case_ids_and_areas_are_usage_errors_before_any_case(run_cli, tmp_path, args, text):
    """Case ids and areas are known once the cases are collected, before the first runs: the
    IUT is sent no case's request (the --io-log holds hellos at most)."""
    log = tmp_path / "io.log"
    run = run_cli(*args, "--io-log", str(log))
    refused(run, text)
    assert "passed" not in run.stdout and "failed" not in run.stdout
    sent = [json.loads(line[2:]) for line in (log.read_text().splitlines() if log.exists() else ())
            if line.startswith("> ")]
    assert all(request["op"] == "hello" for request in sent), sent


def test_a_renamed_case_id_is_a_known_one(run_cli):
    run = run_cli("--case", "recovery.stateful.restart", "--case", "framing.magic.zero.decode", "--examples", "5")
    assert run.rc == 0, run.stderr[-2000:]


@pytest.mark.parametrize("content, text", [
    ("", "nothing to check: the file is empty"),
    ("format: ptlrpc-conformance-vectors/1\nvectors: []\n", "nothing to check: 'vectors' is empty"),
    ("format: ptlrpc-conformance-scenarios/1\nscenarios: []\n", "nothing to check: 'scenarios' is empty"),
])
def test_an_empty_vector_file_is_an_error(run_cli, tmp_path, content, text):
    f = tmp_path / "mine.yaml"
    f.write_text(content)
    refused(run_cli("--vectors", str(f)), f"{f}: {text}")
    lint = run_cli("lint-vectors", str(f), out=False)
    assert lint.rc == 2 and text in lint.stdout


MALFORMED_SCENARIOS = [
    ({"steps": 3}, "'steps' must be a list of steps"),
    ({"requirements": "TGT-DROP-1"}, "'requirements' must be a list of strings"),
    ({"steps": [{"op": ["exchange"]}]}, "step 1: op ['exchange'] is not one of"),
    ({"steps": [{"client": "c1", "xid": 1, "request": "00", "expect_any": None, "expect": 1}]},
     "step 1: 'expect' must be a mapping"),
    ({"steps": [{"client": "c1", "xid": 1, "request": "00", "expect": {"type": ["ERR"]}}]},
     "step 1: expect.type must be REPLY or ERR"),
    # found by a fuzzer: each reached the judge (an 'error (suite)', exit 6) before it was named here
    ({"steps": [{"client": "c1", "xid": 1, "request": "00", "expect": {"status": ""}}]},
     "step 1: expect.status must be an integer (the signed pb_status) or null"),
    ({"steps": [{"client": "c1", "xid": 1, "request": "00", "expect": {"op_flags_all": "5"}}]},
     "step 1: expect.op_flags_all must be a non-negative integer"),
    ({"steps": [{"client": "c1", "xid": 1, "request": "00", "expect": {"handle": 1}}]},
     "step 1: expect.handle must be nonzero, zero or null"),
    ({"steps": [{"client": "c1", "xid": 1, "request": "00", "expect": {"struct": "no_such_struct"}}]},
     "step 1: expect.struct must be a structure name (a string)"),
    ({"steps": [{"client": "c1", "xid": 1, "request": "00", "expect_any": [
        {"outcome": "a", "status": 0}, {"outcome": "b", "requirement": ["TGT-ERR-2"]}]}]},
     "step 1: expect_any 2: expect.requirement must be a requirement id (a string)"),
]


@pytest.mark.parametrize("change, text", MALFORMED_SCENARIOS)
def test_a_malformed_scenario_is_refused_where_it_is(tmp_path, change, text):
    """A scenario file of the wrong shape is a list of problems, each naming the file, the
    scenario and the step (a bare TypeError traceback before)."""
    import yaml
    from ptlrpc_conformance.harness.data.vectors import VectorError
    from ptlrpc_conformance.harness.ost import scenario_file
    scenario = dict({"id": "mine.bad", "title": "t", "requirements": ["TGT-DROP-1"], "cite": ["x"],
                     "steps": [{"op": "restart"}]}, **change)
    f = tmp_path / "mine.yaml"
    f.write_text(yaml.safe_dump({"format": scenario_file.SCENARIO_FORMAT, "scenarios": [scenario]}))
    with pytest.raises(VectorError) as e:
        scenario_file.load_all([str(f)])
    assert any(p.startswith(f"{f}: mine.bad: ") and text in p for p in e.value.problems), e.value.problems


def test_a_malformed_scenario_file_is_a_usage_error(run_cli, tmp_path):
    import yaml
    from ptlrpc_conformance.harness.ost import scenario_file
    f = tmp_path / "mine.yaml"
    f.write_text(yaml.safe_dump({"format": scenario_file.SCENARIO_FORMAT, "scenarios": [
        {"id": "mine.bad", "title": "t", "requirements": ["TGT-DROP-1"], "cite": ["x"], "steps": 3}]}))
    refused(run_cli("--area", "target", "--vectors", str(f)), f"{f}: mine.bad: 'steps' must be a list of steps")


def test_a_vector_directory_without_vector_files_is_an_error(run_cli, tmp_path):
    (tmp_path / "none").mkdir()
    refused(run_cli("--vectors", str(tmp_path / "none")), "nothing to check: no .yaml or .yml vector file")


# ---- the plugin, without the command line ---------------------------------------------------

def test_a_marker_naming_an_unknown_requirement_is_a_usage_error(pytester):
    pytester.makepyfile(test_mine="""
        import pytest

        @pytest.mark.conformance(case="local.ping.decode", requirements=["HDR-MAGIC-1", "HDR-MAGC-9"])
        def test_ping():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 4
    err = result.stderr.str()
    assert "test_mine.py:3: case local.ping.decode: unknown requirement id 'HDR-MAGC-9' (closest: HDR-MAGIC-" in err
    assert "Traceback" not in err + result.stdout.str()


@pytest.mark.parametrize("args, text", [
    (["--conformance-requirement", "HDR-MAGC-1"], "--conformance-requirement HDR-MAGC-1: unknown requirement id"),
    (["--conformance-area", "framin"], "--conformance-area framin: unknown area (closest: framing)"),
    (["--conformance-case", "framing.magic.zeroo.decode"], "--conformance-case framing.magic.zeroo.decode: unknown "
                                                           "case id (closest: framing.magic.zero.decode"),
    (["--update-known-failures"], "--update-known-failures needs --known-failures FILE"),
    (["--known-failures", "missing.yaml"], "--known-failures missing.yaml: no such file"),
    (["--conformance-report", "."], "--conformance-report .: is a directory, not a file"),
    (["--conformance-examples", "0"], "argument --conformance-examples: 0 is not at least 1"),
])
def test_plugin_options_are_checked_before_any_case(pytester, args, text):
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider", *args)
    assert result.ret == 4, result.stdout.str()[-2000:]
    assert text in result.stderr.str()
    assert "passed" not in result.stdout.str() and "Traceback" not in result.stderr.str()


def test_plugin_vector_files_are_checked_before_collection(pytester):
    (pytester.path / "empty.yaml").write_text("")
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider",
                                           "--conformance-vectors", "empty.yaml")
    assert result.ret == 4
    assert "empty.yaml: nothing to check: the file is empty" in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_plugin_with_xdist_reports_an_unknown_case_without_an_internal_error(pytester):
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider",
                                           "-n", "2", "--conformance-case", "framing.magic.zeroo.decode")
    assert result.ret == 4
    out = result.stdout.str() + result.stderr.str()
    assert "--conformance-case framing.magic.zeroo.decode: unknown case id" in out
    assert "INTERNALERROR" not in out


# ---- decode's hex ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("abc", "an odd number of hex digits (3)"),
    ("0a 1", "an odd number of hex digits (3)"),
    ("0g", "'g' at digit 2 is not a hexadecimal digit"),
    ("d30bd00bé0", "'é' at digit 9 is not a hexadecimal digit"),
])
def test_decode_says_what_is_wrong_with_the_hex(run_cli, text, message):
    run = run_cli("decode", text, out=False)
    assert run.rc == 2 and message in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_decode_of_a_file_that_cannot_be_read(run_cli, tmp_path):
    run = run_cli("decode", "@" + str(tmp_path / "none.hex"), out=False)
    assert run.rc == 2 and "cannot read" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / "bin").write_bytes(b"\x9b\x00")
    run = run_cli("decode", "@" + str(tmp_path / "bin"), out=False)
    assert run.rc == 2 and "not a text file of hex digits" in run.stderr


# ---- check-trace's file ---------------------------------------------------------------------

def test_check_trace_refuses_binary_garbage_with_the_offset(run_cli, tmp_path):
    f = tmp_path / "garbage.bin"
    f.write_bytes(b'{"x"\x00\x01\x9b\xff rest')
    run = run_cli("check-trace", str(f), out=False)
    assert run.rc == 2 and "Traceback" not in run.stderr
    assert f"{f}: not a JSON Lines trace or a pcap: byte 0x9b at offset 6 is not UTF-8 text" in run.stderr
    assert "codec" not in run.stderr


def test_check_trace_refuses_text_that_is_not_json_lines(run_cli, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("\nhello world\n")
    run = run_cli("check-trace", str(f), out=False)
    assert run.rc == 2
    assert f"{f}: not a JSON Lines trace or a pcap: line 2 (offset 1) is not JSON" in run.stderr


@pytest.mark.parametrize("name, content", [
    ("empty.jsonl", b""),
    ("blank.jsonl", b"\n  \n"),
    ("events.jsonl", b'{"event": "restart"}\n'),
])
def test_check_trace_of_an_empty_trace_is_nothing_to_check(run_cli, tmp_path, name, content):
    f = tmp_path / name
    f.write_bytes(content)
    run = run_cli("check-trace", str(f), out=False)
    assert run.rc == 2 and f"{f}: nothing to check: the trace holds no exchange" in run.stderr
    assert "0 exchanges, 0 violations" not in run.stderr


def test_check_trace_of_a_header_only_pcap_is_nothing_to_check(run_cli, tmp_path):
    f = tmp_path / "empty.pcap"
    pcap.write_pcap(f, [])
    assert 0 < f.stat().st_size <= 24                  # the pcap header, no packet
    run = run_cli("check-trace", str(f), out=False)
    assert run.rc == 2 and f"{f}: nothing to check: the capture holds no LNet request" in run.stderr


# ---- signed fields in dumps -----------------------------------------------------------------

def _message(status: int) -> bytes:
    body = bytearray(184)
    struct.pack_into("<I", body, 8, 0x00010003)        # pb_version
    struct.pack_into("<i", body, 20, status)           # pb_status
    return struct.pack("<8I", 1, 0, 0x0BD00BD3, 0, 0, 0, 0, 0) + struct.pack("<I", 184) + b"\0" * 4 + bytes(body)


def test_pb_status_is_shown_signed():
    dump = hexdump.render(_message(-107))
    assert "[0] pb_status = -107 = 0xffffff95" in dump and "4294967189" not in dump
    assert "[0] pb_status = 5 = 0x5" in hexdump.render(_message(5))
    assert "[0] pb_opc = 0 = 0x0" in dump                 # unsigned fields unchanged


def test_signed_struct_fields_are_shown_signed():
    data = bytearray(208)
    struct.pack_into("<q", data, 40, -2)                # obdo.o_mtime, an s64
    struct.pack_into("<Q", data, 32, 2 ** 64 - 2)       # obdo.o_size, a u64
    dump = hexdump.render_struct("obdo", bytes(data))
    assert "o_mtime = -2 = 0xfffffffffffffffe" in dump
    assert "o_size = 18446744073709551614 = 0xfffffffffffffffe" in dump


def test_decode_prints_pb_status_signed(run_cli):
    run = run_cli("decode", _message(-107).hex(), "--direction", "reply", out=False)
    assert "pb_status = -107" in run.stdout and "4294967189" not in run.stdout


def test_iut_help_names_every_kind_of_iut(run_cli):
    """The --iut help lists every form the loader accepts (tshark included)."""
    from ptlrpc_conformance.harness.transport import loader
    forms = [line.split()[0] for line in loader.__doc__.splitlines()[2:]
             if line.strip() and not line.startswith("   ")]          # a form's line, not its continuation
    assert forms == ["reference", "reference:RELEASE", "python:package.module:factory", "exec:COMMAND",
                     "tshark[:PROGRAM]", "lnet-tcp:NID?target=UUID&...", "client:COMMAND"]
    text = " ".join(run_cli("certify", "--help", out=False).stdout.split())
    for form in forms:
        assert form in text, form


@pytest.mark.parametrize("content", ["", "# nothing yet\n"])
def test_an_empty_known_failures_file_is_refused(run_cli, tmp_path, content):
    (tmp_path / "known.yaml").write_text(content)
    refused(run_cli("--known-failures", "known.yaml"), "known.yaml: empty: a known-failures file holds")
    # a file --update-known-failures is to fill may be empty
    run = run_cli("--iut", "reference", "--known-failures", "known.yaml", "--update-known-failures", "loosen",
                  "--area", "protocol")
    assert run.rc in (0, 5), run.stderr[-2000:]
    assert "format: ptlrpc-conformance-known-failures/1" in (tmp_path / "known.yaml").read_text()


MISSPELT = """
from ptlrpc_conformance.reference import make_testee


class Misspelt:
    def __init__(self):
        self.inner = make_testee(capabilities=("decode",))

    def handle(self, request):
        response = self.inner.handle(request)
        if request.get("op") == "hello":
            response["result"]["capabilities"] = ["decod"]
        return response
"""


def test_an_unknown_capability_is_named_with_the_closest_known_one(run_cli, tmp_path, pytester):
    (tmp_path / "misspelt.py").write_text(MISSPELT)
    run = run_cli("--iut", "python:misspelt:Misspelt", "--area", "protocol")
    assert "warning: the IUT's hello declares capability 'decod', which this suite does not know: it is " \
           "ignored (closest: decode" in run.stdout
    pytester.makepyfile(misspelt=MISSPELT)
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites.test_protocol", "-p",
                                           "no:cacheprovider", "--iut", "python:misspelt:Misspelt")
    assert "declares capability 'decod'" in result.stdout.str()


def test_the_case_ids_a_selection_is_checked_against_are_kept_only_for_what_determines_them(tmp_path, monkeypatch):
    """certify checks --case and --area against the collected case ids; those are kept in the
    run cache under a key of what they depend on besides the package (cli/certify.py
    _collection_key): the profile, pytest's arguments and the user's vector files by content.
    A plugin from outside the package could add cases, so it is never cached."""
    import argparse
    from ptlrpc_conformance.cli.certify import _collection_key
    monkeypatch.delenv("PYTEST_PLUGINS", raising=False)
    f = tmp_path / "mine.yaml"
    f.write_text("format: ptlrpc-conformance-vectors/1\nvectors: []\n")

    def key(pytest_args=(), vectors=(), profile=None):
        return _collection_key(argparse.Namespace(pytest_args=list(pytest_args), vectors=list(vectors),
                                                  profile=profile))
    assert key() is not None and key() == key()
    assert key(["-p", "ptlrpc_conformance.harness.tools.noshrink"]) not in (None, key())
    assert key(profile="lustre-2.15.8") != key()
    assert key(["-p", "my_plugin"]) is None and key(["-pmy_plugin"]) is None
    before = key(vectors=[str(f)])
    f.write_text("format: ptlrpc-conformance-vectors/1\narea: mine\nvectors: []\n")
    assert before is not None and key(vectors=[str(f)]) not in (None, before)
    monkeypatch.setenv("PYTEST_PLUGINS", "my_plugin")
    assert key() is None
