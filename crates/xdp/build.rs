//! Compiles the XDP programs in `bpf/` with clang into objects that the
//! crate embeds with `include_bytes!`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const PROGRAMS: &[&str] = &["steer", "sink", "gen", "lane"];
const INSTALL_HINT: &str = "apt-get install -y clang llvm libbpf-dev";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = env::var("TERN_CLANG").unwrap_or_else(|_| "clang".to_string());
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".to_string());
    // Debian keeps <asm/types.h> under the multiarch directory, which clang
    // does not search for -target bpf.
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    println!("cargo:rerun-if-env-changed=TERN_CLANG");
    // Headers the programs include (bpf/lane.h, and the lane's sections in
    // bpf/lib/: a directory is watched whole, so a header added there
    // counts too).
    for e in std::fs::read_dir("bpf").into_iter().flatten().flatten() {
        if e.path().extension().is_some_and(|x| x == "h") {
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }
    println!("cargo:rerun-if-changed=bpf/lib");
    for name in PROGRAMS {
        let src = format!("bpf/{name}.c");
        println!("cargo:rerun-if-changed={src}");
        let obj = out.join(format!("{name}.o"));
        let status = Command::new(&clang)
            .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-c", &src, "-o"])
            .arg(&obj)
            .arg(format!("-I{multiarch}"))
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!(
                "clang failed ({s}) compiling {src}; the BPF build needs clang and the libbpf headers: {INSTALL_HINT}"
            ),
            Err(e) => panic!("cannot run `{clang}` ({e}) to compile {src}: {INSTALL_HINT}"),
        }
    }
}
