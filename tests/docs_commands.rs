//! The reference in docs/commands/ stays complete: every top-level command
//! has a page, every subcommand of a group has its section there, and every
//! long flag its `--help` shows is named on its page (walked from clap's
//! definition, the same one `--help` prints).

use std::path::Path;

/// Every shown long flag of `cmd` (`--name`), globals included.
fn flags(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "help" && *l != "version")
        .map(|l| format!("--{l}"))
        .collect()
}

#[test]
fn every_command_and_flag_is_on_its_page() {
    let mut cli = <halobox::cli::Cli as clap::CommandFactory>::command();
    cli.build();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands");
    let mut missing = Vec::new();
    let mut pages = Vec::new();
    for top in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = top.get_name();
        if name == "help" {
            continue;
        }
        let file = format!("{name}.md");
        pages.push(file.clone());
        let Ok(page) = std::fs::read_to_string(dir.join(&file)) else {
            missing.push(format!(
                "docs/commands/{file} (no page for `halobox {name}`)"
            ));
            continue;
        };
        let check = |cmd: &clap::Command, path: &str, missing: &mut Vec<String>| {
            for f in flags(cmd) {
                if !page.contains(&format!("`{f}")) {
                    missing.push(format!("docs/commands/{file}: `{path}` flag {f}"));
                }
            }
        };
        check(top, &format!("halobox {name}"), &mut missing);
        for sub in top
            .get_subcommands()
            .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        {
            let path = format!("halobox {name} {}", sub.get_name());
            if !page.contains(&format!("## {path}\n")) {
                missing.push(format!("docs/commands/{file}: no `## {path}` section"));
            }
            check(sub, &path, &mut missing);
        }
    }
    assert!(
        missing.is_empty(),
        "the command reference is incomplete:\n  {}\n(write it there; `halobox COMMAND --help` lists the flags)",
        missing.join("\n  ")
    );
    // No page for a command that does not exist.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let f = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(pages.contains(&f), "docs/commands/{f} names no command");
    }
    // The README links each command to its page.
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    for p in &pages {
        assert!(
            readme.contains(&format!("(docs/commands/{p})")),
            "README.md does not link docs/commands/{p}"
        );
    }
}
