//! IPsec against an independent implementation (issue 39): the real `tern
//! run` with 16 route-based ESP tunnels, every cipher and integrity
//! algorithm with and without UDP encapsulation (ESN on one), between a
//! LAN host and a "remote gateway" played by scapy's
//! `scapy.layers.ipsec.SecurityAssociation` (/usr/bin/python3).
//!
//! host1 (10.0.1.2) eth0 -- lan0 [tern 10.0.2.1] wan0 -- eth0 host2 (10.0.2.2, scapy)
//!
//! (a) host1 sends to 10.9.K.5 (routed into tunnel K): host2 sees ESP,
//!     scapy decrypts it, the SPI is tunnel K's and the sequence numbers
//!     increase from 1; (b) scapy encrypts packets for host1 on tunnel K's
//!     inbound SA: host1 receives them; replays, a wrong SPI, a corrupted
//!     ICV and truncated ESP each land in their counter and nowhere else;
//!     transit ESP (host2 to host1) is forwarded as any IP protocol. On the
//!     userspace lane (AF_PACKET) and on the XDP lane, one tern start each.
//!
//! Needs root, iproute2, ping, ethtool and scapy; says why and passes
//! without.

use std::process::Child;
use std::time::{Duration, Instant};

mod common;
use common::{Lab, cli, counter, json_lines, log_of, must, python_in, run_tern, sa_counter, scapy_missing, wait_file};

/// (crypto, integ, key bytes, integ key bytes, scapy's crypt and auth names).
const ALGOS: [(&str, &str, usize, usize, &str, &str); 8] = [
    ("aes-128-gcm", "none", 20, 0, "AES-GCM", "NULL"),
    ("aes-256-gcm", "none", 36, 0, "AES-GCM", "NULL"),
    ("aes-128-cbc", "hmac-sha1-96", 16, 20, "AES-CBC", "HMAC-SHA1-96"),
    ("aes-128-cbc", "hmac-sha256-128", 16, 32, "AES-CBC", "SHA2-256-128"),
    ("aes-128-cbc", "hmac-sha512-256", 16, 64, "AES-CBC", "SHA2-512-256"),
    ("aes-256-cbc", "hmac-sha1-96", 32, 20, "AES-CBC", "HMAC-SHA1-96"),
    ("aes-256-cbc", "hmac-sha256-128", 32, 32, "AES-CBC", "SHA2-256-128"),
    ("aes-256-cbc", "hmac-sha512-256", 32, 64, "AES-CBC", "SHA2-512-256"),
];

/// Tunnels: every algorithm without, then with, UDP encapsulation.
const TUNNELS: usize = 16;
/// The tunnel whose inbound SA takes the hostile packets (CBC + SHA1, no
/// UDP), and the one with ESN.
const HOSTILE: usize = 2;
const ESN: usize = 0;

struct Tun {
    k: usize,
    crypto: &'static str,
    integ: &'static str,
    scapy_crypt: &'static str,
    scapy_auth: &'static str,
    udp: bool,
    esn: bool,
    key_out: String,
    ikey_out: String,
    key_in: String,
    ikey_in: String,
}

fn hex(n: usize, seed: usize) -> String {
    let mut s = String::from("0x");
    for i in 0..n {
        s.push_str(&format!("{:02x}", (seed * 31 + i * 7 + 1) & 0xff));
    }
    s
}

fn tunnels() -> Vec<Tun> {
    (0..TUNNELS)
        .map(|k| {
            let (crypto, integ, kl, il, sc, sa) = ALGOS[k % ALGOS.len()];
            Tun {
                k,
                crypto,
                integ,
                scapy_crypt: sc,
                scapy_auth: sa,
                udp: k >= ALGOS.len(),
                esn: k == ESN,
                key_out: hex(kl, 2 * k + 1),
                ikey_out: if il > 0 { hex(il, 100 + k) } else { String::new() },
                key_in: hex(kl, 2 * k + 2),
                ikey_in: if il > 0 { hex(il, 200 + k) } else { String::new() },
            }
        })
        .collect()
}

fn config(lab: &Lab, driver: &str, linux: bool, ts: &[Tun]) -> String {
    let mut c = if linux { "[linux]\nmode = \"linux\"\n".to_string() } else { String::new() };
    c += &format!(
        r#"
[[interface]]
name = "lan0"
device = "lan0"
driver = "{driver}"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "{driver}"
addresses = ["10.0.2.1/24"]

[api]
socket = "{}"

[metrics]
listen = ""
"#,
        lab.socket()
    );
    for t in ts {
        for (id, spi, key, ikey) in
            [(100 + t.k, 0x1000 + t.k, &t.key_out, &t.ikey_out), (200 + t.k, 0x2000 + t.k, &t.key_in, &t.ikey_in)]
        {
            c.push_str(&format!(
                "\n[[ipsec_sa]]\nid = {id}\nspi = {spi}\ncrypto = \"{}\"\ninteg = \"{}\"\nkey = \"{key}\"\nesn = {}\nudp_encap = {}\nreplay_window = 64\n",
                t.crypto, t.integ, t.esn, t.udp
            ));
            if !ikey.is_empty() {
                c.push_str(&format!("integ_key = \"{ikey}\"\n"));
            }
        }
        c.push_str(&format!(
            "\n[[tunnel]]\nname = \"ips{k}\"\ntype = \"ipsec\"\nlocal = \"10.0.2.1\"\nremote = \"10.0.2.2\"\nsa_out = {}\nsa_in = [{}]\naddresses = [\"172.16.{k}.1/30\"]\n\n[[route]]\nprefix = \"10.9.{k}.0/24\"\ninterface = \"ips{k}\"\n",
            100 + t.k,
            200 + t.k,
            k = t.k
        ));
    }
    c
}

