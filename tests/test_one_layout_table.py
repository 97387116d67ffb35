"""One layout table per release, read through one module: spec/layouts.py opens the tables
(layouts.json, and releases/<release>.json's "structs" for another release); every other
module of the package reads layouts through it.  The readers that once read two tables
(spec.layout() for the codec, the struct codecs) now agree field for field."""
import ast
import json

import pytest

from conftest import ROOT
from ptlrpc_conformance import spec
from ptlrpc_conformance.reference.structs import StructCodec
from ptlrpc_conformance.spec import layouts, structs as S

PACKAGE = ROOT / "ptlrpc_conformance"
OPENER = PACKAGE / "spec" / "layouts.py"


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _is_layouts_load(call: ast.Call) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr in ("load", "view") and isinstance(f.value, ast.Name) \
        and f.value.id == "layouts"


def table_openings(path) -> list[str]:
    """What in a module opens a layout table itself: a call given the name layouts.json
    (joinpath, open, Path ...), or the "structs" member taken straight from a loaded file or facts table
    (`facts()["structs"]`, `json.loads(...)["structs"]`, `....get("structs")`), anything but
    `layouts.load(...)["structs"]` or `layouts.view(...)["structs"]` (a release's table in today's names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                              and a.value.endswith("layouts.json") and id(a) not in docs
                                              for a in node.args):
            found.append(f"line {node.lineno}: opens layouts.json ({ast.unparse(node.func)})")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "structs" \
                and isinstance(node.value, ast.Call) and not _is_layouts_load(node.value):
            found.append(f"line {node.lineno}: takes \"structs\" from {ast.unparse(node.value)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "structs" \
                and isinstance(node.func.value, ast.Call) and not _is_layouts_load(node.func.value):
            found.append(f"line {node.lineno}: takes \"structs\" from {ast.unparse(node.func.value)}")
    return found


def test_the_check_finds_an_opening(tmp_path):
    """The check below is not blind: it names each way of opening a table."""
    sample = tmp_path / "m.py"
    sample.write_text('"""Reads spec/layouts.json (a docstring may say so)."""\n'
                      'import json\nfrom importlib import resources\n'
                      'A = json.loads(resources.files("x").joinpath("layouts.json").read_text())\n'
                      'B = spec.facts()["structs"]\nC = releases.load("2.15.8").get("structs")\n'
                      'D = layouts.load()["structs"]\n')
    assert sorted(line.split(":")[0] for line in table_openings(sample)) == ["line 4", "line 5", "line 6"]


def test_no_module_but_spec_layouts_opens_a_layout_table():
    found = {str(p.relative_to(ROOT)): table_openings(p) for p in sorted(PACKAGE.rglob("*.py")) if p != OPENER}
    assert {k: v for k, v in found.items() if v} == {}
    assert table_openings(OPENER)            # the one module that does


def test_facts_json_holds_no_layouts():
    facts = json.loads((PACKAGE / "spec" / "facts.json").read_text(encoding="utf-8"))
    assert "structs" not in facts and "structs" not in spec.facts()
    assert all(isinstance(v, str) for v in facts["structs_required"])      # names, not layouts


def _rows(fields) -> list[tuple]:
    return [(f["name"], f["offset"], f["size"], f["type"], f.get("count"), bool(f.get("flexible"))) for f in fields]


@pytest.mark.parametrize("name", sorted(layouts.load()["structs"]))
def test_the_old_readers_agree(name):
    """spec.layout() (the message codec, the suite's packer and hexdump) and the struct codecs
    (reference/structs.py, spec/structs.py) see the same structure."""
    lay = spec.layout(name)
    ours = [(f.name, f.offset, f.size, f.type, f.count, f.flexible) for f in lay.fields]
    assert ours == _rows(layouts.load()["structs"][name]["fields"])
    assert ours == _rows(S.entry(name)["fields"]) == _rows(StructCodec().entry(name)["fields"])
    assert lay.size == S.size(name) == layouts.struct(name)["size"]
    for f in lay.fields:                     # every array field knows its element size
        if f.count is not None:
            assert f.elem_size and (f.flexible or f.size == f.count * f.elem_size), f


# the nine structures the two tables once gave different field lists, and the fields
# the headers of v2_17_57 declare that wiretest.c does not assert (docs/divergences.md)
ONCE_DISAGREED = {"fiemap_extent": ["fe_reserved64"], "hsm_user_state": ["hus_extended_info"],
                  "lfsck_request": ["lr_status", "lr_flags2"],
                  "llog_log_hdr": ["llh_reserved", "llh_bitmap", "llh_tail"], "lov_ost_data_v1": ["l_ost_type"],
                  "lquota_id": ["qid_fid", "qid_uid", "qid_gid", "qid_projid"], "mgs_config_res": ["mcr_nm_cur_pass"],
                  "obd_uuid": ["uuid"], "ost_id": ["oi_fid"]}


@pytest.mark.parametrize("name", sorted(ONCE_DISAGREED))
def test_once_disagreeing_structures_carry_the_header_fields(name):
    lay = spec.layout(name)
    for field in ONCE_DISAGREED[name]:
        f = lay.field(field)
        assert field in layouts.struct(name)["header_fields"]
        assert f.offset + f.size <= lay.size
    assert S.size(name) == lay.size


def test_the_table_holds_every_structure():
    table = layouts.load()["structs"]
    assert len(table) == table_meta()["structs"] >= 172 + 9
    assert set(layouts.seed_closure()) < set(table) and len(layouts.seed_closure()) == 67
    for name in ("ptlrpc_body_v2", "gss_header", "update_records", "lu_page", "lnet_nid", "mgs_nidtbl_entry"):
        assert name in table, name


def table_meta() -> dict:
    return layouts.load()["meta"]


# release-aware -----------------------------------------------------------------------------

def test_default_release_is_today_s_table():
    assert layouts.release_key(None) == layouts.DEFAULT_RELEASE == "2.17.57"
    assert layouts.load() is layouts.load(None) is layouts.load("2.17.57")
    assert spec.layout("ptlrpc_body_v3") is spec.layout("ptlrpc_body_v3", release="2.17.57")
    assert layouts.field("ost_body", "oa.o_size", release=None) == layouts.field("ost_body", "oa.o_size")
    assert layouts.canonical("ptlrpc_body", None) == "ptlrpc_body_v3" and layouts.field_names() == {}
    assert "2.17.57" in layouts.known_releases()


def test_a_release_without_a_table_is_refused_clearly():
    with pytest.raises(layouts.UnknownRelease, match=r"no layout table for Lustre release '1\.8\.9': "
                                                      r"ptlrpc_conformance/spec/releases/1\.8\.9\.json does not exist"):
        layouts.load("1.8.9")
    for call in (lambda: layouts.canonical("obdo", "1.8.9"), lambda: layouts.struct("obdo", "1.8.9"),
                 lambda: layouts.field("obdo", "o_size", "1.8.9"), lambda: spec.layout("obdo", release="1.8.9")):
        with pytest.raises(layouts.UnknownRelease):
            call()
    with pytest.raises(layouts.UnknownRelease):
        layouts.load("")


@pytest.fixture
def old_release(tmp_path, monkeypatch):
    """A release file in the format of releases/<release>.json, with today's ptlrpc_body_v3
    but pb_projid still padding (as in 2.15.8)."""
    body = layouts.struct("ptlrpc_body_v3")
    del body["name"]
    for f in body["fields"]:
        if f["name"] == "pb_projid":
            f["name"] = "pb_padding1"
    facts = {"format": "ptlrpc-conformance-release/1", "release": "0.0.1", "tag": "v0_0_1", "commit": None,
             "structs": {"ptlrpc_body_v3": body, "lustre_handle": layouts.struct("lustre_handle")},
             "field_names": {"ptlrpc_body_v3": {"pb_projid": "pb_padding1"}}}
    path = tmp_path / "0.0.1.json"
    path.write_text(json.dumps(facts))
    real = layouts._path
    monkeypatch.setattr(layouts, "_path", lambda release: path if release == "0.0.1" else real(release))
    yield "0.0.1"
    # every cache that holds a table loaded while the fake release was there (the default
    # release's view is its loaded table itself: tests/test_layouts.py holds them identical)
    layouts._load.cache_clear()
    layouts._view.cache_clear()
    spec._layout.cache_clear()


def test_another_release_reads_its_own_structs(old_release):
    assert layouts.load(old_release)["meta"]["tag"] == "v0_0_1"
    assert set(layouts.load(old_release)["structs"]) == {"ptlrpc_body_v3", "lustre_handle"}
    assert layouts.canonical("ptlrpc_body", old_release) == "ptlrpc_body_v3"     # the alias still resolves
    with pytest.raises(KeyError):
        layouts.canonical("obdo", old_release)                                   # not in that table
    assert "pb_padding1" in spec.layout("ptlrpc_body_v3", release=old_release).names()
    assert "pb_projid" not in spec.layout("ptlrpc_body_v3", release=old_release).names()
    assert "pb_projid" in spec.layout("ptlrpc_body_v3").names()                  # the default is untouched
    assert layouts.field("ptlrpc_body_v3", "pb_padding1", old_release)["offset"] == 36
    assert layouts.struct("ptlrpc_body_v3", old_release)["name"] == "ptlrpc_body_v3"
    assert layouts.field_names(old_release) == {"ptlrpc_body_v3": {"pb_projid": "pb_padding1"}}
    assert spec.layout("ptlrpc_body_v3", release=old_release).field("pb_pre_versions").elem_size == 8


@pytest.mark.parametrize("release", layouts.known_releases())
def test_every_release_table_has_the_message_structures(release):
    """Whatever release files there are, each gives the header and the body."""
    for name in ("lustre_msg_v2", "ptlrpc_body_v3", "ptlrpc_body_v2"):
        assert spec.layout(name, release=release).size == layouts.struct(name, release)["size"] > 0
