//! docs/CONFIG.md against the parser: every TOML example in it loads,
//! every key a section's table names is a key the parser takes, and every
//! key the parser takes is named in CONFIG.md (or, for `[linux]`, in
//! LINUX.md). A key renamed or added without its documentation fails here.

use std::path::Path;

fn doc(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The fenced blocks of a language in a markdown text.
fn blocks(md: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in md.lines() {
        let t = line.trim_start();
        match &mut cur {
            None if t.starts_with("```") && t[3..].trim() == lang => cur = Some(String::new()),
            Some(b) if t.starts_with("```") => {
                out.push(std::mem::take(b));
                cur = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    out
}

/// The keys the parser takes in a section: the list serde's "unknown
/// field" error gives for a key that does not exist.
fn parser_keys(probe: &str) -> Vec<String> {
    let text = probe.replace("ZZZ", "zzz_no_such_key = 1");
    let e = tern_control::config::parse(&text, "probe.toml", Path::new("."))
        .err()
        .unwrap_or_else(|| panic!("{probe}: the unknown key was accepted"));
    let m = e.message;
    let list = m.split_once("expected").unwrap_or_else(|| panic!("{probe}: {m}")).1;
    let keys: Vec<String> = list.split('`').skip(1).step_by(2).map(str::to_string).collect();
    assert!(!keys.is_empty(), "{probe}: {m}");
    keys
}

const SECTIONS: &[(&str, &str)] = &[
    ("top level", "ZZZ"),
    ("[dataplane]", "[dataplane]\nZZZ"),
    ("[dataplane.fast_paths]", "[dataplane.fast_paths]\nZZZ"),
    ("[dataplane.punt]", "[dataplane.punt]\nZZZ"),
    ("[neighbor]", "[neighbor]\nZZZ"),
    ("[[interface]]", "[[interface]]\nZZZ"),
    ("[[tunnel]]", "[[tunnel]]\nZZZ"),
    ("[[ipsec_sa]]", "[[ipsec_sa]]\nZZZ"),
    ("[[route]]", "[[route]]\nZZZ"),
    ("[[route_file]]", "[[route_file]]\nZZZ"),
    ("[[neighbor_entry]]", "[[neighbor_entry]]\nZZZ"),
    ("[[acl]]", "[[acl]]\nZZZ"),
    ("[[acl.rule]]", "[[acl]]\nname = \"a\"\ndefault = \"accept\"\n[[acl.rule]]\nZZZ"),
    ("[api]", "[api]\nZZZ"),
    ("[metrics]", "[metrics]\nZZZ"),
    ("[linux]", "[linux]\nZZZ"),
    ("[[vrrp]]", "[[vrrp]]\nZZZ"),
    ("[[ike]]", "[[ike]]\nZZZ"),
    ("[ike_service]", "[ike_service]\nZZZ"),
];

#[test]
fn every_toml_example_in_config_md_loads() {
    let md = doc("CONFIG.md");
    let examples = blocks(&md, "toml");
    assert!(!examples.is_empty());
    let dir = std::env::temp_dir().join(format!("tern-config-doc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (i, ex) in examples.iter().enumerate() {
        if let Err(e) = tern_control::config::parse(ex, &format!("CONFIG.md toml block {}", i + 1), &dir) {
            panic!("{e}\n{ex}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `` `key` `` of each row of the tables under a `### `section``
/// heading of CONFIG.md.
fn table_keys(md: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in md.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            section = h.to_string();
        } else if let Some(row) = line.strip_prefix("| `") {
            let cell = row.split('|').next().unwrap_or("");
            for k in format!("`{cell}").split('`').skip(1).step_by(2) {
                out.push((section.clone(), k.to_string()));
            }
        }
    }
    out
}

#[test]
fn config_md_tables_name_only_keys_the_parser_takes() {
    let md = doc("CONFIG.md");
    let rows = table_keys(&md);
    assert!(rows.iter().any(|(s, _)| s.contains("[[acl.rule]]")), "CONFIG.md documents [[acl.rule]] in a table");
    let mut checked = 0;
    for (section, probe) in SECTIONS {
        let keys = parser_keys(probe);
        for (s, k) in rows.iter().filter(|(s, _)| s.contains(&format!("`{section}`"))) {
            assert!(
                keys.contains(k),
                "CONFIG.md section {s} documents `{k}`, which the parser refuses (it takes {keys:?})"
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} documented keys checked");
}

#[test]
fn every_key_the_parser_takes_is_documented() {
    let md = doc("CONFIG.md");
    let linux = doc("LINUX.md");
    let mut missing = Vec::new();
    for (section, probe) in SECTIONS {
        let text = if *section == "[linux]" { format!("{md}\n{linux}") } else { md.clone() };
        for k in parser_keys(probe) {
            let named = text.contains(&format!("`{k}`"))
                || text.lines().any(|l| l.trim_start().trim_start_matches("# ").starts_with(&format!("{k} =")))
                || text.contains(&format!("[{k}]"))
                || text.contains(&format!("[[{k}]]"));
            if !named {
                missing.push(format!("{section} {k}"));
            }
        }
    }
    assert!(missing.is_empty(), "keys the parser takes that CONFIG.md does not name: {missing:?}");
}
