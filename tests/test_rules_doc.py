"""docs/rules.md is the shipped reference of the rule ids (HDR-8, BODY-3, TRANSNO-7, S31, ...)
the suite cites: every id used anywhere in the package, its docs or its tools is defined there
(as a heading or a table row), it defines no id nobody uses, and no shipped file sends a reader
to the project's shared spec, which a clone of the repository does not have."""
import re

import yaml

from conftest import ROOT

RULES_DOC = ROOT / "docs" / "rules.md"
PREFIXES = "HDR|PAD|BODY|CKSUM|VALID|TRANSNO|ERR|MISC|OPC|REC|CONN|DROP|REPLY|OBJ|ENC"
# A rule id, not the tail of a requirement id: TGT-CONN-1 and HDR-MAGIC-1 are requirements.
RULE_ID = re.compile(rf"(?<![A-Za-z0-9_-])(?:(?:{PREFIXES})-[0-9]+[a-z]?|S[0-9]+)\b(?!-)")
# The ids rules.md defines: "### HDR-8 — ..." headings and "| S31 | ..." table rows.
DEFINED = re.compile(r"^(?:#+ +(\S+) +—|\| *(S[0-9]+) *\|)", re.M)
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".md", ".txt", ".cfg", ".toml", ".sh", ".html", ".c"}
SHARED = ("shared/spec", "../shared", "RULES.md")


def defined_ids() -> list[str]:
    return [a or b for a, b in DEFINED.findall(RULES_DOC.read_text(encoding="utf-8"))]


def package_files():
    return [p for p in (ROOT / "ptlrpc_conformance").rglob("*")
            if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts]


def doc_files(certifications: bool):
    docs = [p for p in (ROOT / "docs").rglob("*.md") if p != RULES_DOC]
    if not certifications:
        docs = [p for p in docs if "certifications" not in p.relative_to(ROOT / "docs").parts]
    return docs + [ROOT / "README.md"]


def strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)


def cited_in_vectors() -> dict[str, set[str]]:
    """Rule ids of the "RULES X, Y (note); function" citations of the bundled vector files."""
    used: dict[str, set[str]] = {}
    for path in sorted((ROOT / "ptlrpc_conformance" / "vectors").glob("*.yaml")):
        for s in strings(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if s.startswith("RULES "):
                for rule in RULE_ID.findall(s.split(";")[0]):
                    used.setdefault(rule, set()).add(path.name)
    return used


def in_requirements() -> dict[str, set[str]]:
    doc = yaml.safe_load((ROOT / "ptlrpc_conformance" / "spec" / "requirements.yaml").read_text(encoding="utf-8"))
    used: dict[str, set[str]] = {}
    for req in doc["requirements"]:
        for rule in req.get("rules") or []:
            used.setdefault(rule, set()).add(req["id"])
    return used


def in_model() -> set[str]:
    """The rule names of the decoder model, "HDR-8 (wrap)" counting as HDR-8."""
    from ptlrpc_conformance.harness.verdicts import model
    return {name.split(" (")[0] for name in model.RULE_REQUIREMENT}


def mentioned() -> dict[str, set[str]]:
    """Every rule id written in the package, the docs (certifications included), the README
    and the tools, with the files that write it."""
    used: dict[str, set[str]] = {}
    files = package_files() + doc_files(certifications=True) + [
        p for p in (ROOT / "tools").rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES]
    for path in files:
        for rule in RULE_ID.findall(path.read_text(encoding="utf-8", errors="replace")):
            used.setdefault(rule, set()).add(str(path.relative_to(ROOT)))
    return used


def test_rules_doc_defines_each_id_once():
    ids = defined_ids()
    assert len(ids) > 50, f"docs/rules.md defines only {len(ids)} ids: has its heading format changed?"
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"defined more than once in docs/rules.md: {twice}"
    assert all(RULE_ID.fullmatch(i) for i in ids), [i for i in ids if not RULE_ID.fullmatch(i)]


def test_every_rule_the_requirements_map_to_is_defined():
    missing = {r: sorted(reqs) for r, reqs in in_requirements().items() if r not in set(defined_ids())}
    assert not missing, f"requirements.yaml `rules:` name ids docs/rules.md does not define: {missing}"


def test_every_rule_a_vector_cites_is_defined():
    cited = cited_in_vectors()
    assert cited, "no vector cites a rule: has the \"RULES X\" citation form changed?"
    missing = {r: sorted(f) for r, f in cited.items() if r not in set(defined_ids())}
    assert not missing, f"vectors cite \"RULES X\" for ids docs/rules.md does not define: {missing}"


def test_every_rule_of_the_decoder_model_is_defined():
    missing = sorted(in_model() - set(defined_ids()))
    assert not missing, f"harness/verdicts/model.py names rules docs/rules.md does not define: {missing}"


def test_every_rule_id_written_anywhere_is_defined():
    missing = {r: sorted(f)[:3] for r, f in mentioned().items() if r not in set(defined_ids())}
    assert not missing, f"rule ids used but not defined in docs/rules.md: {missing}"


def test_rules_doc_defines_no_unused_id_and_cites_only_defined_ids():
    ids = set(defined_ids())
    used = set(mentioned()) | set(in_requirements()) | set(cited_in_vectors()) | in_model()
    unused = sorted(ids - used)
    assert not unused, f"docs/rules.md defines ids nothing in the repository uses: {unused}"
    dangling = sorted(set(RULE_ID.findall(RULES_DOC.read_text(encoding="utf-8"))) - ids)
    assert not dangling, f"docs/rules.md mentions ids it does not define: {dangling}"


def test_each_rule_names_the_lustre_code_and_its_requirements():
    """Every rule section says which Lustre functions enforce it and which requirements check it;
    the requirements named are the ones whose `rules:` list the rule."""
    text = RULES_DOC.read_text(encoding="utf-8")
    reqs = in_requirements()
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    assert sections
    for section in sections:
        rule = section.split()[0]
        enforced = re.search(r"^- Enforced by: (.+)$", section, re.M)
        checked = re.search(r"^- Checked by: (.+)$", section, re.M)
        assert enforced and "`" in enforced.group(1), f"{rule}: no Lustre function named"
        assert checked, f"{rule}: no 'Checked by' line"
        named = set(re.findall(r"\b[A-Z]+(?:-[A-Z]+)*-[0-9]+\b", checked.group(1)))
        assert named == reqs.get(rule, set()), (
            f"{rule}: 'Checked by' names {sorted(named)}, requirements.yaml maps it to {sorted(reqs.get(rule, set()))}")


def test_no_shipped_file_points_at_the_shared_spec():
    offenders = []
    for path in package_files() + doc_files(certifications=False):
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if any(s in line for s in SHARED):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not offenders, "shipped files cite the shared spec users do not have:\n" + "\n".join(offenders)
