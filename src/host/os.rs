//! The distribution, from `/etc/os-release` (or `/usr/lib/os-release`).

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// What `os-release` says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct OsFacts {
    /// `ID` (`fedora`, `ubuntu`, `debian`, `arch`).
    pub id: Option<String>,
    /// `ID_LIKE`, split at spaces (`debian`, `rhel fedora`).
    pub id_like: Vec<String>,
    /// `VERSION_ID` (`43`, `24.04`).
    pub version_id: Option<String>,
    /// `PRETTY_NAME`.
    pub pretty_name: Option<String>,
}

impl OsFacts {
    /// True when the distribution is `id` or derives from it.
    pub fn is_like(&self, id: &str) -> bool {
        self.id.as_deref() == Some(id) || self.id_like.iter().any(|l| l == id)
    }
}

/// Reads `/etc/os-release`, else `/usr/lib/os-release`.
pub fn read(r: &Reader) -> OsFacts {
    r.text_quiet("/etc/os-release")
        .or_else(|| r.text_quiet("/usr/lib/os-release"))
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// Parses `KEY=value` lines; values may be quoted.
pub fn parse(text: &str) -> OsFacts {
    let get = |key: &str| {
        text.lines().find_map(|l| {
            let v = l.trim().strip_prefix(key)?.strip_prefix('=')?;
            let v = v.trim().trim_matches('"').trim_matches('\'');
            (!v.is_empty()).then(|| v.to_string())
        })
    };
    OsFacts {
        id: get("ID"),
        id_like: get("ID_LIKE")
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        version_id: get("VERSION_ID"),
        pretty_name: get("PRETTY_NAME"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release() {
        let o = parse(
            "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\n",
        );
        assert_eq!(o.id.as_deref(), Some("ubuntu"));
        assert_eq!(o.version_id.as_deref(), Some("24.04"));
        assert!(o.is_like("debian") && o.is_like("ubuntu") && !o.is_like("fedora"));
    }
}
