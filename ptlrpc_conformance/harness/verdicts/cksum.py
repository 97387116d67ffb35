"""The suite's own checksum helper (docs/rules.md, CKSUM-1/2): Lustre's lm_cksum is crc32_le
seeded with ~0 and not inverted at the end, over all of buffer 0.  zlib's crc32 inverts
at both ends, so the Lustre value is zlib.crc32(data) ^ 0xFFFFFFFF."""
import zlib


def lustre_cksum(buffer0: bytes) -> int:
    return zlib.crc32(buffer0) ^ 0xFFFFFFFF
