//! ESP in UDP on an SA's own ports instead of 4500 (issue 39): the real
//! `tern run` with two tunnels to host2 whose SAs say `udp_encap = true`,
//! `udp_src_port = 4600` (tern's port), `udp_dst_port = 4601` (the
//! peer's), one over IPv4, one over IPv6; scapy (`/usr/bin/python3`,
//! `SecurityAssociation` with `nat_t_header=UDP(sport=4601, dport=4600)`)
//! plays the remote gateway.
//!
//! host1 (10.0.1.2) eth0 -- lan0 [tern 10.0.2.1, 2001:db8:2::1] wan0 -- eth0 host2 (scapy)
//!
//! scapy encrypts packets for host1 to UDP 4600 (on IPv4 one of them cut
//! into fragments): tern decrypts each and host1 receives it; the non-ESP
//! marker on 4600 is counted as `esp-decrypt/non-esp-marker` (no IKE
//! there); UDP to 4700, which no SA uses, stays ordinary local UDP. What
//! host1 sends into the tunnels leaves tern from UDP 4600 to 4601 (host2
//! reads the ports off the wire and scapy decrypts it). On the userspace
//! lane (AF_PACKET), the XDP lane, and in Linux mode over AF_XDP and the
//! XDP lane, where tern's wildcard sockets also bind UDP 4600.
//!
//! Needs root, iproute2, ping, ethtool and scapy; says why and passes
//! without.

use std::process::Child;
use std::time::{Duration, Instant};

mod common;
use common::{Lab, cli, counter, json_lines, log_of, must, python_in, run_tern, sa_counter, scapy_missing, wait_file};

const KEY_IN: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";
const KEY_OUT: &str = "0x1112131415161718191a1b1c1d1e1f2021222324";

fn config(lab: &Lab, driver: &str, linux: bool) -> String {
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
    for k in 0..2u32 {
        for (id, spi, key) in [(10 + k, 0x3101 + k, KEY_IN), (20 + k, 0x4101 + k, KEY_OUT)] {
            c += &format!(
                "\n[[ipsec_sa]]\nid = {id}\nspi = {spi}\ncrypto = \"aes-128-gcm\"\nkey = \"{key}\"\nudp_encap = true\nudp_src_port = 4600\nudp_dst_port = 4601\n"
            );
        }
        let (local, remote) = if k == 0 { ("10.0.2.1", "10.0.2.2") } else { ("2001:db8:2::1", "2001:db8:2::2") };
        c += &format!(
            "\n[[tunnel]]\nname = \"ipsport{k}\"\ntype = \"ipsec\"\nlocal = \"{local}\"\nremote = \"{remote}\"\nsa_out = {}\nsa_in = [{}]\naddresses = [\"172.17.{k}.1/30\"]\n\n[[route]]\nprefix = \"10.9.{}.0/24\"\ninterface = \"ipsport{k}\"\n",
            20 + k,
            10 + k,
            60 + k
        );
    }
    c
}

const PY_COMMON: &str = r#"
import sys, json, socket, struct, time
from scapy.layers.ipsec import SecurityAssociation, ESP
from scapy.all import IP, IPv6, UDP, Raw, fragment
KEY_IN, KEY_OUT = bytes.fromhex(sys.argv[1][2:]), bytes.fromhex(sys.argv[2][2:])
def outer(k, out):
    a, b = ('10.0.2.1', '10.0.2.2') if k == 0 else ('2001:db8:2::1', '2001:db8:2::2')
    if not out:
        a, b = b, a
    return IP(src=a, dst=b) if k == 0 else IPv6(src=a, dst=b)
def sa(k, out):
    if out:  # tern's outbound SA: from its 4600 to the peer's 4601
        return SecurityAssociation(ESP, spi=0x4101 + k, crypt_algo='AES-GCM', crypt_key=KEY_OUT,
            tunnel_header=outer(k, True), nat_t_header=UDP(sport=4600, dport=4601))
    return SecurityAssociation(ESP, spi=0x3101 + k, crypt_algo='AES-GCM', crypt_key=KEY_IN,
        tunnel_header=outer(k, False), nat_t_header=UDP(sport=4601, dport=4600))
"#;

