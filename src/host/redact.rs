//! `halobox snapshot --redact`: MAC addresses (and the GUIDs and IPv6
//! interface ids made from them), hostnames, serial numbers and, on
//! request, IP addresses are replaced in every file of a snapshot. The same
//! input always gets the same replacement within one snapshot, so the
//! snapshot still reads as one consistent host.
//!
//! Addresses are mapped prefix-preservingly (two addresses that share a
//! prefix still share it), keeping the private range and the last octet, so
//! subnets, routes and GIDs still agree with each other.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use sha2::{Digest, Sha256};

use super::snapshot::{Body, Tree};

/// What to replace.
#[derive(Debug, Clone, Default)]
pub struct Redaction {
    /// The host's names (`gethostname`, its short form): replaced where they
    /// stand as whole words.
    pub hostnames: Vec<String>,
    /// Also replace IPv4 addresses and global IPv6 addresses.
    pub addresses: bool,
    /// Secret that keys the address and serial mappings (random per snapshot,
    /// never stored).
    pub key: [u8; 32],
}

/// Files that hold a serial number or a device GUID as their whole content.
const SERIAL_FILES: [&str; 8] = [
    "serial",
    "serial_number",
    "product_serial",
    "board_serial",
    "chassis_serial",
    "product_uuid",
    "node_guid",
    "sys_image_guid",
];

/// Rewrites every file of `tree`: `/etc/passwd` and `/etc/group` cut to
/// what doctor reads (`accounts`), then MACs (also inside `enx<MAC>`
/// interface names, in paths and link targets too), GUIDs, hostnames,
/// serials and, on request, addresses replaced.
pub fn apply(tree: &mut Tree, how: &Redaction) {
    accounts(tree);
    let mut r = Redactor::new(how);
    for text in texts(tree) {
        r.learn_macs(&text);
    }
    for path in tree.keys() {
        r.learn_macs(path);
    }
    let renamed: Tree = std::mem::take(tree)
        .into_iter()
        .map(|(path, mut entry)| {
            if let Body::Link(target) = &entry.body {
                entry.body = Body::Link(r.enx(&target.to_string_lossy()).into());
            }
            (r.enx(&path), entry)
        })
        .collect();
    *tree = renamed;
    for (path, entry) in tree.iter_mut() {
        let Body::File(bytes) = &mut entry.body else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes.clone()) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or_default();
        let mut out = r.text(&text);
        if SERIAL_FILES.contains(&name) && out == text && !text.trim().is_empty() {
            out = r.serial_file(&text);
        }
        if name == "properties" {
            out = r.kfd_unique_id(&out);
        }
        if path == "/proc/net/route" && how.addresses {
            out = r.route_table(&out);
        }
        *bytes = out.into_bytes();
    }
}

