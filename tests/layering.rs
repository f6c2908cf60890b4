//! The layering the README promises, checked on the source tree: calls go one
//! way (`src/cmd/` -> library -> engine/ssh/process), nothing below `src/cmd/`
//! names it, no `cmd` file names another (a `mod.rs` dispatching to its
//! children aside) or grows past [`CMD_LINES`], no module names one on a
//! higher floor ([`FLOORS`]), and no two files of `src/` import each
//! other, directly or round a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, keyed by its module path (`["engine", "ping"]`).
fn modules() -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files
        .into_iter()
        .filter(|p| !p.ends_with("main.rs"))
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            (parts, p)
        })
        .collect()
}

/// The source without `#[cfg(test)]` modules and `//` comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `a::{b, c::{d, e}}` -> `a::b`, `a::c::d`, `a::c::e`.
fn expand(path: &str) -> Vec<String> {
    expand_as(path)
        .into_iter()
        .map(|p| p.split(" as ").next().unwrap().trim().to_string())
        .collect()
}

/// [`expand`], keeping each ` as name`.
fn expand_as(path: &str) -> Vec<String> {
    let path = path.trim();
    let Some(open) = path.find('{') else {
        return vec![path.to_string()];
    };
    let (prefix, rest) = path.split_at(open);
    let inner = &rest[1..rest.len() - 1];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .flat_map(|i| expand_as(&format!("{prefix}{i}")))
        .collect()
}

/// Every `crate::…` and `super::…` path the code names (use groups expanded).
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for stmt in code.split(';') {
        if let Some(i) = stmt.find("use ") {
            let used = stmt[i + 4..].trim();
            if used.starts_with("crate::") || used.starts_with("super::") {
                out.extend(expand(used));
                continue;
            }
        }
        let bytes = stmt.as_bytes();
        for head in ["crate::", "super::"] {
            let mut from = 0;
            while let Some(i) = stmt[from..].find(head) {
                let at = from + i;
                from = at + head.len();
                if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                    continue;
                }
                let end = stmt[at..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                    .map_or(stmt.len(), |e| at + e);
                out.push(stmt[at..end].trim_end_matches(':').to_string());
            }
        }
    }
    out
}

/// The file a path lands in: the longest module prefix that is a file.
fn target(
    files: &BTreeMap<Vec<String>, PathBuf>,
    from: &[String],
    is_mod: bool,
    path: &str,
) -> Vec<String> {
    let mut parts: Vec<&str> = path.split("::").collect();
    let mut base: Vec<String> = Vec::new();
    if parts[0] == "crate" {
        parts.remove(0);
    } else {
        base = from.to_vec();
        if !is_mod {
            base.pop();
        }
        while parts.first() == Some(&"super") {
            parts.remove(0);
            if parts.first() == Some(&"super") {
                base.pop();
            }
        }
        if is_mod {
            base.pop();
        }
    }
    let full: Vec<String> = base
        .into_iter()
        .chain(parts.into_iter().map(String::from))
        .collect();
    (0..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|p| files.contains_key(p))
        .unwrap_or_default()
}

/// The most lines a `src/cmd/` file may have: a command parses, calls one
/// library entry point and prints.
const CMD_LINES: usize = 150;

/// The most lines a function in `src/` may have (its signature to its
/// closing brace).
const FN_LINES: usize = 120;

/// Functions still over [`FN_LINES`]: each is to be broken into named
/// steps. The list only shrinks: a function listed here that is now short
/// fails the test until it is taken off.
const NOT_YET_SHORT: &[(&str, &str)] = &[];

/// Every function in `src/` (not in a test module) longer than
/// [`FN_LINES`]: `(file, name, lines)`. A function is a line that starts,
/// after its indentation, with `fn`, `pub fn`, `async fn`… and ends at the
/// first later line that is `}` at the same indentation.
fn long_functions() -> Vec<(String, String, usize)> {
    let start = |l: &str| {
        let t = l.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let t = t.strip_prefix("const ").unwrap_or(t);
        let name = t.strip_prefix("fn ")?;
        let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
        (!l.trim_end().ends_with(';')).then(|| name[..end].to_string())
    };
    let mut out = Vec::new();
    for p in modules().into_values() {
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let tests = lines
            .iter()
            .position(|l| l.starts_with("#[cfg(test)]"))
            .unwrap_or(lines.len());
        let mut i = 0;
        while i < tests {
            let Some(name) = start(lines[i]) else {
                i += 1;
                continue;
            };
            let indent = lines[i].len() - lines[i].trim_start().len();
            let close = format!("{}}}", " ".repeat(indent));
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].trim_end() == close)
                .unwrap_or(lines.len() - 1);
            let n = end - i + 1;
            if n > FN_LINES {
                let rel = p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
                out.push((rel.display().to_string(), name, n));
            }
            i = end + 1;
        }
    }
    out
}