/// Host2: tern's inbound SAs encrypted by scapy, to UDP 4600: two packets
/// a tunnel, one more over IPv4 cut into fragments; then the non-ESP
/// marker to 4600 and UDP to 4700 (no SA's port). scapy's NAT-T header
/// says UDP length 8 and checksum 0: both are set right (IPv6 forbids a
/// zero checksum, and the kernel trims a datagram to its UDP length).
const PY_SOURCE: &str = r#"
raw4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
raw6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
def fixed(p, v6):
    b = bytearray(bytes(p))
    off = 40 if v6 else (b[0] & 15) * 4
    b[off + 4:off + 6] = (len(b) - off).to_bytes(2, 'big')
    b[off + 6:off + 8] = b'\0\0'
    q = IPv6(bytes(b)) if v6 else IP(bytes(b))
    q[UDP].chksum = None
    return q
def send(p, v6):
    if v6:
        raw6.sendto(bytes(p), ('2001:db8:2::1', 0))
    else:
        raw4.sendto(bytes(p), ('10.0.2.1', 0))
def inner(k, tag, pad=b''):
    return IP(src='10.9.%d.5' % (60 + k), dst='10.0.1.2') / UDP(sport=7000, dport=5000) / Raw(b'pt-%d-%s' % (k, tag) + pad)
for k in (0, 1):
    a = sa(k, False)
    for n in (1, 2):
        send(fixed(a.encrypt(inner(k, b'%d' % n), seq_num=n), k == 1), k == 1)
        time.sleep(0.002)
big = fixed(sa(0, False).encrypt(inner(0, b'big', b'.' * 1100), seq_num=3), False)
big.id = 0x4242
for f in fragment(big, 576):
    send(f, False)
time.sleep(0.01)
send(IP(src='10.0.2.2', dst='10.0.2.1') / UDP(sport=4601, dport=4600) / Raw(b'\0\0\0\0not-ike-here'), False)
send(IP(src='10.0.2.2', dst='10.0.2.1') / UDP(sport=4601, dport=4700) / Raw(b'\x00\x00\x77\x77\x00\x00\x00\x01plain'), False)
"#;

/// Host2: what tern sends from 10.0.2.1 / 2001:db8:2::1 in UDP, for
/// `want` frames (or `secs`): its ports, SPI and what scapy decrypts.
const PY_SINK: &str = r#"
want, secs, ready = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
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
    et, ip = struct.unpack('!H', f[12:14])[0], f[14:]
    if et == 0x0800 and ip[9] == 17 and ip[12:16] == socket.inet_aton('10.0.2.1'):
        k, hdr, l4 = 0, ip[:20], ip[(ip[0] & 15) * 4:struct.unpack('!H', ip[2:4])[0]]
    elif et == 0x86dd and ip[6] == 17 and ip[8:24] == socket.inet_pton(socket.AF_INET6, '2001:db8:2::1'):
        k, hdr, l4 = 1, ip[:40], ip[40:40 + struct.unpack('!H', ip[4:6])[0]]
    else:
        continue
    sport, dport = struct.unpack('!HH', l4[:4])
    if sport == 53 or dport == 53:
        continue
    spi, seq = struct.unpack('!II', l4[8:16])
    r = dict(k=k, sport=sport, dport=dport, spi=spi, seq=seq)
    try:
        q = outer(k, True) / UDP(sport=sport, dport=dport) / ESP(l4[8:])
        r['payload'] = bytes(sa(k, True).decrypt(q)[Raw].load).decode()
    except Exception as e:
        r['error'] = repr(e)
    got.append(r)
for r in got:
    print(json.dumps(r))
"#;

/// Host1: UDP port 5000 for `want` datagrams (or `secs`), one JSON line
/// each.
const PY_HOST: &str = r#"
import sys, socket, json, time, select
secs, ready, want = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 5000))
open(ready, 'w').close()
end, n = time.time() + secs, 0
while time.time() < end and n < want:
    r, _, _ = select.select([u], [], [], 0.1)
    if r:
        d, a = u.recvfrom(65535)
        print(json.dumps(dict(udp=d.decode(errors='replace'), src=a[0])), flush=True)
        n += 1
"#;

