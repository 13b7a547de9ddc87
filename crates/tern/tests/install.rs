//! tern installed like a real tool: the man pages and completions it
//! generates cover every command and docs/CLI.md names every one (so the
//! three cannot drift apart), and the Debian package that scripts/deb.sh
//! builds holds the binary, the systemd unit, the example configuration
//! (a conffile that `tern config check` accepts), the docs, the Grafana
//! dashboard, the man pages and the completions, with a binary that runs
//! once unpacked: the example configuration, XDP lane included, in a
//! network namespace.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn tern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern")).args(args).output().expect("run tern")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(o: Output, what: &str) -> String {
    assert!(o.status.success(), "{what}: {}\n{}", o.status, text(&o.stderr));
    text(&o.stdout)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tern-install-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// The commands of the clap tree, as `tern man --dir` names their pages:
/// "tern-route-add.1" is ["route", "add"]; tern.1 is [].
fn commands_from_man_pages(dir: &Path) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir).expect("man dir") {
        let name = e.expect("entry").file_name().into_string().expect("utf-8 name");
        let stem = name.strip_suffix(".1").unwrap_or_else(|| panic!("{name}: not a section 1 page"));
        let mut words = stem.split('-');
        assert_eq!(words.next(), Some("tern"), "{name}");
        // import-nft is one word with a dash: rejoin against the known one.
        let words: Vec<String> = words.map(String::from).collect();
        let mut joined: Vec<String> = Vec::new();
        for w in words {
            if w == "nft" && joined.last().is_some_and(|l| l == "import") {
                joined.last_mut().expect("import").push_str("-nft");
            } else {
                joined.push(w);
            }
        }
        out.insert(joined);
    }
    out
}

/// Whether `text` has `cmd` as whole words ("tern man" but not "tern manages").
fn names(text: &str, cmd: &str) -> bool {
    text.match_indices(cmd).any(|(i, _)| {
        text[i + cmd.len()..].chars().next().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    })
}

