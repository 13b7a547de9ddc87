//! The codec's tests: round trips of every payload, known bytes, and
//! malformed input (truncated, lying lengths, random bytes).

#![allow(clippy::indexing_slicing)]

use super::payload_kind as pk;
use super::*;
use crate::config::{Identity, TrafficSelector};
use crate::proposal::Protocol;
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::IpAddr;
use x509_parser::prelude::FromDer;

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![any::<[u8; 4]>().prop_map(IpAddr::from), any::<[u8; 16]>().prop_map(IpAddr::from)]
}

fn identity() -> impl Strategy<Value = Identity> {
    prop_oneof![
        ip().prop_map(Identity::Ip),
        "[a-z0-9.-]{0,40}".prop_map(Identity::Fqdn),
        "[a-z0-9.]{1,10}@[a-z.]{1,20}".prop_map(Identity::Email),
        vec(any::<u8>(), 0..64).prop_map(Identity::Dn),
        vec(any::<u8>(), 0..32).prop_map(Identity::KeyId),
    ]
}

fn selector() -> impl Strategy<Value = TrafficSelector> {
    let addrs = prop_oneof![
        (any::<[u8; 4]>(), any::<[u8; 4]>()).prop_map(|(a, b)| (IpAddr::from(a), IpAddr::from(b))),
        (any::<[u8; 16]>(), any::<[u8; 16]>()).prop_map(|(a, b)| (IpAddr::from(a), IpAddr::from(b))),
    ];
    (addrs, any::<u8>(), any::<u16>(), any::<u16>()).prop_map(|((start, end), protocol, start_port, end_port)| {
        TrafficSelector { start, end, protocol, start_port, end_port }
    })
}

