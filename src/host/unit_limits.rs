//! `LimitMEMLOCK=` of a systemd unit as its files configure it: the unit
//! file found first on the search path, then its `<unit>.d/*.conf` drop-ins
//! in file-name order (a name in an earlier directory hides the same name
//! in a later one); the last assignment wins. A service picks it up when
//! it (re)starts.

use schemars::JsonSchema;
use serde::Serialize;

use super::limits::{Limit, LimitValue};
use super::reader::Reader;

/// Which systemd manager runs the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The system manager (rootful services).
    System,
    /// The user's manager (`systemctl --user`).
    User,
}

/// A unit's configured memlock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct UnitLimit {
    /// The unit (`podman.service`).
    pub unit: String,
    /// Its manager.
    pub scope: Scope,
    /// `LimitMEMLOCK=` in effect in the files; `null` when none sets it
    /// (the manager's `DefaultLimitMEMLOCK=`).
    pub memlock: Option<Limit>,
    /// The host path of the file whose assignment wins.
    pub file: Option<String>,
}

const SYSTEM_DIRS: [&str; 5] = [
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

const USER_DIRS: [&str; 4] = [
    "/etc/systemd/user",
    "/run/systemd/user",
    "/usr/local/lib/systemd/user",
    "/usr/lib/systemd/user",
];

/// The unit search path of `scope` (`home` adds the user's own directories).
fn search_path(scope: Scope, home: Option<&str>) -> Vec<String> {
    match scope {
        Scope::System => SYSTEM_DIRS.iter().map(|d| d.to_string()).collect(),
        Scope::User => {
            let home = home.map(|h| h.trim_end_matches('/'));
            let mut dirs: Vec<String> = home
                .map(|h| format!("{h}/.config/systemd/user"))
                .into_iter()
                .collect();
            dirs.extend(USER_DIRS[..2].iter().map(|d| d.to_string()));
            dirs.extend(home.map(|h| format!("{h}/.local/share/systemd/user")));
            dirs.extend(USER_DIRS[2..].iter().map(|d| d.to_string()));
            dirs
        }
    }
}

/// Reads `unit`'s configured memlock in `scope`.
pub fn read(r: &Reader, unit: &str, scope: Scope, home: Option<&str>) -> UnitLimit {
    let dirs = search_path(scope, home);
    let mut files: Vec<String> = dirs
        .iter()
        .map(|d| format!("{d}/{unit}"))
        .find(|p| r.exists(p))
        .into_iter()
        .collect();
    let mut dropins: Vec<(String, String)> = Vec::new();
    for d in &dirs {
        let dir = format!("{d}/{unit}.d");
        for name in r.dir(&dir).unwrap_or_default() {
            if name.ends_with(".conf") && !dropins.iter().any(|(n, _)| *n == name) {
                dropins.push((name.clone(), format!("{dir}/{name}")));
            }
        }
    }
    dropins.sort();
    files.extend(dropins.into_iter().map(|(_, p)| p));
    let mut memlock = None;
    let mut file = None;
    for path in files {
        let Some(text) = r.text_quiet(&path) else {
            continue;
        };
        if let Some(v) = last_assignment(&text) {
            memlock = v;
            file = Some(path);
        }
    }
    UnitLimit {
        unit: unit.to_string(),
        scope,
        memlock,
        file,
    }
}

/// The last `LimitMEMLOCK=` of the `[Service]` section: `Some(None)` for an
/// empty assignment (a reset) or a value systemd would reject.
fn last_assignment(text: &str) -> Option<Option<Limit>> {
    let mut section = "";
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if section != "[Service]" {
            continue;
        }
        if let Some((key, value)) = line.split_once('=')
            && key.trim() == "LimitMEMLOCK"
        {
            found = Some(parse_limit(value.trim()));
        }
    }
    found
}

/// `infinity`, `64M`, `soft:hard`.
pub fn parse_limit(value: &str) -> Option<Limit> {
    let (soft, hard) = value.split_once(':').unwrap_or((value, value));
    Some(Limit {
        soft: parse_bytes(soft)?,
        hard: parse_bytes(hard)?,
    })
}

fn parse_bytes(v: &str) -> Option<LimitValue> {
    let v = v.trim();
    if v == "infinity" {
        return Some(LimitValue::Unlimited);
    }
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift).map(LimitValue::Finite)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_values() {
        let inf = Limit {
            soft: LimitValue::Unlimited,
            hard: LimitValue::Unlimited,
        };
        assert_eq!(parse_limit("infinity"), Some(inf));
        assert_eq!(
            parse_limit("8M:infinity"),
            Some(Limit {
                soft: LimitValue::Finite(8 << 20),
                hard: LimitValue::Unlimited
            })
        );
        assert_eq!(parse_limit("lots"), None);
        assert_eq!(
            last_assignment(
                "[Unit]\nLimitMEMLOCK=1\n[Service]\nLimitMEMLOCK=64K\nLimitMEMLOCK=infinity\n"
            ),
            Some(Some(inf))
        );
        assert_eq!(last_assignment("[Service]\nLimitMEMLOCK=\n"), Some(None));
        assert_eq!(last_assignment("[Service]\nExecStart=x\n"), None);
    }
}
