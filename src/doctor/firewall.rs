//! `net.firewall`: does a firewall on this node drop what the cluster sends
//! to its data-plane interface? New connections to RoCE v2 (UDP 4791),
//! Ray's GCS (TCP 6379) and worker ports (TCP 10002-19999), NCCL/RCCL's
//! ephemeral TCP ports and llama.cpp's RPC servers (TCP 50052) are run
//! through every firewall that is active: firewalld's zone, ufw's rules,
//! and the nftables / iptables input chains. Only the data-plane interface
//! is judged (and trusted by `setup`): the services bind the data-plane
//! address, so the LAN side stays closed.

use super::Check;
use crate::dataplane::DataPlane;
use crate::host::HostFacts;
use crate::host::firewall::{FirewallFacts, RulesetSource, Zone};
use crate::host::netfilter::{Chain, Match, Rule, Ruleset, Verdict};

/// A packet a cluster peer sends to this node.
#[derive(Debug, Clone, Copy)]
struct Probe {
    protocol: &'static str,
    port: u16,
    what: &'static str,
    /// Traffic that always goes through the host's IP stack (TCP); RoCE v2
    /// is handled by a hardware RoCE NIC itself, so a rule dropping it
    /// bites soft-RoCE and misconfigured setups, and is a warning.
    critical: bool,
}

const PROBES: [Probe; 5] = [
    Probe {
        protocol: "udp",
        port: 4791,
        what: "RoCE v2 (UDP 4791)",
        critical: false,
    },
    Probe {
        protocol: "tcp",
        port: 6379,
        what: "Ray GCS (TCP 6379)",
        critical: true,
    },
    Probe {
        protocol: "tcp",
        port: 10002,
        what: "Ray workers (TCP 10002-19999)",
        critical: true,
    },
    Probe {
        protocol: "tcp",
        port: 40000,
        what: "NCCL/RCCL sockets (ephemeral TCP)",
        critical: true,
    },
    Probe {
        protocol: "tcp",
        port: crate::cluster::config::DEFAULT_RPC_PORT,
        what: "llama.cpp RPC servers (TCP 50052)",
        critical: true,
    },
];

/// What one firewall does with a probe.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Accept,
    Drop(String),
    Unclear(String),
}

/// One firewall's judgement of every probe.
struct Judged {
    name: String,
    outcomes: Vec<(Probe, Outcome)>,
    fix: String,
}

pub(super) fn check(facts: &HostFacts, plane: Option<&DataPlane>) -> Check {
    let id = "net.firewall";
    let fw = &facts.firewall;
    let Some(p) = plane else {
        return Check::skip(
            id,
            format!(
                "no data-plane interface resolved to check ({})",
                active_list(fw)
            ),
        );
    };
    let iface = p.interface.as_str();
    let (judged, notes) = judge_all(fw, iface);
    let readable = !judged.is_empty()
        || [&fw.iptables, &fw.nftables]
            .iter()
            .any(|s| s.ruleset().is_some());
    if judged.is_empty() && !readable {
        return Check::skip(
            id,
            format!(
                "no firewall manager is active and the raw rules could not be read, so whether {iface} accepts the cluster's traffic is unknown: {}",
                notes.join("; ")
            ),
        );
    }
    let Tally {
        dropped,
        unclear,
        fixes,
        critical,
    } = tally(&judged);
    let active: Vec<&str> = judged.iter().map(|j| j.name.as_str()).collect();
    let context = format!(
        "active: {}{}",
        if active.is_empty() {
            "none".to_string()
        } else {
            active.join(", ")
        },
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        }
    );
    if !dropped.is_empty() {
        let summary = format!(
            "on {iface}, {}; {context}{}",
            dropped.join("; "),
            if critical {
                ": Ray, NCCL and llama.cpp RPC cannot connect"
            } else {
                ": a hardware RoCE NIC takes UDP 4791 before the host firewall, soft-RoCE does not; allow it"
            }
        );
        return if critical {
            Check::fail(id, summary, fixes.join("\n"))
        } else {
            Check::warn(id, summary, fixes.join("\n"))
        };
    }
    if !unclear.is_empty() {
        return Check::warn(
            id,
            format!(
                "cannot tell whether {iface} accepts the cluster's traffic: {}; {context}",
                unclear.join("; ")
            ),
            fixes.join("\n"),
        );
    }
    Check::pass(
        id,
        format!(
            "{iface} accepts {} traffic; {context}",
            if p.is_usb4() {
                "Ray and NCCL"
            } else {
                "RoCE, Ray and NCCL"
            }
        ),
    )
}