/// Cuts `/etc/passwd` and `/etc/group` to the entries doctor reads: the
/// invoking user's (the uid of the snapshot's `/proc/self/status`; its
/// GECOS field emptied), and the groups that are a device group, one of
/// the user's gids, or list the user (their member lists keep only the
/// user). Everyone else on the host stays out of the snapshot.
fn accounts(tree: &mut Tree) {
    let text = |tree: &Tree, path: &str| match tree.get(path).map(|e| &e.body) {
        Some(Body::File(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    let (uid, gid, gids) = text(tree, "/proc/self/status")
        .map(|s| super::users::parse_status_ids(&s))
        .unwrap_or((None, None, Vec::new()));
    let mut name = None;
    if let Some(passwd) = text(tree, "/etc/passwd") {
        let mine: String = passwd
            .lines()
            .filter(|l| uid.is_some() && l.split(':').nth(2).and_then(|u| u.parse().ok()) == uid)
            .take(1)
            .map(|l| {
                let mut f: Vec<&str> = l.split(':').collect();
                if f.len() >= 5 {
                    f[1] = "x";
                    f[4] = "";
                }
                name = f.first().map(|n| n.to_string());
                f.join(":") + "\n"
            })
            .collect();
        set_file(tree, "/etc/passwd", mine);
    }
    if let Some(group) = text(tree, "/etc/group") {
        let kept: String = group
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                let (n, g) = (*f.first()?, f.get(2)?.parse::<u32>().ok()?);
                let members = f.get(3).copied().unwrap_or("");
                let listed = name
                    .as_deref()
                    .is_some_and(|u| members.split(',').any(|m| m == u));
                let keep = super::users::DEVICE_GROUPS.contains(&n)
                    || gid == Some(g)
                    || gids.contains(&g)
                    || listed;
                keep.then(|| {
                    let member = if listed {
                        name.as_deref().unwrap_or("")
                    } else {
                        ""
                    };
                    format!("{n}:x:{g}:{member}\n")
                })
            })
            .collect();
        set_file(tree, "/etc/group", kept);
    }
}

fn set_file(tree: &mut Tree, path: &str, text: String) {
    if let Some(e) = tree.get_mut(path) {
        e.body = Body::File(text.into_bytes());
    }
}

fn texts(tree: &Tree) -> Vec<String> {
    tree.values()
        .filter_map(|e| match &e.body {
            Body::File(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        })
        .collect()
}

struct Redactor<'a> {
    how: &'a Redaction,
    macs: BTreeMap<[u8; 6], [u8; 6]>,
    v6: BTreeMap<Ipv6Addr, Ipv6Addr>,
}

impl<'a> Redactor<'a> {
    fn new(how: &'a Redaction) -> Self {
        Self {
            how,
            macs: BTreeMap::new(),
            v6: BTreeMap::new(),
        }
    }

    /// Numbers every MAC in order of first appearance: `02:00:00:00:00:01`, …
    /// (colon form, and the hex digits of an `enx<MAC>` interface name).
    fn learn_macs(&mut self, text: &str) {
        let macs: Vec<[u8; 6]> = tokens(text)
            .filter_map(parse_mac)
            .chain(enx_names(text).into_iter().map(|(_, mac)| mac))
            .collect();
        for mac in macs {
            if !self.macs.contains_key(&mac) && mac != [0; 6] && mac != [0xff; 6] {
                let n = self.macs.len() as u32 + 1;
                let b = n.to_be_bytes();
                self.macs.insert(mac, [0x02, 0, b[0], b[1], b[2], b[3]]);
            }
        }
    }

    /// `text` with the MAC inside every `enx<MAC>` interface name replaced
    /// (as udev names USB network adapters).
    fn enx(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (at, mac) in enx_names(text) {
            if let Some(new) = self.macs.get(&mac) {
                out.push_str(&text[last..at]);
                out.push_str(&new.iter().map(|b| format!("{b:02x}")).collect::<String>());
                last = at + 12;
            }
        }
        out.push_str(&text[last..]);
        out
    }

    fn text(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (at, token) in token_spans(text) {
            if let Some(new) = self.token(token) {
                out.push_str(&text[last..at]);
                out.push_str(&new);
                last = at + token.len();
            }
        }
        out.push_str(&text[last..]);
        self.hostnames(&self.enx(&out))
    }

    fn token(&mut self, token: &str) -> Option<String> {
        if let Some(mac) = parse_mac(token) {
            let new = self.macs.get(&mac)?;
            let s = format_mac(new);
            return Some(if token.chars().any(|c| c.is_ascii_uppercase()) {
                s.to_uppercase()
            } else {
                s
            });
        }
        if let Some(guid) = parse_guid(token) {
            return self.eui64(guid).map(|g| format_groups(&g.to_be_bytes()));
        }
        if token.matches(':').count() >= 2
            && let Ok(ip) = token.parse::<Ipv6Addr>()
        {
            let new = self.ipv6(ip)?;
            return Some(if token.len() == 39 {
                format_groups(&new.octets())
            } else {
                new.to_string()
            });
        }
        if self.how.addresses
            && token.matches('.').count() == 3
            && let Ok(ip) = token.parse::<Ipv4Addr>()
        {
            let new = map_ipv4(&self.how.key, ip);
            return (new != ip).then(|| new.to_string());
        }
        None
    }

    /// A known MAC's EUI-64 (`b696:91ff:fe9e:1a20`) → the replacement's.
    fn eui64(&self, id: u64) -> Option<u64> {
        let b = id.to_be_bytes();
        if b[3] != 0xff || b[4] != 0xfe {
            return None;
        }
        let mac = [b[0] ^ 0x02, b[1], b[2], b[5], b[6], b[7]];
        let new = self.macs.get(&mac)?;
        Some(u64::from_be_bytes([
            new[0] ^ 0x02,
            new[1],
            new[2],
            0xff,
            0xfe,
            new[3],
            new[4],
            new[5],
        ]))
    }

    fn ipv6(&mut self, ip: Ipv6Addr) -> Option<Ipv6Addr> {
        let o = ip.octets();
        let (high, low) = (
            u64::from_be_bytes(o[..8].try_into().ok()?),
            u64::from_be_bytes(o[8..].try_into().ok()?),
        );
        if let Some(low) = self.eui64(low) {
            let mut new = [0u8; 16];
            new[..8].copy_from_slice(&high.to_be_bytes());
            new[8..].copy_from_slice(&low.to_be_bytes());
            return self.ipv6_prefix(Ipv6Addr::from(new));
        }
        // An iWARP GID: the MAC, then zeros.
        let mac: [u8; 6] = o[..6].try_into().ok()?;
        if o[6..].iter().all(|b| *b == 0)
            && let Some(new) = self.macs.get(&mac)
        {
            let mut g = [0u8; 16];
            g[..6].copy_from_slice(new);
            return Some(Ipv6Addr::from(g));
        }
        if !self.how.addresses {
            return None;
        }
        if let Some(v4) = ip.to_ipv4_mapped() {
            let new = map_ipv4(&self.how.key, v4);
            return (new != v4).then(|| new.to_ipv6_mapped());
        }
        self.ipv6_prefix(ip).filter(|n| *n != ip)
    }

    /// With addresses redacted, a global IPv6 address gets a documentation
    /// prefix (2001:db8:N::/48); link-local and others keep theirs.
    fn ipv6_prefix(&mut self, ip: Ipv6Addr) -> Option<Ipv6Addr> {
        let s = ip.segments();
        let global = (s[0] & 0xe000) == 0x2000;
        if !self.how.addresses || !global {
            return Some(ip);
        }
        let net = Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0);
        let n = self.v6.len() as u16 + 1;
        let new_net = *self
            .v6
            .entry(net)
            .or_insert(Ipv6Addr::new(0x2001, 0xdb8, n, 0, 0, 0, 0, 0));
        let ns = new_net.segments();
        Some(Ipv6Addr::new(
            ns[0], ns[1], ns[2], s[3], s[4], s[5], s[6], s[7],
        ))
    }

    fn hostnames(&self, text: &str) -> String {
        let mut out = text.to_string();
        let mut names: Vec<&String> = self
            .how
            .hostnames
            .iter()
            .filter(|n| n.len() >= 2 && *n != "localhost")
            .collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        for name in names {
            out = replace_word(&out, name, "redacted-host");
        }
        out
    }

    /// The whole content replaced by a keyed value of the same shape.
    fn serial_file(&self, text: &str) -> String {
        let value = text.trim_end();
        format!("{}{}", self.same_shape(value), &text[value.len()..])
    }

    /// KFD's `unique_id N` (the GPU's serial).
    fn kfd_unique_id(&self, text: &str) -> String {
        text.split_inclusive('\n')
            .map(|l| match l.strip_prefix("unique_id ") {
                Some(v) if v.trim() != "0" => {
                    let v = v.trim_end();
                    format!("unique_id {}{}", self.same_shape(v), &l[10 + v.len()..])
                }
                _ => l.to_string(),
            })
            .collect()
    }

    fn same_shape(&self, value: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.how.key);
        h.update(b"serial");
        h.update(value.as_bytes());
        let digest = h.finalize();
        value
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let d = digest[i % digest.len()].wrapping_add((i / digest.len()) as u8);
                match c {
                    '0'..='9' => char::from(b'0' + d % 10),
                    'a'..='f' if value.chars().all(|c| !c.is_ascii_alphabetic() || c <= 'f') => {
                        char::from(b'a' + d % 6)
                    }
                    'a'..='z' => char::from(b'a' + d % 26),
                    'A'..='Z' => char::from(b'A' + d % 26),
                    other => other,
                }
            })
            .collect()
    }

    /// `/proc/net/route`: Destination and Gateway are little-endian hex;
    /// a destination keeps only the bits its mask covers.
    fn route_table(&self, text: &str) -> String {
        text.split_inclusive('\n')
            .enumerate()
            .map(|(i, line)| {
                let fields: Vec<&str> = line.split('\t').collect();
                if i == 0 || fields.len() < 8 {
                    return line.to_string();
                }
                let hex = |s: &str| u32::from_str_radix(s.trim(), 16).ok();
                let (Some(dst), Some(gw), Some(mask)) =
                    (hex(fields[1]), hex(fields[2]), hex(fields[7]))
                else {
                    return line.to_string();
                };
                let ip_of = |le: u32| Ipv4Addr::from(le.swap_bytes());
                let to_le = |v: u32| v.swap_bytes();
                let new_dst = if dst == 0 {
                    0
                } else {
                    to_le(u32::from(map_ipv4(&self.how.key, ip_of(dst))) & mask.swap_bytes())
                };
                let new_gw = if gw == 0 {
                    0
                } else {
                    to_le(u32::from(map_ipv4(&self.how.key, ip_of(gw))))
                };
                let mut out: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
                out[1] = format!("{new_dst:08X}");
                out[2] = format!("{new_gw:08X}");
                out.join("\t")
            })
            .collect()
    }
}

