//! Resource limits as the kernel reports them: values, soft/hard pairs, and
//! the rows of a `/proc/<pid>/limits` file.

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// One limit value: a number (bytes for memlock, a count for files and
/// processes) or unlimited. In JSON: a number, or the string `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitValue {
    /// A finite limit.
    Finite(u64),
    /// No limit (`RLIM_INFINITY`).
    Unlimited,
}

impl Serialize for LimitValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            LimitValue::Finite(n) => s.serialize_u64(*n),
            LimitValue::Unlimited => s.serialize_str("unlimited"),
        }
    }
}

impl JsonSchema for LimitValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LimitValue".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A finite limit (bytes for memlock, a count otherwise) or \"unlimited\".",
            "oneOf": [
                {"type": "integer", "minimum": 0},
                {"const": "unlimited"}
            ]
        })
    }
}

impl std::fmt::Display for LimitValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitValue::Unlimited => f.write_str("unlimited"),
            LimitValue::Finite(b) => f.write_str(&crate::units::format_bytes(*b)),
        }
    }
}

/// A soft/hard limit pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Limit {
    /// The limit in force.
    pub soft: LimitValue,
    /// The most the soft limit may be raised to without privilege.
    pub hard: LimitValue,
}

/// Memlock, open files and processes of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ProcessLimits {
    /// "Max locked memory".
    pub memlock: Option<Limit>,
    /// "Max open files".
    pub nofile: Option<Limit>,
    /// "Max processes".
    pub nproc: Option<Limit>,
}

/// The limits in a `/proc/<pid>/limits` file; a missing memlock row is recorded.
pub fn read_process_limits(r: &Reader, path: &str) -> ProcessLimits {
    let Some(text) = r.text(path) else {
        return ProcessLimits::default();
    };
    let limits = ProcessLimits {
        memlock: parse_limits_row(&text, "Max locked memory"),
        nofile: parse_limits_row(&text, "Max open files"),
        nproc: parse_limits_row(&text, "Max processes"),
    };
    if limits.memlock.is_none() {
        r.note(path, "no readable 'Max locked memory' row");
    }
    limits
}

/// Parses the `Max locked memory  <soft>  <hard>  bytes` row.
pub fn parse_limits_memlock(text: &str) -> Option<Limit> {
    parse_limits_row(text, "Max locked memory")
}

/// Parses the row called `name` (`<name>  <soft>  <hard>  [units]`).
pub fn parse_limits_row(text: &str, name: &str) -> Option<Limit> {
    let row = text.lines().find_map(|l| l.strip_prefix(name))?;
    let mut parts = row.split_whitespace();
    let soft = parse_value(parts.next()?)?;
    let hard = parse_value(parts.next()?)?;
    Some(Limit { soft, hard })
}

fn parse_value(s: &str) -> Option<LimitValue> {
    if s == "unlimited" {
        Some(LimitValue::Unlimited)
    } else {
        s.parse().ok().map(LimitValue::Finite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_rows() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max locked memory         8388608              8388608              bytes     \n";
        assert_eq!(
            parse_limits_memlock(text),
            Some(Limit {
                soft: LimitValue::Finite(8 << 20),
                hard: LimitValue::Finite(8 << 20)
            })
        );
        let unl = "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(
            parse_limits_memlock(unl).unwrap().soft,
            LimitValue::Unlimited
        );
        assert_eq!(
            parse_limits_memlock("Max locked memory  lots  8 bytes"),
            None
        );
        assert!(LimitValue::Finite(u64::MAX) < LimitValue::Unlimited);
    }
}
