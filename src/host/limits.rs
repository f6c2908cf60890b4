//! Resource limits: memlock of this process and of the podman API service.

use schemars::JsonSchema;
use serde::Serialize;

use super::procs::{self, Process};
use super::reader::Reader;

/// One limit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitValue {
    /// A number of bytes.
    Bytes(u64),
    /// No limit (`RLIM_INFINITY`).
    Unlimited,
}

impl std::fmt::Display for LimitValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitValue::Unlimited => f.write_str("unlimited"),
            LimitValue::Bytes(b) => f.write_str(&crate::units::format_bytes(*b)),
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

/// Memlock facts.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct LimitsFacts {
    /// Memlock of the invoking process (live: getrlimit; snapshot: `/proc/self/limits`).
    pub memlock: Option<Limit>,
    /// Running podman API services (`podman system service`) with their memlock.
    pub podman_services: Vec<Process>,
}

/// Reads memlock limits; `processes` are the podman processes already found.
pub fn read(r: &Reader, processes: &[Process]) -> LimitsFacts {
    let memlock = if r.root().is_live() {
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK)
            .ok()
            .map(|(soft, hard)| Limit {
                soft: from_rlim(soft),
                hard: from_rlim(hard),
            })
    } else {
        read_memlock(r, "/proc/self/limits")
    };
    LimitsFacts {
        memlock,
        podman_services: processes
            .iter()
            .filter(|p| procs::is_podman_service(p))
            .cloned()
            .collect(),
    }
}

fn from_rlim(v: u64) -> LimitValue {
    if v == nix::sys::resource::RLIM_INFINITY {
        LimitValue::Unlimited
    } else {
        LimitValue::Bytes(v)
    }
}

/// The "Max locked memory" row of a `/proc/<pid>/limits` file.
pub fn read_memlock(r: &Reader, path: &str) -> Option<Limit> {
    let text = r.text(path)?;
    let limit = parse_limits_memlock(&text);
    if limit.is_none() {
        r.note(path, "no readable 'Max locked memory' row");
    }
    limit
}

/// Parses the `Max locked memory  <soft>  <hard>  bytes` row.
pub fn parse_limits_memlock(text: &str) -> Option<Limit> {
    let row = text
        .lines()
        .find_map(|l| l.strip_prefix("Max locked memory"))?;
    let mut parts = row.split_whitespace();
    let soft = parse_value(parts.next()?)?;
    let hard = parse_value(parts.next()?)?;
    Some(Limit { soft, hard })
}

fn parse_value(s: &str) -> Option<LimitValue> {
    if s == "unlimited" {
        Some(LimitValue::Unlimited)
    } else {
        s.parse().ok().map(LimitValue::Bytes)
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
                soft: LimitValue::Bytes(8 << 20),
                hard: LimitValue::Bytes(8 << 20)
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
        assert!(LimitValue::Bytes(u64::MAX) < LimitValue::Unlimited);
    }
}
