//! The command-line surface: help with examples, completions, man pages.

mod common;

use common::halobox;
use predicates::str::contains;

#[test]
fn every_command_has_help_with_examples() {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, missing: &mut Vec<String>) {
        let has = cmd
            .get_after_help()
            .is_some_and(|h| h.to_string().contains("Examples:"));
        if !has {
            missing.push(path.join(" "));
        }
        for sub in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
            path.push(sub.get_name().to_string());
            walk(sub, path, missing);
            path.pop();
        }
    }
    let mut missing = Vec::new();
    let cli = <halobox::cli::Cli as clap::CommandFactory>::command();
    walk(&cli, &mut vec!["halobox".into()], &mut missing);
    assert!(missing.is_empty(), "no examples in --help of: {missing:?}");
    // And the real binary prints them.
    for cmd in [
        &["doctor"][..],
        &["refresh"],
        &["cluster", "up"],
        &["image", "add-layer"],
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