fn wire_proposal() -> impl Strategy<Value = WireProposal> {
    (
        any::<u8>(),
        prop_oneof![Just(Protocol::Ike), Just(Protocol::Esp)],
        vec(any::<u8>(), 0..9),
        vec((any::<u8>(), any::<u16>(), proptest::option::of(any::<u16>())), 0..10),
    )
        .prop_map(|(number, protocol, spi, transforms)| WireProposal { number, protocol, spi, transforms })
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

/// Every payload but the encrypted ones (which must be last).
fn payload() -> impl Strategy<Value = Payload> {
    let unknown_kind = prop_oneof![1u8..=32, 48u8..=52, 54u8..=255];
    prop_oneof![
        vec(wire_proposal(), 0..4).prop_map(Payload::Sa),
        (any::<u16>(), bytes(64)).prop_map(|(group, data)| Payload::Ke { group, data }),
        identity().prop_map(Payload::IdI),
        identity().prop_map(Payload::IdR),
        (any::<u8>(), bytes(64)).prop_map(|(encoding, data)| Payload::Cert { encoding, data }),
        (any::<u8>(), bytes(64)).prop_map(|(encoding, data)| Payload::CertReq { encoding, data }),
        (any::<u8>(), bytes(64)).prop_map(|(method, data)| Payload::Auth { method, data }),
        vec(any::<u8>(), 16..=256).prop_map(Payload::Nonce),
        (any::<u8>(), bytes(9), any::<u16>(), bytes(40)).prop_map(|(protocol, spi, kind, data)| Payload::Notify {
            protocol,
            spi,
            kind,
            data
        }),
        (any::<u8>(), vec(any::<u32>(), 0..5)).prop_map(|(protocol, spis)| Payload::Delete { protocol, spis }),
        bytes(40).prop_map(Payload::VendorId),
        vec(selector(), 0..4).prop_map(Payload::TsI),
        vec(selector(), 0..4).prop_map(Payload::TsR),
        (any::<u8>(), vec((0u16..0x8000, bytes(20)), 0..5)).prop_map(|(kind, attrs)| Payload::Cp {
            kind,
            attributes: attrs.into_iter().map(|(kind, value)| CpAttribute { kind, value }).collect()
        }),
        (unknown_kind, bytes(40)).prop_map(|(kind, data)| Payload::Unknown { kind, data }),
    ]
}

fn encrypted() -> impl Strategy<Value = Option<Payload>> {
    proptest::option::of(prop_oneof![
        (any::<u8>(), bytes(100)).prop_map(|(first, body)| Payload::Sk { first, body }),
        (any::<u8>(), 1u16..=20, 0u16..20, bytes(100)).prop_map(|(first, total, n, body)| Payload::Skf {
            first,
            number: n % total + 1,
            total,
            body
        }),
    ])
}

fn header() -> impl Strategy<Value = Header> {
    (any::<u64>(), any::<u64>(), 0x20u8..=0x2f, any::<u8>(), any::<u8>(), any::<u32>()).prop_map(
        |(spi_i, spi_r, version, exchange, flags, message_id)| Header {
            spi_i,
            spi_r,
            next_payload: 0,
            version,
            exchange,
            flags,
            message_id,
            length: 0,
        },
    )
}

fn message() -> impl Strategy<Value = Message> {
    (header(), vec(payload(), 0..6), encrypted()).prop_map(|(header, mut payloads, sk)| {
        payloads.extend(sk);
        Message { header, payloads }
    })
}

/// What fuzzing checks too: whatever decodes re-encodes to something that
/// decodes to the same payloads and is itself a fixed point.
fn assert_stable(data: &[u8]) {
    if let Ok(m) = Message::decode(data) {
        let again = m.encode();
        let m2 = Message::decode(&again).expect("a re-encoded message decodes");
        assert_eq!(m2.payloads, m.payloads);
        assert_eq!(Header { length: m.header.length, ..m2.header }, m.header);
        assert_eq!(m2.encode(), again);
    }
}

proptest! {
    #[test]
    fn message_round_trip(m in message()) {
        let data = m.encode();
        let d = Message::decode(&data).unwrap();
        let first = m.payloads.first().map_or(0, payload_type);
        prop_assert_eq!(d.header, Header { next_payload: first, length: data.len() as u32, ..m.header });
        prop_assert_eq!(&d.payloads, &m.payloads);
        prop_assert_eq!(d.encode(), data);
    }

    #[test]
    fn chain_round_trip(payloads in vec(payload(), 0..6)) {
        let (first, data) = encode_payloads(&payloads);
        prop_assert_eq!(first, payloads.first().map_or(0, payload_type));
        prop_assert_eq!(decode_payloads(first, &data).unwrap(), payloads);
    }

    #[test]
    fn every_prefix_is_an_error(m in message()) {
        let data = m.encode();
        for n in 0..data.len() {
            prop_assert!(Message::decode(&data[..n]).is_err());
        }
    }

    /// Random bytes behind a plausible header: no panic, and what decodes
    /// is stable.
    #[test]
    fn random_bytes(h in header(), first in prop_oneof![Just(33u8), 34u8..=53, any::<u8>()], body in bytes(300)) {
        let mut data = Vec::new();
        Header { next_payload: first, length: (HEADER_LEN + body.len()) as u32, ..h }.encode(&mut data);
        data.extend_from_slice(&body);
        assert_stable(&data);
        assert_stable(&body);
    }

    /// A valid message with bytes overwritten (lengths lie, counts lie,
    /// types change): no panic, and what decodes is stable.
    #[test]
    fn mutated(m in message(), edits in vec((any::<usize>(), any::<u8>()), 1..6)) {
        let mut data = m.encode();
        for (at, b) in edits {
            let n = data.len();
            data[at % n] = b;
        }
        assert_stable(&data);
        // The header's length made to agree, so the payloads are reached.
        let n = data.len() as u32;
        data[24..28].copy_from_slice(&n.to_be_bytes());
        assert_stable(&data);
    }

    #[test]
    fn sk_aad_is_the_message_prefix(h in header(), first in any::<u8>(), body in bytes(200)) {
        let m = Message { header: h, payloads: vec![Payload::Sk { first, body: body.clone() }] };
        let mut datagram = sk_aad(&h, first, body.len());
        datagram.extend_from_slice(&body);
        prop_assert_eq!(&datagram, &m.encode());
        prop_assert_eq!(Message::decode(&datagram).unwrap().payloads, m.payloads);
    }

    #[test]
    fn skf_aad_is_the_message_prefix(h in header(), first in any::<u8>(), total in 1u16..100, n in any::<u16>(), body in bytes(200)) {
        let number = n % total + 1;
        let m = Message { header: h, payloads: vec![Payload::Skf { first, number, total, body: body.clone() }] };
        let mut datagram = skf_aad(&h, first, number, total, body.len());
        datagram.extend_from_slice(&body);
        prop_assert_eq!(&datagram, &m.encode());
    }

    #[test]
    fn identity_display_parses_back(id in prop_oneof![
        ip().prop_map(Identity::Ip),
        "[a-z][a-z0-9-]{0,20}(\\.[a-z0-9-]{1,10}){0,3}".prop_map(Identity::Fqdn),
        "[a-z0-9.]{1,10}@[a-z.]{1,20}".prop_map(Identity::Email),
        vec(any::<u8>(), 1..32).prop_map(Identity::KeyId),
        ("[A-Za-z0-9 ]{1,12}", "[A-Za-zäöü0-9]{1,12}").prop_map(|(o, cn)| {
            Identity::parse(&format!("C=CH, O={}, CN={}", o.trim().replace(' ', "x") + "o", cn)).unwrap()
        }),
    ]) {
        prop_assume!(!matches!(&id, Identity::Fqdn(s) if s.starts_with("keyid") || s.parse::<IpAddr>().is_ok()));
        prop_assert_eq!(Identity::parse(&id.to_string()).unwrap(), id);
    }
}

#[test]
fn header_known_bytes() {
    let h = Header {
        spi_i: 0x0102_0304_0506_0708,
        spi_r: 0x1112_1314_1516_1718,
        next_payload: 46,
        version: 0x20,
        exchange: IKE_AUTH,
        flags: FLAG_INITIATOR,
        message_id: 1,
        length: 0x0150,
    };
    let mut out = Vec::new();
    h.encode(&mut out);
    let want = [
        1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 46, 0x20, 35, 0x08, 0, 0, 0, 1, 0, 0,
        0x01, 0x50,
    ];
    assert_eq!(out, want);
    assert_eq!(Header::decode(&want).unwrap(), h);
    assert_eq!(Header::decode(&want[..27]), Err(WireError::Truncated));
    assert!(h.is_initiator() && !h.is_response());
    assert_eq!(h.major_version(), 2);
}

/// An IKE_SA_INIT request written out field by field.
fn init_request() -> Vec<u8> {
    let mut d = vec![
        // Header: SPIi, SPIr = 0, next SA, version 2.0, IKE_SA_INIT, initiator, message ID 0, length.
        0x8a, 0x6f, 0x1c, 0x28, 0x34, 0x9d, 0x52, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 33, 0x20, 34, 0x08, 0, 0, 0, 0, 0, 0, 0,
        0,
    ];
    d.extend_from_slice(&[
        // SA: next KE, length 4 + 8 + 12 + 8 + 8 = 40.
        34, 0, 0, 40, //
        // Proposal 1 (last), length 36, IKE, no SPI, 3 transforms.
        0, 0, 0, 36, 1, 1, 0, 3, //
        // ENCR AES_GCM_16 with key length 256.
        3, 0, 0, 12, 1, 0, 0, 20, 0x80, 14, 1, 0, //
        // PRF HMAC_SHA2_256.
        3, 0, 0, 8, 2, 0, 0, 5, //
        // DH 31 (last transform).
        0, 0, 0, 8, 4, 0, 0, 31,
    ]);
    // KE: next Nonce, length 8 + 32, group 31.
    d.extend_from_slice(&[40, 0, 0, 40, 0, 31, 0, 0]);
    d.extend(0u8..32);
    // Nonce: next Notify, 4 + 16.
    d.extend_from_slice(&[41, 0, 0, 20]);
    d.extend(100u8..116);
    // Notify IKEV2_FRAGMENTATION_SUPPORTED (16430), no SPI: last payload.
    d.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0x40, 0x2e]);
    let len = d.len() as u32;
    d[24..28].copy_from_slice(&len.to_be_bytes());
    d
}

