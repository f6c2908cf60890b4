//! firewalld: whether it runs, its default zone, and the interfaces listed in
//! its permanent trusted zone (`/etc/firewalld/zones/trusted.xml`).

use schemars::JsonSchema;
use serde::Serialize;

use super::procs::Process;
use super::reader::Reader;

/// firewalld facts.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct FirewallFacts {
    /// A `firewalld` process is running.
    pub firewalld_running: bool,
    /// `DefaultZone=` from `/etc/firewalld/firewalld.conf`.
    pub default_zone: Option<String>,
    /// Interfaces named in the permanent trusted zone.
    pub trusted_interfaces: Vec<String>,
}

/// Reads firewalld facts; `processes` are the firewalld processes found.
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
    }
}

/// The `name` of every `<interface name="..."/>` element of a zone file.
pub fn zone_interfaces(xml: &str) -> Vec<String> {
    xml.split("<interface")
        .skip(1)
        .filter_map(|rest| {
            let tag = &rest[..rest.find('>')?];
            let after = &tag[tag.find("name=")? + 5..];
            let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let value = &after[1..];
            Some(value[..value.find(quote)?].to_string())
        })
        .collect()
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
    }
}
