"""Recovery on OSTs before 2.16 (issue 25): without OBD_CONNECT2_REPLAY_CREATE a create takes
no transno and is never replayed, so the recovery scenarios make their objects again during
recovery (a create served at once, docs/target-rules.md §7) and judge the order of replays,
the recovery filter, claimed transnos and VBR through setattr, punch and destroy, which take
transnos in every release."""
import pytest

import independent_ost
from adapters import started, scenario_by_id
from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import scenario as scen, wire
from ptlrpc_conformance.reference import make_testee, release_ost

OLDER = ("2.12.9", "2.15.8")
# a scenario and a requirement it must judge on every release
JUDGES = [("recovery.replay.transno-order", "RCV-ORDER-1"), ("recovery.filter", "RCV-FILTER-1"),
          ("recovery.claimed-transno", "RCV-CLAIMED-1"), ("recovery.claimed-transno-queued", "RCV-CLAIMED-1"),
          ("recovery.vbr-mismatch", "RCV-VBR-1"), ("recovery.vbr-version", "RCV-VBR-1")]
RECOVERY = sorted(s.id for s in scen.load_all() if s.id.startswith("recovery.") and "unusual" not in s.id)


def _made_again(records) -> list:
    """The records of the creates sent during recovery to make objects again."""
    return [r for r in records if r.client and "again (no REPLAY_CREATE" in r.note]


@pytest.mark.parametrize("release", OLDER)
@pytest.mark.parametrize("sid,requirement", JUDGES)
def test_an_older_ost_has_its_recovery_judged(sid, requirement, release):
    """The reference as the OST of 2.12.9 or 2.15.8 (no REPLAY_CREATE) passes the scenario and
    the scenario judged its requirement (before, every step after the first create was
    skipped: the requirement had no evidence)."""
    judged: list[str] = []
    problems, records = scen.run(scenario_by_id(sid), started(release_ost(release)), judged=judged, release=release)
    assert problems == [], problems
    assert requirement in judged
    made = _made_again(records)
    assert made and all(wire.parse(r.reply, "reply").body["pb_transno"] == 0 for r in made)


@pytest.mark.parametrize("sid,requirement", JUDGES)
def test_a_later_ost_replays_its_creates_and_makes_nothing_again(sid, requirement):
    """With REPLAY_CREATE granted (2.16 and later) the creates are replayed: no create is sent
    to make objects again, and the scenario judges its requirement as before."""
    judged: list[str] = []
    problems, records = scen.run(scenario_by_id(sid), started(make_testee()), judged=judged)
    assert problems == [] and requirement in judged
    assert _made_again(records) == []


@pytest.mark.parametrize("sid", RECOVERY)
def test_an_ost_that_loses_its_creates_in_a_crash_passes(sid, monkeypatch):
    """The independent OST with creates as before 2.16 on a journalling back-end: a create is a
    local transaction committed in order with the others, so a restart loses it with every
    transaction after it.  The recovery scenarios pass it: the create served during recovery
    makes the lost objects again and the replays find them.  At least one scenario's restart
    did lose a create (checked below)."""
    restarts: list[tuple[int, int]] = []
    real = independent_ost.Target.restart

    def restart(self):
        before = self.last_id
        out = real(self)
        restarts.append((before, self.last_id))
        return out

    monkeypatch.setattr(independent_ost.Target, "restart", restart)
    for release in ("2.17.57", "2.15.8"):
        problems, records = scen.run(scenario_by_id(sid), started(independent_ost.old_creates()), release=release)
        assert problems == [], (release, problems)
    if sid == "recovery.replay.one-client":
        assert any(after < before for before, after in restarts), restarts
        assert _made_again(records)


def test_a_create_that_stops_early_is_followed_by_another():
    """A create may stop early (docs/target-rules.md §3): the scenario sends another until one
    names its highest object; the next is sent only after a create that stopped early."""
    s = scenario_by_id("recovery.client-never-returns")
    again = [n for n, st in enumerate(s.steps, 1) if "again (no REPLAY_CREATE" in st.note]
    assert len(again) == 3          # object 2: up to three creates
    for prev, n in zip(again, again[1:]):
        cond = s.steps[n - 1].if_outcome
        assert cond and cond[0]["step"] == prev and all(o.startswith("stopped-early") for o in cond[0]["outcome"])


@pytest.mark.parametrize("sid", ["recovery.replay.transno-order", "recovery.claimed-transno"])
def test_an_ost_that_grants_replay_create_fails_an_older_release(sid):
    """OBD_CONNECT2_REPLAY_CREATE is not defined before 2.16: an OST judged as 2.15.8 that
    grants it (here the reference as a 2.16.1 OST) and gives its creates transnos fails,
    on the grant (TGT-CONN-1) and on the transnos (TGT-TRANSNO-2)."""
    problems, _ = scen.run(scenario_by_id(sid), started(release_ost("2.16.1")), release="2.15.8")
    assert any("TGT-CONN-1" in p and "does not define" in p for p in problems), problems
    assert any("TGT-TRANSNO-2" in p and "opcode 5" in p for p in problems), problems


@pytest.mark.parametrize("release, asks", [("2.12.9", False), ("2.15.8", False), ("2.16.1", True), ("2.17.57", True)])
def test_the_suite_s_client_asks_replay_create_only_where_the_release_defines_it(release, asks):
    """The suite's client of a session judged as `release` asks for OBD_CONNECT2_REPLAY_CREATE
    only where that release's lustre_idl.h defines it (spec/releases: behaviour replay_create)."""
    from ptlrpc_conformance.harness.ost.session import Session
    from ptlrpc_conformance.spec import structs as S
    s = Session(make_testee())
    s.judge.release = release
    c = s.add_client("c2", replay_create=True)
    ocd = S.unpack("obd_connect_data", c.connect_buffers()[3])
    assert c.replay_create is asks
    assert bool(ocd["ocd_connect_flags2"] & spec.constant("OBD_CONNECT2_REPLAY_CREATE")) is asks
    # a grant of it, asked or not, puts it in force only where it was asked for
    c.granted, c.granted2 = spec.constant("OBD_CONNECT_FLAGS2"), spec.constant("OBD_CONNECT2_REPLAY_CREATE")
    assert c.creates_take_transnos is asks
