//! Start-up is a reload from the bare plan: a router started from a file
//! and one started from the same interfaces without addresses, routes or
//! settings, then reloaded to the file, end in the same state (interface
//! table, every route of every source, node parameters, running plan).

use serde_json::Value;
use std::path::{Path, PathBuf};
use tern_control::config;
use tern_control::reload::reload;
use tern_control::router::Router;

/// The full file's interfaces with nothing configured on them but the
/// address the tunnel's outer source needs.
const BARE: &str = r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
mtu = 1400

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]

[[interface]]
name = "lan.7"
parent = "lan"
vlan = 7

[[tunnel]]
name = "gre1"
local = "10.0.2.1"
remote = "10.0.2.9"
"#;

/// `BARE` with addresses (v4, v6, on a VLAN and a tunnel), static routes,
/// a route file, ICMP and neighbour settings.
fn full(dir: &Path) -> String {
    let table = dir.join("table.txt");
    std::fs::write(&table, "203.0.113.0/24\n198.51.100.0/24 10.0.2.7\n2001:db8:99::/48\n").expect("route file");
    format!(
        r#"
[dataplane]
icmp_rate = 77
icmp_burst = 7

[neighbor]
retry_ms = 250
probes = 5
queue_per_dest = 4

[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
mtu = 1400
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24", "10.0.3.1/31"]

[[interface]]
name = "lan.7"
parent = "lan"
vlan = 7
addresses = ["10.0.7.1/24"]

[[tunnel]]
name = "gre1"
local = "10.0.2.1"
remote = "10.0.2.9"
addresses = ["192.168.9.1/30"]

[[route]]
prefix = "198.18.0.0/15"
via = "10.0.2.2"

[[route]]
prefix = "192.0.2.0/24"
type = "blackhole"

[[route]]
prefix = "2001:db8:77::/48"
via = "2001:db8:1::2"

[[route]]
prefix = "172.16.0.0/12"
via = "192.168.9.2"

[[route_file]]
path = "{}"
via = "10.0.1.254"
via6 = "2001:db8:1::fe"
"#,
        table.display()
    )
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tern-start-is-reload-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    d
}

fn start(text: &str) -> Router {
    let plan = config::parse(text, "test.toml", Path::new(".")).expect("config");
    Router::start(plan).expect("router")
}

/// What can be observed of a router's configuration state.
fn state(r: &Router) -> (Value, Vec<String>, Value, Vec<String>) {
    let ifs = serde_json::to_value(&r.iftable().ifs).expect("interfaces");
    // Next-hop ids are allocation order, not state.
    let mut routes: Vec<String> = r
        .fib()
        .routes()
        .map(|d| {
            format!(
                "{} {} {}/{} {:?} best={} active={} {:?}",
                d.prefix, d.source, d.distance, d.metric, d.target, d.best, d.active, d.nexthops
            )
        })
        .collect();
    routes.sort();
    let params = serde_json::to_value(&*r.shared().params.load()).expect("params");
    let plan = r.plan().ifaces.iter().map(|i| format!("{i:?}")).collect();
    (ifs, routes, params, plan)
}

#[test]
fn a_started_router_equals_a_bare_one_reloaded() {
    let dir = dir("equal");
    let text = full(&dir);
    let started = start(&text);
    let mut reloaded = start(BARE);
    let path = dir.join("tern.toml");
    std::fs::write(&path, &text).expect("write");
    let report = reload(&mut reloaded, &path).expect("reload");
    assert!(!report.changes.is_empty());

    let (a, b) = (state(&started), state(&reloaded));
    // Not vacuous: the full file's addresses, routes and knobs are there.
    assert!(a.1.iter().any(|r| r.contains("10.0.7.0")), "VLAN connected route: {:#?}", a.1);
    assert!(a.1.iter().any(|r| r.contains("203.0.113.0")), "route file: {:#?}", a.1);
    assert!(a.1.iter().any(|r| r.contains("192.0.2.0")), "static: {:#?}", a.1);
    assert_eq!(a.2["icmp_rate"], 77);
    assert_eq!(a.2["neigh_max_tries"], 5);
    assert_eq!(a.0, b.0, "interface tables");
    assert_eq!(a.1, b.1, "routes");
    assert_eq!(a.2, b.2, "parameters");
    assert_eq!(a.3, b.3, "running plans");
    assert_eq!(started.plan().routes, reloaded.plan().routes);
    assert_eq!(started.plan().route_files, reloaded.plan().route_files);

    // And reloading the started one to the bare file takes it back to a
    // bare start, but for the parameters a reload keeps (defaults here).
    let mut back = started;
    let bare_path = dir.join("bare.toml");
    std::fs::write(&bare_path, BARE).expect("write");
    reload(&mut back, &bare_path).expect("reload back");
    let fresh = start(BARE);
    let (c, d) = (state(&back), state(&fresh));
    assert_eq!(c.0, d.0, "interface tables");
    assert_eq!(c.1, d.1, "routes");
    assert_eq!(c.2, d.2, "parameters");
    back.shutdown();
    fresh.shutdown();
    reloaded.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_route_file_that_fails_stops_the_start_with_its_reason() {
    let dir = dir("bad");
    let text = full(&dir);
    // Missing.
    std::fs::remove_file(dir.join("table.txt")).expect("rm");
    let plan = config::parse(&text, "test.toml", Path::new(".")).expect("config");
    let e = Router::start(plan).err().expect("refused");
    assert!(e.to_string().contains("table.txt: cannot read"), "{e}");
    // A line that does not parse.
    std::fs::write(dir.join("table.txt"), "203.0.113.0/24\nnot a prefix\n").expect("write");
    let plan = config::parse(&text, "test.toml", Path::new(".")).expect("config");
    let e = Router::start(plan).err().expect("refused");
    assert!(e.to_string().contains("table.txt: line 2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
