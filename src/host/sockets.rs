//! Who owns the far end of a TCP connection on this machine: the socket
//! table of this network namespace (`/proc/net/tcp` and `tcp6`), whose
//! `uid` column is the socket's owner as this user namespace sees it. A
//! socket a listener accepted keeps the listener's owner, so the owner of
//! a connection's far end is the owner of whatever listens there. Plain
//! data out; whether that owner may be trusted is the caller's decision.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The owner (uid) of the socket at `peer` whose own peer is `local`: the
/// far end of a connection made from `local` to `peer`, when it is in this
/// machine's network namespace. `None` when the table holds no such socket
/// (the peer is on another machine) or cannot be read.
pub fn peer_owner(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|f| {
        let text = std::fs::read_to_string(f).ok()?;
        owner_in(&text, local, peer)
    })
}

/// [`peer_owner`] in one table's text.
fn owner_in(table: &str, local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let (local, peer) = (plain(local), plain(peer));
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (here, there, uid) = (f.get(1)?, f.get(2)?, f.get(7)?);
        (decode(here)? == peer && decode(there)? == local)
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// An IPv4-mapped IPv6 address as the IPv4 one (a dual-stack listener's
/// sockets list an IPv4 peer that way).
fn plain(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// One `ADDR:PORT` of the table (the address in hex, as the kernel stores
/// it: 32-bit words in host order).
fn decode(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(plain(SocketAddr::new(ip, port)))
}

/// A listener of another user's on a free local port, for tests: uid
/// 65534 (through `setpriv` and the system python; the tests run as root)
/// that records every byte each connection sends it, then `|`.
#[cfg(test)]
pub(crate) struct Squatter {
    /// Where it listens.
    pub addr: SocketAddr,
    child: std::process::Child,
    dir: tempfile::TempDir,
}

#[cfg(test)]
impl Squatter {
    /// Starts one and waits (up to 5 s) until it listens.
    pub fn start() -> Squatter {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = "import socket, sys\n\
            s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n\
            open(sys.argv[2] + '.up', 'w').close()\n\
            while True:\n    c, _ = s.accept(); c.settimeout(1)\n    got = b''\n\
            \x20   try:\n        while True:\n            b = c.recv(4096)\n            if not b: break\n            got += b\n\
            \x20   except OSError: pass\n\
            \x20   open(sys.argv[2], 'ab').write(got + b'|'); c.close()\n";
        let seen = dir.path().join("seen");
        let child = crate::proc::command("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
                "-c",
                script,
                &port.to_string(),
                &seen.display().to_string(),
            ])
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if dir.path().join("seen.up").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Squatter {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            dir,
        }
    }

    /// Everything it was sent so far (after a second for the last
    /// connection to be written down), each connection ended by `|`.
    pub fn heard(&self) -> Vec<u8> {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        std::fs::read(self.dir.path().join("seen")).unwrap_or_default()
    }
}

#[cfg(test)]
impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    /// The owner of `c`'s far end, asked until the accepted socket shows
    /// (it appears as the handshake ends).
    fn owner(c: &TcpStream) -> Option<u32> {
        let t0 = Instant::now();
        loop {
            let o = peer_owner(c.local_addr().unwrap(), c.peer_addr().unwrap());
            if o.is_some() || t0.elapsed() > Duration::from_secs(2) {
                return o;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn our_own_listener_is_ours() {
        for bind in ["127.0.0.1:0", "[::]:0"] {
            let Ok(l) = TcpListener::bind(bind) else {
                continue;
            };
            let port = l.local_addr().unwrap().port();
            let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            assert_eq!(
                owner(&c),
                Some(nix::unistd::getuid().as_raw()),
                "listener on {bind}"
            );
        }
    }

    /// A listener another user runs (uid 65534 through `setpriv`; the test
    /// runs as root) is that user's; a port on no machine's table is
    /// nobody's.
    #[test]
    fn another_users_listener_is_theirs() {
        if !nix::unistd::getuid().is_root() {
            eprintln!("skipped: needs root to run a listener as uid 65534");
            return;
        }
        let squatter = Squatter::start();
        let got = TcpStream::connect(squatter.addr).ok().as_ref().map(owner);
        assert_eq!(got, Some(Some(65534)));
        let far = "192.0.2.1:80".parse().unwrap();
        assert_eq!(peer_owner("127.0.0.1:1".parse().unwrap(), far), None);
    }

    #[test]
    fn table_lines_decode() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F40 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 123 1\n\
           1: 0000000000000000FFFF00000100007F:1F41 0000000000000000FFFF00000100007F:C351 01 00000000:00000000 00:00000000 00000000  65534        0 124 1\n";
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            owner_in(t, a("127.0.0.1:50000"), a("127.0.0.1:8000")),
            Some(1000)
        );
        assert_eq!(
            owner_in(t, a("127.0.0.1:50001"), a("127.0.0.1:8001")),
            Some(65534)
        );
        assert_eq!(owner_in(t, a("127.0.0.1:50000"), a("127.0.0.1:8001")), None);
    }
}
