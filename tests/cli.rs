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
        // Hidden commands are halobox's own, run on other nodes by it.
        if !has && !cmd.is_hide_set() {
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
    let out = halobox().arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert_eq!(head.len(), 12, "this test runs in the git checkout");
    let today = chrono_free_date(&text);
    assert_eq!(
        text.trim(),
        format!(
            "halobox {} (commit {head}, built {today})",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// The `built YYYY-MM-DD` part, checked for its shape.
fn chrono_free_date(text: &str) -> String {
    let d = text
        .split("built ")
        .nth(1)
        .and_then(|r| r.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("no build date in {text:?}"));
    let b = d.as_bytes();
    assert!(
        b.len() == 10 && b[4] == b'-' && b[7] == b'-' && d.starts_with("20"),
        "{d:?}"
    );
    d.to_string()
}

/// build.rs run where there is no git checkout (a source tarball): the
/// commit says so, and SOURCE_DATE_EPOCH gives the date.
#[test]
fn version_stamp_from_a_tarball_without_git() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("build-script");
    let built = std::process::Command::new("rustc")
        .args(["--edition", "2024", "-o"])
        .arg(&exe)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/build.rs"))
        .output()
        .expect("rustc");
    assert!(built.status.success(), "{built:?}");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let run = |env: &[(&str, &str)]| {
        let mut c = std::process::Command::new(&exe);
        c.current_dir(&src)
            .env("GIT_CEILING_DIRECTORIES", dir.path())
            .env_remove("HALOBOX_GIT_COMMIT");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = run(&[("SOURCE_DATE_EPOCH", "1700000000")]);
    assert!(
        out.contains("cargo:rustc-env=HALOBOX_GIT_COMMIT=unknown: built without a git checkout\n"),
        "{out}"
    );
    assert!(
        out.contains("cargo:rustc-env=HALOBOX_BUILD_DATE=2023-11-14\n"),
        "{out}"
    );
    let out = run(&[
        ("HALOBOX_GIT_COMMIT", "0123456789ab"),
        ("SOURCE_DATE_EPOCH", "0"),
    ]);
    assert!(out.contains("HALOBOX_GIT_COMMIT=0123456789ab\n"), "{out}");
    assert!(out.contains("HALOBOX_BUILD_DATE=1970-01-01\n"), "{out}");
}

#[test]
fn no_arguments_says_where_to_start() {
    let out = halobox().output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Start here, on each node:\n  halobox doctor "),
        "{text}"
    );
    assert!(text.contains("halobox help COMMAND"), "{text}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

/// Every `hint:` in an error names what to run: a command in backticks, a
/// flag, a `halobox`/`sudo` line, or a placeholder filled with one.
#[test]
fn every_hint_names_the_command_to_run() {
    const KNOWN: &[&str] = &[];
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut all,
    );
    let mut bare = Vec::new();
    let mut seen = 0;
    for f in all {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(at) = line.find("hint: ") else {
                continue;
            };
            let in_literal = line[..at].contains('"') || (i > 0 && lines[i - 1].ends_with('\\'));
            if !in_literal {
                continue;
            }
            seen += 1;
            let mut hint = line[at..].to_string();
            let mut j = i;
            while hint.ends_with('\\') && j + 1 < lines.len() {
                j += 1;
                hint.push_str(lines[j].trim_start());
            }
            let hint = hint.split("\",").next().unwrap().to_string();
            let named = ["`", "--", "halobox ", "sudo ", "{"]
                .iter()
                .any(|m| hint.contains(m));
            if !named && !KNOWN.iter().any(|k| hint.contains(k)) {
                bare.push(format!("{}:{}: {hint}", f.display(), i + 1));
            }
        }
    }
    assert!(seen > 50, "found only {seen} hints: is the scan broken?");
    assert!(
        bare.is_empty(),
        "hints without a command:\n{}",
        bare.join("\n")
    );
}
