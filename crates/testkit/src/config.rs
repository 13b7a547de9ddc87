//! Router configurations for tests, written as the TOML the daemon reads
//! (`docs/CONFIG.md`), so that a test states its interfaces, routes,
//! neighbours and rules in one expression:
//!
//! ```
//! use tern_testkit::config::{Config, Rule};
//! let toml = Config::new()
//!     .memory("lan", "02:00:00:00:01:01", &["10.0.1.1/24"])
//!     .acl_in("lan", "IN")
//!     .memory("wan", "02:00:00:00:02:01", &["10.0.2.1/24"])
//!     .route_via("198.18.0.0/15", "10.0.2.2")
//!     .neighbor("wan", "10.0.2.2", "02:00:00:00:02:bb")
//!     .acl("IN", "accept", &[Rule::drop().src("10.0.1.66/32").proto("udp")])
//!     .toml();
//! assert!(toml.contains("acl_in = \"IN\""));
//! ```

use std::fmt::Write;

/// A configuration under construction: tables in the order added, each
/// `[[interface]]` open to the interface setters until the next table.
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct Config {
    head: String,
    tables: Vec<String>,
}

fn quoted(list: &[&str]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(", "))
}

impl Config {
    pub fn new() -> Config {
        Config::default()
    }

    /// A `[dataplane]` key (`icmp_rate`, `workers`, ...), value as TOML.
    pub fn dataplane(mut self, key: &str, value: &str) -> Config {
        if self.head.is_empty() {
            self.head.push_str("[dataplane]\n");
        }
        let _ = writeln!(self.head, "{key} = {value}");
        self
    }

    /// A memory-port interface (what golden and in-process tests use).
    pub fn memory(mut self, name: &str, mac: &str, addresses: &[&str]) -> Config {
        self.tables.push(format!(
            "[[interface]]\nname = {name:?}\ndriver = \"memory\"\nmac = {mac:?}\naddresses = {}\n",
            quoted(addresses)
        ));
        self
    }

    /// A VLAN sub-interface of `parent`.
    pub fn vlan(mut self, name: &str, parent: &str, vid: u16, addresses: &[&str]) -> Config {
        self.tables.push(format!(
            "[[interface]]\nname = {name:?}\nparent = {parent:?}\nvlan = {vid}\naddresses = {}\n",
            quoted(addresses)
        ));
        self
    }

    /// Any key of the interface table `name` added before, value as TOML.
    pub fn iface_key(mut self, name: &str, key: &str, value: &str) -> Config {
        let wanted = format!("[[interface]]\nname = {name:?}\n");
        let t = self.tables.iter_mut().find(|t| t.starts_with(&wanted));
        let t = t.unwrap_or_else(|| panic!("no interface {name} yet"));
        let _ = writeln!(t, "{key} = {value}");
        self
    }

    /// The inbound ACL of interface `name`.
    pub fn acl_in(self, name: &str, acl: &str) -> Config {
        self.iface_key(name, "acl_in", &format!("{acl:?}"))
    }

    /// The outbound ACL of interface `name`.
    pub fn acl_out(self, name: &str, acl: &str) -> Config {
        self.iface_key(name, "acl_out", &format!("{acl:?}"))
    }

    /// A GRE tunnel (with a key when given).
    pub fn gre(mut self, name: &str, local: &str, remote: &str, key: Option<u32>, addresses: &[&str]) -> Config {
        let mut t = format!("[[tunnel]]\nname = {name:?}\nlocal = {local:?}\nremote = {remote:?}\n");
        if let Some(k) = key {
            let _ = writeln!(t, "key = {k}");
        }
        let _ = writeln!(t, "addresses = {}", quoted(addresses));
        self.tables.push(t);
        self
    }

    /// A static route through a gateway.
    pub fn route_via(mut self, prefix: &str, via: &str) -> Config {
        self.tables.push(format!("[[route]]\nprefix = {prefix:?}\nvia = {via:?}\n"));
        self
    }

    /// A static route out of an interface or tunnel (no gateway).
    pub fn route_dev(mut self, prefix: &str, interface: &str) -> Config {
        self.tables.push(format!("[[route]]\nprefix = {prefix:?}\ninterface = {interface:?}\n"));
        self
    }

    /// A permanent neighbour, so that nothing waits on ARP or ND.
    pub fn neighbor(mut self, interface: &str, address: &str, mac: &str) -> Config {
        self.tables
            .push(format!("[[neighbor_entry]]\ninterface = {interface:?}\naddress = {address:?}\nmac = {mac:?}\n"));
        self
    }

    /// An ACL: `default` is `"accept"` or `"drop"`.
    pub fn acl(mut self, name: &str, default: &str, rules: &[Rule]) -> Config {
        let mut t = format!("[[acl]]\nname = {name:?}\ndefault = {default:?}\n");
        for r in rules {
            t.push_str("[[acl.rule]]\n");
            t.push_str(&r.0);
        }
        self.tables.push(t);
        self
    }

    /// The configuration's text.
    pub fn toml(&self) -> String {
        let mut s = self.head.clone();
        for t in &self.tables {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(t);
        }
        s
    }
}

/// One `[[acl.rule]]`: an action and match keys (`docs/CONFIG.md`).
#[derive(Clone, Debug)]
#[must_use]
pub struct Rule(String);

impl Rule {
    pub fn action(action: &str) -> Rule {
        Rule(format!("action = {action:?}\n"))
    }

    pub fn accept() -> Rule {
        Rule::action("accept")
    }

    pub fn drop() -> Rule {
        Rule::action("drop")
    }

    pub fn count() -> Rule {
        Rule::action("count")
    }

    /// Any match key, value as TOML (`dport`, `[22, "1000-2000"]`).
    pub fn key(mut self, key: &str, value: &str) -> Rule {
        let _ = writeln!(self.0, "{key} = {value}");
        self
    }

    pub fn src(self, prefix: &str) -> Rule {
        self.key("src", &format!("{prefix:?}"))
    }

    pub fn dst(self, prefix: &str) -> Rule {
        self.key("dst", &format!("{prefix:?}"))
    }

    pub fn proto(self, proto: &str) -> Rule {
        self.key("proto", &format!("{proto:?}"))
    }

    pub fn dport(self, port: u16) -> Rule {
        self.key("dport", &port.to_string())
    }

    pub fn sport(self, port: u16) -> Rule {
        self.key("sport", &port.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_reads_what_the_builder_writes() {
        let text = Config::new()
            .dataplane("icmp_rate", "100000")
            .memory("lan", "02:00:00:00:01:01", &["10.0.1.1/24"])
            .acl_in("lan", "IN")
            .memory("wan", "02:00:00:00:02:01", &["10.0.2.1/24", "2001:db8:2::1/64"])
            .acl_out("wan", "OUT")
            .vlan("lan.100", "lan", 100, &["10.0.100.1/24"])
            .gre("gre0", "10.0.2.1", "10.0.2.2", Some(7), &["192.168.255.1/30"])
            .route_via("198.18.0.0/15", "10.0.2.2")
            .route_dev("10.20.0.0/16", "gre0")
            .neighbor("wan", "10.0.2.2", "02:00:00:00:02:bb")
            .acl("IN", "accept", &[Rule::drop().src("10.0.1.66/32").proto("udp").dport(53)])
            .acl("OUT", "drop", &[Rule::count().dst("198.18.0.0/15"), Rule::accept()])
            .toml();
        let plan = tern_control::config::parse(&text, "test.toml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(plan.ifaces.iter().filter(|i| i.mac.is_some()).count(), 2, "{text}");
    }
}
