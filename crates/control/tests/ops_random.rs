//! Random requests never crash the API server: arbitrary bytes, arbitrary
//! JSON, and well-formed envelopes of every real operation with random
//! arguments each get an answer (result or error), and the server keeps
//! answering afterwards.

mod common;
mod ops;

use ops::*;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value};
use tern_control::api::Response;
use tern_control::api::client::Client;

const OPS: &[&str] = &[
    "ping",
    "status",
    "interface_list",
    "interface_set",
    "address_list",
    "address_add",
    "address_del",
    "route_list",
    "route_get",
    "route_add",
    "route_del",
    "route_summary",
    "neighbor_list",
    "vrrp_show",
    "stats_show",
    "stats_clear",
    "worker_list",
    "graph_show",
    "graph_dot",
    "acl_list",
    "acl_set",
    "trace_start",
    "trace_show",
    "trace_clear",
    "trace_stop",
    "capture_start",
    "capture_read",
    "capture_stop",
    "config_reload",
    "config_show",
    "top_sample",
];

const KEYS: &[&str] = &[
    "name",
    "up",
    "mtu",
    "interface",
    "address",
    "prefix",
    "via",
    "type",
    "distance",
    "metric",
    "source",
    "limit",
    "count",
    "id",
    "target",
    "direction",
    "snaplen",
    "since_clear",
    "set",
    "default",
    "rule",
    "action",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u64..70000).prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("lan".to_string()),
            Just("wan".to_string()),
            Just("10.0.1.0/24".to_string()),
            Just("10.0.2.2".to_string()),
            Just("2001:db8::/32".to_string()),
            Just("blackhole".to_string()),
            ".{0,12}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..5).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<_, _>>())
            }),
        ]
    })
}

fn request() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Real operations with random arguments.
        (prop::sample::select(OPS), json_value(), prop::option::of(any::<u64>())).prop_map(|(op, args, id)| {
            let mut m = Map::new();
            m.insert("version".into(), Value::from(1));
            m.insert("op".into(), Value::from(op));
            m.insert("args".into(), args);
            if let Some(id) = id {
                m.insert("id".into(), Value::from(id));
            }
            Value::Object(m).to_string().into_bytes()
        }),
        // Any JSON.
        json_value().prop_map(|v| v.to_string().into_bytes()),
        // Any bytes.
        prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn random_requests_get_an_answer_and_the_server_keeps_serving() {
    // One router for all cases (starting one per case would dominate).
    let r = Running::start(CONFIG_TEXT, false);
    let mut runner = TestRunner::new(ProptestConfig { cases: 300, ..ProptestConfig::default() });
    let result = runner.run(&request(), |req| {
        let mut c = Client::connect(&r.socket).expect("connect");
        let mut line: Vec<u8> = req.into_iter().filter(|&b| b != b'\n').collect();
        let blank = line.iter().all(u8::is_ascii_whitespace);
        line.push(b'\n');
        if !blank {
            let resp: Response = c.call_raw(&line).expect("the server answers");
            prop_assert!(resp.ok == resp.result.is_some() && resp.ok != resp.error.is_some(), "{resp:?}");
            if let Some(e) = resp.error {
                prop_assert!(!e.message.is_empty());
            }
        }
        let p = c.call(&tern_control::api::Command::Ping {});
        prop_assert!(p.is_ok(), "still serving: {p:?}");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
