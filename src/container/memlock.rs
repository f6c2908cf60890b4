//! The memlock limit a container asks for, and whether the engine can grant it.

use std::fmt;
use std::str::FromStr;

use crate::host::limits::LimitValue;
use crate::host::procs::Process;

/// A memlock request: `unlimited` or a size (`64M`, `8MiB`, `1G`, `1048576`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemlockRequest(pub LimitValue);

impl FromStr for MemlockRequest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("unlimited") || t == "-1" {
            return Ok(Self(LimitValue::Unlimited));
        }
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| {
            format!("{s:?} is not a size: use `unlimited`, or a number with K, M or G (64M)")
        })?;
        let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
            "" | "B" => 1,
            "K" | "KB" | "KIB" => 1 << 10,
            "M" | "MB" | "MIB" => 1 << 20,
            "G" | "GB" | "GIB" => 1 << 30,
            other => {
                return Err(format!(
                    "unknown size unit {other:?} in {s:?}: use K, M or G"
                ));
            }
        };
        n.checked_mul(mult)
            .map(|b| Self(LimitValue::Finite(b)))
            .ok_or_else(|| format!("{s:?} is too large"))
    }
}

impl fmt::Display for MemlockRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl MemlockRequest {
    /// The value for the API's `Ulimits` (`-1` for unlimited).
    pub fn api_value(self) -> i64 {
        match self.0 {
            LimitValue::Unlimited => -1,
            LimitValue::Finite(b) => i64::try_from(b).unwrap_or(i64::MAX),
        }
    }

    /// The value for the container's memlock label: `unlimited` or bytes.
    pub fn label_value(self) -> String {
        match self.0 {
            LimitValue::Unlimited => "unlimited".into(),
            LimitValue::Finite(b) => b.to_string(),
        }
    }
}

/// Whether the process that creates containers can give them the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// It can.
    Yes,
    /// It cannot; its hard limit is this.
    No {
        /// The most it can grant.
        hard: LimitValue,
    },
    /// Cannot tell (remote engine, process not found or unreadable).
    Unknown(String),
}

/// Can `creator` (the engine's process) grant `req`? A process may raise a
/// container's limit up to its own hard limit, or anywhere with CAP_SYS_RESOURCE.
pub fn grant(req: MemlockRequest, creator: Option<&Process>) -> Grant {
    let Some(p) = creator else {
        return Grant::Unknown("the engine's process was not found on this host".into());
    };
    if p.cap_sys_resource == Some(true) {
        return Grant::Yes;
    }
    match p.limits.memlock {
        None => Grant::Unknown(format!("the limits of pid {} could not be read", p.pid)),
        Some(l) if l.hard >= req.0 => Grant::Yes,
        Some(l) => Grant::No { hard: l.hard },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::limits::{Limit, ProcessLimits};

    #[test]
    fn parse_sizes() {
        let b = |s: &str| s.parse::<MemlockRequest>().map(|m| m.0);
        assert_eq!(b("unlimited"), Ok(LimitValue::Unlimited));
        assert_eq!(b("-1"), Ok(LimitValue::Unlimited));
        assert_eq!(b("64M"), Ok(LimitValue::Finite(64 << 20)));
        assert_eq!(b("8MiB"), Ok(LimitValue::Finite(8 << 20)));
        assert_eq!(b("1g"), Ok(LimitValue::Finite(1 << 30)));
        assert_eq!(b("4096"), Ok(LimitValue::Finite(4096)));
        assert!(b("lots").is_err());
        assert!(b("5T").unwrap_err().contains("unit"));
        assert!(b("99999999999999999999G").is_err());
    }

    #[test]
    fn grants() {
        let p = |hard, cap| Process {
            pid: 7,
            comm: "podman".into(),
            argv: vec![],
            uid: Some(0),
            cap_sys_resource: Some(cap),
            limits: ProcessLimits {
                memlock: Some(Limit { soft: hard, hard }),
                ..Default::default()
            },
            mnt_ns: None,
        };
        let unl = MemlockRequest(LimitValue::Unlimited);
        let eight = LimitValue::Finite(8 << 20);
        assert_eq!(
            grant(unl, Some(&p(eight, false))),
            Grant::No { hard: eight }
        );
        assert_eq!(grant(unl, Some(&p(eight, true))), Grant::Yes);
        assert_eq!(
            grant(MemlockRequest(eight), Some(&p(eight, false))),
            Grant::Yes
        );
        assert_eq!(
            grant(unl, Some(&p(LimitValue::Unlimited, false))),
            Grant::Yes
        );
        assert!(matches!(grant(unl, None), Grant::Unknown(_)));
    }
}
