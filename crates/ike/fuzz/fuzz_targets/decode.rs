//! Decodes arbitrary bytes as an IKE message and as a bare payload chain
//! (the plaintext inside SK, its first type taken from the first byte).
//! Nothing may panic, and whatever decodes must re-encode to bytes that
//! decode to the same payloads and are a fixed point of decode/encode.
//! Decoded SA payloads go through proposal selection and the initiator's
//! answer check; decoded identities are displayed and compared.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern_ike::Identity;
use tern_ike::proposal::{Chosen, Proposal, Protocol, select};
use tern_ike::wire::{Header, Message, Payload, decode_payloads, encode_payloads};

fn exercise(payloads: &[Payload], ours: &[(Vec<Proposal>, Protocol)]) {
    for p in payloads {
        match p {
            Payload::Sa(theirs) => {
                for (ours, protocol) in ours {
                    if let Some((_, chosen, _)) = select(ours, theirs, *protocol) {
                        assert!(chosen.offered_by(ours), "selected {chosen} which we do not offer");
                        let _ = chosen.to_string();
                    }
                }
                for w in theirs {
                    if let Ok(c) = Chosen::from_wire(w) {
                        assert_eq!(Chosen::from_wire(&c.to_wire(w.number, w.protocol, w.spi.clone())), Ok(c));
                    }
                }
            }
            Payload::IdI(id) | Payload::IdR(id) => {
                let _ = id.to_string();
                assert!(id.matches(id), "{id} does not match itself");
                let moon = Identity::parse("C=CH, O=strongSwan, CN=moon").unwrap();
                assert_eq!(id.matches(&moon), moon.matches(id));
            }
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let ours = [
        (
            vec![
                Proposal::parse("aes128gcm16-aes256gcm16-prfsha256-prfsha384-x25519-ecp256", Protocol::Ike).unwrap(),
                Proposal::parse("aes128-aes256-sha256-sha1-modp2048-modp3072", Protocol::Ike).unwrap(),
            ],
            Protocol::Ike,
        ),
        (
            vec![
                Proposal::parse("aes128gcm16-esn-noesn", Protocol::Esp).unwrap(),
                Proposal::parse("aes256-sha512-sha256-x25519", Protocol::Esp).unwrap(),
            ],
            Protocol::Esp,
        ),
    ];
    let _ = Header::decode(data);
    if let Ok(m) = Message::decode(data) {
        let bytes = m.encode();
        let m2 = Message::decode(&bytes).expect("a re-encoded message decodes");
        assert_eq!(m2.payloads, m.payloads);
        assert_eq!(Header { length: m.header.length, ..m2.header }, m.header);
        assert_eq!(m2.encode(), bytes);
        exercise(&m.payloads, &ours);
    }
    if let Some((&first, rest)) = data.split_first() {
        if let Ok(payloads) = decode_payloads(first, rest) {
            let (first2, bytes) = encode_payloads(&payloads);
            let again = decode_payloads(first2, &bytes).expect("a re-encoded chain decodes");
            assert_eq!(again, payloads);
            exercise(&payloads, &ours);
        }
    }
});