/// The SAs as the scapy scripts build them (a Python literal).
fn scapy_sas(ts: &[Tun]) -> String {
    let b = |h: &str| if h.is_empty() { "None".to_string() } else { format!("bytes.fromhex('{}')", &h[2..]) };
    let mut s = String::from("SAS = [\n");
    for t in ts {
        s.push_str(&format!(
            "  dict(k={}, crypt='{}', auth={}, key_out={}, ikey_out={}, key_in={}, ikey_in={}, udp={}, esn={}),\n",
            t.k,
            t.scapy_crypt,
            if t.scapy_auth == "NULL" { "None".into() } else { format!("'{}'", t.scapy_auth) },
            b(&t.key_out),
            b(&t.ikey_out),
            b(&t.key_in),
            b(&t.ikey_in),
            if t.udp { "True" } else { "False" },
            if t.esn { "True" } else { "False" },
        ));
    }
    s.push_str("]\n");
    s
}

const PY_COMMON: &str = r#"
import sys, json, socket, struct, time
from scapy.layers.ipsec import SecurityAssociation, ESP
from scapy.all import IP, UDP, Raw

def sa(d, out):
    natt = UDP(sport=4500, dport=4500) if d['udp'] else None
    if out:  # what tern sends: tern's outbound SA, from 10.0.2.1
        return SecurityAssociation(ESP, spi=0x1000 + d['k'], crypt_algo=d['crypt'], crypt_key=d['key_out'],
            auth_algo=d['auth'], auth_key=d['ikey_out'], tunnel_header=IP(src='10.0.2.1', dst='10.0.2.2'),
            nat_t_header=natt, esn_en=d['esn'], esn=0)
    return SecurityAssociation(ESP, spi=0x2000 + d['k'], crypt_algo=d['crypt'], crypt_key=d['key_in'],
        auth_algo=d['auth'], auth_key=d['ikey_in'], tunnel_header=IP(src='10.0.2.2', dst='10.0.2.1'),
        nat_t_header=natt, esn_en=d['esn'], esn=0)
"#;

/// Host2: capture what tern sends for `want` packets (or `secs`), decrypt
/// each with scapy, print one JSON line per packet.
const PY_SINK: &str = r#"
want, secs, ready = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
by_spi = {0x1000 + d['k']: (d, sa(d, True)) for d in SAS}
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind(('eth0', 0))
s.settimeout(0.2)
open(ready, 'w').close()
got, end = [], time.time() + secs
while len(got) < want and time.time() < end:
    try:
        f, addr = s.recvfrom(65535)
    except socket.timeout:
        continue
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    ip = f[14:]
    ihl = (ip[0] & 15) * 4
    src, dst, proto = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20]), ip[9]
    if src != '10.0.2.1' or dst != '10.0.2.2':
        continue
    l4 = ip[ihl:struct.unpack('!H', ip[2:4])[0]]
    udp = proto == 17 and struct.unpack('!HH', l4[:4]) == (4500, 4500)
    if not (proto == 50 or udp):
        continue
    esp = l4[8:] if udp else l4
    spi, seq = struct.unpack('!II', esp[:8])
    r = dict(spi=spi, seq=seq, udp=udp)
    if spi in by_spi:
        d, a = by_spi[spi]
        q = IP(src=src, dst=dst) / (UDP(sport=4500, dport=4500) / ESP(esp) if udp else ESP(esp))
        try:
            inner = a.decrypt(q)
            r.update(k=d['k'], src=inner.src, dst=inner.dst, payload=bytes(inner[Raw].load).decode())
        except Exception as e:
            r.update(k=d['k'], error=repr(e))
    got.append(r)
for r in got:
    print(json.dumps(r))
"#;

/// Host2: tern's inbound SAs, encrypted by scapy: two good packets per
/// tunnel, then the hostile ones on tunnel HOSTILE, then one more good.
const PY_SOURCE: &str = r#"
hostile = int(sys.argv[1])
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
def send(p):
    raw.sendto(bytes(p), ('10.0.2.1', 0))
def inner(k, n):
    return IP(src='10.9.%d.5' % k, dst='10.0.1.2') / UDP(sport=7000 + k, dport=5000) / Raw(b'in-%d-%d' % (k, n))
sas = {d['k']: sa(d, False) for d in SAS}
for d in SAS:
    for n in (1, 2):
        send(sas[d['k']].encrypt(inner(d['k'], n), seq_num=n))
        time.sleep(0.002)
a = sas[hostile]
replay = a.encrypt(inner(hostile, 1), seq_num=1)
send(replay)
wrong = SecurityAssociation(ESP, spi=0x2fff, crypt_algo=a.crypt_algo.name, crypt_key=a.crypt_key,
    auth_algo=a.auth_algo.name, auth_key=a.auth_key, tunnel_header=IP(src='10.0.2.2', dst='10.0.2.1'))
