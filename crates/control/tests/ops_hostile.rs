//! The daemon against hostile and careless clients: idle and slow API
//! connections, a slowloris metrics scraper; and the operator's messages.

mod common;
mod ops;

use ops::*;
use tern_control::api::*;

#[test]
fn reload_that_removes_a_vlan_counts_its_connected_route() {
    let with_vlan = format!(
        "{CONFIG_TEXT}\n[[interface]]\nname = \"lan.10\"\nparent = \"lan\"\nvlan = 10\naddresses = [\"10.0.10.1/24\"]\n"
    );
    let t = Running::start(&with_vlan, false);
    let mut c = t.client();
    let Ok(Reply::Route(Some(r))) = c.call(&Command::RouteGet(RouteGetArgs { address: "10.0.10.9".into() })) else {
        panic!("the VLAN's connected route")
    };
    assert_eq!(r.kind, "connected", "{r:?}");
    std::fs::write(t.config_path(), CONFIG_TEXT).expect("write");
    let Ok(Reply::Reload(rep)) = c.call(&Command::ConfigReload {}) else { panic!("reload") };
    let line = rep.changes.iter().find(|l| l.contains("lan.10 removed")).unwrap_or_else(|| panic!("{rep:?}"));
    // The connected route, the local route and the directed broadcast.
    assert!(line.contains("(3 routes withdrawn") && line.contains("1 connected"), "{line}");
    assert!(matches!(c.call(&Command::RouteGet(RouteGetArgs { address: "10.0.10.9".into() })), Ok(Reply::Route(None))));
}
