#!/usr/bin/python3
"""Writes the seed corpus of each fuzz target under corpus/<target>/.

Each seed is a real-looking packet built with scapy, cut at the header the
target parses (an ARP target gets the ARP message, not the Ethernet frame).
The property tests in ../tests/proptests.rs mutate the same files.

Run from crates/wire/fuzz:  /usr/bin/python3 gen_corpus.py
Needs python3-scapy (Debian). The output is committed; rerun only to change it.
"""
import os
from scapy.all import (
    ARP, ESP, GRE, ICMP, IP, TCP, UDP, AH, DNS, DNSQR, Dot1AD, Dot1Q, Ether,
    ICMPv6DestUnreach, ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA,
    ICMPv6ND_NS, ICMPv6ND_RA, ICMPv6ND_Redirect, ICMPv6ND_RS,
    ICMPv6NDOptDstLLAddr, ICMPv6NDOptMTU, ICMPv6NDOptPrefixInfo,
    ICMPv6NDOptRedirectedHdr, ICMPv6NDOptSrcLLAddr, ICMPv6PacketTooBig,
    ICMPv6ParamProblem, ICMPv6TimeExceeded, IPOption_RR, IPv6,
    IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting, RouterAlert, Raw,
)

MAC_A = "52:54:00:12:34:56"
MAC_B = "02:00:00:00:00:01"
V4_A, V4_B = "192.168.1.10", "198.51.100.7"
V6_A, V6_B = "2001:db8::1", "2001:db8::2"
LL_A = "fe80::5054:ff:fe12:3456"


def udp4(payload=b"hello"):
    return IP(src=V4_A, dst=V4_B, ttl=64) / UDP(sport=40000, dport=53) / payload


def quote4():
    # IP header + 8 bytes of a UDP datagram, as an ICMP error quotes it.
    return bytes(udp4(b"x" * 100))[:28]


def quote6():
    return bytes(IPv6(src=V6_A, dst=V6_B, hlim=63) / UDP(sport=40000, dport=53) / (b"x" * 100))[:48]


