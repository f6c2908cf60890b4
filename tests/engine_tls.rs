//! `tcp://` engines: plain only on loopback; beyond it only over TLS set up
//! as docker does (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH). The TLS engine is
//! the real dockerd behind a mutual-TLS front on this machine's own
//! non-loopback address; the plain one the same dockerd on 127.0.0.1.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use common::engines::{AUTH_REPO, DOCKER, require};
use common::halobox;

/// An IPv4 address of this machine that is not loopback.
fn non_loopback_ipv4() -> String {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            w.find(|x| *x == "inet")?;
            w.next()?.split('/').next().map(str::to_string)
        })
        .expect("this test needs a non-loopback IPv4 address on this machine (`ip -4 addr`)")
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA in `dir` (`ca.pem`, `ca-key.pem`) and certificates it signs:
/// `server.pem`/`server-key.pem` for `ip`, `cert.pem`/`key.pem` for a client.
fn pki(dir: &Path, ip: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=halobox test CA",
    ]);
    openssl(&ca, dir);
    for (name, subject, ext) in [
        (
            "server",
            "/CN=engine",
            format!("subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth\n"),
        ),
        (
            "client",
            "/CN=client",
            "extendedKeyUsage=clientAuth\n".to_string(),
        ),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let key = format!("{name}-key.pem");
        let csr = format!("{name}.csr");
        let mut req = vec!["req", "-nodes"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", subject]);
        openssl(&req, dir);
        let pem = format!("{name}.pem");
        let extfile = format!("{name}.ext");
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &extfile,
                "-out",
                &pem,
            ],
            dir,
        );
    }
    std::fs::copy(dir.join("client.pem"), dir.join("cert.pem")).unwrap();
    std::fs::copy(dir.join("client-key.pem"), dir.join("key.pem")).unwrap();
}

fn certs(path: &Path) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_file_iter(path)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Forwards `ip:PORT` to dockerd's socket, over mutual TLS with `pki`'s
/// server certificate when `tls` names the folder, else in plain. Returns
/// the port.
fn front(ip: &str, tls: Option<&Path>) -> u16 {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let acceptor = tls.map(|dir| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in certs(&dir.join("ca.pem")) {
            roots.add(c).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                certs(&dir.join("server.pem")),
                PrivateKeyDer::from_pem_file(dir.join("server-key.pem")).unwrap(),
            )
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut engine) =
                        tokio::net::UnixStream::connect(DOCKER.trim_start_matches("unix://")).await
                    else {
                        return;
                    };
                    match acceptor {
                        Some(a) => {
                            if let Ok(mut s) = a.accept(tcp).await {
                                let _ = tokio::io::copy_bidirectional(&mut s, &mut engine).await;
                            }
                        }
                        None => {
                            let mut tcp = tcp;
                            let _ = tokio::io::copy_bidirectional(&mut tcp, &mut engine).await;
                        }
                    }
                });
            }
        });
    });
    port
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn list(engine: &str, cert_path: Option<&Path>) -> Output {
    let mut cmd = halobox();
    cmd.args(["list", "--json", "--engine", engine])
        .env_remove("DOCKER_HOST")
        .env_remove("CONTAINER_HOST");
    match cert_path {
        Some(p) => cmd.env("DOCKER_TLS_VERIFY", "1").env("DOCKER_CERT_PATH", p),
        None => cmd
            .env_remove("DOCKER_TLS_VERIFY")
            .env_remove("DOCKER_CERT_PATH"),
    };
    cmd.output().unwrap()
}

#[test]
fn plain_tcp_beyond_loopback_is_refused_before_connecting() {
    let ip = non_loopback_ipv4();
    let listener = std::net::TcpListener::bind((ip.as_str(), 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = format!("tcp://{ip}:{}", listener.local_addr().unwrap().port());
    let by_flag = list(&address, None);
    let by_env = halobox()
        .args(["list"])
        .env("DOCKER_HOST", &address)
        .env_remove("CONTAINER_HOST")
        .env_remove("DOCKER_TLS_VERIFY")
        .env("HALOBOX_CONFIG", "/nonexistent/config.toml")
        .output()
        .unwrap();
    for (o, source) in [(by_flag, "--engine"), (by_env, "DOCKER_HOST")] {
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "{source}: refusing the plain engine address {address}"
            )),
            "{err}"
        );
        assert!(
            err.contains("DOCKER_TLS_VERIFY=1") && err.contains("ssh -nNT -L"),
            "{err}"
        );
    }
    assert!(
        listener.accept().is_err(),
        "halobox connected to a plain non-loopback engine"
    );
}

#[test]
fn tls_engine_beyond_loopback_and_plain_loopback_engine_work() {
    require(DOCKER);
    let ip = non_loopback_ipv4();
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    pki(&good, &ip);
    let tls_port = front(&ip, Some(&good));
    let address = format!("tcp://{ip}:{tls_port}");

    let o = list(&address, Some(&good));
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("list --json");

    // A push goes over the same TLS (halobox's own push request).
    let pw = std::fs::read_to_string("/tmp/halobox-engines/registry-auth/password")
        .expect("the auth registry's password (scripts/engines/start.sh writes it)");
    let pw = pw.trim();
    let repo = AUTH_REPO.replace("/test", &format!("/tls-{}", std::process::id()));
    let o = halobox()
        .args([
            "publish",
            "127.0.0.1:5000/halobox/test:1",
            "--channel",
            "dev",
            "--to",
            &repo,
            "--revision",
            "0123456789abcdef0123456789abcdef01234567",
            "--source",
            "https://example.org/halobox",
            "--engine",
            &address,
        ])
        .env("DOCKER_TLS_VERIFY", "1")
        .env("DOCKER_CERT_PATH", &good)
        .env("HALOBOX_REGISTRY_USER", "halobox")
        .env("HALOBOX_REGISTRY_PASSWORD", pw)
        .env("REGISTRY_AUTH_FILE", "/nonexistent")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains(&format!("{repo}:dev")), "{out}");
    assert!(!out.contains(pw) && !stderr(&o).contains(pw));

    // An engine whose certificate another CA signed is not trusted.
    let rogue = tmp.path().join("rogue");
    pki(&rogue, &ip);
    for f in ["cert.pem", "key.pem"] {
        std::fs::copy(good.join(f), rogue.join(f)).unwrap();
    }
    let o = list(&address, Some(&rogue));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).to_ascii_lowercase().contains("certificate"),
        "{}",
        stderr(&o)
    );

    // Plain is fine on loopback.
    let plain = front("127.0.0.1", None);
    let o = list(&format!("tcp://127.0.0.1:{plain}"), None);
    assert!(o.status.success(), "{}", stderr(&o));
}