fn py(lab: &Lab, ns: usize, name: &str, body: &str, args: &[&str]) -> Child {
    let path = lab.dir.join(name);
    let common = if name == "host.py" { "" } else { PY_COMMON };
    std::fs::write(&path, format!("{common}{body}")).expect("script");
    python_in(lab, ns, &path, args)
}

fn own_ports(driver: &str, linux: bool, tag: &str) {
    if let Some(why) = common::lab_missing().or_else(scapy_missing) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("espport{}{tag}", std::process::id()));
    let r = lab.ns[1].clone();
    must("ip", &["-n", &r, "link", "set", "lan0", "up"]);
    must("ip", &["-n", &r, "link", "set", "wan0", "up"]);
    let path = lab.dir.join("tern.toml");
    std::fs::write(&path, config(&lab, driver, linux)).expect("config");
    run_tern(&mut lab, &path);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (ns, dst) in [(0, "10.0.1.1"), (2, "10.0.2.1"), (2, "2001:db8:2::1")] {
        while !common::sh("ip", &["netns", "exec", &lab.ns[ns], "ping", "-c", "1", "-W", "1", dst]).status.success() {
            assert!(Instant::now() < deadline, "ping {dst}; tern log:\n{}", log_of(&lab));
        }
    }
    if linux {
        // The SAs' port is bound beside 4500 (the wildcards), once the
        // control loop saw the SA table.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ss =
                String::from_utf8_lossy(&common::sh("ip", &["netns", "exec", &r, "ss", "-Huln"]).stdout).into_owned();
            if ss.contains("0.0.0.0:4600") && ss.contains("[::]:4600") && ss.contains("0.0.0.0:4500") {
                break;
            }
            assert!(Instant::now() < deadline, "{driver}: wildcard UDP 4600 sockets: {ss}\n{}", log_of(&lab));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let trace = driver == "afpacket" && !linux;
    if trace {
        assert!(cli(&lab, &["trace", "start", "32"]).status.success());
    }
    let ready = lab.dir.join("host.ready");
    let host = py(&lab, 0, "host.py", PY_HOST, &["60", &ready.display().to_string(), "5"]);
    wait_file(&ready);
    let sink_ready = lab.dir.join("sink.ready");
    let sink = py(&lab, 2, "sink.py", PY_SINK, &[KEY_IN, KEY_OUT, "2", "60", &sink_ready.display().to_string()]);
    wait_file(&sink_ready);
    let src = py(&lab, 2, "source.py", PY_SOURCE, &[KEY_IN, KEY_OUT]);
    let out = src.wait_with_output().expect("source");
    assert!(out.status.success(), "scapy: {}", String::from_utf8_lossy(&out.stderr));
    // Into the tunnels from host1: encrypted from 4600 to 4601.
    let send = "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nfor k in (0, 1):\n    s.sendto(b'out-%d' % k, ('10.9.%d.5' % (60 + k), 5000))\n";
    must("ip", &["netns", "exec", &lab.ns[0], "/usr/bin/python3", "-c", send]);
    let sent = json_lines(sink);
    let got: Vec<String> = json_lines(host).iter().filter_map(|r| r["udp"].as_str().map(String::from)).collect();
    let log = log_of(&lab);
    for want in ["pt-0-1", "pt-0-2", "pt-1-1", "pt-1-2"] {
        assert!(got.iter().any(|g| g == want), "{driver}: {want} not on host1 (got {got:?})\ntern log:\n{log}");
    }
    assert!(got.iter().any(|g| g.starts_with("pt-0-big.")), "{driver}: the fragmented one (got {got:?})\n{log}");
    assert_eq!((sa_counter(&lab, 10, "packets"), sa_counter(&lab, 11, "packets")), (3, 2), "{driver}");
    assert_eq!(sent.len(), 2, "{driver}: what tern sent: {sent:?}");
    for k in 0..2u64 {
        let s = sent.iter().find(|s| s["k"].as_u64() == Some(k)).unwrap_or_else(|| panic!("{sent:?}"));
        assert_eq!((s["sport"].as_u64(), s["dport"].as_u64()), (Some(4600), Some(4601)), "{driver}: {s}");
        assert_eq!(s["spi"].as_u64(), Some(0x4101 + k), "{s}");
        assert_eq!(s["payload"].as_str(), Some(format!("out-{k}").as_str()), "{driver}: scapy decrypts it: {s}");
    }
    // The marker on 4600: one counter; UDP to 4700 never reached
    // esp-decrypt (its bytes would read as an unknown SPI).
    assert_eq!(counter(&lab, "esp-decrypt/non-esp-marker"), 1, "{driver}");
    assert_eq!(counter(&lab, "esp-decrypt/unknown-spi"), 0, "{driver}");
    assert_eq!(counter(&lab, "esp-decrypt/decrypted"), 5, "{driver}");
    if !linux {
        assert_eq!(counter(&lab, "ip4-local/udp-port-unreachable"), 1, "{driver}: UDP 4700 is local UDP");
    }
    if driver == "xdp" {
        let punted = counter(&lab, "xdp-lane/punt-ipsec");
        assert!(punted >= 5, "{driver}: xdp-lane/punt-ipsec {punted}");
    }
    if driver == "afxdp" && linux {
        let f = counter(&lab, "xdp-steer/ipsec-to-tern");
        assert!(f >= 5, "xdp-steer/ipsec-to-tern: {f}");
    }
    if linux && driver != "afpacket" {
        // The fragmented datagram: reassembled by Linux, read by tern's
        // wildcard socket on 4600 and handed to the engine.
        assert_eq!(counter(&lab, "esp-from-kernel/from-kernel"), 1, "{driver}");
    }
    if trace {
        let t = String::from_utf8_lossy(&cli(&lab, &["trace", "show"]).stdout).into_owned();
        assert!(t.contains("udp 4601 -> 4600"), "the trace names the ports: {t}");
    }
}

