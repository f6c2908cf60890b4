//! Human-readable reports of checks (doctor's, and `halobox check`'s).

use std::fmt::Write;

use super::{Check, Pending, Report, Status, Summary};

/// Colours for a terminal, or none.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Use ANSI colours.
    pub color: bool,
}

impl Style {
    fn status(self, s: Status) -> String {
        let label = s.label();
        if !self.color {
            return label.to_string();
        }
        let code = match s {
            Status::Pass => "32",
            Status::Warn => "33",
            Status::Fail => "31;1",
            Status::Skip => "2",
            Status::Info => "36",
        };
        format!("\x1b[{code}m{label}\x1b[0m")
    }
}

/// Renders the report as aligned lines with indented fixes.
pub fn human(report: &Report, style: Style) -> String {
    let source = report
        .sysroot
        .as_deref()
        .map(|s| format!("snapshot {s}"))
        .unwrap_or_else(|| "this host".into());
    checks(
        &format!("halobox doctor: {source}"),
        &report.checks,
        report.summary,
        style,
    )
}

/// Renders `title`, then each check as an aligned line with its fix
/// indented below, then the counts and the verdict.
pub fn checks(title: &str, checks: &[Check], summary: Summary, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}\n");
    let width = checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in checks {
        let pending = c
            .pending
            .map(|p| format!("({}) ", p.label()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}  {:width$}  {pending}{}",
            style.status(c.status),
            c.id,
            c.summary
        );
        if let Some(fix) = &c.fix {
            let pad = " ".repeat(width + 8);
            for (i, line) in fix.lines().enumerate() {
                let lead = if i == 0 { "fix: " } else { "     " };
                let _ = writeln!(out, "{pad}{lead}{line}");
            }
        }
    }
    let s = summary;
    let verdict = if s.fail > 0 {
        "not ready: fix every FAIL above"
    } else if s.warn > 0 {
        "usable; the WARNs cost performance or need confirming"
    } else {
        "ready"
    };
    let info = if s.info > 0 {
        format!(", {} for information", s.info)
    } else {
        String::new()
    };
    let waiting: Vec<String> = [Pending::Relogin, Pending::Restart, Pending::Reboot]
        .into_iter()
        .filter_map(|p| {
            let n = checks.iter().filter(|c| c.pending == Some(p)).count();
            (n > 0).then(|| format!("{n} {}", p.label()))
        })
        .collect();
    let waiting = if waiting.is_empty() {
        String::new()
    } else {
        format!(" ({})", waiting.join(", "))
    };
    let _ = writeln!(
        out,
        "\n{} passed{waiting}, {} warned, {} failed, {} skipped{info}: {verdict}",
        s.pass, s.warn, s.fail, s.skip
    );
    out
}