send(wrong.encrypt(inner(hostile, 90), seq_num=90))
bad = bytearray(bytes(a.encrypt(inner(hostile, 91), seq_num=91)))
bad[-1] ^= 1
send(bytes(bad))
send(IP(src='10.0.2.2', dst='10.0.2.1', proto=50) / Raw(struct.pack('!II', 0x2000 + hostile, 92) + b'\x01\x02\x03'))
time.sleep(0.05)
send(a.encrypt(inner(hostile, 3), seq_num=3))
# Transit ESP: to host1 itself, forwarded as any IP protocol.
send(IP(src='10.0.2.2', dst='10.0.1.2', proto=50) / Raw(struct.pack('!II', 0x7777, 1) + b'transit-esp-payload!'))
"#;

/// Host1: UDP port 5000 and raw ESP, one JSON line each, until `want`
/// have come (then one more second, for any that should not have come:
/// the caller compares the lines with what it wants), or for `secs` at
/// most. Its clock starts before the sender's scapy has even loaded, which
/// on a loaded machine takes seconds: `secs` is a generous deadline, not
/// the time the test takes.
const PY_HOST: &str = r#"
import sys, socket, json, time, select
want, secs, ready = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 5000))
e = socket.socket(socket.AF_INET, socket.SOCK_RAW, 50)
open(ready, 'w').close()
n, end = 0, time.time() + secs
while time.time() < end:
    r, _, _ = select.select([u, e], [], [], 0.1)
    for s in r:
        d, a = s.recvfrom(65535)
        if s is u:
            print(json.dumps(dict(udp=d.decode(), src=a[0])), flush=True)
        else:
            print(json.dumps(dict(esp=d[20:].hex(), src=a[0])), flush=True)
        n += 1
        if n == want:
            end = min(end, time.time() + 1)
"#;

/// [`PY_HOST`]'s deadline, in seconds.
const HOST_SECS: &str = "60";

fn py(lab: &Lab, ns: usize, name: &str, body: &str, sas: &str, args: &[&str]) -> Child {
    let path = lab.dir.join(name);
    std::fs::write(&path, format!("{}{sas}{body}", if name == "host.py" { "" } else { PY_COMMON })).expect("script");
    python_in(lab, ns, &path, args)
}

