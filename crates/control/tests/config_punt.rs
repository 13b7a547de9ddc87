//! `[dataplane.punt]`: the per-class policers of traffic for the router
//! (control traffic first) parse, default, and refuse what would not
//! police anything sensible, naming the key.

use std::path::Path;
use tern_control::config::{PuntCfg, parse};

fn plan(text: &str) -> Result<tern_control::config::Plan, String> {
    parse(text, "punt.toml", Path::new(".")).map_err(|e| e.to_string())
}

#[test]
fn defaults_and_a_partial_section() {
    let p = plan("").expect("empty config");
    assert_eq!(p.config.dataplane.punt, PuntCfg::default());
    assert_eq!(p.config.dataplane.punt.rates(), tern_nodes::state::DEFAULT_PUNT_CLASSES);
    let p =
        plan("[dataplane.punt]\nbgp = { rate = 500, burst = 50 }\nlocal = { rate = 0, burst = 0 }\n").expect("valid");
    let r = p.config.dataplane.punt.rates();
    assert_eq!(r[1], (500, 50));
    assert_eq!(r[6], (0, 0), "rate 0: not policed, any burst");
    assert_eq!(r[0], tern_nodes::state::DEFAULT_PUNT_CLASSES[0], "a class left out keeps its default");
}

#[test]
fn bad_rates_are_refused_with_their_key() {
    for (text, key) in [
        ("[dataplane.punt]\nospf = { rate = 100, burst = 0 }\n", "dataplane.punt.ospf.burst"),
        ("[dataplane.punt]\nvrrp = { rate = 20000000, burst = 10 }\n", "dataplane.punt.vrrp.rate"),
    ] {
        let e = plan(text).expect_err(text);
        assert!(e.contains(key), "{text}: {e}");
    }
    for text in [
        "[dataplane.punt]\nbgp = { rate = 100 }\n",
        "[dataplane.punt]\nbgp = { rate = 100, burst = 10, depth = 3 }\n",
        "[dataplane.punt]\nssh = { rate = 100, burst = 10 }\n",
        "[dataplane.punt]\nbgp = { rate = -1, burst = 10 }\n",
    ] {
        assert!(plan(text).is_err(), "accepted: {text}");
    }
}
