"""The reference target's settings: the behaviour of a Lustre 2.17.57 OST as its code reads
(the defaults), and the bug switches, each of which turns the target into one realistic
broken target (the mutant zoo and the project's tests use them; the target itself only reads
them)."""
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


# OST_CONNECT_SUPPORTED (include/uapi/linux/lustre/lustre_idl.h): the flags
# ofd_parse_connect_data keeps of those a client asks for.  OBD_CONNECT_RDONLY and
# OBD_CONNECT_TRANSNO are not among them, so no OST export is ever read-only.
OST_CONNECT_SUPPORTED = names_to_mask("OBD_CONNECT_" + n for n in (
    "SRVLOCK", "GRANT", "VERSION", "INDEX", "BRW_SIZE", "CANCELSET", "AT", "LRU_RESIZE", "CKSUM", "VBR",
    "MDS", "SKIP_ORPHAN", "GRANT_SHRINK", "FULL20", "64BITHASH", "MAXBYTES", "MAX_EASIZE", "EINPROGRESS",
    "JOBSTATS", "LIGHTWEIGHT", "LVB_TYPE", "LAYOUTLOCK", "FID", "PINGLESS", "LFSCK", "BULK_MBITS",
    "GRANT_PARAM", "SHORTIO", "FLAGS2", "HPREQ_CHECK1"))
OST_CONNECT_SUPPORTED2 = names_to_mask("OBD_CONNECT2_" + n for n in (
    "LOCKAHEAD", "INC_XID", "ENCRYPT", "LSEEK", "REP_MBITS", "REPLAY_CREATE", "UNALIGNED_DIO",
    "LOCK_CONTENTION"))
OBD_CONNECT_RDONLY = spec.constant("OBD_CONNECT_RDONLY")


def _reference_flags() -> int:
    """The flags the reference grants when asked: spec/target.yaml's reference_connect_flags
    within OST_CONNECT_SUPPORTED (that list still names RDONLY and TRANSNO, which an OST never
    grants)."""
    return names_to_mask(spec.target()["reference_connect_flags"]) & OST_CONNECT_SUPPORTED


def _reference_flags2() -> int:
    return names_to_mask(spec.target()["reference_connect_flags2"]) & OST_CONNECT_SUPPORTED2