#[test]
fn no_function_is_over_the_limit() {
    let long = long_functions();
    let new: Vec<String> = long
        .iter()
        .filter(|(f, n, _)| !NOT_YET_SHORT.contains(&(f.as_str(), n.as_str())))
        .map(|(f, n, l)| format!("{f}: fn {n} ({l} lines)"))
        .collect();
    assert!(
        new.is_empty(),
        "functions over {FN_LINES} lines: break them into named steps (don't just move them): {new:#?}"
    );
    let short: Vec<&(&str, &str)> = NOT_YET_SHORT
        .iter()
        .filter(|(f, n)| !long.iter().any(|(lf, ln, _)| lf == f && ln == n))
        .collect();
    assert!(
        short.is_empty(),
        "no longer over {FN_LINES} lines: take them off NOT_YET_SHORT: {short:?}"
    );
}

/// Every file's module, whether it is a `mod.rs`, and its code.
fn sources() -> Vec<Source> {
    modules()
        .into_iter()
        .map(|(m, p)| {
            let is_mod = p.ends_with("mod.rs") || p.ends_with("lib.rs");
            (m, is_mod, code(&p))
        })
        .collect()
}

/// A source: its module, whether it is a `mod.rs`, its code.
type Source = (Vec<String>, bool, String);

/// A made-up source for the checkers' own tests (`a::b`).
fn source(module: &str, is_mod: bool, code: &str) -> Source {
    let m = module.split("::").map(String::from).collect();
    (m, is_mod, code.to_string())
}

