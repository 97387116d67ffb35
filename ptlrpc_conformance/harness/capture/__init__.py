"""Captures of LNet over TCP: socklnd framing, and pcap/pcapng reading and writing."""
