"""The reference target's state: exports, decoded requests, held requests, transactions and
replies before packing."""
from __future__ import annotations

from dataclasses import dataclass

from .constants import OBD_CONNECT2_REPLAY_CREATE, OBD_CONNECT_FLAGS2, OBD_CONNECT_VBR


# --------------------------------------------------------------------------------------
# state
# --------------------------------------------------------------------------------------

@dataclass
class Export:
    uuid: str
    client_handle: int
    cookie: int = 0                      # 0: remembered after a restart, not reconnected yet
    conn_cnt: int = 0
    flags: int = 0                       # granted ocd_connect_flags
    flags2: int = 0
    asked_rdonly: bool = False           # the connect asked for OBD_CONNECT_RDONLY (granted or not)
    peer: str = ""
    last_xid: int = 0
    last_committed: int = 0
    # lcd_last_xid: the XID of this client's most recent request that ran a (non-local)
    # transaction, and its value on stable storage (written in that transaction)
    last_trans_xid: int = 0
    durable_trans_xid: int = 0
    # recovery
    in_recovery: bool = False
    req_done: bool = False
    lock_done: bool = False
    vbr_failed: bool = False

    @property
    def replay_create(self) -> bool:
        return bool(self.flags & OBD_CONNECT_FLAGS2) and bool(self.flags2 & OBD_CONNECT2_REPLAY_CREATE)

    @property
    def vbr(self) -> bool:
        return bool(self.flags & OBD_CONNECT_VBR)


@dataclass
class Request:
    """A decoded request and where it came from."""
    xid: int
    peer: str
    msg: dict
    body: dict
    buffers: list
    order: str
    lm_flags: int

    @property
    def opc(self) -> int:
        return self.body["pb_opc"]

    @property
    def flags(self) -> int:
        return self.body["pb_flags"]

    @property
    def transno(self) -> int:
        return self.body["pb_transno"]


@dataclass
class Held:
    """A request whose reply waits for recovery to progress."""
    uuid: str
    req: Request


@dataclass
class Txn:
    transno: int
    uuid: str
    xid: int
    effects: list                        # [(key, object state or None)]; ("LAST_ID", seq) keys hold a LAST_ID


@dataclass
class Reply:
    """A reply before packing (saved replies are re-packed with a fresh last_committed)."""
    opc: int
    type: int
    status: int
    transno: int = 0
    buffers: tuple = ()
    handle: int = 0
    op_flags: int = 0
    pre_versions: tuple = (0, 0, 0, 0)
    early: bool = False                  # an early rejection / serious error: last_committed 0


def is_last_id(key: tuple) -> bool:
    return key[0] == "LAST_ID"