/// Every `(module, is a mod.rs, module it names)`, once each.
fn named(sources: &[Source]) -> BTreeSet<(Vec<String>, bool, Vec<String>)> {
    let files: BTreeMap<Vec<String>, PathBuf> = sources
        .iter()
        .map(|(m, _, _)| (m.clone(), PathBuf::new()))
        .collect();
    sources
        .iter()
        .flat_map(|(m, is_mod, code)| {
            paths(code)
                .into_iter()
                .map(|path| (m.clone(), *is_mod, target(&files, m, *is_mod, &path)))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The `cmd` files that name another `cmd` module: `file -> target`. A
/// `mod.rs` may name the modules below it (it dispatches to them).
fn cmd_to_cmd(sources: &[Source]) -> Vec<String> {
    let cmd = |m: &[String]| m.first().map(String::as_str) == Some("cmd");
    named(sources)
        .into_iter()
        .filter(|(m, is_mod, t)| {
            let below = *is_mod && t.len() > m.len() && t.starts_with(m);
            cmd(m) && cmd(t) && t != m && !below
        })
        .map(|(m, _, t)| format!("{} -> {}", m.join("::"), t.join("::")))
        .collect()
}

#[test]
fn no_cmd_file_names_another() {
    let found = cmd_to_cmd(&sources());
    assert!(
        found.is_empty(),
        "src/cmd/ files must call the library, not each other: {found:?}"
    );
}

#[test]
fn no_cmd_file_is_over_the_limit() {
    let long: Vec<String> = modules()
        .into_iter()
        .filter(|(m, _)| m.first().map(String::as_str) == Some("cmd"))
        .filter_map(|(_, p)| {
            let n = std::fs::read_to_string(&p).unwrap().lines().count();
            (n > CMD_LINES).then(|| format!("{} ({n} lines)", p.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "src/cmd/ files over {CMD_LINES} lines (move the work into the library): {long:?}"
    );
}

/// The library files that still print on their own, each with why. The
/// rest of the library says what it does through a `Reporter`.
const PRINTS: &[&str] = &[
    // The CLI's Reporter and Ask: the terminal itself.
    "src/reporter.rs",
    // The serve's foreground supervision (its lines as the engine runs).
    "src/serve/",
    // The exporter's connection errors, as it serves (no caller to tell).
    "src/metrics/serve.rs",
    // Pull and push progress bars (indicatif) on the terminal's stderr.
    "src/engine/progress.rs",
    // The pull's warning about held-back credentials: refresh's executor
    // has only its `==>` progress line to say it with.
    "src/engine/images.rs",
    // `HALOBOX_TEST_PAUSED`, the line the tests wait for.
    "src/refresh/run.rs",
    // Each node's staging lines, echoed from one thread per node.
    "src/fleet/refresh/stage.rs",
    // `enter`'s wait for distrobox, beside the container's own terminal.
    "src/container/enter.rs",
];

/// The files outside `src/cmd/` (and `main.rs`) that print with
/// `println!`, `print!`, `eprintln!`, `eprint!` or `dbg!`.
fn printers(sources: &[(PathBuf, String)]) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    sources
        .iter()
        .filter(|(p, code)| {
            let rel = p.strip_prefix(&src).unwrap_or(p);
            !rel.starts_with("cmd")
                && ["println!", "print!(", "eprintln!", "eprint!(", "dbg!("]
                    .iter()
                    .any(|m| code.contains(m))
        })
        .map(|(p, _)| format!("src/{}", p.strip_prefix(&src).unwrap_or(p).display()))
        .collect()
}

#[test]
fn the_library_reports_instead_of_printing() {
    let files: Vec<(PathBuf, String)> = modules()
        .into_values()
        .map(|p| {
            let c = code(&p);
            (p, c)
        })
        .collect();
    let found = printers(&files);
    let new: Vec<&String> = found
        .iter()
        .filter(|f| !PRINTS.iter().any(|a| f.starts_with(a)))
        .collect();
    assert!(
        new.is_empty(),
        "library modules that print on their own (take a `&mut dyn Reporter` instead): {new:?}"
    );
    let stale: Vec<&&str> = PRINTS
        .iter()
        .filter(|a| !found.iter().any(|f| f.starts_with(**a)))
        .collect();
    assert!(
        stale.is_empty(),
        "files in PRINTS that no longer print (take them off the list): {stale:?}"
    );
}

#[test]
fn the_checker_sees_a_library_file_print() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = [
        (src.join("a.rs"), "fn f() { eprintln!(\"x\"); }".to_string()),
        (
            src.join("b.rs"),
            "fn f(r: &mut dyn Reporter) { r.note(\"x\"); }".to_string(),
        ),
        (
            src.join("cmd/c.rs"),
            "fn f() { println!(\"x\"); }".to_string(),
        ),
    ];
    assert_eq!(printers(&files), ["src/a.rs"]);
}

#[test]
fn the_checker_sees_a_cmd_file_naming_another() {
    let m = source;
    let tree = [
        m("cmd", true, "pub mod a; pub mod b; pub mod fam;"),
        m("cmd::a", false, "fn f() { super::b::run(); }"),
        m("cmd::b", false, "use crate::cmd::a::helper;"),
        m("cmd::fam", true, "fn run() { super::fam::x::run(); }"),
        m("cmd::fam::x", false, "use crate::serve::start;"),
        m("serve", true, ""),
    ];
    assert_eq!(cmd_to_cmd(&tree), ["cmd::a -> cmd::b", "cmd::b -> cmd::a"]);
}

/// The floors of `src/`, lowest first: a module may name modules on its
/// own floor or below, never one above. A module is on the floor of the
/// longest prefix of its path listed here (`""`: the crate root).
const FLOORS: &[(&str, &[&str])] = &[
    (
        "words and processes",
        &[
            "error",
            "units",
            "confine",
            "shell",
            "reporter",
            "image_ref",
            "proc",
            "lock",
            "signals",
            "fan_out",
        ],
    ),
    (
        "the host and ssh",
        &["ssh", "remote", "http", "host", "dataplane"],
    ),
    (
        "the engine and the settings",
        &[
            "engine",
            "backend",
            "config",
            "cluster::config",
            "cluster::vars",
            "cluster::auth",
            "image",
        ],
    ),
    (
        "containers and one host",
        &[
            "container",
            "check",
            "doctor",
            "setup",
            "refresh",
            "metrics",
        ],
    ),
    ("the cluster", &["cluster", "model"]),
    ("serving and benchmarks", &["serve", "bench"]),
    ("workflows over the cluster", &["fleet"]),
    ("the command line", &["cli", "cmd", ""]),
];

/// The modules [`FLOORS`] puts on another floor than their folder's, each
/// with why. Every other folder of `src/` sits on one floor.
const CARVE_OUTS: &[(&str, &str)] = &[
    (
        "cluster::config",
        "cluster.toml's reader: the host floors read the file (cli's defaults, doctor's firewall ports, metrics' scrape targets)",
    ),
    (
        "cluster::vars",
        "cluster.toml's variables, checked by its reader",
    ),
    (
        "cluster::auth",
        "the Ray token variables cluster.toml may not set, checked by its reader",
    ),
];

/// The most carve-outs [`CARVE_OUTS`] may list.
const MAX_CARVE_OUTS: usize = 6;

/// The folders that name a folder on a higher floor (through a carve-out),
/// each with why.
const FOLDER_ARROWS_UP: &[(&str, &str, &str)] = &[
    (
        "doctor",
        "cluster",
        "the firewall's ports come from cluster.toml (cluster::config)",
    ),
    (
        "metrics",
        "cluster",
        "the exporter's node and the scrape config read cluster.toml (cluster::config)",
    ),
];

/// The most arrows back up at folder scale.
const MAX_FOLDER_ARROWS_UP: usize = 2;

/// The entries of `floors` below a folder: modules on another floor than
/// their folder's.
fn spanning(floors: &[(&str, &[&str])]) -> Vec<String> {
    floors
        .iter()
        .flat_map(|(_, prefixes)| prefixes.iter())
        .filter(|p| p.contains("::"))
        .map(|p| p.to_string())
        .collect()
}

/// Every `folder -> folder` (the first part of a module's path) where the
/// target's folder is on a higher floor than the caller's.
fn folder_arrows_up(sources: &[Source]) -> BTreeSet<(String, String)> {
    let top = |m: &[String]| vec![m.first().cloned().unwrap_or_default()];
    named(sources)
        .into_iter()
        .filter(|(m, _, t)| top(m) != top(t) && floor(&top(t)) > floor(&top(m)))
        .map(|(m, _, t)| (top(&m)[0].clone(), top(&t)[0].clone()))
        .collect()
}

#[test]
fn every_folder_sits_on_one_floor_but_the_carve_outs() {
    let listed: BTreeSet<String> = CARVE_OUTS.iter().map(|(m, _)| m.to_string()).collect();
    let found: BTreeSet<String> = spanning(FLOORS).into_iter().collect();
    assert_eq!(
        found, listed,
        "a module on another floor than its folder must be in CARVE_OUTS with its reason (or move it to a folder of its floor)"
    );
    assert!(
        CARVE_OUTS.len() <= MAX_CARVE_OUTS,
        "{} carve-outs, at most {MAX_CARVE_OUTS}: give the modules a folder of their floor",
        CARVE_OUTS.len()
    );
    assert!(CARVE_OUTS.iter().all(|(_, why)| !why.is_empty()));
}

#[test]
fn the_folders_call_up_only_where_listed() {
    let listed: BTreeSet<(String, String)> = FOLDER_ARROWS_UP
        .iter()
        .map(|(a, b, _)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(
        folder_arrows_up(&sources()),
        listed,
        "folders that call a folder on a higher floor: move the code, or list the arrow in FOLDER_ARROWS_UP with its reason"
    );
    assert!(FOLDER_ARROWS_UP.len() <= MAX_FOLDER_ARROWS_UP);
}

#[test]
fn the_checker_sees_a_folder_on_two_floors() {
    let floors: &[(&str, &[&str])] = &[("low", &["a", "b::c"]), ("high", &["b", "d::e::f"])];
    assert_eq!(spanning(floors), ["b::c", "d::e::f"]);
    let m = |p: &str, code: &str| source(p, false, code);
    let tree = [
        m("doctor::firewall", "use crate::cluster::config::parse;"),
        m("cluster::config", ""),
        m("cluster::run", "use crate::fleet::refresh::run;"),
        m("fleet::refresh", "use crate::cluster::run::up;"),
    ];
    assert_eq!(
        folder_arrows_up(&tree),
        BTreeSet::from([
            ("cluster".to_string(), "fleet".to_string()),
            ("doctor".to_string(), "cluster".to_string()),
        ])
    );
}

/// The floor of module `m` (an index into [`FLOORS`]).
fn floor(m: &[String]) -> usize {
    let path = m.join("::");
    FLOORS
        .iter()
        .enumerate()
        .flat_map(|(i, (_, prefixes))| prefixes.iter().map(move |p| (i, *p)))
        .filter(|(_, p)| {
            if p.is_empty() {
                path.is_empty()
            } else {
                path == *p || path.starts_with(&format!("{p}::"))
            }
        })
        .max_by_key(|(_, p)| p.len())
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("{path} is on no floor: add it to FLOORS"))
}

/// Every `file -> target` where the target is on a higher floor.
fn upward(sources: &[Source]) -> Vec<String> {
    let name = |m: &[String]| format!("{} ({})", m.join("::"), FLOORS[floor(m)].0);
    named(sources)
        .into_iter()
        .filter(|(m, _, t)| floor(t) > floor(m))
        .map(|(m, _, t)| format!("{} -> {}", name(&m), name(&t)))
        .collect()
}

#[test]
fn no_module_names_one_on_a_higher_floor() {
    let found = upward(&sources());
    assert!(
        found.is_empty(),
        "modules that call up a floor (move the code, or the call): {found:#?}"
    );
}

#[test]
fn the_checker_sees_a_call_up_a_floor() {
    let m = |p: &str, code: &str| source(p, false, code);
    let tree = [
        m("config", "use crate::container::spec::Spec;"),
        m("container::spec", "use crate::config::load;"),
        m("cluster::run", "crate::fleet::refresh::run();"),
        m("fleet::refresh", "use crate::cluster::run::up;"),
    ];
    assert_eq!(
        upward(&tree),
        [
            "cluster::run (the cluster) -> fleet::refresh (workflows over the cluster)",
            "config (the engine and the settings) -> container::spec (containers and one host)",
        ]
    );
    assert_eq!(floor(&["cmd".into(), "bench".into()]), FLOORS.len() - 1);
}

#[test]
fn nothing_below_cmd_names_it() {
    let offenders: Vec<String> = modules()
        .into_iter()
        .filter(|(m, _)| m.first().map(String::as_str) != Some("cmd"))
        .filter(|(_, p)| code(p).contains("crate::cmd"))
        .map(|(_, p)| p.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "library modules must not call up into src/cmd/: {offenders:?}"
    );
}

#[test]
fn no_import_circles_between_files() {
    let files = modules();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, p) in &files {
        let is_mod = p.ends_with("mod.rs") || p.ends_with("lib.rs");
        let set = edges.entry(m.clone()).or_default();
        for path in paths(&code(p)) {
            let t = target(&files, m, is_mod, &path);
            // A module's parent (mod.rs) re-exporting it is not a circle of
            // two files doing work; the crate root is everyone's parent.
            if t != *m && !t.is_empty() {
                set.insert(t);
            }
        }
    }
    // Tarjan's strongly connected components.
    struct Walk<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<Vec<String>, usize>,
        low: BTreeMap<Vec<String>, usize>,
        stack: Vec<Vec<String>>,
        circles: Vec<Vec<Vec<String>>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, v: &Vec<String>) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let l = self.low[v].min(self.low[w]);
                    self.low.insert(v.clone(), l);
                } else if self.stack.contains(w) {
                    let l = self.low[v].min(self.index[w]);
                    self.low.insert(v.clone(), l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    let done = w == *v;
                    comp.push(w);
                    if done {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.circles.push(comp);
                }
            }
        }
    }
    let mut walk = Walk {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        circles: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    let named: Vec<Vec<String>> = walk
        .circles
        .iter()
        .map(|c| c.iter().map(|m| files[m].display().to_string()).collect())
        .collect();
    assert!(named.is_empty(), "files that import each other: {named:?}");
    assert!(edges.values().map(BTreeSet::len).sum::<usize>() > 100);
}

#[test]
fn the_checker_sees_a_circle() {
    assert_eq!(
        expand("crate::a::{b, c::{d, e as f}}"),
        ["crate::a::b", "crate::a::c::d", "crate::a::c::e"]
    );
    let p = paths("use crate::host::{limits::LimitValue, procs};\nlet x = super::plan::make();");
    assert!(p.contains(&"crate::host::limits::LimitValue".to_string()));
    assert!(p.contains(&"crate::host::procs".to_string()));
    assert!(p.contains(&"super::plan::make".to_string()));
}

/// The floors as a Mermaid picture, highest first.
fn floors_mermaid() -> String {
    let mut out = String::from("flowchart TD\n");
    for (i, (name, modules)) in FLOORS.iter().enumerate().rev() {
        let list: Vec<&str> = modules.iter().copied().filter(|m| !m.is_empty()).collect();
        out.push_str(&format!("    f{i}[\"{name}: {}\"]\n", list.join(", ")));
    }
    for i in (1..FLOORS.len()).rev() {
        out.push_str(&format!("    f{i} --> f{}\n", i - 1));
    }
    out
}

#[test]
fn contributing_draws_the_floors_and_names_every_room() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let drawn = generated(
        &doc,
        "<!-- floors: generated by tests/layering.rs from FLOORS -->\n",
        "<!-- /floors -->",
    )
    .expect("CONTRIBUTING.md has the floors picture");
    assert_eq!(
        drawn,
        floors_mermaid(),
        "CONTRIBUTING.md's floors picture is stale: paste the right side in"
    );
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let mut missing = Vec::new();
    for m in modules().keys().filter(|m| m.len() == 1) {
        let path = if root.join("src").join(&m[0]).is_dir() {
            format!("`src/{}/`", m[0])
        } else {
            format!("`src/{}.rs`", m[0])
        };
        if !doc.contains(&path) {
            missing.push(path);
        }
        let linked = |form: &str| lib.contains(&format!("[`{form}{}`]", m[0]));
        if !linked("") && !linked("mod@") {
            missing.push(format!("src/lib.rs: [`{}`]", m[0]));
        }
    }
    for m in modules().keys().filter(|m| m.len() == 2) {
        if root.join("src").join(&m[0]).join(&m[1]).is_dir()
            && !doc.contains(&format!("`src/{}/{}/`", m[0], m[1]))
        {
            missing.push(format!("`src/{}/{}/`", m[0], m[1]));
        }
    }
    let mut scripts = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    walk(&root.join("scripts"), &mut scripts);
    for s in scripts {
        let name = s.file_name().unwrap().to_string_lossy().into_owned();
        if !doc.contains(&name) {
            missing.push(s.strip_prefix(root).unwrap().display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "CONTRIBUTING.md's Layout table (and src/lib.rs's doc) must name every room and script: {missing:?}"
    );
}

/// The one door each `src/cmd/` file goes through: the library entry points
/// it calls (paths below `crate::`), keyed by the file's module. Every
/// `cmd` file is here (a dispatching `mod.rs`, or a command that only
/// prints clap's own output, with none); each door must be called from its
/// file and be a function of the library; CONTRIBUTING.md's first picture
/// is drawn from this list.
const DOORS: &[(&str, &[&str])] = &[
    ("cmd", &[]),
    (
        "cmd::bench",
        &[
            "bench::flow::run",
            "bench::flow::report",
            "bench::flow::compare",
        ],
    ),
    ("cmd::bench::ab", &["fleet::serving_ab::run"]),
    ("cmd::bench::collective", &["bench::collective::run"]),
    (
        "cmd::bench::html",
        &["bench::html::report_file", "bench::html::compare_file"],
    ),
    ("cmd::bench::serving", &["bench::serving::measure"]),
    ("cmd::bench::soak", &["bench::soak::measure"]),
    ("cmd::build", &["image::build::plan"]),
    ("cmd::check", &["check::run::check"]),
    ("cmd::cluster", &[]),
    (
        "cmd::cluster::bench",
        &["fleet::bench_run::bench", "bench::collective::run"],
    ),
    (
        "cmd::cluster::boot",
        &["fleet::boot::run::enable", "fleet::boot::run::disable"],
    ),
    ("cmd::cluster::doctor", &["fleet::doctor_run::doctor"]),
    (
        "cmd::cluster::fleet",
        &["fleet::refresh::run", "fleet::install::run"],
    ),
    (
        "cmd::cluster::init",
        &["cluster::config::ClusterConfig::new"],
    ),
    (
        "cmd::cluster::join",
        &["cluster::join::report", "cluster::join::start"],
    ),
    (
        "cmd::cluster::lifecycle",
        &["fleet::up", "fleet::down", "fleet::lifecycle::down_plan"],
    ),
    ("cmd::cluster::menu", &["fleet::supervisor::serve"]),
    (
        "cmd::cluster::metrics",
        &["metrics::scrape_config::prometheus_config"],
    ),
    (
        "cmd::cluster::status",
        &["fleet::ray_up::status", "serve::rpc_servers::status"],
    ),
    ("cmd::cluster::top", &["metrics::top::watch"]),
    ("cmd::completions", &[]),
    ("cmd::detect", &["host::gather"]),
    (
        "cmd::doctor",
        &["host::gather", "host::jumbo::prove", "doctor::diagnose"],
    ),
    ("cmd::enter", &["container::enter::run"]),
    (
        "cmd::image",
        &["image::add_layer::run", "cluster::image_sync::sync"],
    ),
    (
        "cmd::list",
        &["engine::connect", "refresh::repair::heal_all"],
    ),
    ("cmd::man", &[]),
    ("cmd::metrics", &["fleet::exporter::run"]),
    (
        "cmd::model",
        &[
            "model::flow::pull",
            "model::flow::sync",
            "model::flow::ls",
            "model::flow::rm",
        ],
    ),
    ("cmd::plan", &["serve::decide::plan"]),
    ("cmd::publish", &["image::publish_flow::run"]),
    ("cmd::refresh", &["refresh::flow::run"]),
    ("cmd::rm", &["engine::connect", "lock::try_acquire"]),
    (
        "cmd::serve",
        &[
            "fleet::supervisor::serve",
            "serve::control::status",
            "serve::control::logs",
            "serve::control::stop",
        ],
    ),
    ("cmd::setup", &["setup::flow::run"]),
    (
        "cmd::snapshot",
        &["host::snapshot::collect", "host::snapshot::write_archive"],
    ),
    ("cmd::start", &[]),
];

/// What a `use crate::…` brings into scope: `(name, path below crate::)`.
fn imports(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for stmt in code.split(';') {
        let Some(i) = stmt.find("use crate::") else {
            continue;
        };
        for item in expand_as(&stmt[i + 4..]) {
            let (path, alias) = match item.split_once(" as ") {
                Some((p, a)) => (p.trim(), Some(a.trim())),
                None => (item.as_str(), None),
            };
            let path = path.strip_prefix("crate::").unwrap_or(path);
            let path = path.strip_suffix("::self").unwrap_or(path);
            let last = path.rsplit("::").next().unwrap_or(path);
            out.push((alias.unwrap_or(last).to_string(), path.to_string()));
        }
    }
    out
}

/// Whether `code` calls `name(` (`name` a whole path, not the tail of one).
fn called(code: &str, name: &str) -> bool {
    let call = format!("{name}(");
    code.match_indices(&call).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    })
}