#[test]
fn esp_in_udp_on_own_ports_over_af_packet() {
    own_ports("afpacket", false, "p");
}

#[test]
fn esp_in_udp_on_own_ports_over_the_xdp_lane() {
    own_ports("xdp", false, "x");
}

#[test]
fn esp_in_udp_on_own_ports_in_linux_mode_over_af_xdp() {
    own_ports("afxdp", true, "l");
}

#[test]
fn esp_in_udp_on_own_ports_in_linux_mode_over_the_xdp_lane() {
    own_ports("xdp", true, "m");
}

/// Host2: datagrams of tern's inbound SA 10 to UDP 4600, each cut into
/// fragments (so that Linux reassembles it and tern's wildcard socket on
/// 4600 reads it), `gap` seconds apart, until the stop file appears; the
/// ready file once the first is out; then how many, as JSON.
const PY_STREAM: &str = r#"
gap, ready, stop = float(sys.argv[3]), sys.argv[4], sys.argv[5]
import os
raw4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
a = sa(0, False)
i = 0
while not os.path.exists(stop) and i < 60000:
    i += 1
    inner = IP(src='10.9.60.5', dst='10.0.1.2') / UDP(sport=7000, dport=5000) / Raw(b'st-%d.' % i + b'.' * 900)
    p = a.encrypt(inner, seq_num=i)
    b = bytearray(bytes(p))
    off = (b[0] & 15) * 4
    b[off + 4:off + 6] = (len(b) - off).to_bytes(2, 'big')
    b[off + 6:off + 8] = b'\0\0'
    q = IP(bytes(b))
    q[UDP].chksum = None
    q.id = i & 0xffff
    for f in fragment(q, 400):
        raw4.sendto(bytes(f), ('10.0.2.1', 0))
    if i == 1:
        open(ready, 'w').close()
    time.sleep(gap)
print(json.dumps(dict(sent=i)))
"#;

/// The wildcard UDP sockets `ss` lists in tern's namespace.
fn udp_listening(lab: &Lab) -> String {
    String::from_utf8_lossy(&common::sh("ip", &["netns", "exec", &lab.ns[1], "ss", "-Huln"]).stdout).into_owned()
}

