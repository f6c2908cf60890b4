//! Image archives in and out of the engine: export (`GET /images/{name}/get`,
//! a docker archive on podman and docker) and load (`POST /images/load`).

use std::io::{Read, Write};
use std::path::Path;

use bollard::query_parameters::ImportImageOptionsBuilder;
use futures_util::StreamExt;
use hyper::body::Bytes;

use super::bound::{Activity, STREAM_IDLE};
use super::{Engine, EngineError};

impl Engine {
    /// Writes the engine's archive of `reference` to `out`.
    pub async fn export_image(&self, reference: &str, out: &Path) -> Result<u64, EngineError> {
        let fail = |message: String| EngineError::Stream {
            context: format!("exporting image {reference}"),
            message,
        };
        if self.image(reference).await?.is_none() {
            return Err(fail(format!(
                "no such image in {} at {}; hint: `{} pull {reference}` or `halobox build` first, or give an archive file",
                self.info.kind, self.info.address, self.info.kind
            )));
        }
        let mut file = std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(out).map_err(|e| fail(format!("{}: {e}", out.display())))?,
        );
        let mut stream = self.docker.export_image(reference);
        let mut total = 0u64;
        let what = format!("exporting image {reference}");
        let activity = Activity::new();
        while let Some(chunk) = self
            .progressing(&what, &activity, STREAM_IDLE, stream.next())
            .await?
        {
            activity.touch();
            let chunk = chunk.map_err(|e| EngineError::Api {
                context: what.clone(),
                error: e,
            })?;
            total += chunk.len() as u64;
            file.write_all(&chunk)
                .map_err(|e| fail(format!("{}: {e}", out.display())))?;
        }
        file.flush()
            .map_err(|e| fail(format!("{}: {e}", out.display())))?;
        Ok(total)
    }

    /// Loads an image archive; returns the engine's `Loaded image…` lines.
    pub async fn load_archive(&self, archive: &Path) -> Result<Vec<String>, EngineError> {
        let context = format!("loading {} into {}", archive.display(), self.info.kind);
        let file = std::fs::File::open(archive).map_err(|e| EngineError::Stream {
            context: context.clone(),
            message: e.to_string(),
        })?;
        let chunks = futures_util::stream::unfold(file, |mut f| async move {
            let mut buf = vec![0u8; 1 << 20];
            match f.read(&mut buf) {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok::<_, std::io::Error>(Bytes::from(buf)), f))
                }
                Err(e) => Some((Err(e), f)),
            }
        });
        // The engine reading the upload is progress too.
        let activity = Activity::new();
        let reading = activity.clone();
        let chunks = chunks.inspect(move |_| reading.touch());
        let opts = ImportImageOptionsBuilder::new().quiet(true).build();
        let mut stream = self
            .docker
            .import_image(opts, bollard::body_try_stream(chunks), None);
        let mut loaded = Vec::new();
        while let Some(item) = self
            .progressing(&context, &activity, STREAM_IDLE, stream.next())
            .await?
        {
            activity.touch();
            match item {
                Ok(info) => {
                    if let Some(msg) = info.error_detail.and_then(|d| d.message) {
                        return Err(EngineError::Stream {
                            context,
                            message: msg,
                        });
                    }
                    if let Some(s) = info.stream {
                        loaded.extend(
                            s.lines()
                                .map(str::trim)
                                .filter(|l| !l.is_empty())
                                .map(str::to_string),
                        );
                    }
                }
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Err(EngineError::Stream {
                        context,
                        message: error,
                    });
                }
                Err(error) => return Err(EngineError::Api { context, error }),
            }
        }
        Ok(loaded)
    }
}