/// Maximal runs of characters that can make up a MAC, GUID or address.
fn token_spans(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let is_tok = |c: char| c.is_ascii_hexdigit() || c == ':' || c == '.';
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (is_tok(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, &text[s..]));
    }
    spans
        .into_iter()
        .map(|(s, t)| {
            // A sentence's full stop or a `key:` colon is not part of it.
            let trimmed = t.trim_end_matches(['.', ':']);
            (s, trimmed)
        })
        .filter(|(_, t)| t.contains(':') || t.contains('.'))
}

fn tokens(text: &str) -> impl Iterator<Item = &str> {
    token_spans(text).map(|(_, t)| t)
}

/// Where each `enx<MAC>` interface name's 12 hex digits start, and the MAC
/// they spell: `enx` not inside a longer name, then exactly 12 hex digits.
fn enx_names(text: &str) -> Vec<(usize, [u8; 6])> {
    let b = text.as_bytes();
    let is_name = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    text.match_indices("enx")
        .filter_map(|(at, _)| {
            let start = at + 3;
            let hex = b.get(start..start + 12)?;
            let clean_before = at == 0 || !is_name(b[at - 1]);
            let clean_after = b.get(start + 12).is_none_or(|c| !is_name(*c));
            if !(clean_before && clean_after && hex.iter().all(u8::is_ascii_hexdigit)) {
                return None;
            }
            let mut mac = [0u8; 6];
            for (i, m) in mac.iter_mut().enumerate() {
                *m = u8::from_str_radix(&text[start + 2 * i..start + 2 * i + 2], 16).ok()?;
            }
            Some((start, mac))
        })
        .collect()
}

