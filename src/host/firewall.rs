//! Host firewalls: firewalld (whether it runs, its default zone and its
//! permanent zones), ufw (enabled, default input policy, user rules) and
//! the raw nftables / iptables rulesets (`nft -j list ruleset` and
//! `iptables-save` on the live host, which need root; in a snapshot
//! `captured/nft-ruleset.json` and `captured/iptables-save.txt`).

use schemars::JsonSchema;
use serde::Serialize;

use super::netfilter::{self, Ruleset};
use super::procs::Process;
use super::reader::Reader;

/// Where a snapshot keeps `nft -j list ruleset`.
pub const NFT_RULESET: &str = "/captured/nft-ruleset.json";
/// Where a snapshot keeps `iptables-save`.
pub const IPTABLES_SAVE: &str = "/captured/iptables-save.txt";

/// One firewalld zone (permanent configuration).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Zone {
    /// Zone name (file stem).
    pub name: String,
    /// `target` (`ACCEPT`, `DROP`, `%%REJECT%%`, `default`).
    pub target: Option<String>,
    /// Interfaces bound to it.
    pub interfaces: Vec<String>,
    /// Services it allows.
    pub services: Vec<String>,
    /// Ports it allows, as `PORT[-PORT]/PROTO`.
    pub ports: Vec<String>,
    /// The file it came from (`/etc/firewalld/zones/…` overrides `/usr/lib/firewalld/zones/…`).
    pub source: String,
}

/// ufw's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct UfwFacts {
    /// `/etc/ufw/ufw.conf` exists (ufw is installed).
    pub installed: bool,
    /// `ENABLED=yes` in `/etc/ufw/ufw.conf`.
    pub enabled: bool,
    /// `DEFAULT_INPUT_POLICY` from `/etc/default/ufw` (`DROP`, `REJECT`, `ACCEPT`).
    pub default_input_policy: Option<String>,
    /// The `ufw-user-input` rules of `/etc/ufw/user.rules`.
    pub user_rules: Ruleset,
}

/// A ruleset read from the kernel or a capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RulesetSource {
    /// Read.
    Read {
        /// The rules.
        ruleset: Ruleset,
    },
    /// Not read, and why (no tool, not root, not captured).
    Unavailable {
        /// Why.
        reason: String,
    },
}

impl RulesetSource {
    /// The rules, when read.
    pub fn ruleset(&self) -> Option<&Ruleset> {
        match self {
            RulesetSource::Read { ruleset } => Some(ruleset),
            RulesetSource::Unavailable { .. } => None,
        }
    }
}

impl Default for RulesetSource {
    fn default() -> Self {
        RulesetSource::Unavailable {
            reason: "not read".into(),
        }
    }
}

/// Firewall facts.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct FirewallFacts {
    /// A `firewalld` process is running.
    pub firewalld_running: bool,
    /// `DefaultZone=` from `/etc/firewalld/firewalld.conf`.
    pub default_zone: Option<String>,
    /// Interfaces named in the permanent trusted zone.
    pub trusted_interfaces: Vec<String>,
    /// Every permanent zone (`/etc/firewalld/zones` over `/usr/lib/firewalld/zones`).
    pub zones: Vec<Zone>,
    /// ufw.
    pub ufw: UfwFacts,
    /// The nftables ruleset (firewalld's own tables left out).
    pub nftables: RulesetSource,
    /// The iptables `filter` table.
    pub iptables: RulesetSource,
}

impl FirewallFacts {
    /// The zone firewalld puts `interface` in: the zone that lists it, else
    /// the default zone (`public` when unset).
    pub fn zone_of(&self, interface: &str) -> (String, Option<&Zone>) {
        if let Some(z) = self
            .zones
            .iter()
            .find(|z| z.interfaces.iter().any(|i| i == interface))
        {
            return (z.name.clone(), Some(z));
        }
        let name = self.default_zone.clone().unwrap_or_else(|| "public".into());
        let zone = self.zones.iter().find(|z| z.name == name);
        (name, zone)
    }
}

/// Reads firewall facts; `processes` are the firewalld processes found.
pub fn read(r: &Reader, processes: &[Process]) -> FirewallFacts {
    FirewallFacts {
        firewalld_running: processes.iter().any(|p| p.comm == "firewalld"),
        default_zone: r.text_quiet("/etc/firewalld/firewalld.conf").and_then(|t| {
            t.lines()
                .find_map(|l| l.trim().strip_prefix("DefaultZone="))
                .map(|z| z.trim().to_string())
        }),
        trusted_interfaces: r
            .text_quiet("/etc/firewalld/zones/trusted.xml")
            .map(|t| zone_interfaces(&t))
            .unwrap_or_default(),
        zones: zones(r),
        ufw: ufw(r),
        nftables: nftables(r),
        iptables: iptables(r),
    }
}

fn zones(r: &Reader) -> Vec<Zone> {
    let mut out: Vec<Zone> = Vec::new();
    for dir in ["/etc/firewalld/zones", "/usr/lib/firewalld/zones"] {
        if !r.exists(dir) {
            continue;
        }
        for file in r.dir(dir).unwrap_or_default() {
            let Some(name) = file.strip_suffix(".xml") else {
                continue;
            };
            if out.iter().any(|z| z.name == name) {
                continue;
            }
            let path = format!("{dir}/{file}");
            if let Some(xml) = r.text_quiet(&path) {
                out.push(parse_zone(name, &xml, &path));
            }
        }
    }
    out
}