#[test]
fn init_request_known_bytes() {
    let data = init_request();
    let m = Message::decode(&data).unwrap();
    assert_eq!(m.header.spi_i, 0x8a6f_1c28_349d_5201);
    assert_eq!(m.header.spi_r, 0);
    assert_eq!(m.header.exchange, IKE_SA_INIT);
    assert_eq!(m.header.length as usize, data.len());
    assert_eq!(
        m.payloads,
        vec![
            Payload::Sa(vec![WireProposal {
                number: 1,
                protocol: Protocol::Ike,
                spi: vec![],
                transforms: vec![(1, 20, Some(256)), (2, 5, None), (4, 31, None)],
            }]),
            Payload::Ke { group: 31, data: (0u8..32).collect() },
            Payload::Nonce((100u8..116).collect()),
            Payload::Notify { protocol: 0, spi: vec![], kind: notify::IKEV2_FRAGMENTATION_SUPPORTED, data: vec![] },
        ]
    );
    assert_eq!(m.encode(), data);
}

#[test]
fn lying_lengths_are_errors() {
    let data = init_request();
    // The header's length one more / one less than the datagram.
    for delta in [1i64, -1] {
        let mut d = data.clone();
        let n = (d.len() as i64 + delta) as u32;
        d[24..28].copy_from_slice(&n.to_be_bytes());
        assert_eq!(Message::decode(&d), Err(WireError::Length(n)));
    }
    // The SA payload's length runs past the message.
    let mut d = data.clone();
    d[30..32].copy_from_slice(&0xfff0u16.to_be_bytes());
    assert_eq!(Message::decode(&d), Err(WireError::Payload(33, "length runs past the message")));
    // A payload length below its own header.
    let mut d = data.clone();
    d[30..32].copy_from_slice(&3u16.to_be_bytes());
    assert_eq!(Message::decode(&d), Err(WireError::Payload(33, "length below 4")));
    // The proposal's length longer than the SA payload.
    let mut d = data.clone();
    d[34..36].copy_from_slice(&37u16.to_be_bytes());
    assert!(matches!(Message::decode(&d), Err(WireError::Payload(33, _))));
    // The transform count says 4 where there are 3.
    let mut d = data.clone();
    d[39] = 4;
    assert_eq!(Message::decode(&d), Err(WireError::Payload(33, "transform count does not match the proposal")));
    // The last payload claims a successor that is not there.
    let mut d = data.clone();
    let notify = d.len() - 8;
    d[notify] = 43;
    assert_eq!(Message::decode(&d), Err(WireError::Truncated));
    // A nonce of 15 bytes.
    let nonce = Payload::Nonce(vec![0; 15]);
    let (first, chain) = encode_payloads(&[nonce]);
    assert_eq!(decode_payloads(first, &chain), Err(WireError::Payload(40, "nonce length outside 16..=256")));
    // Major version 3.
    let mut d = data.clone();
    d[17] = 0x30;
    assert_eq!(Message::decode(&d), Err(WireError::Version(3)));
}

