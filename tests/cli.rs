//! The command-line surface: help with examples, completions, man pages.

mod common;

use common::halobox;
use predicates::str::contains;

#[test]
fn every_command_has_help_with_examples() {
    for cmd in [
        &[][..],
        &["detect"],
        &["doctor"],
        &["completions"],
        &["man"],
    ] {
        let mut args: Vec<&str> = cmd.to_vec();
        args.push("--help");
        halobox()
            .args(&args)
            .assert()
            .success()
            .stdout(contains("Examples:"));
    }
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef halobox"),
        ("fish", "complete -c halobox"),
    ] {
        halobox()
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(contains(marker))
            .stdout(contains("doctor"));
    }
    halobox().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn man_page_prints_and_writes() {
    halobox()
        .arg("man")
        .assert()
        .success()
        .stdout(contains(".TH halobox 1"))
        .stdout(contains("doctor"));
    let dir = tempfile::tempdir().unwrap();
    halobox()
        .args(["man", "--out-dir", dir.path().to_str().unwrap()])
        .assert()
        .success();
    for page in ["halobox.1", "halobox-doctor.1", "halobox-detect.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
}

#[test]
fn version_flag() {
    halobox()
        .arg("--version")
        .assert()
        .success()
        .stdout(contains(env!("CARGO_PKG_VERSION")));
}
