//! What runs on a cluster node, beside its hardware figures: whether the
//! node's halobox container runs (asked of the container engine), whether
//! Ray runs (its `raylet` in `/proc`, through the host readers), and on
//! the head the serve's state (its API's `GET /health`, and whether a
//! serve record on this host says one was started). The readers are the
//! effects; [`families`] turns what they saw into metric families (pure).

use std::net::SocketAddr;
use std::time::Duration;

use crate::cluster::config::NodeBackend;
use crate::host::Reader;
#[cfg(doc)]
use crate::host::procs;
use crate::http;

use super::exposition::{Family, Kind, Sample};

/// How long the serve's `/health` may take to answer a scrape.
pub const HEALTH_TIMEOUT: Duration = Duration::from_millis(500);

/// The most of `/health`'s body that is read (only its status counts).
const HEALTH_BODY: usize = 4096;

/// The processes that say Ray runs on a node (`comm`, 15 characters at
/// most): the raylet runs on every Ray node, the GCS on the head.
pub const RAY_PROCESSES: &[&str] = &["raylet", "gcs_server"];

/// The serve's state as a scrape sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeState {
    /// Its API answers `GET /health` with 200.
    Serving,
    /// A serve record on this host says one was started, but its API does
    /// not answer (starting, failed, or stopped without `serve stop`).
    NotAnswering,
    /// No record here and nothing answers.
    None,
}

impl ServeState {
    /// Every state, in output order.
    pub const ALL: [ServeState; 3] = [
        ServeState::Serving,
        ServeState::NotAnswering,
        ServeState::None,
    ];

    /// The `state` label's value.
    pub fn word(self) -> &'static str {
        match self {
            ServeState::Serving => "serving",
            ServeState::NotAnswering => "not_answering",
            ServeState::None => "none",
        }
    }

    /// From what a scrape saw.
    pub fn of(recorded: bool, healthy: bool) -> ServeState {
        match (healthy, recorded) {
            (true, _) => ServeState::Serving,
            (false, true) => ServeState::NotAnswering,
            (false, false) => ServeState::None,
        }
    }
}

/// What one scrape saw running on the node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Seen {
    /// The node's container (name, backend) and whether it runs (`None`:
    /// the engine could not be asked).
    pub container: Option<(String, NodeBackend, Option<bool>)>,
    /// Whether Ray's daemons run (`None`: not asked).
    pub ray: Option<bool>,
    /// The serve's state (`None`: not the head, or not asked).
    pub serve: Option<ServeState>,
    /// The restarts its supervisor made (`--restart`), from the serve
    /// record's events file (`None`: no serve record named).
    pub restarts: Option<u64>,
}

/// The families of what runs on the node.
pub fn families(seen: &Seen) -> Vec<Family> {
    let mut out = Vec::new();
    if let Some((name, backend, running)) = &seen.container {
        let mut f = Family {
            name: "halobox_container_running",
            help: "1 when the node's halobox container runs, 0 when it exists stopped or not at all (asked of the container engine).",
            kind: Kind::Gauge,
            samples: Vec::new(),
        };
        if let Some(running) = running {
            f.samples.push(Sample {
                labels: vec![
                    ("container", name.clone()),
                    ("backend", backend.to_string()),
                ],
                value: f64::from(u8::from(*running)),
            });
        }
        out.push(f);
    }
    if let Some(ray) = seen.ray {
        out.push(Family {
            name: "halobox_ray_running",
            help: "1 when Ray's raylet or GCS server runs on this node, else 0.",
            kind: Kind::Gauge,
            samples: vec![Sample {
                labels: vec![],
                value: f64::from(u8::from(ray)),
            }],
        });
    }
    if let Some(state) = seen.serve {
        out.push(Family {
            name: "halobox_serve_state",
            help: "The serve on the head: 1 for its state (serving: the API answers /health; not_answering: a serve record says one was started but its API does not answer; none), 0 for the others.",
            kind: Kind::Gauge,
            samples: ServeState::ALL
                .iter()
                .map(|s| Sample {
                    labels: vec![("state", s.word().to_string())],
                    value: f64::from(u8::from(*s == state)),
                })
                .collect(),
        });
    }
    if let Some(n) = seen.restarts {
        out.push(Family {
            name: "halobox_serve_restarts_total",
            help: "Restarts the serve's supervisor made (serve --restart), from the serve record's events on the head; back to 0 when a new serve starts.",
            kind: Kind::Counter,
            samples: vec![Sample {
                labels: vec![],
                value: n as f64,
            }],
        });
    }
    out
}

