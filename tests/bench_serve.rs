//! `halobox bench serve` as a peer runs it, against the real binary: it
//! never listens on every interface unasked, a client that stops reading
//! cannot keep it alive, and only its own client (which read the stop
//! token from its ready line) can stop it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use halobox::bench::tcp::{self, Mode, READY_PREFIX, StopToken};
use halobox::host::{self, GatherOptions, HostRoot};

mod common;
use common::text;

/// `halobox bench serve ARGS` on loopback, its address and stop token
/// read from its ready line.
fn serve(args: &[&str]) -> (Child, BufReader<ChildStdout>, SocketAddr, StopToken) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["bench", "serve", "--bind", "127.0.0.1", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let rest = line.trim().strip_prefix(READY_PREFIX).expect(&line);
    let addr: SocketAddr = rest.split_whitespace().next().unwrap().parse().unwrap();
    let token = StopToken::from_ready_line(line.trim()).expect("a stop token on the ready line");
    (child, out, addr, token)
}

/// Waits up to `within` for `child` to exit; its exit code, `None` if it did not.
fn exited(child: &mut Child, within: Duration) -> Option<i32> {
    let t = Instant::now();
    while t.elapsed() < within {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn target(addr: SocketAddr) -> tcp::Target {
    tcp::Target {
        peer: addr,
        local: None,
    }
}

#[test]
fn only_its_own_client_stops_it() {
    let (mut child, _out, addr, token) = serve(&["--idle-timeout", "60"]);
    // The old bye (a hello alone), and a bye with another token: refused.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&Mode::Bye.hello()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut ack = Vec::new();
    let _ = s.read_to_end(&mut ack);
    assert!(ack.is_empty(), "a bye without the token was answered");
    let other = StopToken::generate().unwrap();
    assert!(tcp::bye(&target(addr), &other).is_err());
    assert_eq!(exited(&mut child, Duration::from_millis(500)), None);

    let (mut child, _out, addr, token2) = serve(&["--idle-timeout", "60"]);
    assert_ne!(token, token2, "each run makes its own token");
    assert!(tcp::bye(&target(addr), &token).is_err());
    tcp::bye(&target(addr), &token2).unwrap();
    assert_eq!(exited(&mut child, Duration::from_secs(10)), Some(0));
}

#[test]
fn a_client_that_stops_reading_cannot_pin_it() {
    let (mut child, _out, addr, _token) = serve(&["--idle-timeout", "1", "--io-timeout", "2"]);
    // Echo mode: send far more than the socket buffers hold, read nothing.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&Mode::Echo(tcp::MAX_ECHO_BYTES).hello())
        .unwrap();
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let chunk = vec![0u8; tcp::MAX_ECHO_BYTES as usize];
    for _ in 0..200 {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    // The server gives up on the write (2 s), then idles out (1 s).
    let code = exited(&mut child, Duration::from_secs(20));
    drop(s);
    assert_eq!(code, Some(0), "the server was still pinned after 20 s");
}

#[test]
fn without_bind_it_listens_on_the_data_plane_address_only() {
    // No data-plane address (a network namespace with only loopback): no
    // guess, no 0.0.0.0, but the way to choose.
    let out = Command::new("unshare")
        .args(["--net", env!("CARGO_BIN_EXE_halobox"), "bench", "serve"])
        .output()
        .expect("unshare (util-linux), as root");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("cannot tell this machine's data-plane address")
            && all.contains("hint: pass --bind ADDR"),
        "{all}"
    );
    // A machine with one RoCE address (the E810 snapshot): that address.
    let facts = host::gather(
        HostRoot::sysroot(&common::fixture_path("strix-e810")).unwrap(),
        GatherOptions::default(),
    );
    assert_eq!(
        tcp::default_bind(&facts).unwrap().to_string(),
        "192.168.100.1"
    );
}