#[test]
fn critical_unknown_payloads() {
    // Unknown type 60 after a vendor ID, not critical, then critical.
    let mut chain = vec![60, 0, 0, 6, 0xaa, 0xbb, 0, 0, 0, 5, 0xcc];
    assert_eq!(
        decode_payloads(pk::VENDOR_ID, &chain).unwrap(),
        vec![Payload::VendorId(vec![0xaa, 0xbb]), Payload::Unknown { kind: 60, data: vec![0xcc] }]
    );
    chain[6 + 1] = 0x80;
    assert_eq!(decode_payloads(pk::VENDOR_ID, &chain), Err(WireError::UnsupportedCritical(60)));
    // The critical bit on a known payload is ignored.
    chain[1] = 0x80;
    chain[7] = 0;
    assert!(decode_payloads(pk::VENDOR_ID, &chain).is_ok());
    // Trailing bytes after the last payload.
    chain.push(0);
    assert!(decode_payloads(pk::VENDOR_ID, &chain).is_err());
}

#[test]
fn encrypted_payload_must_be_last() {
    // SK then a vendor ID: the SK's length does not reach the end.
    let chain = [pk::NONCE, 0, 0, 6, 1, 2, 0, 0, 0, 5, 9];
    assert_eq!(decode_payloads(pk::SK, &chain), Err(WireError::Payload(pk::SK, "encrypted payload not last")));
    let chain = [pk::NONCE, 0, 0, 6, 1, 2];
    assert_eq!(decode_payloads(pk::SK, &chain).unwrap(), vec![Payload::Sk { first: pk::NONCE, body: vec![1, 2] }]);
    // SKF: fragment 0, and fragment 3 of 2, are refused.
    for (n, t) in [(0u16, 2u16), (3, 2)] {
        let mut chain = vec![0, 0, 0, 10];
        chain.extend_from_slice(&n.to_be_bytes());
        chain.extend_from_slice(&t.to_be_bytes());
        chain.extend_from_slice(&[7, 7]);
        assert!(matches!(decode_payloads(pk::SKF, &chain), Err(WireError::Payload(53, _))));
    }
    let chain = [0, 0, 0, 10, 0, 2, 0, 2, 7, 7];
    assert_eq!(
        decode_payloads(pk::SKF, &chain).unwrap(),
        vec![Payload::Skf { first: 0, number: 2, total: 2, body: vec![7, 7] }]
    );
}

#[test]
fn sa_skips_what_tern_cannot_honour() {
    let ah =
        WireProposal { number: 1, protocol: Protocol::Esp, spi: vec![1, 2, 3, 4], transforms: vec![(3, 12, None)] };
    let (first, mut chain) = encode_payloads(&[Payload::Sa(vec![ah.clone(), ah.clone()])]);
    // The first proposal's protocol becomes AH (2): left out.
    chain[4 + 5] = 2;
    assert_eq!(decode_payloads(first, &chain).unwrap(), vec![Payload::Sa(vec![ah.clone()])]);
    // A transform with an attribute other than the key length: left out.
    let mut sa = vec![0, 0, 0, 0];
    sa.extend_from_slice(&[0, 0, 0, 24, 1, 3, 4, 1, 1, 2, 3, 4]);
    sa.extend_from_slice(&[0, 0, 0, 12, 3, 0, 0, 12, 0x80, 15, 0, 1]);
    sa[3] = sa.len() as u8;
    assert_eq!(
        decode_payloads(pk::SA, &sa).unwrap(),
        vec![Payload::Sa(vec![WireProposal { transforms: vec![], ..ah }])]
    );
}

