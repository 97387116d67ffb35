"""Deliberately broken implementations for the project's own tests, each breaking one rule.

Every one is the reference testee built with a different configuration (the injection
seam of reference.codec.CodecConfig): no monkeypatching, no copies.
Load them with --iut python:iuts:NAME (tests/ on sys.path).
"""
from ptlrpc_conformance.reference import CodecConfig, make_testee

BASE = CodecConfig()


def accepts_bufcount_zero():
    """lm_bufcount 0 is let through the bufcount check (HDR-BUFCOUNT-1)."""
    return make_testee(BASE.but(min_bufcount=0), name="broken: accepts bufcount 0")


def no_header_pad():
    """Header size 32 + 4*bufcount, never rounded up to 8 (PAD-HEADER-1), on decode and encode."""
    return make_testee(BASE.but(pad_header=False), name="broken: no odd-bufcount header pad")


def swabbed_magic_unknown():
    """A byte-swapped magic is not recognised, so foreign-endian peers are refused (HDR-MAGIC-2)."""
    return make_testee(BASE.but(magic_swabbed=None), name="broken: swabbed magic unknown")


def accepts_151_byte_body():
    """Buffer 0 of 151 bytes is accepted as a ptlrpc_body (BODY-SIZE-1)."""
    return make_testee(BASE.but(min_body=151), name="broken: 151-byte body accepted")


def decode_only():
    """A correct decoder that declares no encode capability: encode cases are not applicable."""
    return make_testee(capabilities=("decode",), name="decode only")


class Raises:
    """An in-process implementation that raises on every decode."""

    def handle(self, request):
        if request.get("op") == "hello":
            return {"ok": True, "result": {"name": "raises", "version": "0", "capabilities": ["decode"],
                                           "protocol": 1}}
        raise RuntimeError("boom")


def raises():
    return Raises()


class BadHello:
    def handle(self, request):
        return {"ok": True, "result": {"name": "old", "version": "0", "capabilities": [], "protocol": 2}}


def bad_hello():
    return BadHello()
