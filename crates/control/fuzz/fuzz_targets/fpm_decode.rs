//! Any byte stream an FPM peer (zebra's dplane_fpm_nl) or the kernel's
//! netlink socket could deliver: framing, netlink messages, route and
//! next-hop translation for both sources, and the RIB operations they
//! produce must never panic (`tern_control::linux::fpm::decode_any`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tern_control::linux::fpm::decode_any(data);
});