#[test]
fn traffic_selectors() {
    let ts = vec![
        TrafficSelector::any(false),
        TrafficSelector::any(true),
        TrafficSelector {
            start: "10.1.0.0".parse().unwrap(),
            end: "10.1.255.255".parse().unwrap(),
            protocol: 6,
            start_port: 443,
            end_port: 443,
        },
    ];
    let (first, chain) = encode_payloads(&[Payload::TsI(ts.clone())]);
    assert_eq!(first, pk::TSI);
    // Payload header, count 3, then the first selector: type 7, any protocol, length 16, ports 0-65535, 0.0.0.0-255.255.255.255.
    assert_eq!(&chain[..8], &[0, 0, 0, 4 + 4 + 16 + 40 + 16, 3, 0, 0, 0]);
    assert_eq!(&chain[8..24], &[7, 0, 0, 16, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(decode_payloads(first, &chain).unwrap(), vec![Payload::TsI(ts)]);
    // TS_FC_ADDR_RANGE (9): an error, not skipped.
    let chain = [0, 0, 0, 24, 1, 0, 0, 0, 9, 0, 0, 16, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(decode_payloads(pk::TSR, &chain), Err(WireError::Payload(pk::TSR, "unsupported traffic selector type")));
    // Type 7 with a length of 40.
    let mut chain = chain;
    chain[8] = 7;
    chain[11] = 40;
    assert!(decode_payloads(pk::TSR, &chain).is_err());
}

#[test]
fn id_bodies() {
    let cases: Vec<(Identity, Vec<u8>)> = vec![
        (Identity::Ip("192.0.2.1".parse().unwrap()), vec![1, 0, 0, 0, 192, 0, 2, 1]),
        (Identity::Ip("2001:db8::1".parse().unwrap()), {
            let mut v = vec![5, 0, 0, 0, 0x20, 0x01, 0x0d, 0xb8];
            v.extend_from_slice(&[0; 11]);
            v.push(1);
            v
        }),
        (Identity::Fqdn("moon".into()), vec![2, 0, 0, 0, b'm', b'o', b'o', b'n']),
        (Identity::Email("a@b".into()), vec![3, 0, 0, 0, b'a', b'@', b'b']),
        (Identity::Dn(vec![0x30, 0]), vec![9, 0, 0, 0, 0x30, 0]),
        (Identity::KeyId(vec![0xde, 0xad]), vec![11, 0, 0, 0, 0xde, 0xad]),
    ];
    for (id, body) in cases {
        assert_eq!(id_body(&id), body);
        let (first, chain) = encode_payloads(&[Payload::IdR(id.clone())]);
        assert_eq!(&chain[4..], &body[..]);
        assert_eq!(decode_payloads(first, &chain).unwrap(), vec![Payload::IdR(id)]);
    }
    // ID_IPV4_ADDR of 5 bytes, ID_IPV4_ADDR_SUBNET (4), FQDN not UTF-8.
    for body in [&[1u8, 0, 0, 0, 1, 2, 3, 4, 5][..], &[4, 0, 0, 0, 10, 0, 0, 0, 255, 0, 0, 0], &[2, 0, 0, 0, 0xff]] {
        let mut chain = vec![0, 0, 0, 4 + body.len() as u8];
        chain.extend_from_slice(body);
        assert!(matches!(decode_payloads(pk::IDI, &chain), Err(WireError::Payload(35, _))), "{body:?}");
    }
}

/// "C=CH, O=strongSwan, CN=moon" as strongSwan encodes it: PrintableStrings.
const MOON_DN: &[u8] = &[
    0x30, 0x31, //
    0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, b'C', b'H', //
    0x31, 0x13, 0x30, 0x11, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x13, 0x0a, b's', b't', b'r', b'o', b'n', b'g', b'S', b'w',
    b'a', b'n', //
    0x31, 0x0d, 0x30, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x03, 0x13, 0x04, b'm', b'o', b'o', b'n',
];

#[test]
fn identity_parse() {
    assert_eq!(Identity::parse("10.2.0.1").unwrap(), Identity::Ip("10.2.0.1".parse().unwrap()));
    assert_eq!(Identity::parse("fd00::1").unwrap(), Identity::Ip("fd00::1".parse().unwrap()));
    assert_eq!(Identity::parse("tern.example").unwrap(), Identity::Fqdn("tern.example".into()));
    assert_eq!(Identity::parse("@tern.example").unwrap(), Identity::Fqdn("tern.example".into()));
    assert_eq!(Identity::parse("ops@example.net").unwrap(), Identity::Email("ops@example.net".into()));
    assert_eq!(Identity::parse("keyid:0a0B").unwrap(), Identity::KeyId(vec![10, 11]));
    assert_eq!(Identity::parse("@#0a0b").unwrap(), Identity::KeyId(vec![10, 11]));
    assert!(Identity::parse("keyid:abc").unwrap_err().contains("hex"));
    assert!(Identity::parse("").is_err());
    assert!(Identity::parse("@").is_err());
    assert!(Identity::parse("%any").unwrap_err().contains("leave the identity out"));

    let moon = Identity::parse("C=CH, O=strongSwan, CN=moon").unwrap();
    assert_eq!(moon, Identity::Dn(MOON_DN.to_vec()));
    assert_eq!(moon.to_string(), "C=CH, O=strongSwan, CN=moon");
    assert_eq!(Identity::parse(" c = CH ,o=strongSwan,  cn=moon ").unwrap(), moon);
    assert_eq!(Identity::parse("/C=CH/O=strongSwan/CN=moon").unwrap(), moon);
    // x509-parser reads the same name.
    let (_, name) = x509_parser::x509::X509Name::from_der(MOON_DN).unwrap();
    assert_eq!(name.to_string(), "C=CH, O=strongSwan, CN=moon");

    // Not printable: UTF8String; emailAddress: IA5String; an escaped comma.
    let Identity::Dn(d) = Identity::parse("CN=Müller, E=m@x.ch, OU=a\\, b").unwrap() else { panic!() };
    assert_eq!(&d[2..9], &[0x31, 0x10, 0x30, 0x0e, 0x06, 0x03, 0x55]);
    assert_eq!(d[11], 0x0c, "CN Müller is a UTF8String");
    let id = Identity::Dn(d.clone());
    assert_eq!(id.to_string(), "CN=Müller, E=m@x.ch, OU=a, b");
    assert!(d.windows(2).any(|w| w == [0x16, 6]), "the email is an IA5String");

    let e = Identity::parse("C=CH, X=1").unwrap_err();
    assert!(e.contains("\"X\""), "{e}");
    assert!(Identity::parse("C=CH, CN=").unwrap_err().contains("no value"));
    assert!(Identity::parse("C=CH, moon").is_err());

    // A peer's control characters do not reach the logs.
    assert_eq!(Identity::Fqdn("a\nb\x1b[31m".into()).to_string(), "a?b?[31m");
    assert_eq!(Identity::Email("x@y\r".into()).to_string(), "x@y?");
    // Invalid DER still displays.
    assert_eq!(Identity::Dn(vec![0x30, 0x05, 1]).to_string(), "(invalid DN 300501)");
    // An attribute tern has no name for: its dotted OID.
    let mut odd = vec![0x30, 0x0c, 0x31, 0x0a, 0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x11, 0x13, 0x01, b'x'];
    assert_eq!(Identity::Dn(odd.clone()).to_string(), "2.5.4.17=x");
    odd[1] = 0x0d;
    assert!(Identity::Dn(odd).to_string().starts_with("(invalid DN"));
}

/// One exchange captured from strongSwan 5.9.8 (charon initiating to
/// charon, PSK, proposals `aes128gcm16-prfsha256-x25519,
/// aes256-sha256-modp3072`, ESP `aes128gcm16-esn-noesn, aes256-sha256`;
/// IKE_AUTH on port 4500, non-ESP marker stripped), with the plaintext of
/// the encrypted payloads and their AAD from charon's `enc` log at level 4.
mod strongswan {
    use super::*;
    use crate::proposal::{Chosen, Proposal, select};

    const INIT_REQ: &[u8] = include_bytes!("testdata/strongswan-init-req.bin");
    const INIT_RESP: &[u8] = include_bytes!("testdata/strongswan-init-resp.bin");
    const AUTH_REQ: &[u8] = include_bytes!("testdata/strongswan-auth-req.bin");
    const AUTH_RESP: &[u8] = include_bytes!("testdata/strongswan-auth-resp.bin");
    const INFO_REQ: &[u8] = include_bytes!("testdata/strongswan-info-req.bin");
    const INFO_RESP: &[u8] = include_bytes!("testdata/strongswan-info-resp.bin");
    const AUTH_REQ_PLAIN: &[u8] = include_bytes!("testdata/strongswan-auth-req-plain.bin");
    const AUTH_RESP_PLAIN: &[u8] = include_bytes!("testdata/strongswan-auth-resp-plain.bin");
    const INFO_REQ_PLAIN: &[u8] = include_bytes!("testdata/strongswan-info-req-plain.bin");
    /// charon's "assoc" (the AAD) of the IKE_AUTH request and response.
    const AUTH_REQ_AAD: &str = "076969d8d6d8bc1ae8dd8c546dcaff612e202308000000010000013c23000120";
    const AUTH_RESP_AAD: &str = "076969d8d6d8bc1ae8dd8c546dcaff612e202320000000010000008c24000070";
    const SPI_I: u64 = 0x0769_69d8_d6d8_bc1a;
    const SPI_R: u64 = 0xe8dd_8c54_6dca_ff61;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn notify_kinds(payloads: &[Payload]) -> Vec<u16> {
        payloads.iter().filter_map(|p| if let Payload::Notify { kind, .. } = p { Some(*kind) } else { None }).collect()
    }

    /// The IKE_AUTH request's plaintext of a second run with DN identities
    /// (PSK): the ID payloads are charon's own DER, which tern's parser must
    /// reproduce byte for byte (strongSwan compares DNs in binary first),
    /// and tern shows them as charon's log does.
    #[test]
    fn dn_identities_as_charon_encodes_them() {
        const DN_AUTH_REQ_PLAIN: &[u8] = include_bytes!("testdata/strongswan-dn-auth-req-plain.bin");
        let moon = "C=CH, ST=Zurich, O=strongSwan & Co, OU=Test, CN=moon_1, E=moon@example.org";
        let sun = "C=CH, L=Rapperswil, O=strongSwan, SN=42, CN=sun.example.org";
        let inner = decode_payloads(pk::IDI, DN_AUTH_REQ_PLAIN).unwrap();
        let Payload::IdI(idi) = &inner[0] else { panic!("{:?}", inner[0]) };
        let Payload::IdR(idr) = &inner[2] else { panic!("{:?}", inner[2]) };
        assert_eq!(idi, &Identity::parse(moon).unwrap());
        assert_eq!(idr, &Identity::parse(sun).unwrap());
        assert_eq!((idi.to_string(), idr.to_string()), (moon.to_string(), sun.to_string()));
        // "&" and "_" are not PrintableString: charon, and tern, use UTF8String.
        let Identity::Dn(der) = idi else { panic!() };
        assert!(der.windows(14).any(|w| w == b"\x0c\x0fstrongSwan &"));
        assert!(der.windows(8).any(|w| w == b"\x0c\x06moon_1"));
        assert_eq!(encode_payloads(&inner), (pk::IDI, DN_AUTH_REQ_PLAIN.to_vec()));
    }

    #[test]
    fn every_message_re_encodes_byte_for_byte() {
        for d in [INIT_REQ, INIT_RESP, AUTH_REQ, AUTH_RESP, INFO_REQ, INFO_RESP] {
            assert_eq!(Message::decode(d).unwrap().encode(), d);
        }
        for (first, d) in [(pk::IDI, AUTH_REQ_PLAIN), (pk::IDR, AUTH_RESP_PLAIN), (pk::DELETE, INFO_REQ_PLAIN)] {
            assert_eq!(encode_payloads(&decode_payloads(first, d).unwrap()), (first, d.to_vec()));
        }
    }

    #[test]
    fn ike_sa_init() {
        let req = Message::decode(INIT_REQ).unwrap();
        assert_eq!(
            req.header,
            Header {
                spi_i: SPI_I,
                spi_r: 0,
                next_payload: pk::SA,
                version: 0x20,
                exchange: IKE_SA_INIT,
                flags: FLAG_INITIATOR,
                message_id: 0,
                length: 276
            }
        );
        let Payload::Sa(theirs) = &req.payloads[0] else { panic!("{:?}", req.payloads[0]) };
        assert_eq!(
            theirs,
            &vec![
                WireProposal {
                    number: 1,
                    protocol: Protocol::Ike,
                    spi: vec![],
                    transforms: vec![(1, 20, Some(128)), (2, 5, None), (4, 31, None)]
                },
                WireProposal {
                    number: 2,
                    protocol: Protocol::Ike,
                    spi: vec![],
                    transforms: vec![(1, 12, Some(256)), (3, 12, None), (2, 5, None), (4, 15, None)]
                },
            ]
        );
        assert!(matches!(&req.payloads[1], Payload::Ke { group: 31, data } if data.len() == 32));
        assert!(matches!(&req.payloads[2], Payload::Nonce(n) if n.len() == 32));
        assert_eq!(
            notify_kinds(&req.payloads),
            [
                notify::NAT_DETECTION_SOURCE_IP,
                notify::NAT_DETECTION_DESTINATION_IP,
                notify::IKEV2_FRAGMENTATION_SUPPORTED,
                notify::SIGNATURE_HASH_ALGORITHMS,
                16406 // REDIRECT_SUPPORTED
            ]
        );
        // tern as the responder, preferring CBC: strongSwan's first proposal still wins.
        let ours = [
            Proposal::parse("aes256-sha256-modp3072", Protocol::Ike).unwrap(),
            Proposal::parse("aes128gcm16-prfsha256-x25519", Protocol::Ike).unwrap(),
        ];
        let (n, chosen, spi) = select(&ours, theirs, Protocol::Ike).unwrap();
        assert_eq!((n, chosen.to_string().as_str(), spi), (1, "aes128gcm16-prfsha256-x25519", vec![]));
        // strongSwan's answer is what tern would have said.
        let resp = Message::decode(INIT_RESP).unwrap();
        assert_eq!((resp.header.spi_r, resp.header.flags), (SPI_R, FLAG_RESPONSE));
        let Payload::Sa(answer) = &resp.payloads[0] else { panic!() };
        assert_eq!(answer, &vec![chosen.to_wire(1, Protocol::Ike, vec![])]);
        assert_eq!(Chosen::from_wire(&answer[0]).unwrap(), chosen);
        assert!(chosen.offered_by(&ours));
    }

    #[test]
    fn ike_auth() {
        let req = Message::decode(AUTH_REQ).unwrap();
        assert_eq!((req.header.exchange, req.header.message_id, req.header.length), (IKE_AUTH, 1, 316));
        let [Payload::Sk { first, body }] = &req.payloads[..] else { panic!("{:?}", req.payloads) };
        assert_eq!(*first, pk::IDI);
        // The AAD tern builds is charon's, and the datagram's first bytes.
        let aad = sk_aad(&req.header, *first, body.len());
        assert_eq!(aad, unhex(AUTH_REQ_AAD));
        assert_eq!(&AUTH_REQ[..aad.len()], &aad[..]);
        let resp = Message::decode(AUTH_RESP).unwrap();
        let [Payload::Sk { first, body }] = &resp.payloads[..] else { panic!() };
        assert_eq!(sk_aad(&resp.header, *first, body.len()), unhex(AUTH_RESP_AAD));

        let inner = decode_payloads(pk::IDI, AUTH_REQ_PLAIN).unwrap();
        assert_eq!(inner[0], Payload::IdI(Identity::Fqdn("moon.example".into())));
        assert_eq!(inner[2], Payload::IdR(Identity::Fqdn("sun.example".into())));
        assert!(matches!(&inner[3], Payload::Auth { method: 2, data } if data.len() == 32));
        let Payload::Sa(esp) = &inner[4] else { panic!("{:?}", inner[4]) };
        assert_eq!(esp.len(), 2);
        assert_eq!((esp[0].protocol, esp[0].spi.len()), (Protocol::Esp, 4));
        assert_eq!(esp[0].transforms, vec![(1, 20, Some(128)), (5, 1, None), (5, 0, None)]);
        assert_eq!(esp[1].transforms, vec![(1, 12, Some(256)), (3, 12, None), (5, 0, None)]);
        let ts = |a: &str, b: &str| TrafficSelector {
            start: a.parse().unwrap(),
            end: b.parse().unwrap(),
            protocol: 0,
            start_port: 0,
            end_port: 65535,
        };
        assert_eq!(inner[5], Payload::TsI(vec![ts("10.1.0.0", "10.1.255.255")]));
        assert_eq!(inner[6], Payload::TsR(vec![ts("10.2.0.0", "10.2.255.255")]));
        assert_eq!(
            notify_kinds(&inner),
            [notify::INITIAL_CONTACT, notify::MOBIKE_SUPPORTED, 16399, 16404, 16417, 16420]
        );
        // tern as the responder with PFS configured: in IKE_AUTH without the group.
        let ours = [Proposal::parse("aes256-sha256-x25519", Protocol::Esp).unwrap().without_dh()];
        let (n, chosen, spi) = select(&ours, esp, Protocol::Esp).unwrap();
        assert_eq!((n, chosen.to_string().as_str(), spi), (2, "aes256-sha256", esp[1].spi.clone()));

        let inner = decode_payloads(pk::IDR, AUTH_RESP_PLAIN).unwrap();
        assert_eq!(inner[0], Payload::IdR(Identity::Fqdn("sun.example".into())));
        assert_eq!(notify_kinds(&inner), [notify::MOBIKE_SUPPORTED, 16399, notify::NO_PROPOSAL_CHOSEN]);
        assert_eq!(
            decode_payloads(pk::DELETE, INFO_REQ_PLAIN).unwrap(),
            [Payload::Delete { protocol: 1, spis: vec![] }]
        );
        // The INFORMATIONAL response is empty: SK with no inner payload.
        let info = Message::decode(INFO_RESP).unwrap();
        assert!(matches!(&info.payloads[..], [Payload::Sk { first: 0, .. }]));
    }
}

#[test]
fn identities_match_as_strongswan_compares_them() {
    let moon = Identity::Dn(MOON_DN.to_vec());
    // The same name with UTF8Strings (what OpenSSL puts in certificates).
    let mut utf8 = MOON_DN.to_vec();
    for at in [24, 45] {
        assert_eq!(utf8[at], 0x13);
        utf8[at] = 0x0c;
    }
    let utf8 = Identity::Dn(utf8);
    assert_ne!(moon, utf8);
    assert!(moon.matches(&utf8) && utf8.matches(&moon));
    assert_eq!(utf8.to_string(), moon.to_string());
    // PrintableStrings compare without regard to case; UTF8Strings do not.
    let lower = Identity::parse("c=ch, o=STRONGSWAN, cn=Moon").unwrap();
    assert!(moon.matches(&lower));
    assert!(!utf8.matches(&lower));
    // Another value, another order, another attribute, one more: no.
    for other in [
        "C=CH, O=strongSwan, CN=sun",
        "O=strongSwan, C=CH, CN=moon",
        "C=CH, OU=strongSwan, CN=moon",
        "C=CH, O=strongSwan, CN=moon, E=a@b",
    ] {
        assert!(!moon.matches(&Identity::parse(other).unwrap()), "{other}");
    }
    // Unparseable DER matches only itself.
    let junk = Identity::Dn(vec![0x30, 0x03, 1, 2]);
    assert!(junk.matches(&junk.clone()) && !junk.matches(&moon));
    assert!(Identity::Fqdn("Moon.Example".into()).matches(&Identity::Fqdn("moon.example".into())));
    assert!(Identity::Email("Ops@Example.net".into()).matches(&Identity::Email("ops@example.net".into())));
    assert!(!Identity::Fqdn("moon.example".into()).matches(&Identity::Email("moon.example".into())));
    let ip = Identity::parse("10.0.0.1").unwrap();
    assert!(ip.matches(&ip.clone()) && !ip.matches(&Identity::parse("10.0.0.2").unwrap()));
}
