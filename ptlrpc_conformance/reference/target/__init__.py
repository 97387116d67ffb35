"""The bundled reference OST target: a Lustre 2.17.57 OST (ofd on an ldiskfs OSD) as its code
reads, in memory.

One Lustre OST as the suite's clients see it: exports keyed by cookie, objects keyed by
(sequence, id) as Lustre's ostid_seq()/ostid_id() compute them, a LAST_ID per sequence, a
transno counter with boot epochs, a commit schedule, saved replies for resends, and recovery
after `restart()` with replays in transno order and version checks (VBR).

Where Lustre's outcome depends on the back-end, on timing or on configuration, the reference
picks one allowed outcome and says so where it does (look for "reference choice").  The
functions named in comments are Lustre's (lustre-release, tag v2_17_57); the behaviour is
described, not copied.

One module per concern, each a part of `Target`:
  dispatch.py      `Target`: a request's path (decode, the checks of Lustre's receive path, the
                   handler or recovery) and its reply
  exports.py       connections and exports
  objects.py       the handlers and the attribute rules of objects
  transactions.py  transnos, commits, last_rcvd's per-client records, saved replies
  recovery.py      restart, the recovery window, the replay queues
  state.py         the records they share (Export, Request, Reply, ...)
  ostid.py         ost_id and FID arithmetic;  constants.py  the constants, by Lustre's names

`TargetConfig` sets it up as a genuine Lustre OST may be (release, configuration, the choices
the rules allow).  Broken targets are subclasses that override one method each
(ptlrpc_conformance/mutants/broken_targets.py), never settings of the reference or patches.

`Target.exchange(data, xid, client)` takes one request (wire bytes), the XID it travelled
with and the name of the peer, and returns `{"data": HEX | None}` plus, when replies to
earlier requests went out while handling it, `"replies": [{"client", "xid", "data"}]`.
"""
from ..target_config import OBD_CONNECT_RDONLY, TargetConfig
from .dispatch import Target
from .ostid import (fid_key, fid_to_ostid, ostid_id, ostid_seq, ostid_set_id, ostid_to_fid, raw_oi,
                    valid_sequence)
from .state import Export, Held, Reply, Request, Txn

__all__ = ["OBD_CONNECT_RDONLY", "Export", "Held", "Reply", "Request", "Target", "TargetConfig", "Txn",
           "fid_key", "fid_to_ostid", "ostid_id", "ostid_seq", "ostid_set_id", "ostid_to_fid", "raw_oi",
           "valid_sequence"]
