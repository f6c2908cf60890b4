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