/// `aa:bb:cc:dd:ee:ff` (either case).
fn parse_mac(token: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = token.split(':').collect();
    if parts.len() != 6 || parts.iter().any(|p| p.len() != 2) {
        return None;
    }
    let mut mac = [0u8; 6];
    for (b, p) in mac.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    Some(mac)
}

/// A sysfs GUID: `b696:91ff:fe9e:1a20`.
fn parse_guid(token: &str) -> Option<u64> {
    let parts: Vec<&str> = token.split(':').collect();
    if parts.len() != 4 || parts.iter().any(|p| p.len() != 4) {
        return None;
    }
    u64::from_str_radix(&parts.concat(), 16).ok()
}

fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Bytes as `xxxx:xxxx:…` (sysfs GUIDs and `%pI6` GIDs).
fn format_groups(bytes: &[u8]) -> String {
    bytes
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c.get(1).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(":")
}

/// Prefix-preserving: bit i of the result is bit i of `ip` flipped by a
/// keyed function of the bits before it. The network class (the private
/// ranges' prefix, or the first octet) and the last octet are kept;
/// loopback, masks, multicast and the unspecified address are left alone.
pub fn map_ipv4(key: &[u8; 32], ip: Ipv4Addr) -> Ipv4Addr {
    let o = ip.octets();
    if o[0] == 0 || o[0] == 127 || o[0] >= 224 {
        return ip;
    }
    let keep = match (o[0], o[1]) {
        (192, 168) | (169, 254) => 16,
        (172, 16..=31) => 12,
        _ => 8,
    };
    let a = u32::from(ip);
    let mut out = a;
    for i in keep..24 {
        let prefix = a >> (32 - i);
        let mut h = Sha256::new();
        h.update(key);
        h.update([i as u8]);
        h.update(prefix.to_be_bytes());
        let flip = h.finalize()[0] & 1;
        out ^= u32::from(flip) << (31 - i);
    }
    Ipv4Addr::from(out)
}