/// Whether Ray's daemons run here (in this PID namespace): the first
/// process whose `comm` is one of [`RAY_PROCESSES`] ends the look (only
/// `comm` is read, unlike [`procs::find`]).
pub fn ray_running(r: &Reader) -> bool {
    r.dir("/proc").unwrap_or_default().iter().any(|entry| {
        entry.bytes().all(|b| b.is_ascii_digit())
            && r.text_quiet(&format!("/proc/{entry}/comm"))
                .is_some_and(|c| RAY_PROCESSES.contains(&c.trim()))
    })
}

/// Whether container `name` runs, as the container engine says (`None`:
/// the engine could not be asked).
pub fn container_running(name: &str) -> Option<bool> {
    let info = crate::engine::block_on(async {
        let engine = crate::engine::connect(None).await?;
        anyhow::Ok(engine.container(name).await?)
    })
    .ok()?
    .ok()?;
    Some(info.is_some_and(|c| c.state == "running"))
}

/// Whether `GET /health` on `addr` answers 200 within [`HEALTH_TIMEOUT`].
pub fn healthy(addr: SocketAddr) -> bool {
    http::get_up_to(addr, "/health", None, HEALTH_TIMEOUT, HEALTH_BODY)
        .is_ok_and(|r| r.status == 200)
}

/// `IP:PORT` of a recorded endpoint (`http://IP:PORT`).
pub fn endpoint_addr(endpoint: &str) -> Option<SocketAddr> {
    endpoint
        .strip_prefix("http://")?
        .trim_end_matches('/')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::render;

    #[test]
    fn states_and_families() {
        assert_eq!(ServeState::of(false, true), ServeState::Serving);
        assert_eq!(ServeState::of(true, true), ServeState::Serving);
        assert_eq!(ServeState::of(true, false), ServeState::NotAnswering);
        assert_eq!(ServeState::of(false, false), ServeState::None);
        let seen = Seen {
            container: Some(("hb\"x\n".into(), NodeBackend::Podman, Some(true))),
            ray: Some(false),
            serve: Some(ServeState::NotAnswering),
            restarts: Some(3),
        };
        let text = render("n1", &families(&seen));
        assert!(
            text.contains("# TYPE halobox_serve_restarts_total counter\nhalobox_serve_restarts_total{node=\"n1\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "halobox_container_running{node=\"n1\",container=\"hb\\\"x\\n\",backend=\"podman\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("halobox_ray_running{node=\"n1\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("halobox_serve_state{node=\"n1\",state=\"not_answering\"} 1\n"));
        assert!(text.contains("halobox_serve_state{node=\"n1\",state=\"serving\"} 0\n"));
        assert!(text.contains("halobox_serve_state{node=\"n1\",state=\"none\"} 0\n"));
        // An engine that could not be asked leaves the sample out.
        let unknown = Seen {
            container: Some(("c".into(), NodeBackend::Docker, None)),
            ..Seen::default()
        };
        assert_eq!(render("n1", &families(&unknown)), "");
        assert!(families(&Seen::default()).is_empty());
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint_addr("http://10.0.0.1:8000"),
            Some("10.0.0.1:8000".parse().unwrap())
        );
        assert_eq!(endpoint_addr("https://10.0.0.1:8000"), None);
        assert_eq!(endpoint_addr("http://x"), None);
    }

    #[test]
    fn ray_runs_when_a_raylet_is_in_proc() {
        let dir = tempfile::tempdir().unwrap();
        let proc_dir = |pid: &str, comm: &str| {
            let d = dir.path().join("proc").join(pid);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), comm).unwrap();
        };
        proc_dir("1", "systemd\n");
        proc_dir("self", "raylet\n");
        let r = || Reader::new(crate::host::HostRoot::sysroot(dir.path()).unwrap());
        assert!(!ray_running(&r()));
        proc_dir("4242", "raylet-x\n");
        assert!(!ray_running(&r()));
        proc_dir("4243", "gcs_server\n");
        assert!(ray_running(&r()));
    }

    #[test]
    fn healthy_is_a_200_answer() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let answers = [
            "HTTP/1.0 200\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}",
            "HTTP/1.1 503 Service Unavailable\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n",
        ];
        let t = std::thread::spawn(move || {
            for a in answers {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                s.write_all(a.as_bytes()).unwrap();
            }
        });
        let seen: Vec<bool> = answers.iter().map(|_| healthy(addr)).collect();
        assert_eq!(seen, [true, true, false, false]);
        t.join().unwrap();
    }

    #[test]
    fn a_closed_port_is_not_healthy() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        assert!(!healthy(addr));
    }
}
