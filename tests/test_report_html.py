"""report.html (ptlrpc_conformance.harness.outputs.html): the self-contained certification page.

The page is checked as a browser reads it: rendered by headless Chromium (--dump-dom) and
the assertions made on the DOM it produced.  Chromium is a test requirement, not an
option: tools/setup-system.sh installs it (Debian package `chromium`), and a test that
finds it missing fails with that hint (conftest.require_tool).
"""
from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import require_tool
from ptlrpc_conformance.harness.outputs import html as report_html
from ptlrpc_conformance.harness.outputs import report as report_json
from ptlrpc_conformance.harness.outputs import level as level_rule

FAILING_IUT = ("--iut", "python:iuts:no_header_pad", "--examples", "30")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


# ----------------------------------------------------------------------------------------
# a small DOM of what Chromium dumped
# ----------------------------------------------------------------------------------------

class Node:
    def __init__(self, tag: str, attrs: dict, parent: "Node | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list = []       # Node or str

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs) -> list["Node"]:
        out = []
        for n in self.iter():
            if tag and n.tag != tag:
                continue
            if cls and cls not in (n.attrs.get("class") or "").split():
                continue
            if any(n.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(n)
        return out

    def by_id(self, ident: str) -> "Node":
        found = [n for n in self.iter() if n.attrs.get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id={ident!r}"
        return found[0]


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, {k: (v or "") for k, v in attrs}, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        assert n is not None and n.parent is not None, f"unbalanced </{tag}> in the dumped DOM"
        self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse(text: str) -> Node:
    b = _Builder()
    b.feed(text)
    b.close()
    return b.root


# ----------------------------------------------------------------------------------------
# Chromium
# ----------------------------------------------------------------------------------------

def chromium() -> str:
    """The report.html tests render the page in headless Chromium."""
    return require_tool("chromium")


def dump_dom(page, tmp_path) -> str:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "<body" in proc.stdout, \
        f"chromium --dump-dom failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc.stdout


def rendered(report: dict, tmp_path) -> tuple[str, Node]:
    page = report_html.write(report, tmp_path / "report.html")
    assert page == tmp_path / "report.html" and page.is_file()
    dom = dump_dom(page, tmp_path)
    return dom, parse(dom)


def assert_self_contained(dom: str, tree: Node) -> None:
    assert "http://" not in dom and "https://" not in dom
    for n in tree.iter():
        for attr in ("src", "srcset", "action", "poster", "data"):
            assert attr not in n.attrs, f"<{n.tag} {attr}=...> in the page"
        if "href" in n.attrs:
            assert n.attrs["href"].startswith("#"), f"<{n.tag} href={n.attrs['href']!r}>: not a link within the page"
    assert not tree.find_all("link") and not tree.find_all("img") and not tree.find_all("iframe")
    for s in tree.find_all("script"):
        assert "src" not in s.attrs and len(s.text()) < 400
    assert tree.find_all("style"), "the CSS is inline"


def summary_rows(tree: Node) -> dict[str, dict[str, int]]:
    table = tree.by_id("summary")
    assert table.tag == "table"
    heads = [th.text().strip() for th in table.find_all("thead")[0].find_all("th")]
    rows = {}
    for tr in table.find_all("tr"):
        cells = [c for c in tr.children if isinstance(c, Node) and c.tag in ("th", "td")]
        if not cells or cells[0].tag != "th" or tr.parent.tag == "thead":
            continue
        rows[cells[0].text().strip()] = {h: int(c.text().strip()) for h, c in zip(heads[1:], cells[1:])}
    return rows


# ----------------------------------------------------------------------------------------
# a failing and a passing IUT, as a browser shows them
# ----------------------------------------------------------------------------------------

def test_failing_report_in_chromium(run_cli, tmp_path):
    chromium()
    run = run_cli("certify", *FAILING_IUT, html=True)
    assert run.rc == 1, run.stdout + run.stderr
    report = run.report
    failing = {c["id"]: c for c in report["cases"] if c["verdict"] in ("fail", "error")}
    assert failing, "the broken IUT was expected to fail cases"

    dom, tree = rendered(report, tmp_path)
    assert_self_contained(dom, tree)

    level = tree.by_id("level")
    level_text = " ".join(level.text().split())
    assert "not conformant" in level_text
    failing_must = sorted(r for r, e in report["requirements"].items()
                          if e["level"] == "MUST" and e["verdict"] in ("fail", "error"))
    assert failing_must
    for r in failing_must:
        assert r in level_text, f"failing MUST requirement {r} not named in the level"

    rows = summary_rows(tree)
    areas = {c["id"].split(".")[0] for c in report["cases"]}
    assert areas <= set(rows), f"summary rows {sorted(rows)} lack areas {sorted(areas - set(rows))}"
    for area in areas:
        cases = [c for c in report["cases"] if c["id"].split(".")[0] == area]
        assert rows[area]["Fail"] == sum(c["verdict"] == "fail" for c in cases)
        assert rows[area]["Pass"] == sum(c["verdict"] == "pass" for c in cases)
        assert rows[area]["Total"] == len(cases)
    assert rows["Total"]["Fail"] == report["summary"]["fail"]
    assert rows["Total"]["Pass"] == report["summary"]["pass"]
    assert rows["Total"]["Total"] == report["summary"]["total"]

    # failures grouped by what went wrong: one full example a group, the group's other cases named
    entries = tree.find_all(cls="failure")
    others = [n for ul in tree.find_all("ul", cls="others") for n in ul.find_all("li")]
    shown = [n.attrs.get("data-case") for n in entries + others]
    assert sorted(shown) == sorted(failing), "each failing case exactly once: a group's example, or named in it"
    assert len(entries) == len(tree.find_all(cls="group")) < len(failing)
    for n in others:
        assert n.attrs["id"] == "case-" + n.attrs["data-case"] and n.attrs["data-case"] in n.text()
    by_case = {n.attrs["data-case"]: n for n in entries}
    for cid, case in failing.items():
        if cid not in by_case:
            continue
        entry = by_case[cid]
        text = entry.text()
        assert cid in text
        for r in case["requirements"]:
            assert r in text
        notes = case.get("notes") or {}
        if notes.get("signature"):
            assert notes["signature"] in text
        if (notes.get("reproducer") or {}).get("bytes"):
            dumps = entry.find_all("table", cls="hexdump")
            assert dumps, f"{cid}: no hex dump table"
            assert "lm_bufcount" in dumps[0].text() or "struct" in (notes["reproducer"].get("op") or "")
        if str(notes.get("signature", "")).startswith("field:") and notes.get("highlight"):
            assert entry.find_all("mark"), f"{cid}: the bytes of the field that differs are not highlighted"
        if notes.get("actual_hex") and notes.get("highlight"):
            dumps = entry.find_all("table", cls="hexdump")
            assert len(dumps) == 2, f"{cid}: expected and actual dumps"
            assert dumps[0].find_all("mark"), f"{cid}: differing bytes not highlighted"

    # the failures come before the summary and the requirements table
    assert dom.index('id="failures"') < dom.index('id="areas"') < dom.index('id="requirements"')

    # the collapsed list of all cases
    details = [d for d in tree.find_all("details") if d.attrs.get("id") == "all-cases"]
    assert len(details) == 1 and "open" not in details[0].attrs
    listed = details[0].text()
    assert all(c["id"] in listed for c in report["cases"])

    # the requirements table
    req_text = tree.by_id("requirements").text()
    for r in report["requirements"]:
        assert r in req_text


def test_passing_report_in_chromium(certified, tmp_path):
    """The reference's whole certification (the session's one: conftest.py `certified`), its
    page written again here from its report.json and rendered by chromium."""
    chromium()
    run = certified("reference")
    assert run.rc == 0, run.stdout + run.stderr
    report = run.report
    dom, tree = rendered(report, tmp_path)
    assert_self_contained(dom, tree)
    level_text = " ".join(tree.by_id("level").text().split())
    assert "fully conformant" in level_text and "not conformant" not in level_text
    assert not tree.find_all(cls="failure")
    rows = summary_rows(tree)
    # every case passes but the client cases, which do not apply to a target (certify --client)
    client = [c for c in report["cases"] if c["id"].startswith("client.")]
    assert client and all(c["verdict"] == "not-applicable" for c in client)
    assert rows["Total"]["Total"] == report["summary"]["total"]
    assert rows["Total"]["Pass"] == report["summary"]["pass"] == report["summary"]["total"] - len(client)
    header = tree.find_all("header")[0].text()
    hello = report["iut"]["hello"]
    for text in (hello["name"], hello["version"], report["lustre_version"], report["profile"], str(report["seed"])):
        assert text in header
    for cap in hello["capabilities"]:
        assert cap in header


# ----------------------------------------------------------------------------------------
# the renderer on hand-made reports (no browser needed)
# ----------------------------------------------------------------------------------------

def _report(reqs: dict, cases: list | None = None, **extra) -> dict:
    cases = cases if cases is not None else [
        {"id": f"framing.x{i}", "requirements": [r], "verdict": e["verdict"], "message": "", "duration_s": 0.0}
        for i, (r, e) in enumerate(reqs.items())]
    for r, e in reqs.items():
        e.setdefault("cases", [c["id"] for c in cases if r in c["requirements"]])
    return {"suite": {"name": "ptlrpc-conformance", "version": "0.1.0"}, "profile": "lustre-2.17.57",
            "lustre_version": "2.17.57", "seed": 1, "iut": {"spec": "reference", "hello": {
                "name": "t", "version": "1", "capabilities": ["decode"]}},
            "command": ["ptlrpc-conformance", "certify"], "started": "2026-01-02T03:04:05+00:00",
            "duration_s": 1.5, "summary": {}, "requirements": reqs, "cases": cases, **extra}


@pytest.mark.parametrize("verdicts, text", [
    ({"MUST": "pass", "SHOULD": "pass"}, "fully conformant: decode"),
    ({"MUST": "pass", "SHOULD": "fail"}, "conformant: decode"),
    ({"MUST": "fail", "SHOULD": "pass"}, "not conformant: decode"),
    ({"MUST": "error", "SHOULD": "pass"}, "not conformant: decode"),
    # a level names what was certified: a MUST requirement none of whose cases ran certifies nothing
    ({"MUST": "skipped", "SHOULD": "pass"}, "not certified: no MUST case applied"),
])
def test_level(verdicts, text):
    reqs = {"HDR-A-1": {"level": "MUST", "verdict": verdicts["MUST"]},
            "HDR-B-1": {"level": "MUST", "verdict": "not-applicable"},
            "HDR-C-1": {"level": "SHOULD", "verdict": verdicts["SHOULD"]},
            "HDR-D-1": {"level": "MAY", "verdict": "fail"}}
    lv = report_html.level(_report(reqs))
    assert lv.text == text
    assert lv.not_applicable == ["HDR-B-1"]
    assert lv.failing_must == (["HDR-A-1"] if verdicts["MUST"] in ("fail", "error") else [])
    page = report_html.render(_report(reqs))
    level_html = page.split('id="level"', 1)[1].split("</div>", 1)[0]
    assert f'<strong class="text">{text}</strong>' in level_html
    assert "HDR-B-1" in level_html and "outside the declared capabilities" in level_html.lower()


def test_an_incomplete_run_reaches_no_level():
    reqs = {"HDR-A-1": {"level": "MUST", "verdict": "pass"}}
    assert report_html.level(_report(reqs)).text == "fully conformant: decode"
    assert report_html.level(_report(reqs, incomplete=False)).text == "fully conformant: decode"
    lv = report_html.level(_report(reqs, incomplete=True))
    assert lv.text == "incomplete" and lv.css == "level-no" and "the run is incomplete" in lv.reasons
    assert report_html.level(_report({}, [], incomplete=True)).text == "incomplete"


def _page_level(page: str) -> str:
    """The level a page announces (its #level box's <strong class="text">)."""
    strong = parse(page).by_id("level").find_all("strong", cls="text")
    assert len(strong) == 1
    return strong[0].text()


LEVEL_RUNS = {   # kind: (IUT, extra certify arguments, the level report.json must state)
    # a -k selection: a run without failures is partial, whatever its SHOULD requirements
    "passing": ("reference", (), "partial"),
    "failing MUST": ("python:iuts:no_header_pad", (), "not conformant"),
    "failing SHOULD only": ("python:iuts:cksum_final_inversion", (), "partial"),
    "incomplete": ("python:iuts:no_header_pad", ("--max-fail", "1"), "incomplete"),
}


@pytest.mark.parametrize("kind", list(LEVEL_RUNS))
def test_page_and_report_json_state_the_same_level(run_cli, kind):
    """One rule (outputs.level): the level in report.json is the one report.html announces,
    and the page works out the same level from the requirements when a report has none."""
    iut, extra, expected = LEVEL_RUNS[kind]
    run = run_cli("certify", "--iut", iut, "-k", "framing.magic or framing.cksum", *extra, html=True)
    # a SHOULD failure is a warning: the run exits 0 (--strict: 1)
    assert run.rc == (0 if kind in ("passing", "failing SHOULD only") else 1), run.stdout[-3000:] + run.stderr[-3000:]
    report = run.report
    assert report["level"]["status"] == expected
    assert report["incomplete"] is (kind == "incomplete")
    # the page says the level in words: the status and what was certified ("conformant: decode, encode")
    words = level_rule.words(report["level"])
    said = "conformant (partial: -k framing.magic or framing.cksum" if expected == "partial" else expected
    assert words.startswith(said) and (kind == "incomplete" or words.endswith(": decode, encode"))
    assert _page_level((run.out / "report.html").read_text(encoding="utf-8")) == words
    assert _page_level(report_html.render(report)) == words
    recorded = report.pop("level")
    assert _page_level(report_html.render(report)) == words
    lv = report_html.level(report)
    assert not lv.from_report
    assert (lv.failing_must, lv.failing_should, lv.not_applicable) == \
        (recorded["failing_must"], recorded["failing_should"], recorded["not_applicable"])


@pytest.mark.parametrize("incomplete", [False, True])
@pytest.mark.parametrize("must, should", [(m, s) for m in report_html.VERDICTS for s in report_html.VERDICTS])
def test_page_computes_the_level_report_json_records(must, should, incomplete):
    """Every combination of MUST and SHOULD verdicts: the page's own computation (for a
    report without a level member) is report.json's rule."""
    reqs = {"HDR-A-1": {"level": "MUST", "verdict": must}, "CKSUM-1": {"level": "SHOULD", "verdict": should},
            "HDR-B-1": {"level": "MAY", "verdict": "fail"}}
    recorded = report_json.level(reqs, incomplete, ["decode"])     # _report's IUT declares decode
    lv = report_html.level(_report(reqs, incomplete=incomplete))
    assert lv.text == level_rule.words(recorded) and lv.status == recorded["status"]
    assert (lv.failing_must, lv.failing_should, lv.not_applicable, lv.certified_capabilities) == \
        (recorded["failing_must"], recorded["failing_should"], recorded["not_applicable"],
         recorded["certified_capabilities"])
    assert _page_level(report_html.render(_report(reqs, incomplete=incomplete))) == level_rule.words(recorded)


def test_level_recorded_in_the_report_wins():
    reqs = {"HDR-A-1": {"level": "MUST", "verdict": "fail"}}
    rep = _report(reqs, level={"name": "conformant", "failing_must": [], "failing_should": ["X-1"],
                               "not_applicable": []})
    lv = report_html.level(rep)
    assert lv.text == "conformant" and lv.failing_must == [] and lv.from_report
    assert report_html.level(_report(reqs, level="fully conformant")).text == "fully conformant"


def test_untrusted_text_is_escaped():
    evil = '<script>alert(1)</script>"\'><img src=x onerror=alert(2)>'
    case = {"id": 'framing.evil"><b>', "requirements": ["HDR-A-1"], "verdict": "fail",
            "message": evil + "\nexpected: accepted", "duration_s": 0.1,
            "notes": {"signature": evil, "extra": evil, "reproducer": {
                "id": evil, "title": evil, "verdict": "valid", "direction": "request", "bytes": ["zz"]}}}
    rep = _report({"HDR-A-1": {"level": "MUST", "verdict": "fail"}}, [case], level=evil, sha256={"x": evil},
                  reproduce=[evil], incomplete=evil)
    rep["iut"]["hello"] = {"name": evil, "version": evil, "capabilities": [evil], "vendor": evil}
    rep["iut"]["spec"] = evil
    rep["environment"] = {"cwd": evil}
    page = report_html.render(rep)
    assert "<script>alert" not in page and "<img" not in page and "<b>" not in page
    assert page.count("<script>") == 1           # the print helper, nothing else
    tree = parse(page)
    assert [n.attrs["data-case"] for n in tree.find_all(cls="failure")] == ['framing.evil"><b>']
    assert not tree.find_all("img") and not tree.find_all("b") and len(tree.find_all("script")) == 1


def test_script_from_the_iut_is_shown_as_text_in_chromium(tmp_path):
    """Text an IUT wrote (its hello, a failure message) and a reproducer's title reach the
    page escaped: Chromium shows them as text and builds no element from them."""
    chromium()
    evil = "<script>alert(1)</script>"
    case = {"id": "framing.magic.v2-native.decode", "requirements": ["HDR-MAGIC-1"], "verdict": "fail",
            "message": f"framing.magic.v2-native: rejected: EINVAL ({evil})", "duration_s": 0.1,
            "notes": {"signature": "rejected:EINVAL", "reproducer": {
                "id": "framing.magic.v2-native", "title": f"title {evil}", "verdict": "valid",
                "direction": "request", "bytes": ["01000000"]}}}
    rep = _report({"HDR-MAGIC-1": {"level": "MUST", "verdict": "fail"}}, [case])
    rep["iut"]["hello"] = {"name": f"name {evil}", "version": f"version {evil}", "capabilities": ["decode"]}
    page = report_html.render(rep)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert evil not in page and page.count(escaped) >= 5       # title, name, version, message, input
    dom, tree = rendered(rep, tmp_path)
    scripts = tree.find_all("script")
    assert len(scripts) == 1 and "alert" not in scripts[0].text()      # the print helper only
    assert f"name {evil}" in tree.find_all("h1")[0].parent.text()
    assert f"version {evil}" in tree.find_all("header")[0].text()
    entry = tree.find_all(cls="failure")[0]
    assert f"rejected: EINVAL ({evil})" in entry.find_all("pre", cls="msg")[0].text()
    assert f"title {evil}" in entry.text()
    assert evil in tree.find_all("title")[0].text()


def test_dumps_are_bounded_and_highlight_differences():
    data = bytes.fromhex("01000000" "00000000" "d30bd00b") + bytes(2000)
    table = report_html.dump_table(data, "input", highlight={8, 1500})
    assert "<mark>d3</mark>" in table and "lm_magic" in table
    assert table.count("<mark>") == 2                              # the late difference is shown
    assert "bytes not shown" in table and "more bytes" in table
    assert table.count("<tr") < 80
    shown = sum(len(re.findall(r"\b[0-9a-f]{2}\b", m)) for m in re.findall(r'<td class="hex">(.*?)</td>', table))
    assert shown <= report_html.DUMP_LIMIT + 16 * report_html.DUMP_EXTRA_ROWS


def test_encode_failure_shows_expected_and_actual():
    expected = bytes.fromhex("01000000000000000000000000000000")
    actual = bytes.fromhex("01000000000000000000000000000099")
    case = {"id": "framing.enc.encode", "requirements": ["ENC-CANON-1"], "verdict": "fail",
            "message": "encoded bytes differ\nexpected (16 bytes):\n     0  01 00 00 00   lm_bufcount = 1",
            "notes": {"signature": "bytes@15", "highlight": [15], "actual_hex": actual.hex(),
                      "reproducer": {"id": "framing.enc", "title": "t", "verdict": "valid",
                                     "direction": "request", "canonical": True, "bytes": [expected.hex()]}}}
    page = report_html.render(_report({"ENC-CANON-1": {"level": "MUST", "verdict": "fail"}}, [case]))
    section = page.split('data-case="framing.enc.encode"', 1)[1].split("</section>", 1)[0]
    assert section.count('class="hexdump"') == 2
    assert "<mark>00</mark>" in section and "<mark>99</mark>" in section
    assert "expected (16 bytes" in section and "actual (16 bytes)" in section
    # the text dump of the message is replaced by the tables; the full text stays available
    short = section.split('<pre class="msg">', 1)[1].split("</pre>", 1)[0]
    assert "encoded bytes differ" in short and "lm_bufcount = 1" not in short
    assert "<details" in section


def test_unknown_members_are_ignored_and_known_optional_ones_shown(tmp_path):
    reqs = {"HDR-A-1": {"level": "MUST", "verdict": "pass"}}
    rep = _report(reqs, sha256={"vectors": "ab" * 32}, reproduce=["ptlrpc-conformance", "certify", "--seed", "1"],
                  future_member={"anything": [1, 2]}, gate={"x": 1})
    page = report_html.render(rep)
    assert "ab" * 32 in page and "ptlrpc-conformance certify --seed 1" in page
    assert "future_member" not in page
    json.dumps(rep)      # the report is untouched and still serialisable
    assert report_html.write(rep, tmp_path / "sub" / "r.html").read_text(encoding="utf-8") == page


def test_incomplete_reason_is_shown():
    """A run stopped by --max-fail or --time-budget says why at the top of the page."""
    from ptlrpc_conformance.harness.outputs import html as report_html
    reqs = {"HDR-MAGIC-1": {"level": "MUST", "verdict": "pass", "cases": ["a"]}}
    report = _report(reqs, incomplete=True)
    report["incomplete_reason"] = "stopped after 3 failing cases (--max-fail 3)"
    page = report_html.render(report)
    assert 'id="incomplete"' in page and "stopped after 3 failing cases (--max-fail 3)" in page


def test_the_gate_is_shown_right_after_the_level(run_cli, tmp_path):
    kf = tmp_path / "kf.yaml"
    kf.write_text("format: ptlrpc-conformance-known-failures/1\nentries:\n"
                  "- id: framing.magic.v1.decode\n  reason: fixed since\n")
    run = run_cli("certify", "--iut", "reference", "-k", "framing.magic", "--known-failures", str(kf), html=True)
    page = (run.out / "report.html").read_text()
    gate_box = parse(page).by_id("gate")
    assert "FAILED" in gate_box.text() and "1 stale entries" in " ".join(gate_box.text().split())
    assert "entry framing.magic.v1.decode is stale" in gate_box.text()
    assert page.index('id="level"') < page.index('id="gate"') < page.index('id="failures"')


def test_a_decoded_field_that_differs_is_highlighted(run_cli):
    run = run_cli("certify", "--iut", "python:ptlrpc_conformance.mutants:no_swab_lm_opc", "-k",
                  "framing.header.ignored-fields.swabbed", html=True)
    case = next(c for c in run.report["cases"] if (c.get("notes") or {}).get("signature") == "field:header.lm_opc")
    assert case["notes"]["highlight"] == [24, 25, 26, 27]          # lm_opc's bytes in the input
    page = parse((run.out / "report.html").read_text())
    marked = [m.text() for entry in page.find_all(cls="failure") for m in entry.find_all("mark")]
    assert marked, "no byte highlighted for a field that decoded wrongly"


def test_no_html_writes_no_page_and_leaves_no_earlier_one(run_cli, tmp_path):
    """--no-html (the mutant zoo's runs): report.json and junit.xml only, and a page an earlier
    run left in --out is gone, so no page disagrees with the new report.json."""
    out = tmp_path / "o"
    first = run_cli("certify", "--case", "framing.magic.zero.decode", "--out", str(out), "-q", out=False, html=True)
    assert first.rc == 0 and (out / "report.html").is_file(), first.stderr[-2000:]
    again = run_cli("certify", "--case", "framing.magic.zero.decode", "--out", str(out), "-q", "--no-html", out=False)
    assert again.rc == 0, again.stderr[-2000:]
    assert (out / "report.json").is_file() and (out / "junit.xml").is_file()
    assert not (out / "report.html").exists()
    assert "report: " in again.stdout and "report.html" not in again.stdout