fn interop(driver: &str, linux: bool, tag: &str) {
    if let Some(why) = common::lab_missing().or_else(scapy_missing) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("espctl{}{tag}", std::process::id()));
    let r = lab.ns[1].clone();
    must("ip", &["-n", &r, "link", "set", "lan0", "up"]);
    must("ip", &["-n", &r, "link", "set", "wan0", "up"]);
    let ts = tunnels();
    let path = lab.dir.join("tern.toml");
    std::fs::write(&path, config(&lab, driver, linux, &ts)).expect("config");
    run_tern(&mut lab, &path);
    let sas = scapy_sas(&ts);
    // Neighbours both ways before the tunnels' traffic.
    let deadline = Instant::now() + Duration::from_secs(30);
    for (ns, dst) in [(0, "10.0.1.1"), (2, "10.0.2.1")] {
        while !common::sh("ip", &["netns", "exec", &lab.ns[ns], "ping", "-c", "1", "-W", "1", dst]).status.success() {
            assert!(Instant::now() < deadline, "ping {dst}; tern log:\n{}", log_of(&lab));
        }
    }

    // (a) host1 -> tunnels -> ESP seen and decrypted by scapy on host2.
    let ready = lab.dir.join("sink.ready");
    let sink =
        py(&lab, 2, "sink.py", PY_SINK, &sas, &[&(TUNNELS * 3).to_string(), HOST_SECS, &ready.display().to_string()]);
    wait_file(&ready);
    let send = (0..TUNNELS)
        .flat_map(|k| (1..=3).map(move |n| format!("s.sendto(b'out-{k}-{n}', ('10.9.{k}.5', 9)); time.sleep(0.002)")))
        .collect::<Vec<_>>()
        .join("\n");
    let script = format!("import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n{send}\n");
    let out = common::sh("ip", &["netns", "exec", &lab.ns[0], "/usr/bin/python3", "-c", &script]);
    assert!(out.status.success(), "host1 send: {}", String::from_utf8_lossy(&out.stderr));
    let seen = json_lines(sink);
    for t in &ts {
        let mine: Vec<&serde_json::Value> =
            seen.iter().filter(|r| r["spi"].as_u64() == Some(0x1000 + t.k as u64)).collect();
        let what = format!("{driver}: tunnel {} ({} {} udp={} esn={})", t.k, t.crypto, t.integ, t.udp, t.esn);
        assert_eq!(mine.len(), 3, "{what}: ESP packets seen: {seen:?}\ntern log:\n{}", log_of(&lab));
        for (n, r) in mine.iter().enumerate() {
            assert_eq!(r["udp"].as_bool(), Some(t.udp), "{what}: UDP encapsulation");
            assert_eq!(r["seq"].as_u64(), Some(n as u64 + 1), "{what}: sequence numbers from 1");
            assert!(r.get("error").is_none(), "{what}: scapy could not decrypt: {r}");
            assert_eq!(r["dst"].as_str(), Some(format!("10.9.{}.5", t.k).as_str()), "{what}: inner destination");
            assert_eq!(r["payload"].as_str(), Some(format!("out-{}-{}", t.k, n + 1).as_str()), "{what}: payload");
        }
        assert_eq!(sa_counter(&lab, 100 + t.k, "packets"), 3, "{what}: SA counter");
    }

    // (b) scapy -> tern -> host1, with the hostile packets.
    let before: Vec<u64> = ["unknown-spi", "truncated", "replay", "integrity"]
        .iter()
        .map(|e| counter(&lab, &format!("esp-decrypt/{e}")))
        .collect();
    let ready = lab.dir.join("host.ready");
    // Two per tunnel, the hostile tunnel's third, the transit ESP.
    let want = TUNNELS * 2 + 2;
    let host = py(&lab, 0, "host.py", PY_HOST, "", &[&want.to_string(), HOST_SECS, &ready.display().to_string()]);
    wait_file(&ready);
    let src = py(&lab, 2, "source.py", PY_SOURCE, &sas, &[&HOSTILE.to_string()]);
    let src_out = src.wait_with_output().expect("source");
    assert!(src_out.status.success(), "scapy source: {}", String::from_utf8_lossy(&src_out.stderr));
    let got = json_lines(host);
    for t in &ts {
        let want: Vec<String> = if t.k == HOSTILE { vec![1, 2, 3] } else { vec![1, 2] }
            .into_iter()
            .map(|n| format!("in-{}-{n}", t.k))
            .collect();
        let mine: Vec<String> = got
            .iter()
            .filter_map(|r| r["udp"].as_str())
            .filter(|p| p.starts_with(&format!("in-{}-", t.k)))
            .map(String::from)
            .collect();
        let what = format!("{driver}: tunnel {} ({} {} udp={} esn={})", t.k, t.crypto, t.integ, t.udp, t.esn);
        assert_eq!(mine, want, "{what}: decrypted packets on host1 (all: {got:?})\ntern log:\n{}", log_of(&lab));
        assert_eq!(sa_counter(&lab, 200 + t.k, "packets"), want.len() as u64, "{what}: SA counter");
    }
    assert!(
        got.iter().any(|r| r["esp"].as_str().is_some_and(|h| h.starts_with("00007777"))),
        "{driver}: transit ESP reached host1: {got:?}"
    );
    // Each hostile packet in its counter, once.
    let h = 200 + HOSTILE;
    assert_eq!(sa_counter(&lab, h, "replay_drops"), 1, "{driver}: replay");
    assert_eq!(sa_counter(&lab, h, "integrity_failures"), 1, "{driver}: corrupted ICV");
    let after: Vec<u64> = ["unknown-spi", "truncated", "replay", "integrity"]
        .iter()
        .map(|e| counter(&lab, &format!("esp-decrypt/{e}")))
        .collect();
    let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(moved, [1, 1, 1, 1], "{driver}: esp-decrypt unknown-spi, truncated, replay, integrity");
    for t in &ts {
        if t.k != HOSTILE {
            assert_eq!(sa_counter(&lab, 200 + t.k, "replay_drops"), 0);
            assert_eq!(sa_counter(&lab, 200 + t.k, "integrity_failures"), 0);
        }
    }
    if driver == "xdp" {
        // ESP and NAT-T for the router went to the engine by name.
        assert!(counter(&lab, "xdp-lane/punt-ipsec") >= (TUNNELS * 2) as u64, "xdp-lane/punt-ipsec");
    }
    if linux {
        // Linux owns the router's addresses, but not its IPsec: the
        // steering program sent ESP and NAT-T to tern.
        let n = counter(&lab, "xdp-steer/ipsec-to-tern");
        assert!(n >= (TUNNELS * 2) as u64, "xdp-steer/ipsec-to-tern: {n}");
    }
    let shown = String::from_utf8_lossy(&cli(&lab, &["ipsec", "tunnel", "show"]).stdout).into_owned();
    assert!(shown.contains("ips15") && shown.contains("10.0.2.1 -> 10.0.2.2"), "{shown}");
    let cfg = String::from_utf8_lossy(&cli(&lab, &["config", "show"]).stdout).into_owned();
    assert!(!cfg.contains(&ts[0].key_out[2..]), "config show leaks a key");
    assert!(!log_of(&lab).contains(&ts[0].key_out[2..]), "the log holds a key");
}

#[test]
fn scapy_interop_over_af_packet() {
    interop("afpacket", false, "p");
}

#[test]
fn scapy_interop_over_the_xdp_lane() {
    interop("xdp", false, "x");
}

/// Linux mode over AF_XDP: the steering program passes the router's own
/// traffic to Linux but ESP and UDP 500/4500 to tern.
#[test]
fn scapy_interop_in_linux_mode_over_af_xdp() {
    interop("afxdp", true, "l");
}

// ------------------------------------------ IPv6 extension headers

const EXT_KEY_IN: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";
const EXT_KEY_OUT: &str = "0x1112131415161718191a1b1c1d1e1f2021222324";