/// Waits until UDP `port`'s IPv4 wildcard socket is (or is not) bound.
fn wait_bound(lab: &Lab, port: u16, bound: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = format!("0.0.0.0:{port} ");
    loop {
        let ss = udp_listening(lab);
        if ss.contains(&want) == bound {
            return;
        }
        assert!(Instant::now() < deadline, "UDP {port} bound: want {bound}: {ss}\n{}", log_of(lab));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Linux mode (AF_XDP): while scapy keeps sending fragmented ESP in UDP to
/// port 4600 (which the kernel reassembles for tern's wildcard socket on
/// 4600), an SA on port 4700 comes, one on 4800 goes, and both again:
/// every datagram is decrypted, none lost while the port set changes
/// (4600's socket is never rebound).
#[test]
fn esp_in_udp_port_set_changes_lose_nothing_in_linux_mode() {
    if let Some(why) = common::lab_missing().or_else(scapy_missing) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("espchg{}", std::process::id()));
    let r = lab.ns[1].clone();
    must("ip", &["-n", &r, "link", "set", "lan0", "up"]);
    must("ip", &["-n", &r, "link", "set", "wan0", "up"]);
    let path = lab.dir.join("tern.toml");
    let sa4800 = |id: u32| {
        format!(
            "\n[[ipsec_sa]]\nid = {id}\nspi = {}\ncrypto = \"aes-128-gcm\"\nkey = \"{KEY_IN}\"\nudp_encap = true\nudp_src_port = 4800\nudp_dst_port = 4801\n",
            0x5000 + id
        )
    };
    std::fs::write(&path, config(&lab, "afxdp", true) + &sa4800(40)).expect("config");
    run_tern(&mut lab, &path);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (ns, dst) in [(0, "10.0.1.1"), (2, "10.0.2.1")] {
        while !common::sh("ip", &["netns", "exec", &lab.ns[ns], "ping", "-c", "1", "-W", "1", dst]).status.success() {
            assert!(Instant::now() < deadline, "ping {dst}; tern log:\n{}", log_of(&lab));
        }
    }
    wait_bound(&lab, 4600, true);
    wait_bound(&lab, 4800, true);
    let (ready, stop) = (lab.dir.join("stream.ready"), lab.dir.join("stream.stop"));
    let (r, st) = (ready.display().to_string(), stop.display().to_string());
    let stream = py(&lab, 2, "stream.py", PY_STREAM, &[KEY_IN, KEY_OUT, "0", &r, &st]);
    wait_file(&ready);
    let add = |id: u32, port: u16| {
        let (id, spi, port) = (id.to_string(), format!("{:#x}", 0x5000 + id), port.to_string());
        let words = [
            "ipsec",
            "sa",
            "add",
            "id",
            &id,
            "spi",
            &spi,
            "crypto",
            "aes-128-gcm",
            "key",
            KEY_IN,
            "udp_encap",
            "udp_src_port",
            &port,
            "udp_dst_port",
            "4801",
        ];
        let o = cli(&lab, &words);
        assert!(o.status.success(), "sa add {id}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let del = |id: u32| {
        let o = cli(&lab, &["ipsec", "sa", "del", &id.to_string()]);
        assert!(o.status.success(), "sa del {id}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let mut changes = 0;
    for _ in 0..2 {
        add(41, 4700);
        wait_bound(&lab, 4700, true);
        del(40);
        wait_bound(&lab, 4800, false);
        add(40, 4800);
        wait_bound(&lab, 4800, true);
        del(41);
        wait_bound(&lab, 4700, false);
        changes += 4;
    }
    std::fs::write(&stop, "").expect("stop file");
    let n = json_lines(stream).first().and_then(|v| v["sent"].as_u64()).expect("how many scapy sent");
    assert!(n > 1, "scapy sent {n}");
    // Every datagram: reassembled by Linux, read on 4600, decrypted.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sa_counter(&lab, 10, "packets") < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = log_of(&lab);
    assert_eq!(sa_counter(&lab, 10, "packets"), n, "{changes} port-set changes\n{log}");
    assert_eq!(counter(&lab, "esp-from-kernel/from-kernel"), n, "{log}");
    assert_eq!(counter(&lab, "esp-decrypt/decrypted"), n, "{log}");
    assert!(udp_listening(&lab).contains("0.0.0.0:4600 "), "4600 still bound");
    eprintln!("{n} datagrams across {changes} port-set changes, each decrypted");
}
