"""The reference target's settings: the behaviour docs/target-rules.md describes (the
defaults), and the bug switches, each of which turns the target into one realistic broken
target (the mutant zoo and the project's tests use them; the target itself only reads them)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .. import spec
from .codec import CodecConfig
from .structs import StructConfig

def names_to_mask(names) -> int:
    mask = 0
    for name in names:
        mask |= spec.constant(name)
    return mask




@dataclass(frozen=True)
class TargetConfig:
    """How the reference target behaves.  The defaults follow docs/target-rules.md; every
    setting below "bugs" turns the target into one realistic broken target."""

    target_uuid: str = field(default_factory=lambda: spec.target()["target_uuid"])
    transno_start: int = 1 << 32          # the first transno issued (§8)
    commit_lag: int = 2                   # a transaction commits once this many newer transnos exist (§8)
    cookie_start: int = 0x7E57_0000_0000_0001
    connect_flags: int = field(default_factory=lambda: names_to_mask(spec.target()["reference_connect_flags"]))
    connect_flags2: int = field(default_factory=lambda: names_to_mask(spec.target()["reference_connect_flags2"]))
    codec_config: CodecConfig | None = None
    struct_config: StructConfig | None = None

    # ---- bugs: transnos and commits --------------------------------------------------
    transno_reuse: bool = False           # the counter is not incremented: a transno is issued twice
    extra_transno_opcodes: frozenset = frozenset()   # opcode names that also get a transno (e.g. OST_GETATTR)
    transno_on_failure: bool = False      # a failed transaction (SETATTR -ENOENT, ...) still gets a transno
    last_committed_backwards: bool = False  # every other reply reports an older last_committed
    last_committed_ahead: bool = False    # last_committed is above the highest transno issued
    # ---- bugs: reply types -------------------------------------------------------------
    handler_errors_as_err: bool = False   # a handler's failure status is sent as ERR instead of REPLY
    early_rejections_as_reply: bool = False  # rows 5-15 of §2 are sent as REPLY instead of ERR
    reply_to_undecodable: bool = False    # an undecodable request gets an ERR instead of being dropped
    err_status_positive: bool = False     # ERR replies carry a positive status
    handle_in_replies: bool = False       # every reply carries the export cookie in pb_handle
    # ---- bugs: resends, replays, connections ---------------------------------------------
    save_replies: bool = True             # False: no saved replies, a resend is executed again
    replay_outside_recovery: bool = False  # a replay outside recovery is executed instead of ERR -ENODEV
    check_handle: bool = True             # False: a request with an unknown pb_handle is served
    check_conn_cnt: bool = True           # False: a request with a stale pb_conn_cnt is served
    check_ealready: bool = True           # False: reconnects with the same count or another handle accepted
    reconnect_flag: bool = True           # False: reconnect replies lack MSG_CONNECT_RECONNECT
    resend_new_transno: bool = False      # a resend gets its saved reply under a new transno (a mix)
    err_opc_zero: bool = False            # ERR replies carry pb_opc 0, not the request's opcode
    recovering_flag: bool = True          # False: reconnects during recovery lack MSG_CONNECT_RECOVERING
    busy_new_clients: bool = True         # False: a new client is let in during recovery (no -EBUSY)
    recovery_filter: bool = True          # False: every opcode is served during recovery (no -EAGAIN)
    vbr_check: bool = True                # False: replays run whatever their pb_pre_versions say
    drop_claimed: bool = True             # False: a replay of a transno another client claimed runs
    # ---- bugs: handlers ----------------------------------------------------------------
    setattr_ignores_valid: bool = False   # SETATTR applies every attribute field, whatever o_valid says
    punch_requires_size_blocks: bool = True  # False: PUNCH without FLSIZE|FLBLOCKS is accepted
    # ---- bugs: recovery ----------------------------------------------------------------
    replay_new_transno: bool = False      # a replay is answered with a new transno instead of its own
    replay_in_transno_order: bool = True  # False: replays run as they arrive
    epoch_jump: bool = True               # False: no new epoch after recovery
    restart_keeps_uncommitted: bool = False  # uncommitted changes survive a restart
    restart_loses_committed: bool = False    # a restart loses committed changes too

    def but(self, **changes) -> "TargetConfig":
        """A copy with some settings changed: the seam for broken targets and mutants."""
        return replace(self, **changes)