/// Every active firewall's judgement of the probes on `iface`, and notes
/// on those that are not active or not readable.
fn judge_all(fw: &FirewallFacts, iface: &str) -> (Vec<Judged>, Vec<String>) {
    let mut judged = Vec::new();
    let mut notes = Vec::new();
    if fw.firewalld_running {
        judged.push(firewalld(fw, iface));
    } else {
        notes.push("firewalld not running".to_string());
    }
    if fw.ufw.enabled {
        judged.push(ufw(fw, iface));
    } else if fw.ufw.installed {
        notes.push("ufw installed but not enabled".to_string());
    }
    // ufw manages iptables/nftables itself; its rules are judged above.
    if !fw.ufw.enabled {
        let iptables_read = fw
            .iptables
            .ruleset()
            .is_some_and(|r| !r.input_chains().is_empty());
        for (name, source) in [("iptables", &fw.iptables), ("nftables", &fw.nftables)] {
            match source {
                RulesetSource::Unavailable { reason } => notes.push(format!("{name}: {reason}")),
                RulesetSource::Read { ruleset } => {
                    // iptables-nft's own table shows in nft too: judge it once.
                    let ruleset = if name == "nftables" && iptables_read {
                        without_table(ruleset, "ip filter")
                    } else {
                        ruleset.clone()
                    };
                    if ruleset.is_empty() {
                        notes.push(format!("{name}: no input rules"));
                    } else {
                        judged.push(netfilter(name, &ruleset, iface));
                    }
                }
            }
        }
    }
    (judged, notes)
}

/// What the judgements add up to.
struct Tally {
    /// `NAME drops PROBES (why)`, per firewall.
    dropped: Vec<String>,
    /// `NAME for PROBES (why)`, per firewall that could not tell.
    unclear: Vec<String>,
    /// The fixes of the firewalls in trouble, each once.
    fixes: Vec<String>,
    /// A dropped probe is one the cluster cannot work without.
    critical: bool,
}

fn tally(judged: &[Judged]) -> Tally {
    let mut dropped = Vec::new();
    let mut unclear = Vec::new();
    let mut fixes = Vec::new();
    let mut critical = false;
    for j in judged {
        let drops: Vec<(&Probe, &String)> = j
            .outcomes
            .iter()
            .filter_map(|(p, o)| match o {
                Outcome::Drop(by) => Some((p, by)),
                _ => None,
            })
            .collect();
        let unsure: Vec<(&Probe, &String)> = j
            .outcomes
            .iter()
            .filter_map(|(p, o)| match o {
                Outcome::Unclear(why) => Some((p, why)),
                _ => None,
            })
            .collect();
        critical |= drops.iter().any(|(p, _)| p.critical);
        if !drops.is_empty() {
            dropped.push(format!("{} drops {}", j.name, grouped(&drops)));
        }
        if !unsure.is_empty() {
            unclear.push(format!("{} for {}", j.name, grouped(&unsure)));
        }
        let troubled = !drops.is_empty() || !unsure.is_empty();
        if troubled && !fixes.contains(&j.fix) {
            fixes.push(j.fix.clone());
        }
    }
    Tally {
        dropped,
        unclear,
        fixes,
        critical,
    }
}