/// Whether `code` calls the library function `door` (a path below
/// `crate::`), by its whole path or through what it imports.
fn calls(code: &str, door: &str) -> bool {
    let mut names = vec![format!("crate::{door}")];
    for (name, path) in imports(code) {
        if door == path {
            names.push(name);
        } else if let Some(rest) = door.strip_prefix(&format!("{path}::")) {
            names.push(format!("{name}::{rest}"));
        }
    }
    names.iter().any(|n| called(code, n))
}

/// Whether `door` is a function of the library: the file of its longest
/// module prefix defines it, or re-exports it with `pub use`.
fn is_library_fn(files: &BTreeMap<Vec<String>, PathBuf>, door: &str) -> bool {
    let parts: Vec<String> = door.split("::").map(String::from).collect();
    let Some(module) = (1..parts.len())
        .rev()
        .map(|n| parts[..n].to_vec())
        .find(|p| files.contains_key(p))
    else {
        return false;
    };
    let code = code(&files[&module]);
    let f = parts.last().unwrap();
    let defined = [format!("fn {f}("), format!("fn {f}<")]
        .iter()
        .any(|d| code.contains(d.as_str()));
    let exported = code.split(';').any(|stmt| {
        stmt.trim_start().starts_with("pub use ")
            && expand(&stmt.trim_start()[8..])
                .iter()
                .any(|p| p.rsplit("::").next() == Some(f.as_str()))
    });
    defined || exported
}