/// Two IPv6 tunnels to host2 (AES-128-GCM inbound SPIs 0x3001 plain ESP
/// and 0x3002 ESP in UDP 4500).
fn ext_config(lab: &Lab, driver: &str, linux: bool) -> String {
    let mut c = if linux { "[linux]\nmode = \"linux\"\n".to_string() } else { String::new() };
    c += &format!(
        r#"
[[interface]]
name = "lan0"
device = "lan0"
driver = "{driver}"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "{driver}"
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]

[api]
socket = "{}"

[metrics]
listen = ""
"#,
        lab.socket()
    );
    for (k, udp) in [(0u32, false), (1, true)] {
        for (id, spi, key) in [(10 + k, 0x3001 + k, EXT_KEY_IN), (20 + k, 0x4001 + k, EXT_KEY_OUT)] {
            c += &format!(
                "\n[[ipsec_sa]]\nid = {id}\nspi = {spi}\ncrypto = \"aes-128-gcm\"\nkey = \"{key}\"\nudp_encap = {udp}\n"
            );
        }
        c += &format!(
            "\n[[tunnel]]\nname = \"ips6x{k}\"\ntype = \"ipsec\"\nlocal = \"2001:db8:2::1\"\nremote = \"2001:db8:2::2\"\nsa_out = {}\nsa_in = [{}]\naddresses = [\"172.17.{k}.1/30\"]\n\n[[route]]\nprefix = \"10.9.{}.0/24\"\ninterface = \"ips6x{k}\"\n",
            20 + k,
            10 + k,
            50 + k
        );
    }
    c
}

/// Host2: for each SA (plain ESP, ESP in UDP) and each chain of extension
/// headers, one packet for host1 encrypted by scapy, the chain put between
/// the outer IPv6 header and ESP (or UDP), sent whole through a raw socket.
const PY_EXT_SOURCE: &str = r#"
import socket, time
from scapy.layers.ipsec import SecurityAssociation, ESP
from scapy.all import IP, IPv6, UDP, Raw, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment
key = bytes.fromhex(sys.argv[1][2:])
raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
chains = {
    'hbh': [lambda nh: IPv6ExtHdrHopByHop(nh=nh)],
    'rt': [lambda nh: IPv6ExtHdrRouting(nh=nh, type=253, segleft=0)],
    'dst': [lambda nh: IPv6ExtHdrDestOpt(nh=nh)],
    'frag': [lambda nh: IPv6ExtHdrFragment(nh=nh, offset=0, m=0, id=7)],
    'all': [lambda nh: IPv6ExtHdrHopByHop(nh=43), lambda nh: IPv6ExtHdrRouting(nh=60, type=253, segleft=0),
            lambda nh: IPv6ExtHdrDestOpt(nh=44), lambda nh: IPv6ExtHdrFragment(nh=nh, offset=0, m=0, id=8)],
}
for k, udp in ((0, False), (1, True)):
    a = SecurityAssociation(ESP, spi=0x3001 + k, crypt_algo='AES-GCM', crypt_key=key,
        tunnel_header=IPv6(src='2001:db8:2::2', dst='2001:db8:2::1'),
        nat_t_header=UDP(sport=4500, dport=4500) if udp else None)
    for n, (name, chain) in enumerate(chains.items()):
        inner = IP(src='10.9.%d.5' % (50 + k), dst='10.0.1.2') / UDP(sport=7000, dport=5000) / Raw(b'x6-%s-%d' % (name.encode(), k))
        p = IPv6(bytes(a.encrypt(inner, seq_num=n + 1)))
        upper, body = p.nh, bytes(p.payload)
        pkt = IPv6(src='2001:db8:2::2', dst='2001:db8:2::1')
        for make in chain:
            pkt = pkt / make(upper)
        pkt = pkt / Raw(body)
        raw.sendto(bytes(pkt), ('2001:db8:2::1', 0))
        time.sleep(0.002)
"#;

/// ESP and ESP in UDP 4500 over IPv6 behind extension headers (hop-by-hop,
/// routing, destination options, an atomic fragment, all four), built by
/// scapy on host2 and sent through the veth to tern's address: every one
/// is decrypted and reaches host1, on the lane `driver` (and in Linux mode
/// through the steering program).
fn ext_headers(driver: &str, linux: bool, tag: &str) {
    if let Some(why) = common::lab_missing().or_else(scapy_missing) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("espext{}{tag}", std::process::id()));
    let r = lab.ns[1].clone();
    must("ip", &["-n", &r, "link", "set", "lan0", "up"]);
    must("ip", &["-n", &r, "link", "set", "wan0", "up"]);
    let path = lab.dir.join("tern.toml");
    std::fs::write(&path, ext_config(&lab, driver, linux)).expect("config");
    run_tern(&mut lab, &path);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (ns, dst) in [(0, "10.0.1.1"), (2, "2001:db8:2::1")] {
        while !common::sh("ip", &["netns", "exec", &lab.ns[ns], "ping", "-c", "1", "-W", "1", dst]).status.success() {
            assert!(Instant::now() < deadline, "ping {dst}; tern log:\n{}", log_of(&lab));
        }
    }
    let ready = lab.dir.join("host.ready");
    let host = py(&lab, 0, "host.py", PY_HOST, "", &["10", HOST_SECS, &ready.display().to_string()]);
    wait_file(&ready);
    let src = py(&lab, 2, "ext.py", PY_EXT_SOURCE, "", &[EXT_KEY_IN]);
    let out = src.wait_with_output().expect("source");
    assert!(out.status.success(), "scapy: {}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<String> = json_lines(host).iter().filter_map(|r| r["udp"].as_str().map(String::from)).collect();
    for k in 0..2 {
        for chain in ["hbh", "rt", "dst", "frag", "all"] {
            let want = format!("x6-{chain}-{k}");
            assert!(got.contains(&want), "{driver}: {want} not on host1 (got {got:?})\ntern log:\n{}", log_of(&lab));
        }
        assert_eq!(sa_counter(&lab, 10 + k, "packets"), 5, "{driver}: SA {}", 10 + k);
    }
    assert_eq!(counter(&lab, "esp-decrypt/decrypted"), 10, "{driver}");
    if driver == "xdp" {
        assert!(counter(&lab, "xdp-lane/punt-ipsec") >= 10, "xdp-lane/punt-ipsec");
    }
    if linux {
        let n = counter(&lab, "xdp-steer/ipsec-to-tern");
        assert!(n >= 10, "xdp-steer/ipsec-to-tern: {n}");
    }
}

