#!/usr/bin/python3
"""Builds the input pcaps of tern's golden tests with scapy.

Run from this directory with Debian's python3-scapy: /usr/bin/python3 make_inputs.py
Each case directory gets in-<interface>.pcap; the expected outputs are
written by the test itself with TERN_BLESS=1 and reviewed by a human.
"""
from scapy.all import (ARP, Dot1Q, Ether, GRE, ICMP, IP, IPv6, IPv6ExtHdrDestOpt,
                       IPv6ExtHdrHopByHop, ICMPv6EchoRequest, ICMPv6ND_NS,
                       ICMPv6NDOptSrcLLAddr, UDP, Raw, wrpcap)

TERN_LAN = "02:00:00:00:01:01"
TERN_WAN = "02:00:00:00:02:01"
HOST_A = "02:00:00:00:01:aa"
GW = "02:00:00:00:02:bb"


def fixed(pkts):
    for i, p in enumerate(pkts):
        p.time = 1700000000 + i
    return pkts


def ipv4_basic():
    a, r = "10.0.1.2", "10.0.1.1"
    lan = [
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst="198.18.0.7") / UDP(sport=1234, dport=5678) / b"forward me",
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst="198.18.0.7", ttl=1) / UDP(sport=40000, dport=33434) / b"ttl1",
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst="198.18.0.7", chksum=0x1234) / UDP() / b"bad checksum",
        Ether(bytes(Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst="198.18.0.7") / UDP() / b"truncated")[:30]),
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst=r) / ICMP(id=7, seq=1) / b"ping tern",
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst="203.0.113.1") / UDP(sport=1, dport=2) / b"nowhere",
        Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_A) / ARP(op=1, hwsrc=HOST_A, psrc=a, pdst=r),
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst=r) / UDP(sport=5353, dport=53) / b"dns?",
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst="198.18.0.8", options=b"\x94\x04\x00\x00") / UDP() / b"ip options",
        Ether(dst="02:99:99:99:99:99", src=HOST_A) / IP(src=a, dst="198.18.0.7") / UDP() / b"not for tern",
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src=a, dst="198.18.0.9") / UDP() / Raw(b"x" * 1472),
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src="224.0.0.1", dst="198.18.0.7") / UDP() / b"martian",
    ]
    wan = [
        Ether(dst=TERN_WAN, src=GW) / IP(src="198.18.0.7", dst=a) / UDP(sport=5678, dport=1234) / b"and back",
    ]
    return {"lan": lan, "wan": wan}


def ipv6_basic():
    a, r = "2001:db8:1::2", "2001:db8:1::1"
    lan = [
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst="2001:db8:ff::7") / UDP(sport=1, dport=2) / b"v6 forward",
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst="2001:db8:ff::7", hlim=1) / UDP() / b"hop limit 1",
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst="2001:db8:ff::7") / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / UDP() / b"ext",
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst=r) / ICMPv6EchoRequest(id=1, seq=1, data=b"ping6"),
        Ether(dst="33:33:ff:00:00:01", src=HOST_A) / IPv6(src=a, dst="ff02::1:ff00:1", hlim=255) / ICMPv6ND_NS(tgt=r) / ICMPv6NDOptSrcLLAddr(lladdr=HOST_A),
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst="fe80::1234") / UDP() / b"ll not ours",
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst=r) / UDP(sport=5353, dport=53) / b"dns?",
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst="2001:db8:ff::8") / UDP() / Raw(b"y" * 1400),
        Ether(dst=TERN_LAN, src=HOST_A) / IPv6(src=a, dst="2001:db8:99::1") / UDP() / b"no route",
    ]
    return {"lan": lan}


def features():
    lan = [
        Ether(dst=TERN_LAN, src=HOST_A) / Dot1Q(vlan=100) / IP(src="10.0.100.2", dst="10.20.0.5") / UDP(sport=7, dport=9) / b"into the tunnel",
        Ether(dst=TERN_LAN, src=HOST_A) / Dot1Q(vlan=100) / IP(src="10.0.100.66", dst="10.0.2.9") / UDP() / b"acl drop",
        Ether(dst=TERN_LAN, src=HOST_A) / Dot1Q(vlan=100) / IP(src="10.0.100.2", dst="10.0.2.9") / UDP() / b"tagged to wan",
        Ether(dst=TERN_LAN, src=HOST_A) / IP(src="10.0.1.2", dst="10.0.2.9") / UDP() / b"untagged to wan",
        Ether(dst=TERN_LAN, src=HOST_A) / Dot1Q(vlan=200) / IP(src="10.0.200.2", dst="10.0.2.9") / UDP() / b"unknown vlan",
    ]
    wan = [
        Ether(dst=TERN_WAN, src=GW) / IP(src="10.0.2.2", dst="10.0.2.1") / GRE(key_present=1, key=7) / IP(src="10.20.0.5", dst="10.0.100.2") / UDP(sport=9, dport=7) / b"out of the tunnel",
        Ether(dst=TERN_WAN, src=GW) / IP(src="10.0.2.2", dst="10.0.2.1") / GRE(key_present=1, key=8) / IP(src="10.20.0.5", dst="10.0.100.2") / UDP() / b"wrong key",
    ]
    return {"lan": lan, "wan": wan}


for case, gen in [("ipv4-basic", ipv4_basic), ("ipv6-basic", ipv6_basic), ("features", features)]:
    for iface, pkts in gen().items():
        wrpcap(f"{case}/in-{iface}.pcap", fixed(pkts))