/// The `cmd` files missing from [`DOORS`], the entries that name no `cmd`
/// file, and the doors not called from their file or not in the library.
fn door_faults(files: &BTreeMap<Vec<String>, PathBuf>) -> Vec<String> {
    let mut faults = Vec::new();
    for m in files
        .keys()
        .filter(|m| m.first().map(String::as_str) == Some("cmd"))
    {
        let key = m.join("::");
        if !DOORS.iter().any(|(k, _)| *k == key) {
            faults.push(format!("{key}: not in DOORS"));
        }
    }
    for (key, doors) in DOORS {
        let m: Vec<String> = key.split("::").map(String::from).collect();
        let Some(path) = files.get(&m) else {
            faults.push(format!("{key}: no such cmd file"));
            continue;
        };
        let code = code(path);
        for door in *doors {
            if !calls(&code, door) {
                faults.push(format!("{key}: does not call {door}"));
            }
            if !is_library_fn(files, door) {
                faults.push(format!("{key}: {door} is no library function"));
            }
        }
    }
    faults
}

#[test]
fn every_cmd_file_goes_through_its_doors() {
    let faults = door_faults(&modules());
    assert!(
        faults.is_empty(),
        "DOORS must list every src/cmd/ file with the library entry points it calls: {faults:#?}"
    );
}

