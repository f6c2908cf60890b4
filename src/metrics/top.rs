//! `cluster top`'s figures: one scrape of a node's `halobox metrics` (and
//! of the serve's engine `/metrics` on the head) read into a [`Reading`],
//! two readings into a row (rates from counter deltas). Pure but for
//! [`fetch`], an endpoint's body through [`crate::http`], and [`watch`],
//! every node scraped in a thread of its own so that a slow node holds
//! nothing else back.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::http;

/// Largest body read from an endpoint.
pub const MAX_BODY: usize = 4 << 20;
/// How long one scrape (a node's, and the head's engine's) may take; a
/// node that takes longer, trickling or silent, is shown as not answering.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);

/// One sample of the text format: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Metric name.
    pub name: String,
    /// Label pairs.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
}

/// The samples of a Prometheus text body (comments and lines that do not
/// parse are skipped).
pub fn parse(text: &str) -> Vec<Line> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(l: &str) -> Option<Line> {
    let l = l.trim();
    if l.is_empty() || l.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match l.find('{') {
        Some(i) => {
            let close = l.rfind('}')?;
            (&l[..i], labels(&l[i + 1..close])?, &l[close + 1..])
        }
        None => {
            let i = l.find(' ')?;
            (&l[..i], Vec::new(), &l[i..])
        }
    };
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    Some(Line {
        name: name.to_string(),
        labels,
        value,
    })
}

fn labels(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let mut key = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            key.push(c);
        }
        if key.is_empty() {
            return Some(out);
        }
        if chars.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key.trim().to_string(), value));
    }
}

/// What one scrape of a node says (a figure it does not export is `None`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// GTT in use and in all, bytes (summed over cards).
    pub gtt: Option<(f64, f64)>,
    /// GPU busy, 0 to 1 (the busiest card).
    pub busy: Option<f64>,
    /// The hottest GPU sensor, °C.
    pub temp: Option<f64>,
    /// RDMA bytes received and sent, summed over ports (counters).
    pub rdma: Option<(f64, f64)>,
    /// Congestion events: CNPs sent and handled, ECN-marked packets (a
    /// counter, summed over ports).
    pub congestion: Option<f64>,
    /// The engine's generated tokens (a counter) and running requests.
    pub engine: Option<(Option<f64>, Option<f64>)>,
}

fn sum(lines: &[Line], names: &[&str]) -> Option<f64> {
    let found: Vec<f64> = lines
        .iter()
        .filter(|l| names.contains(&l.name.as_str()))
        .map(|l| l.value)
        .collect();
    (!found.is_empty()).then(|| found.iter().sum())
}

fn max(lines: &[Line], name: &str) -> Option<f64> {
    lines
        .iter()
        .filter(|l| l.name == name)
        .map(|l| l.value)
        .fold(None, |m, v| Some(m.map_or(v, |m: f64| m.max(v))))
}

/// A node's `halobox metrics` body read.
pub fn reading(text: &str) -> Reading {
    let l = parse(text);
    let used = sum(&l, &["halobox_gpu_gtt_used_bytes"]);
    let total = sum(&l, &["halobox_gpu_gtt_total_bytes"]);
    let rx = sum(&l, &["halobox_rdma_port_receive_bytes_total"]);
    let tx = sum(&l, &["halobox_rdma_port_transmit_bytes_total"]);
    Reading {
        gtt: used.zip(total),
        busy: max(&l, "halobox_gpu_busy_ratio"),
        temp: max(&l, "halobox_gpu_temperature_celsius"),
        rdma: rx.zip(tx),
        congestion: sum(
            &l,
            &[
                "halobox_rdma_cnp_sent_total",
                "halobox_rdma_cnp_handled_total",
                "halobox_rdma_ecn_marked_packets_total",
            ],
        ),
        engine: None,
    }
}

/// The engine's `/metrics` read: generated tokens (vLLM
/// `vllm:generation_tokens_total`, llama-server
/// `llamacpp:tokens_predicted_total`) and running requests
/// (`vllm:num_requests_running`, `llamacpp:requests_processing`).
pub fn engine_reading(text: &str) -> (Option<f64>, Option<f64>) {
    let l = parse(text);
    (
        sum(
            &l,
            &[
                "vllm:generation_tokens_total",
                "llamacpp:tokens_predicted_total",
            ],
        ),
        sum(
            &l,
            &["vllm:num_requests_running", "llamacpp:requests_processing"],
        ),
    )
}

