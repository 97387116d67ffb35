"""LNet over TCP (socklnd) as a node speaks it: the codec of its wire structures (`wire.py`)
and a node engine that connects, accepts and exchanges LNet messages (`node.py`), whose
connections can be recorded in a pcap as they pass (`tap.py`, capture/pcap.py's writer).

The wire layouts and constants are data, spec/lnet.yaml, shared with the capture reader and
writer (harness/capture/socklnd.py).  docs/lnet-tcp.md says what exists and what the
`lnet-tcp:` adapter and `serve` build on it.
"""
