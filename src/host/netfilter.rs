//! Packet filter rules of the input path, from `nft -j list ruleset` or
//! `iptables-save` (and ufw's `user.rules`, which is iptables-save syntax),
//! reduced to what decides whether a new connection to a port on an
//! interface is accepted: interface, protocol, destination port, conntrack
//! state and the verdict. Anything else a rule matches on is kept as
//! [`Match::Other`], so a decision that depends on it is reported as
//! unclear rather than guessed.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// One condition of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum Match {
    /// Input interface name (`iifname`, `-i`); `*`/`+` ends a prefix.
    Interface {
        /// Names or prefixes.
        names: Vec<String>,
        /// `!=` / `! -i`.
        negated: bool,
    },
    /// Transport protocol (`meta l4proto`, `ip protocol`, `-p`).
    Protocol {
        /// `tcp`, `udp`, `icmp`…
        names: Vec<String>,
        /// Negated.
        negated: bool,
    },
    /// Destination port ranges (inclusive), optionally for one protocol.
    DestPort {
        /// The protocol the port belongs to (`tcp dport` → `tcp`).
        protocol: Option<String>,
        /// Ranges.
        ranges: Vec<(u16, u16)>,
        /// Negated.
        negated: bool,
    },
    /// Connection tracking state (`ct state`, `--ctstate`, `--state`).
    CtState {
        /// Lower-case states (`established`, `related`, `new`, `invalid`).
        states: Vec<String>,
        /// Negated.
        negated: bool,
    },
    /// Anything else, as written.
    Other {
        /// The condition's text.
        text: String,
    },
}

/// What a rule does when it matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "verdict", content = "chain", rename_all = "snake_case")]
pub enum Verdict {
    /// Accept.
    Accept,
    /// Drop.
    Drop,
    /// Reject (answer with an error).
    Reject,
    /// Return to the calling chain.
    Return,
    /// Evaluate another chain, then continue here.
    Jump(String),
    /// Evaluate another chain, do not come back.
    Goto(String),
    /// No verdict (counters, logging, marks): go on with the next rule.
    Continue,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Rule {
    /// All must hold.
    pub matches: Vec<Match>,
    /// What happens then.
    pub verdict: Verdict,
    /// The rule in a readable form (for messages).
    pub text: String,
}

/// One chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Chain {
    /// `inet filter` (nftables family and table) or `filter` (iptables).
    pub table: String,
    /// Chain name.
    pub name: String,
    /// The hook of a base chain (`input`); `None` for a regular chain.
    pub hook: Option<String>,
    /// Base chain priority (lower runs first).
    pub priority: i64,
    /// Base chain policy (`accept`/`drop`).
    pub policy: Option<String>,
    /// Rules in order.
    pub rules: Vec<Rule>,
}

/// A ruleset of one source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Ruleset {
    /// Chains that matter for incoming IPv4 packets.
    pub chains: Vec<Chain>,
}

impl Ruleset {
    /// Base chains on the input hook, in the order the kernel runs them.
    pub fn input_chains(&self) -> Vec<&Chain> {
        let mut v: Vec<&Chain> = self
            .chains
            .iter()
            .filter(|c| c.hook.as_deref() == Some("input"))
            .collect();
        v.sort_by_key(|c| c.priority);
        v
    }

    /// The chain called `name` in `table`.
    pub fn chain(&self, table: &str, name: &str) -> Option<&Chain> {
        self.chains
            .iter()
            .find(|c| c.table == table && c.name == name)
    }

    /// True when nothing on the input path filters: no input chain, or
    /// only empty ones that accept.
    pub fn is_empty(&self) -> bool {
        self.input_chains()
            .iter()
            .all(|c| c.rules.is_empty() && c.policy.as_deref() != Some("drop"))
    }
}

