//! netdev helpers on a veth in a throwaway namespace.

mod common;

use std::net::IpAddr;

use common::*;
use tern_io::netdev;

#[test]
fn facts_and_settings_of_a_veth() {
    let Some(ns) = Netns::new() else { return };
    ns.ip(&["addr", "add", "192.0.2.1/24", "dev", "va"]);
    ns.in_ns(|| {
        let idx = netdev::ifindex("va").expect("index");
        assert!(idx > 1);
        assert_eq!(netdev::link_type("va").expect("type"), netdev::ARPHRD_ETHER);
        let mac = netdev::mac("va").expect("mac");
        assert_eq!(mac[0] & 1, 0, "unicast MAC");
        assert_ne!(mac, [0; 6]);
        assert_eq!(netdev::mtu("va").expect("mtu"), 1500);
        netdev::set_mtu("va", 4000).expect("set mtu");
        assert_eq!(netdev::mtu("va").expect("mtu"), 4000);

        let f = netdev::flags("va").expect("flags");
        assert!(f.up && !f.promisc && !f.loopback);
        netdev::set_promisc("va", true).expect("promisc on");
        assert!(netdev::flags("va").expect("flags").promisc);
        netdev::set_promisc("va", false).expect("promisc off");
        assert!(!netdev::flags("va").expect("flags").promisc);

        netdev::set_up("va", false).expect("down");
        assert!(!netdev::flags("va").expect("flags").up);
        netdev::set_up("va", true).expect("up");
        assert!(netdev::flags("va").expect("flags").up);

        let addrs = netdev::addresses("va").expect("addresses");
        assert!(addrs.iter().any(|a| a.addr == IpAddr::from([192, 0, 2, 1]) && a.prefix_len == 24), "{addrs:?}");
        assert!(netdev::addresses("vb").expect("addresses").iter().all(|a| a.addr.is_ipv6()), "vb has no IPv4");
    });
}

#[test]
fn quiet_kernel_sets_and_restores() {
    let Some(ns) = Netns::new() else { return };
    ns.in_ns(|| {
        netdev::sysctl_write("ipv4/conf/va/forwarding", "1").expect("enable forwarding");
        netdev::sysctl_write("ipv6/conf/va/disable_ipv6", "0").expect("enable ipv6");
        let before_arp = netdev::sysctl_read("ipv4/conf/va/arp_ignore").expect("read");
        let g = netdev::quiet_kernel("va").expect("quiet");
        assert_eq!(g.ifname(), "va");
        assert_eq!(netdev::sysctl_read("ipv4/conf/va/forwarding").expect("read"), "0");
        assert_eq!(netdev::sysctl_read("ipv4/conf/va/arp_ignore").expect("read"), "8");
        assert_eq!(netdev::sysctl_read("ipv6/conf/va/disable_ipv6").expect("read"), "1");
        assert_eq!(netdev::sysctl_read("ipv4/conf/vb/forwarding").expect("read"), "0", "other interfaces untouched");
        drop(g);
        assert_eq!(netdev::sysctl_read("ipv4/conf/va/forwarding").expect("read"), "1");
        assert_eq!(netdev::sysctl_read("ipv4/conf/va/arp_ignore").expect("read"), before_arp);
        assert_eq!(netdev::sysctl_read("ipv6/conf/va/disable_ipv6").expect("read"), "0");

        netdev::quiet_kernel("va").expect("quiet").keep();
        assert_eq!(netdev::sysctl_read("ipv4/conf/va/forwarding").expect("read"), "0", "keep() leaves settings");
        assert!(netdev::quiet_kernel("tio-none0").is_err());
    });
}

#[test]
fn offloads_can_be_turned_off_and_on() {
    use netdev::Offload;
    let Some(ns) = Netns::new() else { return };
    ns.in_ns(|| {
        // veth turns TSO, GSO and transmit checksumming on by default.
        for o in [Offload::Tso, Offload::Gso, Offload::TxChecksum] {
            assert!(netdev::offload("va", o).expect("get"), "{o:?} on by default");
            netdev::set_offload("va", o, false).expect("off");
            assert!(!netdev::offload("va", o).expect("get"), "{o:?} off");
        }
        netdev::set_offload("va", Offload::Gro, true).expect("gro on");
        assert!(netdev::offload("va", Offload::Gro).expect("get"));
        netdev::disable_large_frame_offloads("va").expect("disable");
        for o in [Offload::Gro, Offload::Lro, Offload::Tso, Offload::Gso] {
            assert!(!netdev::offload("va", o).expect("get"), "{o:?} off after disable_large_frame_offloads");
        }
        netdev::set_offload("va", Offload::TxChecksum, true).expect("csum on");
        assert!(netdev::offload("va", Offload::TxChecksum).expect("get"));
    });
}