#[test]
fn esp_behind_ipv6_extension_headers_over_af_packet() {
    ext_headers("afpacket", false, "p");
}

#[test]
fn esp_behind_ipv6_extension_headers_over_the_xdp_lane() {
    ext_headers("xdp", false, "x");
}

#[test]
fn esp_behind_ipv6_extension_headers_in_linux_mode_over_af_xdp() {
    ext_headers("afxdp", true, "l");
}

// ------------------------------------------ fragments

/// Host2: for each SA (IPv4 plain ESP and in UDP 4500, IPv6 the same),
/// three packets for host1 encrypted by scapy, each ESP packet then cut by
/// scapy into fragments of at most 600 bytes (`fragment`, `fragment6`),
/// sent in order, reversed, and in order again, through a raw socket.
/// scapy's NAT-T header carries UDP length 8 (Linux trims the datagram
/// to it: an empty payload) and checksum 0, which IPv6 forbids (RFC 8200
/// 8.1; Linux counts `Udp6InCsumErrors`): both are computed over the whole
/// datagram before `fragment`/`fragment6` cut it.
const PY_FRAG_SOURCE: &str = r#"
import socket, time
from scapy.layers.ipsec import SecurityAssociation, ESP
from scapy.all import IP, IPv6, UDP, Raw, IPv6ExtHdrFragment, fragment, fragment6
key = bytes.fromhex(sys.argv[1][2:])
raw4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
raw6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
for k, (v6, udp) in enumerate(((False, False), (False, True), (True, False), (True, True))):
    outer = IPv6(src='2001:db8:2::2', dst='2001:db8:2::1') if v6 else IP(src='10.0.2.2', dst='10.0.2.1')
    a = SecurityAssociation(ESP, spi=0x3001 + k, crypt_algo='AES-GCM', crypt_key=key, tunnel_header=outer,
        nat_t_header=UDP(sport=4500, dport=4500) if udp else None)
    for n in range(3):
        inner = IP(src='10.9.%d.5' % (50 + k), dst='10.0.1.2') / UDP(sport=7000, dport=5000) / \
            Raw(b'fr-%d-%d-' % (k, n) + b'.' * 1100)
        p = a.encrypt(inner, seq_num=n + 1)
        if v6:
            p = IPv6(bytes(p))
            upper, body = p.nh, p.payload
            p.remove_payload()
            p.nh, p.plen = 44, None
            if udp:
                body[UDP].len, body[UDP].chksum = None, None
            p = p / IPv6ExtHdrFragment(nh=upper, id=0x1000 + 10 * k + n) / body
            frags = fragment6(p, 600)
            dst = ('2001:db8:2::1', 0)
            raw = raw6
        else:
            b = bytearray(bytes(p))
            if udp:
                # Parsed with length 8, the ESP would be the UDP's padding.
                ihl = (b[0] & 15) * 4
                b[ihl + 4:ihl + 6] = (len(b) - ihl).to_bytes(2, 'big')
            p = IP(bytes(b))
            p.id = 0x1000 + 10 * k + n
            if udp:
                p[UDP].chksum = None
            frags = fragment(p, 576)
            dst = ('10.0.2.1', 0)
            raw = raw4
        assert len(frags) >= 2, len(frags)
        if n == 1:
            frags = frags[::-1]
        for f in frags:
            raw.sendto(bytes(f), dst)
        time.sleep(0.002)
"#;

/// Tunnels 0-1 over IPv4 to 10.0.2.2 and 2-3 over IPv6 to 2001:db8:2::2
/// (plain ESP, then ESP in UDP 4500), inbound SPIs 0x3001-0x3004.
fn frag_config(lab: &Lab, driver: &str, linux: bool) -> String {
    let mut c = ext_config(lab, driver, linux);
    // ext_config's two IPv6 tunnels become 2-3: drop them and write all four.
    c.truncate(c.find("\n[[ipsec_sa]]").expect("sa"));
    for (k, udp) in [(0u32, false), (1, true), (2, false), (3, true)] {
        for (id, spi, key) in [(10 + k, 0x3001 + k, EXT_KEY_IN), (20 + k, 0x4001 + k, EXT_KEY_OUT)] {
            c += &format!(
                "\n[[ipsec_sa]]\nid = {id}\nspi = {spi}\ncrypto = \"aes-128-gcm\"\nkey = \"{key}\"\nudp_encap = {udp}\n"
            );
        }
        let (local, remote) = if k < 2 { ("10.0.2.1", "10.0.2.2") } else { ("2001:db8:2::1", "2001:db8:2::2") };
        c += &format!(
            "\n[[tunnel]]\nname = \"ipsfr{k}\"\ntype = \"ipsec\"\nlocal = \"{local}\"\nremote = \"{remote}\"\nsa_out = {}\nsa_in = [{}]\naddresses = [\"172.17.{k}.1/30\"]\n\n[[route]]\nprefix = \"10.9.{}.0/24\"\ninterface = \"ipsfr{k}\"\n",
            20 + k,
            10 + k,
            50 + k
        );
    }
    c
}