#[test]
fn the_checker_sees_a_door() {
    let code = "use crate::image::publish_flow as flow;\nuse crate::fleet;\nuse crate::cluster::run;\n\
                fn f() { flow::run(); fleet::up(); crate::fleet::supervisor::serve(); x_run::go(); }";
    assert!(calls(code, "image::publish_flow::run"));
    assert!(calls(code, "fleet::up"));
    assert!(calls(code, "fleet::supervisor::serve"));
    assert!(!calls(code, "cluster::run::status"));
    assert!(!calls(code, "bench::run::go"));
    let files = modules();
    assert!(is_library_fn(&files, "fleet::up"));
    assert!(is_library_fn(&files, "fleet::supervisor::serve"));
    assert!(!is_library_fn(&files, "fleet::supervisor::nothing_here"));
}

/// The boxes of CONTRIBUTING.md's first picture besides the doors.
const LAYERS: &str = r#"    cmd --> doors
    doors --> facts["facts: src/host/, src/engine/ queries, setup/facts.rs, refresh/prepare.rs"]
    facts --> plan["plan (pure): refresh/plan.rs, setup/, cluster/plan.rs, serve/plan.rs, container/spec.rs"]
    plan -->|--dry-run| out["printed plan"]
    plan --> exec["executor: refresh/run.rs, setup/apply.rs, fleet/ray_up.rs, fleet/rpc_up.rs, fleet/refresh.rs"]
    exec --> edge["the edge: src/engine/, src/ssh.rs + src/remote.rs, src/http.rs, src/proc.rs"]
