//! The layering the README promises, checked on the source tree: calls go one
//! way (`src/cmd/` -> library -> engine/ssh/process), nothing below `src/cmd/`
//! names it, and no two files of `src/` import each other, directly or round
//! a circle.

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
    let path = path.trim();
    let Some(open) = path.find('{') else {
        return vec![path.split(" as ").next().unwrap().trim().to_string()];
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
        .flat_map(|i| expand(&format!("{prefix}{i}")))
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