/// ESP and ESP in UDP 4500, over IPv4 and IPv6, that scapy encrypted and
/// then cut into fragments (in order and reversed), sent through the veth
/// to tern's address: tern reassembles (`ip4-reassembly`,
/// `ip6-reassembly`) and decrypts every one, and the inner packets reach
/// host1; on the lane `driver`. In Linux mode over AF_XDP the steering
/// program sends every fragment of ESP to tern, and ESP in UDP's
/// fragments to Linux, whose reassembled datagram tern's UDP 4500 socket
/// hands to the engine (`esp-from-kernel`); over AF_PACKET tern
/// reassembles UDP fragments itself and the kernel's copy is dropped.
fn fragments(driver: &str, linux: bool, tag: &str) {
    fragments_with(driver, linux, tag, 1);
}

/// [`fragments`] with `workers` workers: with two, each datagram has an
/// owner worker, and the fragments another worker receives are handed to
/// it (`handed-off`); the `[reassembly]` section given is in force
/// (`tern status`).
fn fragments_with(driver: &str, linux: bool, tag: &str, workers: u16) {
    fragments_ike(driver, linux, tag, workers, false);
}

/// An `[[ike]]` peer on 10.0.2.1 that never starts (its own tunnel): the
/// IKE service binds UDP 500 and 4500 of that address in Linux mode.
const IDLE_IKE_PEER: &str = r#"
[[tunnel]]
name = "ikefr"
type = "ipsec"
local = "10.0.2.1"
remote = "10.0.2.99"
addresses = ["172.18.0.1/30"]

[[ike]]
name = "idle"
local = "10.0.2.1"
remote = "10.0.2.99"
tunnel = "ikefr"
start = false
auth = "psk"
psk = "an idle peer's psk 0123456789"
proposals = ["aes128-sha256-x25519"]
esp_proposals = ["aes128gcm16"]
"#;

/// [`fragments_with`], with [`IDLE_IKE_PEER`] when `ike`: IPv4's ESP in
/// UDP then reaches the IKE service's socket on 10.0.2.1:4500 (IPv6's the
/// wildcard socket), which hands it to the engine all the same.
fn fragments_ike(driver: &str, linux: bool, tag: &str, workers: u16, ike: bool) {
    if let Some(why) = common::lab_missing().or_else(scapy_missing) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("fragesp{}{tag}", std::process::id()));
    let r = lab.ns[1].clone();
    must("ip", &["-n", &r, "link", "set", "lan0", "up"]);
    must("ip", &["-n", &r, "link", "set", "wan0", "up"]);
    let path = lab.dir.join("tern.toml");
    let mut config = frag_config(&lab, driver, linux);
    if workers > 1 {
        config = format!(
            "[dataplane]\nworkers = {workers}\n\n[reassembly]\nmax_datagrams = 512\ntimeout_ms = 3000\n\n{config}"
        );
    }
    if ike {
        config += IDLE_IKE_PEER;
    }
    std::fs::write(&path, config).expect("config");
    run_tern(&mut lab, &path);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (ns, dst) in [(0, "10.0.1.1"), (2, "10.0.2.1"), (2, "2001:db8:2::1")] {
        while !common::sh("ip", &["netns", "exec", &lab.ns[ns], "ping", "-c", "1", "-W", "1", dst]).status.success() {
            assert!(Instant::now() < deadline, "ping {dst}; tern log:\n{}", log_of(&lab));
        }
    }
    let ready = lab.dir.join("host.ready");
    let host = py(&lab, 0, "host.py", PY_HOST, "", &["12", HOST_SECS, &ready.display().to_string()]);
    wait_file(&ready);
    let src = py(&lab, 2, "frag.py", PY_FRAG_SOURCE, "", &[EXT_KEY_IN]);
    let out = src.wait_with_output().expect("source");
    assert!(out.status.success(), "scapy: {}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<String> = json_lines(host)
        .iter()
        .filter_map(|r| r["udp"].as_str().map(|u| u.trim_end_matches('.').to_string()))
        .collect();
    for k in 0..4u32 {
        for n in 0..3 {
            let want = format!("fr-{k}-{n}-");
            assert!(got.contains(&want), "{driver}: {want} not on host1 (got {got:?})\ntern log:\n{}", log_of(&lab));
        }
        assert_eq!(sa_counter(&lab, 10 + k as usize, "packets"), 3, "{driver}: SA {}", 10 + k);
    }
    assert_eq!(counter(&lab, "esp-decrypt/decrypted"), 12, "{driver}");
    // Over AF_XDP in Linux mode the kernel reassembled ESP in UDP (six
    // datagrams) and tern's socket handed each to the engine once.
    let from_kernel = counter(&lab, "esp-from-kernel/from-kernel");
    let by_kernel = if linux && driver == "afxdp" { 6 } else { 0 };
    assert_eq!(from_kernel, by_kernel, "{driver}: esp-from-kernel/from-kernel");
    let datagrams = counter(&lab, "ip4-reassembly/datagrams") + counter(&lab, "ip6-reassembly/datagrams");
    assert_eq!(datagrams, 12 - by_kernel, "{driver}: datagrams reassembled by tern");
    for node in ["ip4-reassembly", "ip6-reassembly"] {
        for drop in ["timeout", "overlap", "evicted", "too-big-for-buffer", "bad-fragment"] {
            assert_eq!(counter(&lab, &format!("{node}/{drop}")), 0, "{driver}: {node}/{drop}");
        }
    }
    for drop in ["too-big-for-buffer", "bad-packet"] {
        assert_eq!(counter(&lab, &format!("esp-from-kernel/{drop}")), 0, "{driver}: esp-from-kernel/{drop}");
    }
    if driver == "xdp" {
        assert!(counter(&lab, "xdp-lane/punt-ipsec") + counter(&lab, "xdp-lane/punt-local") >= 24, "xdp-lane punts");
    }
    if linux {
        // tern's UDP 4500 sockets: the wildcards, and with `[[ike]]` the
        // IKE service's on its address (which the kernel prefers).
        let ss = String::from_utf8_lossy(&common::sh("ip", &["netns", "exec", &r, "ss", "-Huln"]).stdout).into_owned();
        assert!(ss.contains("0.0.0.0:4500") && ss.contains("[::]:4500"), "wildcard UDP 4500 sockets: {ss}");
        assert_eq!(ike, ss.contains("10.0.2.1:4500"), "the IKE service's socket: {ss}");
        let snmp = |file: &str, key: &str| kernel_counter(&r, file, key);
        let (reasm4, reasm6) = (snmp("snmp", "Ip:ReasmOKs"), snmp("snmp6", "Ip6ReasmOKs"));
        let (noports4, noports6) = (snmp("snmp", "Udp:NoPorts"), snmp("snmp6", "Udp6NoPorts"));
        let csum6 = snmp("snmp6", "Udp6InCsumErrors");
        eprintln!(
            "{driver} linux mode, ESP in UDP fragments: kernel ReasmOKs {reasm4}+{reasm6}, UDP NoPorts {noports4}+{noports6}, Udp6InCsumErrors {csum6}"
        );
        // The kernel put ESP in UDP back together too (its copy, over
        // AF_PACKET) and found tern's socket: no port unreachable.
        assert!(reasm4 >= 3 && reasm6 >= 3, "the kernel reassembled ESP in UDP: {reasm4} {reasm6}");
        assert_eq!((noports4, noports6, csum6), (0, 0, 0), "{driver}: the kernel's UDP found tern's socket");
        if driver == "afxdp" {
            // Plain ESP's fragments were sent to tern (the six datagrams'),
            // ESP in UDP's passed to Linux as the router's own traffic.
            let f = counter(&lab, "xdp-steer/ipsec-to-tern");
            assert!(f >= 12, "xdp-steer/ipsec-to-tern: {f}");
            assert!(counter(&lab, "xdp-steer/pass-local") >= 12, "xdp-steer/pass-local");
        }
    }
    if workers > 1 {
        // A datagram is owned by the worker that received it with odds of
        // one in two: 12 of them all at home, one in 4,096.
        let handed = counter(&lab, "ip4-reassembly/handed-off") + counter(&lab, "ip6-reassembly/handed-off");
        assert!(handed > 0, "{driver}: no fragment handed off");
        for node in ["ip4-reassembly", "ip6-reassembly"] {
            assert_eq!(counter(&lab, &format!("{node}/handoff-full")), 0, "{driver}: {node}/handoff-full");
        }
        let status = String::from_utf8_lossy(&cli(&lab, &["status"]).stdout).into_owned();
        assert!(
            status.contains("reassembly  512 datagrams a worker, 64 a source, 16384 bytes, 64 fragments, 3000 ms"),
            "{status}"
        );
    }
}