/// `text` without control characters (a hostile value cannot move the
/// cursor or change the terminal), at most `max` characters.
pub fn clean(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

/// The table's header.
pub const HEADER: &str = "NODE         GTT used/total GiB  GPU busy  TEMP °C  RDMA in Gb/s  RDMA out Gb/s  CONG ev/s  SERVE tok/s  RUNNING";

/// A rate from two counter values `dt` seconds apart (a counter that went
/// down, restarted, gives none).
fn rate(prev: Option<f64>, now: Option<f64>, dt: f64) -> Option<f64> {
    let (p, n) = (prev?, now?);
    (dt > 0.0 && n >= p).then(|| (n - p) / dt)
}

/// A figure right-aligned in `width` columns: `-` when there is none, `?`
/// when it does not fit (a hostile value cannot widen the row).
fn cell(v: Option<f64>, width: usize, f: impl Fn(f64) -> String) -> String {
    let s = v.filter(|v| v.is_finite()).map_or("-".to_string(), f);
    let s = if s.chars().count() > width {
        "?".to_string()
    } else {
        s
    };
    format!("{s:>width$}")
}

/// One node's row: `now`, with rates against `prev` taken `dt` seconds
/// before (the first row has no rates yet), or why the node did not
/// answer.
pub fn row(node: &str, now: &Result<Reading, String>, prev: Option<&Reading>, dt: f64) -> String {
    let name = format!("{:<12}", clean(node, 12));
    let r = match now {
        Ok(r) => r,
        Err(e) => return format!("{name} not answering: {}", clean(e, 90)),
    };
    let gib = 1024.0 * 1024.0 * 1024.0;
    let gtt = match r.gtt {
        Some((u, t)) if u.is_finite() && t.is_finite() => {
            format!("{:.1}/{:.1}", u / gib, t / gib)
        }
        _ => "-".into(),
    };
    let gtt = if gtt.len() > 20 { "?".into() } else { gtt };
    let p = prev.cloned().unwrap_or_default();
    let gbit = |bytes: f64| format!("{:.2}", bytes * 8.0 / 1e9);
    let (erx, etx) = (r.rdma.map(|x| x.0), r.rdma.map(|x| x.1));
    let (prx, ptx) = (p.rdma.map(|x| x.0), p.rdma.map(|x| x.1));
    let (tokens, running) = r.engine.unwrap_or((None, None));
    let serve = if r.engine.is_some() {
        cell(rate(p.engine.and_then(|e| e.0), tokens, dt), 11, |v| {
            format!("{v:.1}")
        })
    } else {
        format!("{:>11}", "")
    };
    let running = if r.engine.is_some() {
        cell(running, 8, |v| format!("{v:.0}"))
    } else {
        String::new()
    };
    format!(
        "{name} {gtt:>20}  {}  {}  {}  {}  {}  {serve}  {running}",
        cell(r.busy, 8, |v| format!("{:.0}%", v * 100.0)),
        cell(r.temp, 7, |v| format!("{v:.0}")),
        cell(rate(prx, erx, dt), 12, gbit),
        cell(rate(ptx, etx, dt), 13, gbit),
        cell(rate(p.congestion, r.congestion, dt), 9, |v| format!(
            "{v:.1}"
        )),
    )
    .trim_end()
    .to_string()
}

/// Why [`fetch`] has no body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed {
    /// The key was not sent: the listener is not proven this user's (why).
    NotOurs(String),
    /// No answer, or not a 200 one (why).
    Other(String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::NotOurs(w) | Failed::Other(w) => f.write_str(w),
        }
    }
}

