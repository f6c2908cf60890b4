//! Where the container engine's API socket is: a pure decision from the
//! environment and which socket files exist.

use std::path::{Path, PathBuf};

/// Where one candidate address came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What named it (`--engine`, `CONTAINER_HOST`, …).
    pub source: &'static str,
    /// The address (`unix:///run/podman/podman.sock`, `tcp://host:2375`).
    pub address: String,
}

/// The environment discovery reads.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryEnv {
    /// `--engine URL` or the config file's `engine`.
    pub explicit: Option<String>,
    /// `CONTAINER_HOST`.
    pub container_host: Option<String>,
    /// `DOCKER_HOST`.
    pub docker_host: Option<String>,
    /// `XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<PathBuf>,
}

impl DiscoveryEnv {
    /// Reads the process environment; `explicit` comes from flags or config.
    pub fn from_process(explicit: Option<String>) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self {
            explicit,
            container_host: var("CONTAINER_HOST"),
            docker_host: var("DOCKER_HOST"),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR").map(PathBuf::from),
        }
    }
}

/// Every place to try, in order: `--engine`/config, `CONTAINER_HOST`,
/// `DOCKER_HOST`, the rootless podman socket, the rootful podman socket,
/// the docker socket. Explicit settings are tried alone: naming an engine
/// and silently getting another would be worse than an error.
pub fn candidates(env: &DiscoveryEnv) -> Vec<Candidate> {
    let c = |source, address: String| Candidate { source, address };
    if let Some(e) = &env.explicit {
        return vec![c("--engine", normalize(e))];
    }
    if let Some(e) = &env.container_host {
        return vec![c("CONTAINER_HOST", normalize(e))];
    }
    if let Some(e) = &env.docker_host {
        return vec![c("DOCKER_HOST", normalize(e))];
    }
    let mut out = Vec::new();
    if let Some(dir) = &env.xdg_runtime_dir {
        out.push(c(
            "$XDG_RUNTIME_DIR",
            format!("unix://{}", dir.join("podman/podman.sock").display()),
        ));
    }
    out.push(c("rootful podman", "unix:///run/podman/podman.sock".into()));
    out.push(c("docker", "unix:///var/run/docker.sock".into()));
    out
}

/// A bare path becomes a `unix://` address.
pub fn normalize(address: &str) -> String {
    if address.starts_with('/') {
        format!("unix://{address}")
    } else {
        address.to_string()
    }
}

/// The socket path of a `unix://` address.
pub fn unix_path(address: &str) -> Option<&Path> {
    address.strip_prefix("unix://").map(Path::new)
}

/// How halobox reaches an engine address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A unix socket.
    Unix(PathBuf),
    /// Plain HTTP to a loopback address (`http://127.0.0.1:2375`).
    Plain(String),
    /// HTTPS with docker's TLS files (`https://host:2376`).
    Tls(String),
}

/// The host of a `scheme://host:port[/...]` address (IPv6 without brackets).
fn host_of(authority: &str) -> &str {
    let authority = authority.split('/').next().unwrap_or_default();
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
}