#[test]
fn fragmented_esp_over_af_packet() {
    fragments("afpacket", false, "p");
}

#[test]
fn fragmented_esp_over_the_xdp_lane() {
    fragments("xdp", false, "x");
}

/// A counter of the kernel's `/proc/net/FILE` in namespace `ns`: `key` is
/// "Group:Name" for `snmp`'s two-line tables, the name for `snmp6`.
fn kernel_counter(ns: &str, file: &str, key: &str) -> u64 {
    let out = common::sh("ip", &["netns", "exec", ns, "cat", &format!("/proc/net/{file}")]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if let Some((group, name)) = key.split_once(':') {
        let rows: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{group}:")))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let [names, values] = rows.as_slice() else { return 0 };
        names.iter().position(|n| *n == name).and_then(|i| values.get(i)).and_then(|v| v.parse().ok()).unwrap_or(0)
    } else {
        text.lines()
            .filter_map(|l| l.split_once(char::is_whitespace))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// Two workers over AF_PACKET (fanout by hash).
#[test]
fn fragmented_esp_with_two_workers_over_af_packet() {
    fragments_with("afpacket", false, "w", 2);
}

#[test]
fn fragmented_esp_in_linux_mode_over_af_xdp() {
    fragments("afxdp", true, "l");
}

/// Linux mode over AF_PACKET: the kernel sees every frame beside tern, so
/// tern reassembles UDP fragments itself and its UDP 4500 socket drops
/// the kernel's copy.
#[test]
fn fragmented_esp_in_linux_mode_over_af_packet() {
    fragments("afpacket", true, "q");
}

/// Linux mode over AF_XDP with `[[ike]]` on 10.0.2.1: the IKE service's
/// socket takes IPv4's reassembled ESP in UDP and hands it to the engine.
#[test]
fn fragmented_esp_in_linux_mode_over_af_xdp_with_ike() {
    fragments_ike("afxdp", true, "i", 1, true);
}
