//! The JSON schemas in docs/ are generated from the types and must be current.
//! Regenerate with `HALOBOX_UPDATE_SCHEMAS=1 cargo test --test schema`.

use std::path::PathBuf;

fn check(name: &str, schema: schemars::Schema) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    let want = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    if std::env::var_os("HALOBOX_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is out of date: run HALOBOX_UPDATE_SCHEMAS=1 cargo test --test schema",
        path.display()
    );
}

#[test]
fn host_facts_schema_is_current() {
    check(
        "host-facts.schema.json",
        schemars::schema_for!(halobox::host::HostFacts),
    );
}

#[test]
fn doctor_report_schema_is_current() {
    check(
        "doctor-report.schema.json",
        schemars::schema_for!(halobox::doctor::Report),
    );
}

#[test]
fn check_report_schema_is_current() {
    check(
        "check-report.schema.json",
        schemars::schema_for!(halobox::check::Report),
    );
}

#[test]
fn bench_results_schema_is_current() {
    check(
        "bench-results.schema.json",
        schemars::schema_for!(halobox::bench::results::Results),
    );
}

/// The `cause` names of saved results are what users' scripts match on:
/// they are pinned here, and the schema documents every one of them.
#[test]
fn bench_cause_names_are_stable() {
    const CAUSES: [&str; 18] = [
        "no_device",
        "device_access",
        "port_down",
        "memlock",
        "connect",
        "port_in_use",
        "peer_exited",
        "retry_exceeded",
        "completion",
        "qp_setup",
        "version_mismatch",
        "rdma_cm",
        "usage",
        "run_failed",
        "not_installed",
        "no_data",
        "collapse",
        "unknown",
    ];
    let schema =
        serde_json::to_value(schemars::schema_for!(halobox::bench::results::Results)).unwrap();
    let variants = schema["$defs"]["Cause"]["oneOf"]
        .as_array()
        .expect("Cause is documented variant by variant");
    let documented: Vec<&str> = variants
        .iter()
        .map(|v| {
            assert!(
                v["description"].as_str().is_some_and(|d| !d.is_empty()),
                "undocumented cause {v}"
            );
            v["const"].as_str().expect("a cause name")
        })
        .collect();
    assert_eq!(
        documented, CAUSES,
        "a cause was renamed, added or removed: scripts match these names; \
         keep the old name or raise results::SCHEMA_VERSION"
    );
    for name in CAUSES {
        let cause: halobox::bench::diagnose::Cause =
            serde_json::from_value(serde_json::Value::from(name)).unwrap();
        assert_eq!(serde_json::to_value(cause).unwrap(), name);
    }
    assert_eq!(halobox::bench::results::SCHEMA_VERSION, 1);
}
