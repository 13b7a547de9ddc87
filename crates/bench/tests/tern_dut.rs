//! The RFC 2544 tester driving the real `tern run` on AF_XDP with a
//! busy-polling worker (`--dut tern-afxdp-busy`, and the default worker
//! that busy-polls while traffic flows, `tern-afxdp-adaptive`): the tester
//! teaches tern's helper socket the ingress NAPI id with UDP broadcasts
//! from the generator's namespace, and refuses the DUT if busy polling
//! does not engage. Short trials at a low rate; nothing here asserts a speed.
//! `tern-bench` runs as a program; the tern under test is the one cargo built
//! beside it (`cargo build -p tern`; a workspace test run builds it).

use std::path::PathBuf;
use std::process::Command;
use tern_testkit::netns::lab_missing;

const TERN_BENCH: &str = env!("CARGO_BIN_EXE_tern-bench");

/// `tern` in tern-bench's directory, or why it cannot be used.
fn tern_beside() -> Result<PathBuf, String> {
    let tern = std::path::Path::new(TERN_BENCH).with_file_name("tern");
    if tern.is_file() { Ok(tern) } else { Err(format!("no {} (cargo build -p tern first)", tern.display())) }
}

#[test]
fn tester_runs_tern_with_busy_polling_engaged() {
    if let Some(why) = lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let tern = match tern_beside() {
        Ok(t) => t,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!("tern-busy-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let out = Command::new(TERN_BENCH)
        .args(["rfc2544", "--scenario", "single-flow-50fw", "--tern-bin"])
        .arg(&tern)
        .args(["--dut", "tern-afxdp-busy,tern-afxdp-adaptive"])
        .args(["--trial-secs", "0.5", "--drain-secs", "0.3", "--loads", "0.01", "--max-mpps", "0.05", "--no-search"])
        .args(["--json", "--work-dir"])
        .arg(&dir)
        .output()
        .expect("run tern-bench");
    assert!(out.status.success(), "tester failed: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    // The spinning worker, then the default one that sleeps when idle.
    for (k, (name, idle)) in
        [("tern-afxdp-busy", "idle = spin"), ("tern-afxdp-adaptive", "idle = sleep")].into_iter().enumerate()
    {
        let dut = &json["duts"][k];
        assert_eq!(dut["name"], name);
        assert_eq!(dut["status"], "ok", "{}", dut["message"]);
        assert!(dut["description"].as_str().is_some_and(|d| d.contains(idle)), "{}", dut["description"]);
        let point = &dut["sizes"][0]["frame_loss"][0];
        let sent = point["sent"].as_u64().expect("sent");
        let received = point["streams"][0]["received"].as_u64().expect("received");
        assert!(sent > 0 && received > 0, "{name}: sent {sent}, received {received}");
    }
    // tern said which way it busy-polls: through the helper socket on a
    // veth, in both runs.
    let logs: Vec<String> = std::fs::read_dir(&dir)
        .expect("work dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with("-tern.log"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    assert_eq!(logs.len(), 2, "one log per DUT");
    for log in &logs {
        assert!(log.contains("busy polling through the helper socket's NAPI"), "tern log: {log}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run in which a DUT failed exits non-zero, after printing the report
/// (the JSON names the failure) and writing the HTML page, whose error
/// cell is escaped. The "tern" here is a script that fails at start.
#[test]
fn a_run_in_which_a_dut_failed_exits_non_zero() {
    use std::os::unix::fs::PermissionsExt;
    if let Some(why) = lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tern-bench-fail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let fake = dir.join("fake-tern");
    std::fs::write(&fake, "#!/bin/sh\nfor i in $(seq 1 300); do echo \"line $i <oops>\"; done\nexit 3\n")
        .expect("script");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let html = dir.join("report.html");
    let out = Command::new(TERN_BENCH)
        .args(["rfc2544", "--scenario", "single-flow-50fw", "--dut", "tern", "--tern-bin"])
        .arg(&fake)
        .args(["--trial-secs", "0.2", "--drain-secs", "0.2", "--loads", "0.01", "--max-mpps", "0.02", "--no-search"])
        // All on CPU 0, nothing moved: the test beside this one holds CPU 1
        // for its DUT and moves every other task, this one's too, off it.
        .args(["--gen-cpu", "0", "--dut-cpu", "0", "--sink-cpu", "0", "--no-isolate"])
        .args(["--json", "--html"])
        .arg(&html)
        .arg("--work-dir")
        .arg(&dir)
        .output()
        .expect("run tern-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a failed DUT must fail the run: {stderr}");
    assert!(stderr.contains("tern-bench: failed: tern"), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report is still printed");
    assert_eq!(json["ceiling"]["status"], "ok", "{}", json["ceiling"]["message"]);
    assert_eq!(json["duts"][0]["status"], "failed");
    assert!(json["duts"][0]["message"].as_str().is_some_and(|m| m.contains("exited at start")));
    let page = std::fs::read_to_string(&html).expect("the page is still written");
    assert!(page.contains("failed:") && page.contains("&lt;oops&gt;") && !page.contains("<oops>"));
    let _ = std::fs::remove_dir_all(&dir);
}
