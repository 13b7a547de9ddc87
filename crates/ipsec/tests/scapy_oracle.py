"""scapy's ESP (scapy.layers.ipsec.SecurityAssociation) as an independent
oracle for tern-ipsec: reads a JSON list of requests on stdin, answers a
JSON list on stdout.

Request: {"op": "encrypt" | "decrypt", "crypt": scapy name, "ckey": hex,
"auth": scapy name, "akey": hex, "spi": int, "esn": bool, "seq": int
(64 bits), "udp": bool, "src": "a.b.c.d", "dst": "a.b.c.d", "pkt": hex}.
encrypt: pkt is an inner IPv4/IPv6 packet; the answer is the outer packet
(IPv4 [+ UDP 4500] + ESP) scapy sends, in hex. decrypt: pkt is such an
outer packet; the answer is the inner packet scapy recovers, in hex, or
"error: ..." when scapy refuses it.
"""
import json
import sys

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation


def sa_of(r):
    return SecurityAssociation(
        ESP,
        spi=r["spi"],
        seq_num=r["seq"] & 0xFFFFFFFF,
        crypt_algo=r["crypt"],
        crypt_key=bytes.fromhex(r["ckey"]),
        auth_algo=r["auth"],
        auth_key=bytes.fromhex(r["akey"]) if r["akey"] else None,
        tunnel_header=IP(src=r["src"], dst=r["dst"]),
        nat_t_header=UDP(sport=4500, dport=4500) if r["udp"] else None,
        esn_en=r["esn"],
        esn=r["seq"] >> 32,
    )


def inner(raw):
    return IPv6(raw) if raw[0] >> 4 == 6 else IP(raw)


def answer(r):
    sa = sa_of(r)
    raw = bytes.fromhex(r["pkt"])
    if r["op"] == "encrypt":
        return bytes(sa.encrypt(inner(raw))).hex()
    try:
        out = sa.decrypt(IP(raw))
    except Exception as e:  # scapy raises IPSecIntegrityError and others
        return "error: %s" % e
    return bytes(out).hex()


def main():
    reqs = json.load(sys.stdin)
    json.dump([answer(r) for r in reqs], sys.stdout)


if __name__ == "__main__":
    main()