/// Replaces `word` where it is not part of a longer name.
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_name) || after.is_some_and(is_name) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// This host's name and its short form, for `--redact`.
pub fn hostnames() -> Vec<String> {
    let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return Vec::new();
    };
    let name = name.trim().to_string();
    let short = name.split('.').next().unwrap_or_default().to_string();
    let mut names = vec![name];
    if short != names[0] {
        names.push(short);
    }
    names
}

/// The key of this snapshot's mappings (never stored).
pub fn random_key() -> anyhow::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| anyhow::anyhow!("reading /dev/urandom for the redaction key: {e}"))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn how(addresses: bool) -> Redaction {
        Redaction {
            hostnames: vec!["strix1".into()],
            addresses,
            key: [7; 32],
        }
    }

    #[test]
    fn macs_guids_and_gids_follow_one_mapping() {
        let h = how(false);
        let mut r = Redactor::new(&h);
        r.learn_macs("link/ether b4:96:91:9e:1a:20 brd ff:ff:ff:ff:ff:ff\n");
        let out = r.text(
            "b4:96:91:9e:1a:20 B4:96:91:9E:1A:20 b696:91ff:fe9e:1a20 fe80:0000:0000:0000:b696:91ff:fe9e:1a20 fe80::b696:91ff:fe9e:1a20 b496:919e:1a20:0000:0000:0000:0000:0000 ff:ff:ff:ff:ff:ff on strix1.\n",
        );
        assert_eq!(
            out,
            "02:00:00:00:00:01 02:00:00:00:00:01 0000:00ff:fe00:0001 fe80:0000:0000:0000:0000:00ff:fe00:0001 fe80::ff:fe00:1 0200:0000:0001:0000:0000:0000:0000:0000 ff:ff:ff:ff:ff:ff on redacted-host.\n"
        );
        assert_eq!(r.text("strix10 xstrix1"), "strix10 xstrix1");
    }

    #[test]
    fn addresses_keep_their_prefixes() {
        let key = [7; 32];
        let a = map_ipv4(&key, "192.168.100.1".parse().unwrap());
        let b = map_ipv4(&key, "192.168.100.2".parse().unwrap());
        assert_eq!(a.octets()[..2], [192, 168]);
        assert_eq!(a.octets()[..3], b.octets()[..3]);
        assert_eq!((a.octets()[3], b.octets()[3]), (1, 2));
        assert_ne!(a, "192.168.100.1".parse::<Ipv4Addr>().unwrap());
        let mask: Ipv4Addr = "255.255.255.252".parse().unwrap();
        assert_eq!(map_ipv4(&key, mask), mask);
        let h = how(true);
        let mut r = Redactor::new(&h);
        let gid = r.text("0000:0000:0000:0000:0000:ffff:c0a8:6401\n");
        assert!(
            gid.starts_with("0000:0000:0000:0000:0000:ffff:c0a8:"),
            "{gid}"
        );
        assert_eq!(gid.trim(), {
            let v: Ipv6Addr = a.to_ipv6_mapped();
            format_groups(&v.octets())
        });
        let route = r.route_table(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             enp194s0np0\t0064A8C0\t00000000\t0001\t0\t0\t101\tFCFFFFFF\t0\t0\t0\n",
        );
        let dst = route.lines().nth(1).unwrap().split('\t').nth(1).unwrap();
        let dst = Ipv4Addr::from(u32::from_str_radix(dst, 16).unwrap().swap_bytes());
        assert_eq!(u32::from(dst), u32::from(a) & 0xffff_fffc);
    }

    fn file(text: &str) -> super::super::snapshot::Entry {
        super::super::snapshot::Entry {
            mode: 0o644,
            mtime: 0,
            body: Body::File(text.as_bytes().to_vec()),
        }
    }

    fn body(tree: &Tree, path: &str) -> String {
        match &tree[path].body {
            Body::File(b) => String::from_utf8_lossy(b).into_owned(),
            Body::Link(t) => t.display().to_string(),
            Body::Dir => String::new(),
        }
    }

    /// A USB adapter's `enx<MAC>` name loses its MAC everywhere (paths,
    /// link targets, file text, the colon form in `address`), mapped as the
    /// colon form is; `/etc/passwd` and `/etc/group` keep only what doctor
    /// reads.
    #[test]
    fn enx_names_and_accounts_are_redacted() {
        let mut tree = Tree::new();
        let net = "/sys/class/net/enx00e04c680001";
        tree.insert(format!("{net}/address"), file("00:e0:4c:68:00:01\n"));
        tree.insert(
            net.into(),
            super::super::snapshot::Entry {
                mode: 0o777,
                mtime: 0,
                body: Body::Link("../../devices/pci0000:00/usb2/2-1/net/enx00e04c680001".into()),
            },
        );
        tree.insert(
            "/proc/net/dev".into(),
            file("enx00E04C680001: 1 2 3\nxenx00e04c680002: 0\n"),
        );
        tree.insert(
            "/proc/self/status".into(),
            file("Name:\thalobox\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t27 1000 \n"),
        );
        tree.insert(
            "/etc/passwd".into(),
            file("root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice Liddell,,,:/home/alice:/bin/bash\nbob:x:1001:1001:Bob:/home/bob:/bin/zsh\n"),
        );
        tree.insert(
            "/etc/group".into(),
            file("root:x:0:\nsudo:x:27:alice,bob\nvideo:x:44:bob\nrender:x:105:alice,bob\nrdma:x:106:\nbob:x:1001:\nalice:x:1000:\nadm:x:4:bob\n"),
        );
        apply(&mut tree, &how(false));
        let all: String = tree
            .keys()
            .map(|p| format!("{p}\n{}\n", body(&tree, p)))
            .collect::<String>()
            .to_lowercase();
        assert!(!all.contains("00e04c680001"), "{all}");
        assert!(!all.contains("00:e0:4c:68:00:01"), "{all}");
        assert!(
            all.contains("xenx00e04c680002"),
            "not an interface name: {all}"
        );
        let net = "/sys/class/net/enx020000000001";
        assert_eq!(
            body(&tree, &format!("{net}/address")),
            "02:00:00:00:00:01\n"
        );
        assert!(body(&tree, net).ends_with("/net/enx020000000001"));
        assert_eq!(
            body(&tree, "/etc/passwd"),
            "alice:x:1000:1000::/home/alice:/bin/bash\n"
        );
        assert_eq!(
            body(&tree, "/etc/group"),
            "sudo:x:27:alice\nvideo:x:44:\nrender:x:105:alice\nrdma:x:106:\nalice:x:1000:\n"
        );
    }

    #[test]
    fn serials_keep_their_shape() {
        let h = how(false);
        let r = Redactor::new(&h);
        let s = r.serial_file("MT2145X12345\n");
        assert_eq!(s.len(), 13);
        assert!(s.ends_with('\n') && s.starts_with(|c: char| c.is_ascii_uppercase()));
        assert_ne!(s, "MT2145X12345\n");
        assert_eq!(s, r.serial_file("MT2145X12345\n"));
        let p = r.kfd_unique_id("gpu_id 1\nunique_id 1234567890\nnum_xcc 1\n");
        assert!(
            !p.contains("1234567890") && p.contains("num_xcc 1\n"),
            "{p}"
        );
    }
}