/// `A, B (why 1); C (why 2)`: probes that share a reason share it.
fn grouped(items: &[(&Probe, &String)]) -> String {
    let mut groups: Vec<(&String, Vec<&str>)> = Vec::new();
    for (p, why) in items {
        match groups.iter_mut().find(|(w, _)| w == why) {
            Some((_, v)) => v.push(p.what),
            None => groups.push((why, vec![p.what])),
        }
    }
    groups
        .iter()
        .map(|(why, v)| format!("{} ({why})", v.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn active_list(fw: &FirewallFacts) -> String {
    let mut v = Vec::new();
    if fw.firewalld_running {
        v.push("firewalld runs");
    }
    if fw.ufw.enabled {
        v.push("ufw is enabled");
    }
    if v.is_empty() {
        "firewalld and ufw are not active; pass --ip".into()
    } else {
        format!("{}; pass --ip", v.join(", "))
    }
}

fn without_table(ruleset: &Ruleset, table: &str) -> Ruleset {
    Ruleset {
        chains: ruleset
            .chains
            .iter()
            .filter(|c| c.table != table)
            .cloned()
            .collect(),
    }
}

/// A few firewalld services and their ports (the others never cover the
/// probes' ports).
const SERVICES: [(&str, &str); 3] = [
    ("ssh", "22/tcp"),
    ("dhcpv6-client", "546/udp"),
    ("mdns", "5353/udp"),
];

fn firewalld(fw: &FirewallFacts, iface: &str) -> Judged {
    let (zone_name, zone) = fw.zone_of(iface);
    let fix = format!(
        "sudo firewall-cmd --permanent --zone=trusted --add-interface={iface}\nsudo firewall-cmd --reload"
    );
    let name = format!("firewalld (zone {zone_name})");
    let Some(zone) = zone else {
        return Judged {
            name,
            outcomes: PROBES
                .iter()
                .map(|p| {
                    (
                        *p,
                        Outcome::Unclear(format!(
                            "{iface} is not in the trusted zone and zone {zone_name}'s file was not found"
                        )),
                    )
                })
                .collect(),
            fix,
        };
    };
    Judged {
        name,
        outcomes: PROBES.iter().map(|p| (*p, zone_verdict(zone, p))).collect(),
        fix,
    }
}

fn zone_verdict(zone: &Zone, probe: &Probe) -> Outcome {
    if zone.target.as_deref() == Some("ACCEPT") {
        return Outcome::Accept;
    }
    let allowed = zone
        .ports
        .iter()
        .map(String::as_str)
        .chain(
            zone.services
                .iter()
                .filter_map(|s| SERVICES.iter().find(|(n, _)| n == s).map(|(_, p)| *p)),
        )
        .any(|spec| port_spec_covers(spec, probe));
    if allowed {
        Outcome::Accept
    } else {
        Outcome::Drop(format!(
            "zone {} allows only {}",
            zone.name,
            if zone.services.is_empty() && zone.ports.is_empty() {
                "what it lists: nothing".to_string()
            } else {
                zone.services
                    .iter()
                    .chain(&zone.ports)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ))
    }
}

/// `4791/udp`, `1025-65535/tcp`.
fn port_spec_covers(spec: &str, probe: &Probe) -> bool {
    let Some((ports, proto)) = spec.split_once('/') else {
        return false;
    };
    let (a, b) = ports.split_once('-').unwrap_or((ports, ports));
    proto == probe.protocol
        && a.parse::<u16>().is_ok_and(|a| a <= probe.port)
        && b.parse::<u16>().is_ok_and(|b| probe.port <= b)
}

fn ufw(fw: &FirewallFacts, iface: &str) -> Judged {
    let policy = fw
        .ufw
        .default_input_policy
        .as_deref()
        .unwrap_or("DROP")
        .to_lowercase();
    let chain = fw
        .ufw
        .user_rules
        .chain("filter", "ufw-user-input")
        .cloned()
        .unwrap_or(Chain {
            table: "filter".into(),
            name: "ufw-user-input".into(),
            hook: None,
            priority: 0,
            policy: None,
            rules: Vec::new(),
        });
    // The user rules decide; what none of them matches meets the default policy.
    let ruleset = Ruleset {
        chains: vec![Chain {
            hook: Some("input".into()),
            policy: Some(policy.clone()),
            ..chain
        }],
    };
    let mut j = netfilter("ufw", &ruleset, iface);
    for (_, o) in &mut j.outcomes {
        if let Outcome::Drop(by) = o
            && by.starts_with("policy")
        {
            *by = format!("default input policy {}", policy.to_uppercase());
        }
    }
    j.fix = format!("sudo ufw allow in on {iface}");
    j
}

fn netfilter(name: &str, ruleset: &Ruleset, iface: &str) -> Judged {
    let outcomes = PROBES
        .iter()
        .map(|p| (*p, judge(ruleset, iface, p)))
        .collect();
    let fix = match name {
        "iptables" => format!(
            "sudo iptables -I INPUT -i {iface} -j ACCEPT\n# persistent: Debian/Ubuntu `sudo netfilter-persistent save`; elsewhere add it where your rules are loaded from"
        ),
        _ => {
            let (table, chain) = ruleset
                .input_chains()
                .first()
                .map(|c| (c.table.clone(), c.name.clone()))
                .unwrap_or(("inet filter".into(), "input".into()));
            format!(
                "sudo nft insert rule {table} {chain} iifname \"{iface}\" accept\n# persistent: the same rule in /etc/nftables.conf (Debian/Ubuntu) or /etc/sysconfig/nftables.conf (Fedora)"
            )
        }
    };
    Judged {
        name: name.into(),
        outcomes,
        fix,
    }
}

/// A new connection from a peer arriving on `iface`.
struct Packet<'a> {
    iface: &'a str,
    protocol: &'a str,
    port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tri {
    Yes,
    No,
    Maybe,
}

enum Flow {
    Accept,
    Drop(String),
    Unclear(String),
    /// The chain ended (or returned) without a verdict.
    FellThrough,
}

fn judge(ruleset: &Ruleset, iface: &str, probe: &Probe) -> Outcome {
    let pkt = Packet {
        iface,
        protocol: probe.protocol,
        port: probe.port,
    };
    for chain in ruleset.input_chains() {
        match run_chain(ruleset, chain, &pkt, 0) {
            Flow::Accept => continue,
            Flow::Drop(by) => return Outcome::Drop(by),
            Flow::Unclear(why) => return Outcome::Unclear(why),
            Flow::FellThrough => {
                if chain.policy.as_deref() == Some("drop") {
                    return Outcome::Drop(format!("policy drop of {} {}", chain.table, chain.name));
                }
            }
        }
    }
    Outcome::Accept
}

fn run_chain(ruleset: &Ruleset, chain: &Chain, pkt: &Packet, depth: u32) -> Flow {
    if depth > 16 {
        return Flow::Unclear(format!("chains nest too deep at {}", chain.name));
    }
    let mut maybe_accepted: Option<&Rule> = None;
    let unclear_if_maybe = |maybe: Option<&Rule>, flow: Flow| match (maybe, flow) {
        (Some(r), Flow::Drop(_)) => Flow::Unclear(format!("depends on `{}`", r.text)),
        (_, f) => f,
    };
    for rule in &chain.rules {
        let m = rule_matches(rule, pkt);
        if m == Tri::No {
            continue;
        }
        let target = |name: &str| ruleset.chain(&chain.table, name);
        if m == Tri::Maybe {
            match &rule.verdict {
                Verdict::Accept => {
                    maybe_accepted = maybe_accepted.or(Some(rule));
                    continue;
                }
                Verdict::Continue => continue,
                _ => return Flow::Unclear(format!("depends on `{}`", rule.text)),
            }
        }
        match &rule.verdict {
            Verdict::Accept => return Flow::Accept,
            Verdict::Drop | Verdict::Reject => {
                return unclear_if_maybe(maybe_accepted, Flow::Drop(format!("`{}`", rule.text)));
            }
            Verdict::Return => return Flow::FellThrough,
            Verdict::Continue => {}
            Verdict::Jump(name) => match target(name) {
                None => return Flow::Unclear(format!("jumps to unknown chain {name}")),
                Some(c) => match run_chain(ruleset, c, pkt, depth + 1) {
                    Flow::FellThrough => {}
                    other => return unclear_if_maybe(maybe_accepted, other),
                },
            },
            Verdict::Goto(name) => {
                return match target(name) {
                    None => Flow::Unclear(format!("goes to unknown chain {name}")),
                    Some(c) => {
                        unclear_if_maybe(maybe_accepted, run_chain(ruleset, c, pkt, depth + 1))
                    }
                };
            }
        }
    }
    match maybe_accepted {
        // Falling through to a drop policy after a rule that may have accepted.
        Some(r) if chain.policy.as_deref() == Some("drop") => {
            Flow::Unclear(format!("depends on `{}`", r.text))
        }
        _ => Flow::FellThrough,
    }
}

fn rule_matches(rule: &Rule, pkt: &Packet) -> Tri {
    let mut result = Tri::Yes;
    for m in &rule.matches {
        match match_one(m, pkt) {
            Tri::No => return Tri::No,
            Tri::Maybe => result = Tri::Maybe,
            Tri::Yes => {}
        }
    }
    result
}

fn match_one(m: &Match, pkt: &Packet) -> Tri {
    let yes = |b: bool| if b { Tri::Yes } else { Tri::No };
    match m {
        Match::Interface { names, negated } => {
            let hit =
                names.iter().any(
                    |n| match n.strip_suffix('*').or_else(|| n.strip_suffix('+')) {
                        Some(prefix) => pkt.iface.starts_with(prefix),
                        None => n == pkt.iface,
                    },
                );
            yes(hit != *negated)
        }
        Match::Protocol { names, negated } => {
            let number = match pkt.protocol {
                "tcp" => "6",
                _ => "17",
            };
            let hit = names
                .iter()
                .any(|n| n == pkt.protocol || n == number || n == "all");
            yes(hit != *negated)
        }
        Match::DestPort {
            protocol,
            ranges,
            negated,
        } => {
            if protocol.as_deref().is_some_and(|p| p != pkt.protocol) {
                return Tri::No;
            }
            let hit = ranges.iter().any(|(a, b)| *a <= pkt.port && pkt.port <= *b);
            yes(hit != *negated)
        }
        Match::CtState { states, negated } => yes(states.iter().any(|s| s == "new") != *negated),
        Match::Other { .. } => Tri::Maybe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::netfilter::parse_iptables_save;

    fn probe(protocol: &'static str, port: u16) -> Probe {
        Probe {
            protocol,
            port,
            what: "x",
            critical: true,
        }
    }

    #[test]
    fn iptables_verdicts() {
        let r = parse_iptables_save(
            "*filter\n:INPUT DROP [0:0]\n-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A INPUT -i lo -j ACCEPT\n-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n-A INPUT -i enp+ -p udp --dport 4791 -j ACCEPT\nCOMMIT\n",
        );
        assert_eq!(
            judge(&r, "enp194s0np0", &probe("udp", 4791)),
            Outcome::Accept
        );
        assert!(matches!(
            judge(&r, "enp194s0np0", &probe("tcp", 6379)),
            Outcome::Drop(by) if by.contains("policy drop")
        ));
        assert!(matches!(
            judge(&r, "eth9", &probe("udp", 4791)),
            Outcome::Drop(_)
        ));
    }

    #[test]
    fn unknown_conditions_make_it_unclear() {
        let r = parse_iptables_save(
            "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -s 10.0.0.0/8 -p udp --dport 4791 -j DROP\n-A INPUT -j MYCHAIN\n:MYCHAIN - [0:0]\n-A MYCHAIN -p tcp --dport 6379 -j REJECT\n-A MYCHAIN -j RETURN\nCOMMIT\n",
        );
        assert!(matches!(
            judge(&r, "e", &probe("udp", 4791)),
            Outcome::Unclear(_)
        ));
        assert!(matches!(
            judge(&r, "e", &probe("tcp", 6379)),
            Outcome::Drop(by) if by.contains("REJECT")
        ));
        assert_eq!(judge(&r, "e", &probe("tcp", 40000)), Outcome::Accept);
    }

    #[test]
    fn firewalld_zone_ports() {
        let z = crate::host::firewall::parse_zone(
            "FedoraWorkstation",
            r#"<zone><service name="ssh"/><port protocol="udp" port="1025-65535"/><port protocol="tcp" port="1025-65535"/></zone>"#,
            "/usr/lib/firewalld/zones/FedoraWorkstation.xml",
        );
        for p in PROBES {
            assert_eq!(zone_verdict(&z, &p), Outcome::Accept, "{}", p.what);
        }
        let public = crate::host::firewall::parse_zone(
            "public",
            r#"<zone><service name="ssh"/><service name="dhcpv6-client"/></zone>"#,
            "x",
        );
        assert!(matches!(
            zone_verdict(&public, &PROBES[1]),
            Outcome::Drop(_)
        ));
    }
}
