"""Compatibility path (documented before the harness was split by job): LNet/socklnd framing
is now `ptlrpc_conformance.harness.capture.socklnd`, pcap reading and writing
`ptlrpc_conformance.harness.capture.pcap`. New code imports from those."""
from ptlrpc_conformance.harness.capture.pcap import *  # noqa: F401,F403
from ptlrpc_conformance.harness.capture.pcap import Packet, Trace, packets, read_pcap, scan_pcap, write_pcap  # noqa: F401
from ptlrpc_conformance.harness.capture.socklnd import *  # noqa: F401,F403