/// `GET http://ADDR{path}` within `timeout` (connect, request and body),
/// with `bearer` as the API key when given (the engine's `/metrics` is
/// behind its key), sent only to a listener proven this user's
/// ([`http::get_ours`]): the body of a 200 answer (at most [`MAX_BODY`]
/// bytes), or why not.
pub fn fetch(
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
    bearer: Option<&str>,
) -> Result<String, Failed> {
    let r = match bearer {
        Some(k) => http::get_ours(addr, path, k, timeout, MAX_BODY),
        None => http::get_up_to(addr, path, None, timeout, MAX_BODY),
    }
    .map_err(|e| match e.why {
        http::Why::NotOurs(_) => Failed::NotOurs(e.to_string()),
        _ => Failed::Other(e.to_string()),
    })?;
    if r.status != 200 {
        let reason = hyper::StatusCode::from_u16(r.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or_default();
        return Err(Failed::Other(
            format!("{addr}: answered HTTP {} {reason}", r.status)
                .trim_end()
                .to_string(),
        ));
    }
    Ok(r.body)
}

/// One node `cluster top` watches: its `halobox metrics`, and on the head
/// the serve's engine.
#[derive(Debug, Clone, Copy)]
pub struct Watched {
    /// Where its `halobox metrics` listens.
    pub addr: SocketAddr,
    /// The engine's API (the head's only).
    pub engine: Option<SocketAddr>,
}

/// One scrape's result: which node (its index), when the scrape started,
/// and the reading or why there is none.
#[derive(Debug)]
pub struct Scraped {
    /// Index of the node in what [`watch`] was given.
    pub node: usize,
    /// When the scrape started.
    pub at: Instant,
    /// The reading, or why the node did not answer.
    pub reading: Result<Reading, String>,
    /// Why the engine's figures are missing: the key was not sent.
    pub not_ours: Option<String>,
}

/// One node's reading now (the head's with its engine's figures, asked
/// with the serving API's key, which goes only to a listener proven this
/// user's), and why the engine's figures are missing when the key was not
/// sent.
pub fn read_node(node: Watched, key: Option<&str>) -> Result<(Reading, Option<String>), String> {
    let body = fetch(node.addr, "/metrics", SCRAPE_TIMEOUT, None).map_err(|e| e.to_string())?;
    let mut r = reading(&body);
    let mut why = None;
    if let Some(e) = node.engine {
        match fetch(e, "/metrics", SCRAPE_TIMEOUT, key) {
            Ok(t) => r.engine = Some(engine_reading(&t)),
            Err(Failed::NotOurs(w)) => why = Some(w),
            Err(Failed::Other(_)) => {}
        }
    }
    Ok((r, why))
}

/// Scrapes every node in a thread of its own, each at most once per
/// `every`, and sends each result as it comes; a thread ends after its
/// scrape once the receiver is gone.
pub fn watch(nodes: &[Watched], key: Option<String>, every: Duration) -> mpsc::Receiver<Scraped> {
    let (tx, rx) = mpsc::channel();
    for (i, node) in nodes.iter().copied().enumerate() {
        let (tx, key) = (tx.clone(), key.clone());
        std::thread::spawn(move || {
            loop {
                let at = Instant::now();
                let (reading, not_ours) = match read_node(node, key.as_deref()) {
                    Ok((r, why)) => (Ok(r), why),
                    Err(e) => (Err(e), None),
                };
                if tx
                    .send(Scraped {
                        node: i,
                        at,
                        reading,
                        not_ours,
                    })
                    .is_err()
                {
                    return;
                }
                std::thread::sleep(every.saturating_sub(at.elapsed()));
            }
        });
    }
    rx
}

/// A node's row before its first scrape ends.
pub fn waiting_row(node: &str) -> String {
    format!("{:<12} asking...", clean(node, 12))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "# HELP x y\n# TYPE halobox_gpu_gtt_used_bytes gauge\n\
        halobox_gpu_gtt_used_bytes{node=\"a\",card=\"card0\"} 1073741824\n\
        halobox_gpu_gtt_total_bytes{node=\"a\",card=\"card0\"} 4294967296\n\
        halobox_gpu_busy_ratio{node=\"a\",card=\"card0\"} 0.25\n\
        halobox_gpu_temperature_celsius{node=\"a\",card=\"card0\",sensor=\"edge\"} 51\n\
        halobox_gpu_temperature_celsius{node=\"a\",card=\"card0\",sensor=\"a,b=\\\"}\"} 60\n\
        halobox_rdma_port_receive_bytes_total{node=\"a\",device=\"m\",port=\"1\"} 1000000000\n\
        halobox_rdma_port_transmit_bytes_total{node=\"a\",device=\"m\",port=\"1\"} 2000000000\n\
        halobox_rdma_cnp_sent_total{node=\"a\",device=\"m\",port=\"1\"} 10\n\
        halobox_rdma_ecn_marked_packets_total{node=\"a\",device=\"m\",port=\"1\"} 5\n\
        garbage line\nhalobox_x{unclosed 1\n";

    #[test]
    fn a_scrape_read() {
        let r = reading(NODE);
        assert_eq!(r.gtt, Some((1073741824.0, 4294967296.0)));
        assert_eq!(r.busy, Some(0.25));
        assert_eq!(r.temp, Some(60.0));
        assert_eq!(r.rdma, Some((1e9, 2e9)));
        assert_eq!(r.congestion, Some(15.0));
        assert_eq!(
            parse("m{a=\"x\\\"y\",b=\"\\n\"} 2\n")[0].labels,
            [("a".into(), "x\"y".into()), ("b".into(), "\n".into())]
        );
        assert_eq!(
            engine_reading(
                "vllm:generation_tokens_total{model_name=\"m\"} 300\nvllm:num_requests_running{model_name=\"m\"} 4\n"
            ),
            (Some(300.0), Some(4.0))
        );
        assert_eq!(
            engine_reading("llamacpp:tokens_predicted_total 7\nllamacpp:requests_processing 1\n"),
            (Some(7.0), Some(1.0))
        );
    }

    #[test]
    fn rows_from_deltas() {
        let prev = reading(NODE);
        let mut now = prev.clone();
        now.rdma = Some((1e9 + 1.25e9, 2e9 + 2.5e9));
        now.congestion = Some(35.0);
        now.engine = Some((Some(500.0), Some(3.0)));
        let mut prev_e = prev.clone();
        prev_e.engine = Some((Some(300.0), Some(2.0)));
        let first = row("a", &Ok(prev.clone()), None, 1.0);
        assert!(first.starts_with("a            "), "{first}");
        assert!(first.contains("1.0/4.0"), "{first}");
        assert!(first.contains("25%"), "{first}");
        let r = row("a", &Ok(now.clone()), Some(&prev_e), 2.0);
        // 1.25e9 bytes in 2 s = 5 Gb/s; 2.5e9 bytes = 10 Gb/s; 20 events / 2 s.
        assert!(r.contains(" 5.00 "), "{r}");
        assert!(r.contains(" 10.00 "), "{r}");
        assert!(r.contains(" 10.0 "), "{r}");
        // 200 tokens in 2 s; 3 running.
        assert!(r.contains(" 100.0 "), "{r}");
        assert!(r.ends_with(" 3"), "{r}");
        // A counter that went down (a restart) gives no rate.
        let back = row("a", &Ok(prev.clone()), Some(&now), 1.0);
        assert!(!back.contains("5.00"), "{back}");
    }

    #[test]
    fn hostile_values_cannot_reach_the_terminal() {
        let r = row(
            "a\x1b[2J\x07b",
            &Err("refused\x1b]0;owned\x07\r\nx".into()),
            None,
            1.0,
        );
        assert!(!r.chars().any(char::is_control), "{r:?}");
        assert!(r.contains("not answering: refused"), "{r}");
        let huge = Reading {
            gtt: Some((f64::INFINITY, 1.0)),
            busy: Some(f64::NAN),
            temp: Some(-1e300),
            ..Reading::default()
        };
        let r = row("a", &Ok(huge), None, 1.0);
        assert!(!r.chars().any(char::is_control), "{r:?}");
        assert!(r.len() < 200, "{r}");
    }

    #[test]
    fn fetch_reads_a_body_and_says_why_not() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            for body in [
                "HTTP/1.1 200 OK\r\n\r\nm 1\n",
                "HTTP/1.1 404 Not Found\r\n\r\nno",
            ] {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                s.write_all(body.as_bytes()).unwrap();
            }
        });
        let t1 = Duration::from_secs(5);
        assert_eq!(fetch(addr, "/metrics", t1, None).unwrap(), "m 1\n");
        assert_eq!(
            fetch(addr, "/metrics", t1, None).unwrap_err(),
            Failed::Other(format!("{addr}: answered HTTP 404 Not Found"))
        );
        t.join().unwrap();
        assert!(
            fetch(addr, "/metrics", t1, None)
                .unwrap_err()
                .to_string()
                .starts_with(&format!("{addr}: "))
        );
    }
}