/// Parses `nft -j list ruleset`. Tables of the `ip6`, `arp`, `bridge` and
/// `netdev` families are left out (they do not see IPv4 input), and so are
/// tables firewalld manages (`firewalld` and `firewalld_*`), which halobox
/// judges from firewalld's own zone files.
pub fn parse_nft_json(text: &str) -> Result<Ruleset, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let items = v
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or("no `nftables` array")?;
    let wanted = |family: &str, table: &str| {
        matches!(family, "ip" | "inet") && !table.starts_with("firewalld")
    };
    let mut chains = Vec::new();
    for item in items {
        if let Some(c) = item.get("chain") {
            let family = c["family"].as_str().unwrap_or_default();
            let table = c["table"].as_str().unwrap_or_default();
            if !wanted(family, table) {
                continue;
            }
            // Only filter chains decide; nat/route chains on a hook do not drop.
            let filter = c["type"].as_str().is_none_or(|t| t == "filter");
            chains.push(Chain {
                table: format!("{family} {table}"),
                name: c["name"].as_str().unwrap_or_default().to_string(),
                hook: c["hook"].as_str().filter(|_| filter).map(str::to_string),
                priority: c["prio"].as_i64().unwrap_or(0),
                policy: c["policy"].as_str().map(str::to_string),
                rules: Vec::new(),
            });
        }
    }
    for item in items {
        let Some(r) = item.get("rule") else { continue };
        let family = r["family"].as_str().unwrap_or_default();
        let table = r["table"].as_str().unwrap_or_default();
        if !wanted(family, table) {
            continue;
        }
        let key = format!("{family} {table}");
        let name = r["chain"].as_str().unwrap_or_default();
        let rule = nft_rule(r["expr"].as_array().map(Vec::as_slice).unwrap_or_default());
        if let Some(c) = chains.iter_mut().find(|c| c.table == key && c.name == name) {
            c.rules.push(rule);
        }
    }
    Ok(Ruleset { chains })
}

fn nft_rule(exprs: &[Value]) -> Rule {
    let mut matches = Vec::new();
    let mut verdict = Verdict::Continue;
    let mut text = Vec::new();
    for e in exprs {
        let Some((kind, body)) = e.as_object().and_then(|o| o.iter().next()) else {
            continue;
        };
        match kind.as_str() {
            "match" => {
                let m = nft_match(body);
                text.push(match_text(&m));
                matches.push(m);
            }
            "accept" => verdict = Verdict::Accept,
            "drop" => verdict = Verdict::Drop,
            "reject" => verdict = Verdict::Reject,
            "return" => verdict = Verdict::Return,
            "jump" => verdict = Verdict::Jump(body["target"].as_str().unwrap_or_default().into()),
            "goto" => verdict = Verdict::Goto(body["target"].as_str().unwrap_or_default().into()),
            "counter" | "log" | "comment" | "limit" => {}
            other => {
                let m = Match::Other {
                    text: format!("{other} {body}"),
                };
                text.push(match_text(&m));
                matches.push(m);
            }
        }
    }
    text.push(verdict_text(&verdict));
    Rule {
        matches,
        verdict,
        text: text.join(" "),
    }
}

/// Strings and numbers of an nft right-hand side (`"lo"`, `22`,
/// `{"set": [...]}`, `["established", "related"]`, `{"range": [a, b]}`).
fn nft_values(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(a) => Some(a.clone()),
        Value::Object(o) if o.contains_key("set") => o["set"].as_array().cloned(),
        Value::String(_) | Value::Number(_) => Some(vec![v.clone()]),
        Value::Object(o) if o.contains_key("range") => Some(vec![v.clone()]),
        _ => None,
    }
}

fn nft_match(body: &Value) -> Match {
    let other = || Match::Other {
        text: body.to_string(),
    };
    let op = body["op"].as_str().unwrap_or("==");
    let negated = match op {
        "==" | "in" => false,
        "!=" => true,
        _ => return other(),
    };
    let left = &body["left"];
    let Some(values) = nft_values(&body["right"]) else {
        return other();
    };
    let strings = || -> Option<Vec<String>> {
        values
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let meta = left["meta"]["key"].as_str();
    if meta == Some("iifname") {
        return strings().map_or_else(other, |names| Match::Interface { names, negated });
    }
    if meta == Some("l4proto")
        || (left["payload"]["protocol"].as_str() == Some("ip")
            && left["payload"]["field"].as_str() == Some("protocol"))
    {
        return strings().map_or_else(other, |names| Match::Protocol { names, negated });
    }
    if left["ct"]["key"].as_str() == Some("state") {
        return strings().map_or_else(other, |states| Match::CtState { states, negated });
    }
    if left["payload"]["field"].as_str() == Some("dport") {
        let protocol = left["payload"]["protocol"].as_str().map(str::to_string);
        let ranges: Option<Vec<(u16, u16)>> = values
            .iter()
            .map(|v| match v {
                Value::Number(n) => n
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .map(|p| (p, p)),
                Value::Object(o) => {
                    let r = o.get("range")?.as_array()?;
                    let a = u16::try_from(r.first()?.as_u64()?).ok()?;
                    let b = u16::try_from(r.get(1)?.as_u64()?).ok()?;
                    Some((a, b))
                }
                _ => None,
            })
            .collect();
        return ranges.map_or_else(other, |ranges| Match::DestPort {
            protocol,
            ranges,
            negated,
        });
    }
    other()
}

/// Parses `iptables-save` output: the `filter` table's chains and rules.
/// Rules of other tables are left out.
pub fn parse_iptables_save(text: &str) -> Ruleset {
    let mut chains: Vec<Chain> = Vec::new();
    let mut table = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(t) = line.strip_prefix('*') {
            table = t.to_string();
            continue;
        }
        if table != "filter" {
            continue;
        }
        if let Some(decl) = line.strip_prefix(':') {
            let mut parts = decl.split_whitespace();
            let name = parts.next().unwrap_or_default().to_string();
            let policy = parts.next().filter(|p| *p != "-").map(str::to_lowercase);
            if let Some(c) = chains.iter_mut().find(|c| c.name == name) {
                c.policy = policy;
                continue;
            }
            chains.push(Chain {
                table: "filter".into(),
                hook: (name == "INPUT").then(|| "input".to_string()),
                priority: 0,
                policy,
                name,
                rules: Vec::new(),
            });
            continue;
        }
        let Some(rest) = line
            .strip_prefix("-A ")
            .or_else(|| line.strip_prefix("-I "))
        else {
            continue;
        };
        let args = super::kernel::split_words(rest);
        let Some((chain, args)) = args.split_first() else {
            continue;
        };
        let rule = iptables_rule(args, line);
        match chains.iter_mut().find(|c| &c.name == chain) {
            Some(c) if line.starts_with("-I ") => c.rules.insert(0, rule),
            Some(c) => c.rules.push(rule),
            None => chains.push(Chain {
                table: "filter".into(),
                name: chain.clone(),
                hook: (chain == "INPUT").then(|| "input".to_string()),
                priority: 0,
                policy: None,
                rules: vec![rule],
            }),
        }
    }
    Ruleset { chains }
}