"#;

/// CONTRIBUTING.md's first picture: the command line, the doors from
/// [`DOORS`], then facts, plan and executor.
fn layers_mermaid() -> String {
    let mut rooms: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for d in DOORS.iter().flat_map(|(_, d)| d.iter().copied()) {
        let (room, rest) = d.split_once("::").unwrap_or((d, ""));
        let list = rooms.entry(room).or_default();
        let door = if rest.is_empty() { d } else { rest };
        if !list.contains(&door) {
            list.push(door);
        }
    }
    let lines: Vec<String> = rooms
        .iter()
        .map(|(room, doors)| format!("{room}: {}", doors.join(", ")))
        .collect();
    format!(
        "flowchart LR\n    main[\"src/main.rs\"] --> cli[\"src/cli/ (clap)\"]\n    \
         main --> cmd[\"src/cmd/ (one file per command)\"]\n    \
         doors[\"the doors (library entry points)<br>{}\"]\n{LAYERS}",
        lines.join("<br>")
    )
}

/// The text between `start` and the closing fence before `end`.
fn generated<'a>(doc: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let (_, rest) = doc.split_once(start)?;
    let (picture, _) = rest.split_once(&format!("```\n{end}"))?;
    picture.strip_prefix("```mermaid\n")
}

#[test]
fn contributing_draws_the_doors_and_stays_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let drawn = generated(
        &doc,
        "<!-- layers: generated by tests/layering.rs from DOORS -->\n",
        "<!-- /layers -->",
    )
    .expect("CONTRIBUTING.md has the layers picture");
    assert_eq!(
        drawn,
        layers_mermaid(),
        "CONTRIBUTING.md's layers picture is stale: paste the right side in"
    );
    let chars = doc.chars().count();
    assert!(
        chars < 20_000,
        "CONTRIBUTING.md is {chars} characters (at most 19,999): move detail into the modules' //! docs"
    );
    let mut long = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with('|')) {
        let mut cell = String::new();
        let mut prev = ' ';
        for c in line.chars() {
            if c == '|' && prev != '\\' {
                if cell.chars().count() > 300 {
                    long.push(cell.trim().chars().take(60).collect::<String>());
                }
                cell.clear();
            } else {
                cell.push(c);
            }
            prev = c;
        }
    }
    assert!(
        long.is_empty(),
        "CONTRIBUTING.md's table cells over 300 characters (one line a room; the rest in its //! doc): {long:?}"
    );
}

/// The rooms whose `mod.rs` doc names every file and folder in them (so
/// none, like `cluster/resume.rs` once, is named nowhere).
const NAMED_IN_DOC: &[&str] = &["cluster", "fleet", "serve", "model", "refresh", "metrics"];

#[test]
fn every_file_of_the_workflow_rooms_is_named_in_its_doc() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    for room in NAMED_IN_DOC {
        let dir = src.join(room);
        let doc: String = std::fs::read_to_string(dir.join("mod.rs"))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        for e in std::fs::read_dir(&dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".rs").unwrap_or(&name);
            if name == "mod.rs" {
                continue;
            }
            let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            let named = doc.match_indices(stem).any(|(at, _)| {
                !word(doc[..at].chars().next_back()) && !word(doc[at + stem.len()..].chars().next())
            });
            if !named {
                missing.push(format!("src/{room}/{name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files their room's mod.rs doc does not name: {missing:?}"
    );
}