SEEDS = {
    "ethernet_vlan": {
        "untagged_ipv4": Ether(src=MAC_A, dst=MAC_B) / udp4(),
        "arp_broadcast": Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / ARP(hwsrc=MAC_A, psrc=V4_A, pdst="192.168.1.1"),
        "dot1q_ipv6": Ether(src=MAC_A, dst=MAC_B) / Dot1Q(vlan=100, prio=5) / IPv6(src=V6_A, dst=V6_B) / UDP(sport=1, dport=2),
        "qinq_arp": Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / Dot1AD(vlan=100) / Dot1Q(vlan=200) / ARP(hwsrc=MAC_A, psrc=V4_A, pdst="192.168.1.1"),
        "priority_tag": Ether(src=MAC_A, dst=MAC_B) / Dot1Q(vlan=0, prio=3) / udp4(),
    },
    "arp": {
        "request": ARP(op=1, hwsrc=MAC_A, psrc=V4_A, pdst="192.168.1.1"),
        "reply": ARP(op=2, hwsrc=MAC_B, psrc="192.168.1.1", hwdst=MAC_A, pdst=V4_A),
        "gratuitous": ARP(op=1, hwsrc=MAC_A, psrc=V4_A, hwdst="ff:ff:ff:ff:ff:ff", pdst=V4_A),
        "padded_request": bytes(ARP(op=1, hwsrc=MAC_A, psrc=V4_A, pdst="192.168.1.1")) + bytes(18),
    },
    "ipv4": {
        "icmp_echo": IP(src=V4_A, dst="8.8.8.8", id=0x1c46, flags="DF") / ICMP(id=0x1234, seq=1) / b"abcdefgh",
        "udp_dns": IP(src=V4_A, dst=V4_B) / UDP(sport=40000, dport=53) / DNS(rd=1, qd=DNSQR(qname="example.com")),
        "tcp_syn": IP(src=V4_A, dst=V4_B, flags="DF") / TCP(sport=54321, dport=443, flags="S", options=[("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]),
        "options_rr": IP(src="10.0.0.1", dst="10.0.0.2", ttl=1, options=[IPOption_RR(routers=["0.0.0.0", "0.0.0.0"])]) / UDP(sport=1, dport=2),
        "first_fragment": IP(src=V4_A, dst=V4_B, id=7, flags="MF") / UDP(sport=1, dport=2) / (b"f" * 64),
        "gre_key": IP(src=V4_A, dst=V4_B, proto=47) / GRE(key_present=1, key=42, proto=0x0800) / udp4(),
    },
    "ipv6_ext": {
        "udp": IPv6(src=V6_A, dst=V6_B) / UDP(sport=40000, dport=53) / b"query",
        "hbh_frag_udp": IPv6(src=V6_A, dst="ff02::16", hlim=1) / IPv6ExtHdrHopByHop(options=[RouterAlert()]) / IPv6ExtHdrFragment(id=0xdeadbeef, offset=0, m=1) / UDP(sport=1, dport=2) / b"xxxxxxxx",
        "destopt_routing_tcp": IPv6(src=V6_A, dst=V6_B) / IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting(addresses=["2001:db8::9"], segleft=1) / TCP(sport=1000, dport=22, flags="S"),
        "later_fragment": IPv6(src=V6_A, dst=V6_B) / IPv6ExtHdrFragment(id=1, offset=185, m=0, nh=17) / (b"z" * 32),
        "esp": IPv6(src=V6_A, dst=V6_B, nh=50) / (b"\x00\x00\x10\x00\x00\x00\x00\x01" + bytes(range(24))),
        "ah_tcp": IPv6(src=V6_A, dst=V6_B) / AH(spi=0x100, seq=1, icv=bytes(12), nh=6, payloadlen=4) / TCP(sport=1, dport=2),
    },
    "icmpv4": {
        "echo_request": ICMP(type=8, id=0x1234, seq=1) / b"abcdefgh",
        "echo_reply": ICMP(type=0, id=0x1234, seq=1) / b"abcdefgh",
        "frag_needed": ICMP(type=3, code=4, nexthopmtu=1400) / quote4(),
        "port_unreachable": ICMP(type=3, code=3) / quote4(),
        "ttl_exceeded": ICMP(type=11, code=0) / quote4(),
        "redirect": ICMP(type=5, code=1, gw="192.168.1.254") / quote4(),
    },
    "icmpv6_nd": {
        "ns_slla": ICMPv6ND_NS(tgt=V6_A) / ICMPv6NDOptSrcLLAddr(lladdr=MAC_A),
        "na_tlla": ICMPv6ND_NA(tgt=V6_A, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=MAC_A),
        "rs": ICMPv6ND_RS() / ICMPv6NDOptSrcLLAddr(lladdr=MAC_A),
        "ra": ICMPv6ND_RA(chlim=64, O=1, routerlifetime=1800) / ICMPv6NDOptSrcLLAddr(lladdr=MAC_B) / ICMPv6NDOptMTU(mtu=1500) / ICMPv6NDOptPrefixInfo(prefix="2001:db8:1::", prefixlen=64, L=1, A=1),
        "redirect": ICMPv6ND_Redirect(tgt="fe80::9", dst="2001:db8::99") / ICMPv6NDOptDstLLAddr(lladdr=MAC_B) / ICMPv6NDOptRedirectedHdr(pkt=quote6()),
        "echo": ICMPv6EchoRequest(id=0x77, seq=3, data=b"ping"),
        "echo_reply": ICMPv6EchoReply(id=0x77, seq=3, data=b"ping"),
        "packet_too_big": ICMPv6PacketTooBig(mtu=1280) / quote6(),
        "time_exceeded": ICMPv6TimeExceeded(code=0) / quote6(),
        "param_problem": ICMPv6ParamProblem(code=1, ptr=6) / quote6(),
        "unreachable": ICMPv6DestUnreach(code=1) / quote6(),
    },
    "udp": {
        "dns_query": UDP(sport=40000, dport=53) / DNS(rd=1, qd=DNSQR(qname="example.com")),
        "empty": UDP(sport=1, dport=2),
        "zero_checksum": UDP(sport=5000, dport=4789, chksum=0) / bytes(16),
        "ike_nat_t": UDP(sport=4500, dport=4500) / (b"\x00\x00\x10\x00\x00\x00\x00\x01" + bytes(16)),
    },
    "tcp": {
        "syn_options": TCP(sport=54321, dport=443, seq=0x12345678, flags="S", window=64240, options=[("MSS", 1460), ("SAckOK", b""), ("Timestamp", (123456, 0)), ("NOP", None), ("WScale", 7)]),
        "syn_ack": TCP(sport=443, dport=54321, seq=1, ack=0x12345679, flags="SA", options=[("MSS", 1400), ("NOP", None), ("WScale", 8)]),
        "ack_data": TCP(sport=54321, dport=443, seq=2, ack=2, flags="PA") / b"GET / HTTP/1.1\r\n\r\n",
        "sack": TCP(sport=1, dport=2, flags="A", options=[("NOP", None), ("NOP", None), ("SAck", (100, 200, 300, 400))]),
        "rst": TCP(sport=1, dport=2, flags="R"),
    },
    "gre": {
        "key_ipv4": GRE(key_present=1, key=42, proto=0x0800) / udp4(),
        "all_ipv6": GRE(chksum_present=1, key_present=1, seqnum_present=1, key=1, seqence_number=7, proto=0x86DD) / IPv6(src=V6_A, dst=V6_B) / UDP(sport=1, dport=2),
        "plain_teb": GRE(proto=0x6558) / Ether(src=MAC_A, dst=MAC_B) / udp4(),
    },
    "esp": {
        "esp_aes_gcm": b"\x00\x00\x10\x00\x00\x00\x00\x01" + bytes(range(8)) + bytes(range(64)) + bytes(16),
        "esp_seq_high": b"\xc0\x01\x02\x03\xff\xff\xff\xfe" + bytes(48),
    },
}


def build(p):
    if isinstance(p, (bytes, bytearray)):
        return bytes(p)
    return bytes(p)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for target, seeds in SEEDS.items():
        d = os.path.join(here, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name, p in seeds.items():
            if target in ("icmpv6_nd", "tcp", "udp") and not isinstance(p, bytes):
                # Upper-layer checksums need the IPv6/IPv4 addresses the
                # tests use: build inside the right IP header, then cut.
                if target == "icmpv6_nd":
                    p = bytes(IPv6(src="2001:db8::1", dst="fe80::2", hlim=255) / p)[40:]
                else:
                    p = bytes(IP(src="192.0.2.1", dst="198.51.100.2") / p)[20:]
            with open(os.path.join(d, name + ".bin"), "wb") as f:
                f.write(build(p))


if __name__ == "__main__":
    main()
