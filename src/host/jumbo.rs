//! Jumbo-frame proof: one ping with the don't-fragment bit set
//! (`ping -M do -s SIZE`), sized so the IPv4 packet fills the interface's
//! MTU, towards each peer. A link whose MTU is set but whose host
//! controller (or the far end) drops such frames fails here, not in NCCL.

use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::HostFacts;

/// IPv4 (20) and ICMP (8) headers: a payload of `MTU - 28` fills the MTU.
pub const HEADERS: u32 = 28;

/// One DF-bit ping and what came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JumboProof {
    /// The peer pinged.
    pub peer: Ipv4Addr,
    /// The interface the route to the peer leaves from.
    pub interface: String,
    /// That interface's MTU.
    pub mtu: u32,
    /// The ICMP payload sent (`MTU - 28`).
    pub size: u32,
    /// A reply came back for the full-size unfragmented packet.
    pub held: bool,
    /// ping's last line of output (the loss line, or its error).
    pub detail: String,
}

/// The ping that proves `mtu` to `peer` through `interface` (argv).
pub fn ping_argv(interface: &str, peer: Ipv4Addr, mtu: u32) -> Vec<String> {
    [
        "ping",
        "-M",
        "do",
        "-s",
        &mtu.saturating_sub(HEADERS).to_string(),
        "-c",
        "1",
        "-W",
        "1",
        "-w",
        "2",
        "-I",
        interface,
        &peer.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Pings every peer through the interface its route leaves from, at that
/// interface's MTU. Peers without a route or an MTU are left out (doctor's
/// `net.route` names them). Live hosts only: a snapshot cannot ping.
pub fn prove(facts: &HostFacts, peers: &[Ipv4Addr]) -> Vec<JumboProof> {
    if facts.sysroot.is_some() {
        return Vec::new();
    }
    peers
        .iter()
        .filter_map(|peer| {
            let route = facts.routes.lookup(*peer).filter(|r| !r.reject)?;
            let mtu = facts.network.interface(&route.interface)?.mtu?;
            Some(ping(&route.interface, *peer, mtu))
        })
        .collect()
}

fn ping(interface: &str, peer: Ipv4Addr, mtu: u32) -> JumboProof {
    let argv = ping_argv(interface, peer, mtu);
    let out = crate::proc::command(&argv[0]).args(&argv[1..]).output();
    let (held, text) = match out {
        Ok(o) => (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        ),
        Err(e) => (false, format!("ping could not run: {e}")),
    };
    JumboProof {
        peer,
        interface: interface.to_string(),
        mtu,
        size: mtu.saturating_sub(HEADERS),
        held,
        detail: last_line(&text),
    }
}

/// The line that says what happened: the packet-loss line when there is
/// one, else the last non-empty line.
fn last_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .find(|l| l.contains("packet loss"))
        .or(lines.last())
        .map_or_else(String::new, |l| l.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ping_fills_the_mtu_and_the_loss_line_is_kept() {
        let argv = ping_argv("thunderbolt0", Ipv4Addr::new(10, 0, 0, 2), 9000);
        assert_eq!(argv[..5], ["ping", "-M", "do", "-s", "8972"]);
        assert_eq!(argv.last().unwrap(), "10.0.0.2");
        let out = "PING 10.0.0.2 (10.0.0.2) from 10.0.0.1 thunderbolt0: 8972(9000) bytes of data.\nping: local error: message too long, mtu=1500\n\n--- 10.0.0.2 ping statistics ---\n1 packets transmitted, 0 received, +1 errors, 100% packet loss, time 0ms\n";
        assert!(last_line(out).starts_with("1 packets transmitted, 0 received"));
        assert_eq!(
            last_line("ping: connect: Network is unreachable\n"),
            "ping: connect: Network is unreachable"
        );
    }
}
