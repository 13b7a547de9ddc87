//! `cargo run -p tern-acl --example import_nft FILE.json`: prints the TOML
//! tern would use for an `nft -j list ruleset` dump (what `tern acl
//! import-nft` prints), or the refusal.
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: import_nft FILE.json");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    match tern_acl::nft::import(&text) {
        Ok(i) => print!("{i}"),
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    }
}
