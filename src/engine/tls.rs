//! TLS to a `tcp://` engine, configured as docker does: `DOCKER_TLS_VERIFY`
//! set (non-empty) turns it on, `DOCKER_CERT_PATH` (default `~/.docker`)
//! holds `ca.pem` (the only CA trusted for the engine), `cert.pem` and
//! `key.pem` (the client's certificate and key).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use bollard::{BollardRequest, ClientVersion, Docker};
use futures_util::Stream;
use http_body_util::{Either, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where the engine's TLS files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The folder with `ca.pem`, `cert.pem` and `key.pem`.
    pub dir: PathBuf,
}

/// The TLS settings of the environment, as docker reads them: `None`
/// unless `DOCKER_TLS_VERIFY` is set.
pub fn from_env() -> Option<TlsFiles> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    var("DOCKER_TLS_VERIFY")?;
    let dir = var("DOCKER_CERT_PATH")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".docker")))?;
    Some(TlsFiles { dir })
}

/// The body bollard sends through a custom transport.
type BollardBody = Either<
    Full<Bytes>,
    StreamBody<Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send>>>,
>;

impl TlsFiles {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A rustls client config that trusts only `ca.pem` and presents
    /// `cert.pem`/`key.pem`.
    fn client_config(&self) -> Result<rustls::ClientConfig, String> {
        let read_err = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
        let ca = self.file("ca.pem");
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&ca).map_err(|e| read_err(&ca, &e))? {
            let cert = cert.map_err(|e| read_err(&ca, &e))?;
            roots.add(cert).map_err(|e| read_err(&ca, &e))?;
        }
        if roots.is_empty() {
            return Err(format!("{}: no certificate in it", ca.display()));
        }
        let cert_path = self.file("cert.pem");
        let chain = CertificateDer::pem_file_iter(&cert_path)
            .map_err(|e| read_err(&cert_path, &e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| read_err(&cert_path, &e))?;
        let key_path = self.file("key.pem");
        let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| read_err(&key_path, &e))?;
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("{} / {}: {e}", cert_path.display(), key_path.display()))
    }

    /// Checks that the files make a usable identity, with the fix if not.
    pub fn check(&self) -> Result<(), String> {
        self.client_config().map(|_| ()).map_err(|e| {
            format!(
                "DOCKER_TLS_VERIFY is set but the TLS files in {} cannot be used: {e}\n  \
                 hint: DOCKER_CERT_PATH must name a folder with ca.pem (the engine's CA), \
                 cert.pem and key.pem (this client's certificate and key), as for docker: \
                 `ls \"$DOCKER_CERT_PATH\"` shows what is there",
                self.dir.display()
            )
        })
    }

    /// An HTTPS-only connector with this identity.
    pub fn connector(&self) -> Result<HttpsConnector<HttpConnector>, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        Ok(hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(self.client_config()?)
            .https_only()
            .enable_http1()
            .wrap_connector(http))
    }

    /// A bollard client for `https://host:port` over this TLS identity.
    pub fn docker(
        &self,
        https_address: &str,
        timeout_secs: u64,
        version: &ClientVersion,
    ) -> Result<Docker, String> {
        let client: Client<HttpsConnector<HttpConnector>, BollardBody> =
            Client::builder(TokioExecutor::new()).build(self.connector()?);
        Docker::connect_with_custom_transport(
            move |req: BollardRequest| {
                let client = client.clone();
                async move { Ok(client.request(req).await?) }
            },
            Some(https_address),
            timeout_secs,
            version,
        )
        .map_err(|e| e.to_string())
    }
}
