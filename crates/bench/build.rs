//! Compiles the XDP programs (bpf/*.bpf.c: generator, sink, pass, hole
//! watch, the xdp-fwd DUT) with clang into OUT_DIR; src/bpf.rs embeds them
//! with `include_bytes!`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const PROGRAMS: [&str; 5] = ["gen", "sink", "pass", "holes", "xdpfwd"];
const HINT: &str = "tern-bench needs clang to build its XDP programs: apt-get install -y clang llvm libbpf-dev";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let bpf_dir = manifest.join("bpf");
    println!("cargo:rerun-if-changed={}", bpf_dir.join("common.h").display());
    for name in PROGRAMS {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        let obj = out.join(format!("{name}.bpf.o"));
        let status = Command::new(env::var("CLANG").unwrap_or_else(|_| "clang".into()))
            .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
            .arg("-I/usr/include/x86_64-linux-gnu")
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("clang failed on {} ({s}); {HINT}", src.display()),
            Err(e) => panic!("cannot run clang ({e}); {HINT}"),
        }
    }
}