fn iptables_rule(args: &[String], line: &str) -> Rule {
    let mut matches = Vec::new();
    let mut verdict = Verdict::Continue;
    let mut protocol: Option<String> = None;
    let mut negate = false;
    let mut i = 0;
    let next = |i: &mut usize| {
        *i += 1;
        args.get(*i).cloned().unwrap_or_default()
    };
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "!" => {
                negate = true;
                i += 1;
                continue;
            }
            "-i" | "--in-interface" => {
                let name = next(&mut i);
                matches.push(Match::Interface {
                    names: vec![name],
                    negated: negate,
                });
            }
            "-p" | "--protocol" => {
                let p = next(&mut i).to_lowercase();
                protocol = Some(p.clone());
                matches.push(Match::Protocol {
                    names: vec![p],
                    negated: negate,
                });
            }
            "--dport" | "--destination-port" | "--dports" | "--destination-ports" => {
                let spec = next(&mut i);
                let ranges: Option<Vec<(u16, u16)>> = spec
                    .split(',')
                    .map(|p| match p.split_once(':') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => p.parse().ok().map(|v| (v, v)),
                    })
                    .collect();
                matches.push(match ranges {
                    Some(ranges) => Match::DestPort {
                        protocol: protocol.clone(),
                        ranges,
                        negated: negate,
                    },
                    None => Match::Other {
                        text: format!("--dport {spec}"),
                    },
                });
            }
            "--ctstate" | "--state" => {
                let states = next(&mut i).split(',').map(str::to_lowercase).collect();
                matches.push(Match::CtState {
                    states,
                    negated: negate,
                });
            }
            "-m" | "--match" => {
                // The module name itself decides nothing; its options follow.
                next(&mut i);
            }
            "-j" | "--jump" | "-g" | "--goto" => {
                let target = next(&mut i);
                verdict = match target.as_str() {
                    "ACCEPT" => Verdict::Accept,
                    "DROP" => Verdict::Drop,
                    "REJECT" => Verdict::Reject,
                    "RETURN" => Verdict::Return,
                    "LOG" | "NFLOG" | "MARK" | "CONNMARK" | "CT" => Verdict::Continue,
                    _ if a == "-g" || a == "--goto" => Verdict::Goto(target),
                    _ => Verdict::Jump(target),
                };
                // Target options (--log-prefix "...", --reject-with …) follow.
                break;
            }
            "-c" => {
                next(&mut i);
            }
            opt if opt.starts_with('-') => {
                // Any other condition: keep it with its value(s).
                let mut text = opt.to_string();
                while args.get(i + 1).is_some_and(|v| !v.starts_with('-')) {
                    text.push(' ');
                    text.push_str(&next(&mut i));
                }
                if !is_harmless(opt) {
                    matches.push(Match::Other { text });
                }
            }
            _ => {}
        }
        negate = false;
        i += 1;
    }
    Rule {
        matches,
        verdict,
        text: line.to_string(),
    }
}

