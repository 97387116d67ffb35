"""A requirement's capability, kind and direction are fields of spec/requirements.yaml, stated
once there: every entry has them with allowed values, docs/ids.md documents exactly those
values, and no code of the package infers them from the id's prefix."""
import re

import yaml

from conftest import ROOT
from ptlrpc_conformance.harness.data import registry

SPEC = ROOT / "ptlrpc_conformance" / "spec" / "requirements.yaml"
IDS_DOC = ROOT / "docs" / "ids.md"


def entries() -> list[dict]:
    return yaml.safe_load(SPEC.read_text(encoding="utf-8"))["requirements"]


def test_every_requirement_states_capability_and_kind_with_allowed_values():
    bad = []
    for e in entries():
        if e.get("capability") not in registry.CAPABILITIES + ("none",):
            bad.append(f"{e['id']}: capability {e.get('capability')!r}")
        if e.get("kind") not in registry.KINDS:
            bad.append(f"{e['id']}: kind {e.get('kind')!r}")
        if "direction" in e and e["direction"] not in registry.DIRECTIONS:
            bad.append(f"{e['id']}: direction {e['direction']!r}")
    assert len(entries()) > 50 and not bad, bad


def test_the_fields_agree_with_each_other():
    """A target's behaviour needs the target or restart capability, a client's conduct the
    client capability, the protocol's own requirement certifies none, an encoder's needs encode;
    only a decoder rule has a direction or an errno class."""
    bad = []
    for r in registry.requirements().values():
        if (r.kind == "behaviour") != (r.capability in ("target", "restart")):
            bad.append(f"{r.id}: kind {r.kind} with capability {r.capability}")
        if (r.kind == "conduct") != (r.capability == "client"):
            bad.append(f"{r.id}: kind {r.kind} with capability {r.capability}")
        if (r.kind == "protocol") != (r.capability is None):
            bad.append(f"{r.id}: kind {r.kind} with capability {r.capability}")
        if r.kind == "encoding" and r.capability != "encode":
            bad.append(f"{r.id}: kind encoding with capability {r.capability}")
        if (r.direction or r.errno_class) and (r.capability != "decode" or r.kind != "acceptance"):
            bad.append(f"{r.id}: a direction or errno class on a {r.capability} requirement of kind {r.kind}")
    assert not bad, bad


def test_the_registry_refuses_an_entry_without_a_kind(monkeypatch):
    text = SPEC.read_text(encoding="utf-8").replace("  kind: content\n", "", 1)
    monkeypatch.setattr(registry, "_load_yaml", lambda name: yaml.safe_load(text))
    registry.requirements.cache_clear()
    try:
        try:
            registry.requirements()
        except registry.RegistryError as e:
            assert "kind must be one of" in str(e)
        else:
            raise AssertionError("an entry without a kind was accepted")
    finally:
        registry.requirements.cache_clear()


def _table(text: str, first_column: str) -> dict[str, str]:
    """The rows of the markdown table of `text` whose header starts with `first_column`:
    first cell (backquotes removed) -> the second."""
    rows, inside = {}, False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and cells[0] == first_column:
            inside = True
        elif not cells:
            inside = False
        elif inside and not set(cells[0]) <= set("-"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def test_ids_doc_documents_exactly_the_allowed_values():
    text = IDS_DOC.read_text(encoding="utf-8")
    fields = _table(text, "field")
    assert set(fields) >= {"capability", "kind", "direction", "errno_class"}, fields
    named = lambda cell: re.findall(r"`([a-z_]+)`", cell)
    assert named(fields["capability"]) == list(registry.CAPABILITIES) + ["none"]
    assert named(fields["kind"]) == list(registry.KINDS)
    assert named(fields["direction"]) == list(registry.DIRECTIONS)
    assert list(_table(text, "kind")) == list(registry.KINDS)


def test_requirements_yaml_header_explains_every_kind():
    header = SPEC.read_text(encoding="utf-8").split("\nformat:")[0]
    explained = re.findall(r"^#\s{3}([a-z]+)\s{2,}", header, re.M)
    assert explained == list(registry.KINDS), explained


def test_no_code_reads_a_requirement_from_its_id_prefix():
    """What a requirement is comes from its fields: the package never tests an id's prefix
    (`rid.startswith("ENC-")`)."""
    prefix = re.compile(r"""startswith\(\(?\s*["'][A-Z]+-["']""")
    offenders = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
                 for p in (ROOT / "ptlrpc_conformance").rglob("*.py")
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if prefix.search(line)]
    assert not offenders, offenders
