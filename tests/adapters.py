"""Small helpers the target and recovery tests share: an adapter started on a testee, and a
bundled scenario by its id."""
from ptlrpc_conformance.harness.ost import scenario as scen
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter


def started(testee) -> InProcessAdapter:
    """An in-process adapter on `testee`, started (its hello read)."""
    a = InProcessAdapter(testee)
    a.start()
    return a


def scenario_by_id(sid: str):
    """The bundled scenario named `sid`."""
    return next(s for s in scen.load_all() if s.id == sid)