/// Options that never keep a rule from matching a packet (comments, and
/// `-m tcp`/`-m udp` helpers are handled by `-m` itself).
fn is_harmless(opt: &str) -> bool {
    matches!(opt, "--comment")
}

/// A readable form of one match.
pub fn match_text(m: &Match) -> String {
    let neg = |n: &bool| if *n { "!= " } else { "" };
    match m {
        Match::Interface { names, negated } => {
            format!("iifname {}{}", neg(negated), names.join(","))
        }
        Match::Protocol { names, negated } => {
            format!("l4proto {}{}", neg(negated), names.join(","))
        }
        Match::DestPort {
            protocol,
            ranges,
            negated,
        } => format!(
            "{} dport {}{}",
            protocol.as_deref().unwrap_or("th"),
            neg(negated),
            ranges
                .iter()
                .map(|(a, b)| if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        Match::CtState { states, negated } => {
            format!("ct state {}{}", neg(negated), states.join(","))
        }
        Match::Other { text } => text.clone(),
    }
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Accept => "accept".into(),
        Verdict::Drop => "drop".into(),
        Verdict::Reject => "reject".into(),
        Verdict::Return => "return".into(),
        Verdict::Jump(c) => format!("jump {c}"),
        Verdict::Goto(c) => format!("goto {c}"),
        Verdict::Continue => "continue".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iptables_rules() {
        let r = parse_iptables_save(
            "*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A INPUT -i lo -j ACCEPT\n-A INPUT -p udp -m udp --dport 4791 -j DROP\n-A INPUT -p tcp -m multiport --dports 6379,10000:20000 -j ACCEPT\n-A INPUT -m comment --comment \"x y\" -j LOG --log-prefix \"[A B] \"\nCOMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j DNAT\nCOMMIT\n",
        );
        let input = r.input_chains();
        assert_eq!(input.len(), 1);
        assert_eq!(input[0].policy.as_deref(), Some("drop"));
        let rules = &input[0].rules;
        assert_eq!(rules.len(), 5);
        assert_eq!(
            rules[0].matches,
            [Match::CtState {
                states: vec!["related".into(), "established".into()],
                negated: false
            }]
        );
        assert_eq!(
            rules[2].matches[1],
            Match::DestPort {
                protocol: Some("udp".into()),
                ranges: vec![(4791, 4791)],
                negated: false
            }
        );
        assert_eq!(rules[2].verdict, Verdict::Drop);
        assert_eq!(
            rules[3].matches[1],
            Match::DestPort {
                protocol: Some("tcp".into()),
                ranges: vec![(6379, 6379), (10000, 20000)],
                negated: false
            }
        );
        assert!(rules[4].matches.is_empty() && rules[4].verdict == Verdict::Continue);
        assert!(r.chain("filter", "PREROUTING").is_none());
    }

    #[test]
    fn nft_rules() {
        let r = parse_nft_json(
            r#"{"nftables":[{"metainfo":{"version":"1.0.6"}},
            {"table":{"family":"inet","name":"filter","handle":3}},
            {"chain":{"family":"inet","table":"filter","name":"input","handle":1,"type":"filter","hook":"input","prio":0,"policy":"drop"}},
            {"chain":{"family":"inet","table":"firewalld","name":"filter_INPUT","handle":1,"type":"filter","hook":"input","prio":10,"policy":"accept"}},
            {"chain":{"family":"ip6","table":"filter","name":"input","handle":1,"type":"filter","hook":"input","prio":0,"policy":"drop"}},
            {"rule":{"family":"inet","table":"filter","chain":"input","handle":4,"expr":[{"match":{"op":"in","left":{"ct":{"key":"state"}},"right":["established","related"]}},{"accept":null}]}},
            {"rule":{"family":"inet","table":"filter","chain":"input","handle":5,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"udp","field":"dport"}},"right":{"set":[4791,{"range":[5000,5010]}]}}},{"counter":{"packets":0,"bytes":0}},{"drop":null}]}},
            {"rule":{"family":"inet","table":"filter","chain":"input","handle":6,"expr":[{"xt":{"type":"match","name":"conntrack"}},{"accept":null}]}}]}"#,
        )
        .unwrap();
        let input = r.input_chains();
        assert_eq!(input.len(), 1, "firewalld and ip6 tables are left out");
        let rules = &input[0].rules;
        assert_eq!(
            rules[1].matches,
            [Match::DestPort {
                protocol: Some("udp".into()),
                ranges: vec![(4791, 4791), (5000, 5010)],
                negated: false
            }]
        );
        assert_eq!(rules[1].verdict, Verdict::Drop);
        assert!(matches!(rules[2].matches[0], Match::Other { .. }));
        assert!(parse_nft_json("[]").is_err());
    }
}
