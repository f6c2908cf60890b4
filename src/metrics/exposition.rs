//! The Prometheus text exposition format (version 0.0.4): `# HELP`,
//! `# TYPE`, then one line per sample, every sample labelled with the node.

use std::fmt::Write;

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Goes up and down.
    Gauge,
    /// Only goes up (named `…_total`).
    Counter,
}

/// One sample: its labels (besides `node`) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label names and values, in output order.
    pub labels: Vec<(&'static str, String)>,
    /// The value in the family's unit.
    pub value: f64,
}

/// A metric family: name, help, type and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Metric name (`halobox_gpu_gtt_used_bytes`).
    pub name: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
    /// Gauge or counter.
    pub kind: Kind,
    /// Its samples.
    pub samples: Vec<Sample>,
}

/// Longest label value written; longer values (a hostile sysfs label) are cut.
pub const MAX_LABEL_CHARS: usize = 128;

/// Renders families as exposition text. Families without samples and
/// samples whose value is not finite are left out.
pub fn render(node: &str, families: &[Family]) -> String {
    let mut o = String::new();
    for f in families {
        let samples: Vec<&Sample> = f.samples.iter().filter(|s| s.value.is_finite()).collect();
        if samples.is_empty() {
            continue;
        }
        let kind = match f.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let _ = writeln!(o, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(o, "# TYPE {} {kind}", f.name);
        for s in samples {
            let _ = write!(o, "{}{{node=\"{}\"", f.name, escape(node));
            for (k, v) in &s.labels {
                let _ = write!(o, ",{k}=\"{}\"", escape(v));
            }
            let _ = writeln!(o, "}} {}", s.value);
        }
    }
    o
}

/// A label value as the format requires it: `\`, `"` and newline escaped,
/// control characters dropped, at most [`MAX_LABEL_CHARS`] characters.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars().take(MAX_LABEL_CHARS) {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_skips() {
        let fams = [
            Family {
                name: "halobox_x_bytes",
                help: "X.",
                kind: Kind::Gauge,
                samples: vec![
                    Sample {
                        labels: vec![("sensor", "a\"b\\c\nd\u{7}".into())],
                        value: 1.5,
                    },
                    Sample {
                        labels: vec![],
                        value: f64::NAN,
                    },
                ],
            },
            Family {
                name: "halobox_empty_total",
                help: "Empty.",
                kind: Kind::Counter,
                samples: vec![],
            },
        ];
        assert_eq!(
            render("n\"1", &fams),
            "# HELP halobox_x_bytes X.\n# TYPE halobox_x_bytes gauge\nhalobox_x_bytes{node=\"n\\\"1\",sensor=\"a\\\"b\\\\c\\nd\"} 1.5\n"
        );
        assert_eq!(escape(&"x".repeat(500)).len(), MAX_LABEL_CHARS);
    }
}