@dataclass(frozen=True)
class TargetConfig:
    """How the reference target behaves.  The defaults follow Lustre 2.17.57's OST (ofd on
    ldiskfs) as its code reads; every setting below "bugs" turns the target into one realistic
    broken target."""

    target_uuid: str = field(default_factory=lambda: spec.target()["target_uuid"])
    transno_start: int = 1 << 32          # the first transno issued
    commit_lag: int = 2                   # a transaction commits once this many newer transnos exist
    cookie_start: int = 0x7E57_0000_0000_0001
    connect_flags: int = field(default_factory=_reference_flags)
    connect_flags2: int = field(default_factory=_reference_flags2)
    codec_config: CodecConfig | None = None
    struct_config: StructConfig | None = None
    # OST_CREATE (ofd_create_hdl): objects per precreate transaction (ofd_precreate_batch;
    # Lustre's default OBJ_SUBDIR_COUNT * 4), and the sequence width the reply's o_size
    # carries (lcs_width; LUSTRE_DATA_SEQ_MAX_WIDTH by default)
    precreate_batch: int = 128
    seq_width: int = 0x1FFFFFF
    # the Lustre release whose OST this is: its facts (spec/releases/<release>.json, behaviour
    # and the OST's connect masks) decide the answers that differ between releases
    # (docs/target-rules.md, "Releases"); the default is the suite's default release
    release: str = "2.17.57"
    last_id_start: int = 0                # LAST_ID of sequence 0 after a reset (an OST that served an MDS)

    # ---- not bugs: behaviours a conforming target may choose ----------------------------
    grant_rdonly: bool = False            # grants OBD_CONNECT_RDONLY when asked (an MDT does) and enforces it
    claim_window: bool = False            # a replay of the transno whose reply the recovery thread has just
    #                                       sent is queued, not run (it came before the next expected transno
    #                                       moved: replay_request_or_update); it runs once no client replays
    # configurations of Lustre's OST (the hello may declare them: docs/testee-protocol.md §2.1.2)
    project_quota: bool = True            # False: an OST without project quota (ldiskfs without the project
    #                                       feature): a new projid is refused -EOPNOTSUPP (a punch still truncates)
    recovery: bool = True                 # False: recovery disabled (OBDF_REPLAYABLE clear: no
    #                                       MSG_CONNECT_REPLAYABLE, no transnos, no recovery after a restart)

    # ---- bugs: transnos and commits --------------------------------------------------
    transno_reuse: bool = False           # the counter is not incremented: a transno is issued twice
    extra_transno_opcodes: frozenset = frozenset()   # opcode names that also get a transno (e.g. OST_GETATTR)
    transno_on_failure: bool = False      # a failed transaction (SETATTR -ENOENT, ...) still gets a transno
    last_committed_backwards: bool = False  # every other reply reports an older last_committed
    last_committed_ahead: bool = False    # last_committed is above the highest transno issued
    # ---- bugs: reply types and check order -------------------------------------------------
    handler_errors_as_err: bool = False   # a handler's failure status is sent as ERR instead of REPLY
    early_rejections_as_reply: bool = False  # the early rejections (ERR rows) are sent as REPLY instead
    reply_to_undecodable: bool = False    # an undecodable request gets an ERR instead of being dropped
    err_status_positive: bool = False     # ERR replies carry a positive status
    handle_in_replies: bool = False       # every reply carries the export cookie in pb_handle
    timeout_drop_first: bool = False      # the pb_timeout 0 drop runs before ptlrpc_check_req's checks
    # ---- bugs: read-only exports -----------------------------------------------------------
    honour_ungranted_rdonly: bool = False  # a client that asked for RDONLY is refused -EROFS though not granted it
    rdonly_unenforced: bool = False       # (with grant_rdonly) the granted RDONLY is not enforced
    # ---- bugs: resends, replays, connections ---------------------------------------------
    save_replies: bool = True             # False: no saved replies, a resend is executed again
    replay_outside_recovery: bool = False  # a replay outside recovery is executed instead of ERR -ENODEV
    check_handle: bool = True             # False: a request with an unknown pb_handle is served
    check_conn_cnt: bool = True           # False: a request with a stale pb_conn_cnt is served
    check_ealready: bool = True           # False: reconnects with the same count or another handle accepted
    check_last_trans_xid: bool = True     # False: the last transaction's XID again without MSG_RESENT is run (row 12)
    reconnect_flag: bool = True           # False: reconnect replies lack MSG_CONNECT_RECONNECT
    resend_new_transno: bool = False      # a resend gets its saved reply under a new transno (a mix)
    err_opc_zero: bool = False            # ERR replies carry pb_opc 0, not the request's opcode
    recovering_flag: bool = True          # False: reconnects during recovery lack MSG_CONNECT_RECOVERING
    busy_new_clients: bool = True         # False: a new client is let in during recovery (no -EBUSY)
    recovery_filter: bool = True          # False: every opcode is served during recovery (no -EAGAIN)
    vbr_check: bool = True                # False: replays run whatever their pb_pre_versions say
    version_on_every_change: bool = False  # every change (not only size changes) sets the object's VBR version
    drop_claimed: bool = True             # False: a replay whose transno a still-queued replay holds is queued too
    claimed_always_dropped: bool = False  # a replay of a transno another client already replayed is dropped (not run)
    replay_skips_committed: bool = False  # a replay of a committed transaction is answered from its saved reply, not run
    end_recovery_hard: bool = False       # end_recovery is the hard limit: every unfinished client evicted, recovery ends
    # ---- bugs: handlers ----------------------------------------------------------------
    getattr_omits_projid: bool = False    # GETATTR leaves OBD_MD_FLPROJID out of o_valid (as if optional)
    setattr_ignores_valid: bool = False   # SETATTR applies every attribute field, whatever o_valid says
    punch_requires_size_blocks: bool = True  # False: PUNCH without FLSIZE|FLBLOCKS is accepted
    create_eexist: bool = False           # CREATE creates only the id it names, -EEXIST if it exists
    create_applies_attrs: bool = False    # CREATE gives the new object the attributes the request carries
    zeroed_objects: bool = False          # a new object's permission bits are 0, not 07666
    uid_keeps_suid: bool = False          # a uid change does not clear S_ISUID
    punch_sets_ids: bool = False          # PUNCH applies uid/gid/projid as SETATTR does (is_setattr rule)
    # ---- bugs: recovery ----------------------------------------------------------------
    replay_new_transno: bool = False      # a replay is answered with a new transno instead of its own
    replay_in_transno_order: bool = True  # False: replays run as they arrive
    epoch_jump: bool = True               # False: no new epoch after recovery
    restart_keeps_uncommitted: bool = False  # uncommitted changes survive a restart
    restart_loses_committed: bool = False    # a restart loses committed changes too

    def but(self, **changes) -> "TargetConfig":
        """A copy with some settings changed: the seam for broken targets and mutants."""
        return replace(self, **changes)
