"""The order of a decoder's checks is stated once on the judging side: harness/verdicts/model.py
`CHECKS`.  The model's own checks follow it, and the places that restate it for readers - the
table of docs/testee-protocol.md §2.2, requirement HDR-ORDER-1 and the HDR section of
docs/rules.md - are checked against it here.  (The reference codec and the C example keep
their own statement of the order: they are implementations, and are judged by the suite.)"""
import random
import re

import yaml

from conftest import ROOT
from ptlrpc_conformance.harness.data.vectors import load_all
from ptlrpc_conformance.harness.verdicts import model
from ptlrpc_conformance.harness.verdicts.derive import derive

PROTOCOL_DOC = ROOT / "docs" / "testee-protocol.md"
RULES_DOC = ROOT / "docs" / "rules.md"
RULE = re.compile(r"\b(?:HDR|BODY)-[0-9]+\b")


def base(rule: str) -> str:
    """"HDR-8 (wrap)" is a case of rule HDR-8."""
    return rule.split(" (")[0]


def distinct(items) -> list:
    return list(dict.fromkeys(items))


def steps() -> dict[int, list[model.Check]]:
    out: dict[int, list[model.Check]] = {}
    for c in model.CHECKS:
        out.setdefault(c.step, []).append(c)
    return out


def test_checks_are_listed_by_step_and_name_known_requirements():
    from ptlrpc_conformance.harness.data import registry
    numbers = [c.step for c in model.CHECKS]
    assert numbers == sorted(numbers) and sorted(set(numbers)) == list(range(1, max(numbers) + 1))
    assert all(c.requirement in registry.requirements() for c in model.CHECKS)
    assert all(set(c.errno) <= set(model.ANY_CLASS) and c.errno for c in model.CHECKS)
    # checks of one step are alternatives: a per-buffer pair, or one check per direction
    for step, checks in steps().items():
        assert len(checks) == 1 or len({base(c.rule) for c in checks}) == 1 \
            or {c.direction for c in checks} == {"request", "reply"}, step


def messages():
    """Every decode vector, every derived variant, and random corruptions of the valid ones."""
    vectors = [v for v in load_all() if v.op == "decode"]
    out = [(v.data, v.direction) for v in vectors]
    out += [(x.data, x.direction) for case in derive(vectors) for x in case.variants]
    rng = random.Random(20261127)
    valid = [v for v in vectors if v.verdict == "valid"]
    for _ in range(3000):
        v = rng.choice(valid)
        data = bytearray(v.data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(min(len(data), 232))
            data[at] = rng.choice((0, 1, 0xFF, rng.randrange(256)))
        cut = rng.choice((len(data), len(data), rng.randrange(len(data) + 1)))
        out.append((bytes(data[:cut]), rng.choice(("request", "reply"))))
    return out


def test_the_model_makes_its_checks_in_the_order_of_CHECKS():
    """For every message, the checks it fails come in the order of their steps, with the errno
    classes CHECKS gives them, each check of a direction only on that direction; and every
    check decides some message (none is dead)."""
    by_rule = {c.rule: c for c in model.CHECKS}
    decided = set()
    for data, direction in messages():
        for tolerate in (False, True):
            failed = model.failing_rules(data, direction, tolerate)
            order = [by_rule[rule].step for rule, _ in failed]
            assert order == sorted(order), (data.hex(), direction, failed)
            for rule, errno in failed:
                assert errno == by_rule[rule].errno and by_rule[rule].direction in (None, direction)
            p = model.predict(data, direction, tolerate)
            if p.verdict == "invalid":
                assert p.errno == by_rule[p.rule].errno and p.requirement == by_rule[p.rule].requirement
                decided.add(p.rule)
    assert decided == set(by_rule), set(by_rule) - decided


def protocol_table() -> list[tuple[str, str, str]]:
    """The rows of the check table of docs/testee-protocol.md §2.2: (#, rejection, rule)."""
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    table = text.split("**Checks and their order.**", 1)[1].split("\n\n")[1]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()]
    assert rows[0] == ["#", "check", "rejection", "rule"], rows[0]
    return [(r[0], r[2], r[3]) for r in rows[2:]]


def test_the_testee_protocol_table_is_the_models_order():
    rows = [(number, rejection, rule) for number, rejection, rule in protocol_table() if number.isdigit()]
    assert [int(number) for number, _, _ in rows] == sorted(steps())
    for number, rejection, rule in rows:
        checks = steps()[int(number)]
        assert RULE.findall(rule) == distinct(base(c.rule) for c in checks), (number, rule)
        named = set(re.findall(r"`(E[A-Z]+)`", rejection))
        assert named == {e for c in checks for e in c.errno}, (number, rejection)


def test_hdr_order_1_names_the_models_order():
    reqs = yaml.safe_load((ROOT / "ptlrpc_conformance" / "spec" / "requirements.yaml").read_text(encoding="utf-8"))
    order = next(r for r in reqs["requirements"] if r["id"] == "HDR-ORDER-1")
    words = re.search(r"Lustre's order \(([^)]*)\)", order["statement"]).group(1).split(", ")
    assert words == distinct(c.what for c in model.CHECKS)
    # its rules: HDR-1 (the magic's 12 bytes, which the 32-byte check of HDR-2 covers), then the checks
    assert [r for r in order["rules"] if r != "HDR-1"] == distinct(base(c.rule) for c in model.CHECKS)


def test_the_rules_doc_states_the_header_checks_in_the_models_order():
    text = RULES_DOC.read_text(encoding="utf-8")
    stated = re.search(r"runs?\s+the checks ([^.]*?) in that order", text).group(1)
    named = RULE.findall(stated)
    header = distinct(base(c.rule) for c in model.CHECKS if c.rule.startswith("HDR-") and base(c.rule) in named)
    assert [r for r in named if r in header] == header and len(header) >= 4, (named, header)
