"""The reference target's settings: the behaviour of a Lustre 2.17.57 OST as its code reads
(the defaults), and the choices and configurations a genuine Lustre OST may have.  No setting
makes the target wrong: the broken targets of the mutant zoo are subclasses of it
(ptlrpc_conformance/mutants/broken_targets.py)."""
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
    ldiskfs) as its code reads; the other values of each setting are what Lustre allows too:
    another release, another configuration, or another outcome the rules accept."""

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
    replay_skips_committed: bool = False  # a replay of a committed transaction is answered from its saved
    #                                       reply, not run again (as a target that reconstructs may)
    end_recovery_hard: bool = False       # end_recovery is the hard limit: every unfinished client evicted,
    #                                       its held requests answered ERR -ENOTCONN, and recovery ends
    # configurations of Lustre's OST (the hello may declare them: docs/testee-protocol.md §2.1.2)
    project_quota: bool = True            # False: an OST without project quota (ldiskfs without the project
    #                                       feature): a new projid is refused -EOPNOTSUPP (a punch still truncates)
    recovery: bool = True                 # False: recovery disabled (OBDF_REPLAYABLE clear: no
    #                                       MSG_CONNECT_REPLAYABLE, no transnos, no recovery after a restart)

    def but(self, **changes) -> "TargetConfig":
        """A copy with some settings changed."""
        return replace(self, **changes)
