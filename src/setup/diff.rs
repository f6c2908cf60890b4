//! Unified diffs of planned file writes.

use similar::TextDiff;

/// `old` → `new` of `path` as a unified diff (`/dev/null` for a new file).
pub fn unified(path: &str, old: Option<&str>, new: &str) -> String {
    let from = if old.is_some() { path } else { "/dev/null" };
    TextDiff::from_lines(old.unwrap_or_default(), new)
        .unified_diff()
        .context_radius(3)
        .header(from, path)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_changed_files() {
        let d = unified("/etc/x", None, "a\n");
        assert!(d.starts_with("--- /dev/null\n+++ /etc/x\n"), "{d}");
        assert!(d.contains("+a\n"));
        let d = unified("/etc/x", Some("a\nb\n"), "a\nc\n");
        assert!(d.contains("-b\n+c\n"), "{d}");
    }
}