/// Parses a firewalld zone file.
pub fn parse_zone(name: &str, xml: &str, source: &str) -> Zone {
    let ports = elements(xml, "port")
        .into_iter()
        .filter_map(|tag| {
            Some(format!(
                "{}/{}",
                attr(&tag, "port")?,
                attr(&tag, "protocol")?
            ))
        })
        .collect();
    Zone {
        name: name.to_string(),
        target: elements(xml, "zone")
            .first()
            .and_then(|tag| attr(tag, "target")),
        interfaces: zone_interfaces(xml),
        services: elements(xml, "service")
            .into_iter()
            .filter_map(|tag| attr(&tag, "name"))
            .collect(),
        ports,
        source: source.to_string(),
    }
}

/// The inside of every `<NAME …>` start tag.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let open = format!("<{name}");
    xml.split(&open)
        .skip(1)
        .filter(|rest| rest.starts_with(|c: char| c.is_whitespace() || c == '/' || c == '>'))
        .filter_map(|rest| Some(rest[..rest.find('>')?].to_string()))
        .collect()
}

/// The value of `key="…"` (or single quotes) in a tag.
fn attr(tag: &str, key: &str) -> Option<String> {
    let mut rest = tag;
    loop {
        let at = rest.find(key)?;
        let before_ok = at == 0 || rest[..at].ends_with(char::is_whitespace);
        let after = rest[at + key.len()..].trim_start();
        if before_ok && let Some(v) = after.strip_prefix('=') {
            let v = v.trim_start();
            let quote = v.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let v = &v[1..];
            return Some(v[..v.find(quote)?].to_string());
        }
        rest = &rest[at + key.len()..];
    }
}

/// The `name` of every `<interface name="..."/>` element of a zone file.
pub fn zone_interfaces(xml: &str) -> Vec<String> {
    elements(xml, "interface")
        .into_iter()
        .filter_map(|tag| attr(&tag, "name"))
        .collect()
}

fn ufw(r: &Reader) -> UfwFacts {
    let Some(conf) = r.text_quiet("/etc/ufw/ufw.conf") else {
        return UfwFacts::default();
    };
    let value = |text: &str, key: &str| {
        text.lines().find_map(|l| {
            let v = l.trim().strip_prefix(key)?.strip_prefix('=')?;
            Some(v.trim().trim_matches('"').to_string())
        })
    };
    UfwFacts {
        installed: true,
        enabled: value(&conf, "ENABLED").is_some_and(|v| v.eq_ignore_ascii_case("yes")),
        default_input_policy: r
            .text_quiet("/etc/default/ufw")
            .and_then(|t| value(&t, "DEFAULT_INPUT_POLICY")),
        user_rules: r
            .text_quiet("/etc/ufw/user.rules")
            .map(|t| netfilter::parse_iptables_save(&t))
            .unwrap_or_default(),
    }
}

/// Runs a ruleset dump on the live host; its error text when it fails.
fn dump(program: &str, args: &[&str]) -> Result<String, String> {
    match crate::proc::command(program).args(args).output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{program} is not installed"))
        }
        Err(e) => Err(format!("{program}: {e}")),
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let err = err.lines().next().unwrap_or("failed").trim();
            Err(
                if err.contains("ermission denied") || err.contains("not permitted") {
                    format!(
                        "`{program}` needs root ({err}): run `sudo halobox doctor` to check these rules"
                    )
                } else {
                    format!("`{program} {}` failed: {err}", args.join(" "))
                },
            )
        }
    }
}

fn nftables(r: &Reader) -> RulesetSource {
    let text = if r.root().is_live() {
        dump("nft", &["-j", "list", "ruleset"]).inspect(|t| r.write(NFT_RULESET, t.as_bytes()))
    } else {
        r.text_quiet(NFT_RULESET)
            .ok_or_else(|| "not captured".to_string())
    };
    match text.and_then(|t| netfilter::parse_nft_json(&t)) {
        Ok(ruleset) => RulesetSource::Read { ruleset },
        Err(reason) => RulesetSource::Unavailable { reason },
    }
}

fn iptables(r: &Reader) -> RulesetSource {
    let text = if r.root().is_live() {
        dump("iptables-save", &["-t", "filter"]).inspect(|t| r.write(IPTABLES_SAVE, t.as_bytes()))
    } else {
        r.text_quiet(IPTABLES_SAVE)
            .ok_or_else(|| "not captured".to_string())
    };
    match text {
        Ok(t) => RulesetSource::Read {
            ruleset: netfilter::parse_iptables_save(&t),
        },
        Err(reason) => RulesetSource::Unavailable { reason },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_file() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
<zone target="ACCEPT">
  <short>Trusted</short>
  <interface name="enp194s0np0"/>
  <interface name='thunderbolt0' />
  <interface broken
</zone>"#;
        assert_eq!(zone_interfaces(xml), ["enp194s0np0", "thunderbolt0"]);
        let z = parse_zone("trusted", xml, "/etc/firewalld/zones/trusted.xml");
        assert_eq!(z.target.as_deref(), Some("ACCEPT"));
    }

    #[test]
    fn public_zone() {
        let z = parse_zone(
            "public",
            r#"<zone><short>Public</short><service name="ssh"/><service name="dhcpv6-client"/><port port="4791" protocol="udp"/><port protocol="tcp" port="10000-20000"/></zone>"#,
            "/usr/lib/firewalld/zones/public.xml",
        );
        assert_eq!(z.target, None);
        assert_eq!(z.services, ["ssh", "dhcpv6-client"]);
        assert_eq!(z.ports, ["4791/udp", "10000-20000/tcp"]);
    }
}
