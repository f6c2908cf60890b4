//! `halobox bench collective`: live on two namespace nodes whose podman
//! containers carry the torch of vLLM's CPU venv (scripts/bench-collective.sh:
//! gloo over the data plane, the JSON, the saved run read by `bench
//! report`, a Python without torch refused), and its bad input without an
//! engine. The live run needs root, the engines of scripts/engines/start.sh
//! and scripts/vllm-venv.sh's venv (scripts/test.sh installs both); a
//! missing piece fails.

mod common;

use std::process::Command;

/// halobox with `args` (the tests' one runner): whether it succeeded, and
/// what it printed.
fn halobox(args: &[&str]) -> (bool, String) {
    let out = common::run(args);
    (out.status.success(), common::text(&out))
}

/// The two-node run, then its JSON checked: gloo, every sum right, a
/// positive bus bandwidth at every size, and the saved run read back.
#[test]
fn two_namespace_nodes_gloo_correct_sums_saved_and_no_torch_refused() {
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/bench-collective.sh"
        ))
        .arg("--out")
        .arg(out.path())
        .env("HALOBOX_BIN", env!("CARGO_BIN_EXE_halobox"))
        .output()
        .expect("run scripts/bench-collective.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stderr),
        String::from_utf8_lossy(&run.stdout)
    );
    assert!(run.status.success(), "bench-collective.sh failed:\n{text}");
    let read = |name: &str| -> serde_json::Value {
        let t = std::fs::read_to_string(out.path().join(name)).unwrap();
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("{name}: {e}: {t}"))
    };
    let res = read("collective.json");
    assert_eq!(res["kind"], "collective", "{res}");
    assert_eq!(res["backend"], "gloo", "{res}");
    assert_eq!(res["world"], 2, "{res}");
    assert_eq!(res["status"], "ok", "{res}");
    let rows = res["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 10, "2 operations × 5 sizes: {res}");
    for r in rows {
        assert_eq!(r["correct"], true, "{r}");
        assert!(r["busbw_gbs"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["latency"]["p99_us"].as_f64().unwrap() >= r["latency"]["median_us"].as_f64().unwrap(),
            "{r}"
        );
    }
    for r in res["ranks"].as_array().unwrap() {
        assert_eq!(r["status"], "ok", "{r}");
        assert!(r["torch"].as_str().unwrap().starts_with("2."), "{r}");
    }
    // `bench report` of the saved folder derives the same table.
    let report = read("report.json");
    assert_eq!(report["rows"], res["rows"]);
    let plan = std::fs::read_to_string(out.path().join("plan.txt")).unwrap();
    assert!(
        plan.contains("GLOO_SOCKET_IFNAME=dp0") && plan.contains("MASTER_ADDR="),
        "{plan}"
    );
    let notorch = std::fs::read_to_string(out.path().join("notorch.txt")).unwrap();
    assert!(
        notorch.contains("node a: no torch in its container (/opt/halobox-ray/bin/python")
            && notorch.contains("hint:"),
        "{notorch}"
    );
    assert!(text.contains("ratio all_reduce 16 MiB"), "{text}");
    // The measured ratios (information: a performance goal, not asserted).
    for line in text.lines().filter(|l| l.starts_with("ratio ")) {
        eprintln!("{line}");
    }
}

/// Sizes out of range are refused before anything runs, with the fix.
#[test]
fn sizes_out_of_range_are_refused_with_a_hint() {
    for (sizes, said) in [
        ("4K,1G", "1G is out of range"),
        ("100", "out of range"),
        ("4X", "not a size"),
    ] {
        let (ok, text) = halobox(&[
            "bench",
            "collective",
            "--sizes",
            sizes,
            "--cluster",
            "/nonexistent.toml",
        ]);
        assert!(!ok, "{text}");
        assert!(
            text.contains(said) && text.contains("hint: halobox bench collective --sizes"),
            "{sizes}: {text}"
        );
    }
}

/// A cluster of one node has no collective to run.
#[test]
fn one_node_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(
        &cfg,
        "[[node]]\nssh = \"root@10.77.9.1\"\nip = \"10.77.9.1\"\n",
    )
    .unwrap();
    let (ok, text) = halobox(&[
        "bench",
        "collective",
        "--cluster",
        cfg.to_str().unwrap(),
        "--dry-run",
    ]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("needs two or more")
            && text.contains("hint: add the other nodes with `halobox cluster init"),
        "{text}"
    );
}

/// Two saved runs of different kinds are not compared.
#[test]
fn compare_refuses_a_collective_run_against_a_link_run() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::write(a.path().join("collective-run.json"), "{}").unwrap();
    let (ok, text) = halobox(&[
        "bench",
        "compare",
        a.path().to_str().unwrap(),
        b.path().to_str().unwrap(),
    ]);
    assert!(!ok, "{text}");
    assert!(text.contains("not the same kind of run"), "{text}");
}