#[test]
fn man_pages_cover_every_command_and_cli_md_names_each_one() {
    let dir = scratch("man");
    ok(tern(&["man", "--dir", dir.to_str().expect("utf-8")]), "tern man --dir");
    let cmds = commands_from_man_pages(&dir);
    // Pages for the root, nouns, verbs and the packaging commands exist.
    for want in [&[][..], &["route"], &["route", "add"], &["acl", "import-nft"], &["completions"], &["man"]] {
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        assert!(cmds.contains(&want), "no man page for tern {want:?}; pages: {cmds:?}");
    }
    let route_add = std::fs::read_to_string(dir.join("tern-route-add.1")).expect("tern-route-add.1");
    assert!(route_add.starts_with(".ie") || route_add.contains(".TH"), "not roff: {route_add:.200}");
    assert!(route_add.contains("batches of 5000"), "the page carries the --file help: {route_add}");

    // Every command of the tree is named in docs/CLI.md as "tern NOUN [VERB]".
    let cli_md = std::fs::read_to_string(workspace().join("docs/CLI.md")).expect("docs/CLI.md");
    let missing: Vec<String> = cmds
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| format!("tern {}", c.join(" ")))
        .filter(|c| !names(&cli_md, c))
        .collect();
    assert!(missing.is_empty(), "docs/CLI.md does not name {missing:?}");

    // And every "## noun" section of docs/CLI.md is a command of the tree.
    let nouns: BTreeSet<&str> = cmds.iter().filter(|c| c.len() == 1).map(|c| c[0].as_str()).collect();
    for line in cli_md.lines() {
        let Some(h) = line.strip_prefix("## ") else { continue };
        let word = h.split_whitespace().next().unwrap_or_default();
        if word.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            assert!(nouns.contains(word), "docs/CLI.md has a section `{line}` but tern has no command {word:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The benchmarks left tern for `tern-bench`: no page for them, and the old
/// command says where they went instead of clap's generic error.
#[test]
fn tern_bench_points_at_the_tern_bench_binary() {
    let dir = scratch("man-bench");
    ok(tern(&["man", "--dir", dir.to_str().expect("utf-8")]), "tern man --dir");
    let cmds = commands_from_man_pages(&dir);
    assert!(cmds.iter().all(|c| c.first().is_none_or(|n| n != "bench")), "a page for tern bench: {cmds:?}");
    let out = tern(&["bench", "rfc2544", "--dut", "linux"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), "tern bench moved to its own binary: tern-bench rfc2544 --dut linux\n");
    assert!(out.stdout.is_empty());
}

#[test]
fn man_without_a_directory_prints_the_main_page() {
    let page = ok(tern(&["man"]), "tern man");
    assert!(page.contains(".TH tern 1"), "{page:.300}");
    for noun in ["route", "interface", "completions", "man"] {
        assert!(page.contains(noun), "tern.1 lists {noun}");
    }
    let o = tern(&["man", "--dir", "/proc/version/x"]);
    assert!(!o.status.success(), "an unwritable directory fails");
    assert!(text(&o.stderr).contains("/proc/version/x"), "the error names it: {}", text(&o.stderr));
}

#[test]
fn completions_know_every_noun_in_each_shell() {
    let dir = scratch("complete");
    ok(tern(&["man", "--dir", dir.to_str().expect("utf-8")]), "tern man --dir");
    let nouns: Vec<String> =
        commands_from_man_pages(&dir).into_iter().filter(|c| c.len() == 1).map(|c| c[0].clone()).collect();
    assert!(nouns.len() >= 15, "{nouns:?}");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = ok(tern(&["completions", shell]), shell);
        for n in &nouns {
            assert!(script.contains(n.as_str()), "the {shell} completions lack {n}");
        }
        assert!(script.contains("import-nft"), "the {shell} completions lack acl import-nft");
    }
    let bash = ok(tern(&["completions", "bash"]), "bash");
    assert!(bash.contains("complete -F _tern"), "bash registers a function for tern");
    let o = tern(&["completions", "tcsh"]);
    assert!(!o.status.success(), "an unknown shell fails");
    assert!(text(&o.stderr).contains("possible values"), "and says which exist: {}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Builds the .deb with scripts/deb.sh (the release build is reused when
/// it is current; scripts/test.sh builds it before the tests), replacing
/// target/debian/tern_*.deb.
fn build_deb() -> Option<PathBuf> {
    let have = Command::new("cargo").args(["deb", "--version"]).output().is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("SKIP: cargo-deb is not installed (scripts/setup.sh installs it)");
        return None;
    }
    // --fast: cargo-deb's quicker compression (9 s instead of 50 here).
    let o = Command::new(workspace().join("scripts/deb.sh"))
        .arg("--fast")
        .current_dir(workspace())
        .output()
        .expect("scripts/deb.sh");
    let out = ok(o, "scripts/deb.sh");
    let deb = PathBuf::from(out.lines().last().expect("deb.sh prints the package").trim());
    let deb = if deb.is_absolute() { deb } else { workspace().join(deb) };
    assert!(deb.extension().is_some_and(|e| e == "deb") && deb.exists(), "deb.sh printed {deb:?}");
    Some(deb)
}

#[test]
fn the_debian_package_installs_a_working_tern() {
    let Some(deb) = build_deb() else { return };
    let deb = deb.to_str().expect("utf-8 path");

    let info = common::must("dpkg-deb", &["-I", deb]);
    for want in ["Package: tern", "Version: 0.1.0", "Section: net", "Depends: libc6"] {
        assert!(info.contains(want), "dpkg-deb -I lacks {want:?}:\n{info}");
    }
    let listing = common::must("dpkg-deb", &["-c", deb]);
    for want in [
        "./usr/bin/tern",
        "./usr/lib/systemd/system/tern.service",
        "./etc/tern/tern.toml",
        "./usr/share/doc/tern/README.md",
        "./usr/share/doc/tern/CLI.md",
        "./usr/share/doc/tern/CONFIG.md",
        "./usr/share/doc/tern/MONITORING.md",
        "./usr/share/tern/grafana/tern.json",
        "./usr/share/man/man1/tern.1.gz",
        "./usr/share/man/man1/tern-route-add.1.gz",
        "./usr/share/bash-completion/completions/tern",
        "./usr/share/zsh/vendor-completions/_tern",
        "./usr/share/fish/vendor_completions.d/tern.fish",
    ] {
        assert!(listing.lines().any(|l| l.ends_with(want)), "the package lacks {want}:\n{listing}");
    }

    let root = scratch("root");
    let r = root.to_str().expect("utf-8");
    common::must("dpkg-deb", &["-x", deb, r]);
    let ctrl = root.join("DEBIAN");
    common::must("dpkg-deb", &["-e", deb, ctrl.to_str().expect("utf-8")]);
    let conffiles = std::fs::read_to_string(ctrl.join("conffiles")).expect("DEBIAN/conffiles");
    assert!(conffiles.lines().any(|l| l == "/etc/tern/tern.toml"), "the example config is a conffile: {conffiles}");

    let bin = root.join("usr/bin/tern");
    let b = bin.to_str().expect("utf-8");
    let v = common::must(b, &["--version"]);
    assert_eq!(v.trim(), format!("tern {}", env!("CARGO_PKG_VERSION")), "the packaged binary runs");
    // The packaged man pages are the packaged binary's.
    let man_dir = root.join("usr/share/man/man1");
    let pages = std::fs::read_dir(&man_dir).expect("man1").count();
    let fresh = scratch("fresh-man");
    common::must(b, &["man", "--dir", fresh.to_str().expect("utf-8")]);
    assert_eq!(pages, std::fs::read_dir(&fresh).expect("fresh").count(), "one packaged page per command");

    // The unit points at what the package installs.
    let unit = std::fs::read_to_string(root.join("usr/lib/systemd/system/tern.service")).expect("unit");
    for line in unit.lines().filter(|l| l.starts_with("Exec")) {
        let prog =
            line.split_once('=').map(|(_, v)| v.split_whitespace().next().unwrap_or_default()).unwrap_or_default();
        assert!(prog == "/usr/bin/tern" || prog == "/bin/kill", "{line}: runs something the package does not install");
    }
    let docs = unit.lines().find_map(|l| l.strip_prefix("Documentation=")).expect("Documentation=");
    for d in docs.split_whitespace() {
        if let Some(p) = d.strip_prefix("file://") {
            assert!(root.join(p.trim_start_matches('/')).exists(), "Documentation={d}: not in the package");
        } else if let Some(m) = d.strip_prefix("man:") {
            let page = m.replace("(1)", ".1.gz");
            assert!(man_dir.join(&page).exists(), "Documentation={d}: no {page} in the package");
        }
    }
    assert!(
        unit.contains("ProtectHome=read-only") && unit.contains("StateDirectory=tern"),
        "route files stay readable"
    );
    verify_unit(&root, &unit);

    // The example configuration is valid: `tern config check` passes where
    // its devices exist (a namespace with eth1 and eth2), and elsewhere
    // stops only at a missing device (everything before it parsed).
    let conf = root.join("etc/tern/tern.toml");
    let c = conf.to_str().expect("utf-8");
    let o = Command::new(b).args(["config", "check", c]).output().expect("config check");
    let err = text(&o.stderr);
    let missing_device = err.contains("].device: no device \"eth");
    assert!(o.status.success() || missing_device, "tern.toml: {err}");
    if common::is_root() {
        let ns = Netns::new(&format!("install-{}", std::process::id()));
        common::must("ip", &["-n", &ns.0, "link", "add", "eth1", "type", "veth", "peer", "name", "eth2"]);
        // Loopback up, as on a host (tern's metrics endpoint is on 127.0.0.1).
        common::must("ip", &["-n", &ns.0, "link", "set", "lo", "up"]);
        let checked = common::sh("ip", &["netns", "exec", &ns.0, b, "config", "check", c]);
        let out = ok(checked, "tern config check on the packaged example");
        assert!(out.contains("ok: 2 interface(s)"), "{out}");
        runs_the_example(&root, &ns.0);
    } else {
        eprintln!("SKIP: config check with eth1/eth2 needs root (a network namespace)");
    }
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&fresh);
}

/// The unpacked binary runs the example configuration in `ns`, run from
/// outside the source tree: its XDP lane (embedded in the binary) attaches
/// to both devices, the API answers, and SIGTERM stops it cleanly.
fn runs_the_example(root: &Path, ns: &str) {
    let bin = root.join("usr/bin/tern");
    let sock = root.join("api.sock");
    let log = root.join("run.log");
    let child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(&bin)
        .args(["--log", "warn", "run", "--config"])
        .arg(root.join("etc/tern/tern.toml"))
        .arg("--socket")
        .arg(&sock)
        .env("TERN_STATE_DIR", root.join("state"))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("run.log"))
        .spawn()
        .expect("tern run");
    let mut daemon = Daemon(Some(child));
    let cli = |args: &[&str]| Command::new(&bin).arg("--socket").arg(&sock).args(args).output().expect("tern");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(sock.exists() && cli(&["status"]).status.success()) {
        let c = daemon.0.as_mut().expect("running");
        if let Ok(Some(st)) = c.try_wait() {
            panic!("tern run exited ({st}): {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        assert!(Instant::now() < deadline, "tern run never answered on {}", sock.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    let show = ok(cli(&["interface", "show"]), "tern interface show");
    assert_eq!(show.matches("lane xdp native").count(), 2, "the XDP lane on eth1 and eth2:\n{show}");
    for dev in ["eth1", "eth2"] {
        let link = common::must("ip", &["-n", ns, "link", "show", dev]);
        assert!(link.contains("name tern_lane"), "{dev} runs tern's XDP program: {link}");
    }
    let c = daemon.0.as_mut().expect("running");
    common::must("kill", &["-TERM", &c.id().to_string()]);
    // The unit's TimeoutStopSec: a tern that takes longer fails here
    // instead of hanging the test (the Daemon guard kills it).
    let deadline = Instant::now() + Duration::from_secs(15);
    let st = loop {
        if let Some(st) = c.try_wait().expect("try_wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "tern run did not stop within 15 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    daemon.0 = None;
    assert!(st.success(), "tern run stopped with {st}: {}", std::fs::read_to_string(&log).unwrap_or_default());
}

/// A tern that is killed when dropped (a failed check does not leave it).
struct Daemon(Option<Child>);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A network namespace, deleted when dropped (also when a check failed).
struct Netns(String);

impl Netns {
    fn new(name: &str) -> Netns {
        common::must("ip", &["netns", "add", name]);
        Netns(name.to_string())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = common::sh("ip", &["netns", "del", &self.0]);
    }
}

/// `systemd-analyze verify` on the packaged unit, with its commands
/// pointed at the unpacked binary (the host has no /usr/bin/tern).
fn verify_unit(root: &Path, unit: &str) {
    let have = Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("SKIP: systemd-analyze verify: no systemd-analyze");
        return;
    }
    let dir = root.join("verify");
    std::fs::create_dir_all(&dir).expect("verify dir");
    let bin = root.join("usr/bin/tern");
    let path = dir.join("tern.service");
    std::fs::write(&path, unit.replace("/usr/bin/tern", bin.to_str().expect("utf-8"))).expect("unit copy");
    let o = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output().expect("systemd-analyze");
    let err = text(&o.stderr);
    // Only complaints about this unit count (the host's own units may have some).
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("tern.service")).collect();
    assert!(o.status.success() && ours.is_empty(), "systemd-analyze verify: {}\n{err}", o.status);
}