/// True for `localhost` and loopback IP addresses.
pub fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// How to reach `address`: a unix socket as it is; `tcp://`, `http://` and
/// `https://` over TLS when `tls` is configured, else plain only to a
/// loopback address. Anything else is refused with the fix: a plain
/// connection across the network would carry full control of the engine
/// and registry credentials in clear.
pub fn transport(address: &str, tls: bool) -> Result<Transport, String> {
    if let Some(path) = unix_path(address) {
        return Ok(Transport::Unix(path.to_path_buf()));
    }
    let rest = ["tcp://", "http://", "https://"]
        .iter()
        .find_map(|s| address.strip_prefix(s).map(|r| (*s, r)));
    let Some((scheme, authority)) = rest else {
        return Err(format!(
            "{address} is not an engine address halobox can use\n  \
             hint: `--engine unix:///path/to/socket`, or `--engine tcp://host:port` (TLS unless loopback)"
        ));
    };
    let authority = authority.trim_end_matches('/');
    if tls {
        return Ok(Transport::Tls(format!("https://{authority}")));
    }
    let host = host_of(authority);
    if scheme == "https://" {
        return Err(format!(
            "{address} asks for TLS but DOCKER_TLS_VERIFY is not set\n  \
             hint: `export DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=DIR` (DIR holding ca.pem, cert.pem, key.pem), as for docker"
        ));
    }
    if is_loopback_host(host) {
        return Ok(Transport::Plain(format!("http://{authority}")));
    }
    Err(format!(
        "refusing the plain engine address {address}: {host} is not loopback, and without TLS \
         full control of the engine and any registry credentials would cross the network in clear\n  \
         hint: configure TLS as docker does (`export DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=DIR`, DIR holding \
         ca.pem, cert.pem, key.pem), or reach the engine through a unix socket or an ssh tunnel: \
         `ssh -nNT -L /tmp/engine.sock:/run/podman/podman.sock {host}`, then --engine unix:///tmp/engine.sock"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tcp_only_to_loopback_unless_tls() {
        use Transport::*;
        let t = |a: &str, tls| transport(a, tls);
        assert_eq!(
            t("unix:///run/x.sock", false),
            Ok(Unix("/run/x.sock".into()))
        );
        for a in [
            "tcp://127.0.0.1:2375",
            "tcp://localhost:2375",
            "http://[::1]:2375/",
            "tcp://127.8.9.10:1",
        ] {
            assert!(matches!(t(a, false), Ok(Plain(_))), "{a}");
        }
        assert_eq!(
            t("tcp://127.0.0.1:2375", false),
            Ok(Plain("http://127.0.0.1:2375".into()))
        );
        for a in [
            "tcp://10.0.0.5:2375",
            "tcp://engine.example.org:2375",
            "http://[fe80::1]:2375",
            "tcp://127.0.0.1.example.org:2375",
        ] {
            let e = t(a, false).unwrap_err();
            assert!(e.contains(a) && e.contains("DOCKER_TLS_VERIFY"), "{e}");
        }
        assert_eq!(
            t("tcp://10.0.0.5:2376", true),
            Ok(Tls("https://10.0.0.5:2376".into()))
        );
        assert!(t("https://10.0.0.5:2376", false).is_err());
        assert!(t("ssh://host", false).is_err());
    }

    #[test]
    fn order_without_settings() {
        let env = DiscoveryEnv {
            xdg_runtime_dir: Some("/run/user/1000".into()),
            ..Default::default()
        };
        let got: Vec<String> = candidates(&env).into_iter().map(|c| c.address).collect();
        assert_eq!(
            got,
            [
                "unix:///run/user/1000/podman/podman.sock",
                "unix:///run/podman/podman.sock",
                "unix:///var/run/docker.sock"
            ]
        );
    }

    #[test]
    fn explicit_wins_and_is_alone() {
        let env = DiscoveryEnv {
            explicit: Some("/tmp/x.sock".into()),
            container_host: Some("unix:///a".into()),
            docker_host: Some("unix:///b".into()),
            xdg_runtime_dir: None,
        };
        assert_eq!(
            candidates(&env),
            [Candidate {
                source: "--engine",
                address: "unix:///tmp/x.sock".into()
            }]
        );
        let env = DiscoveryEnv {
            container_host: None,
            ..env.clone()
        };
        assert_eq!(candidates(&env)[0].address, "unix:///tmp/x.sock");
        let env = DiscoveryEnv {
            explicit: None,
            container_host: None,
            docker_host: Some("tcp://10.0.0.1:2375".into()),
            xdg_runtime_dir: None,
        };
        assert_eq!(candidates(&env)[0].source, "DOCKER_HOST");
    }
}
