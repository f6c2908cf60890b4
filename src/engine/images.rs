//! Images: pull with progress, inspect, tag, list and remove.

use std::collections::HashMap;

use bollard::models::ImageInspect;
use bollard::query_parameters::{
    CreateImageOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptionsBuilder,
    TagImageOptionsBuilder,
};
use futures_util::StreamExt;

use super::auth::{self, Credentials};
use super::bound::{Activity, STREAM_IDLE};
use super::progress::LayerProgress;
use super::{Engine, EngineError, push};
use crate::image_ref::ImageRef;

/// What halobox needs to know about a local image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalImage {
    /// Image id (`sha256:…`).
    pub id: String,
    /// Repo digests (`repo@sha256:…`).
    pub repo_digests: Vec<String>,
    /// Tags (`repo:tag`).
    pub repo_tags: Vec<String>,
    /// Labels.
    pub labels: HashMap<String, String>,
    /// The image's `Created` time (RFC 3339).
    pub created: Option<String>,
}

impl LocalImage {
    fn from_inspect(i: ImageInspect) -> Self {
        let labels = i
            .config
            .as_ref()
            .and_then(|c| c.labels.clone())
            .unwrap_or_default();
        Self {
            id: i.id.unwrap_or_default(),
            repo_digests: i.repo_digests.unwrap_or_default(),
            repo_tags: i.repo_tags.unwrap_or_default(),
            labels,
            created: i.created,
        }
    }

    /// The digest for `repository`, else the first one.
    pub fn digest_for(&self, repository: &str) -> Option<String> {
        let pick = |d: &String| d.split_once('@').map(|(_, h)| h.to_string());
        self.repo_digests
            .iter()
            .find(|d| d.starts_with(&format!("{repository}@")))
            .or_else(|| self.repo_digests.first())
            .and_then(pick)
    }
}

impl Engine {
    /// Pulls `image`, showing per-layer progress; errors inside the stream
    /// fail the pull. Credentials come from [`auth::lookup`] (never
    /// `HALOBOX_REGISTRY_USER/PASSWORD` unless `HALOBOX_REGISTRY` names the
    /// image's registry; a warning says when they were held back).
    pub async fn pull(&self, image: &ImageRef) -> Result<(), EngineError> {
        let found = auth::lookup(&image.repository, None);
        if let Some(w) = &found.withheld {
            eprintln!("warning: {w}");
        }
        self.pull_with(image, found.credentials.as_ref()).await
    }

    /// Pulls `image` with `creds` (or none), showing per-layer progress.
    pub async fn pull_with(
        &self,
        image: &ImageRef,
        creds: Option<&Credentials>,
    ) -> Result<(), EngineError> {
        let reference = image.to_string();
        let registry = auth::registry_of(&image.repository);
        let hinted = |message: String| match push::auth_hint(&message, &registry, creds) {
            Some(h) => format!("{}\n  {h}", message.trim()),
            None => message,
        };
        let mut opts = CreateImageOptionsBuilder::new().from_image(&image.repository);
        match (&image.digest, &image.tag) {
            (Some(d), _) => opts = opts.tag(d),
            (None, Some(t)) => opts = opts.tag(t),
            (None, None) => opts = opts.tag("latest"),
        }
        let mut stream =
            self.docker
                .create_image(Some(opts.build()), None, creds.map(Credentials::to_docker));
        let mut progress = LayerProgress::new(&format!("pull {reference}"));
        let what = format!("pulling {reference}");
        let activity = Activity::new();
        loop {
            let next = self
                .progressing(&what, &activity, STREAM_IDLE, stream.next())
                .await;
            let item = match next {
                Ok(Some(item)) => item,
                Ok(None) => break,
                Err(e) => {
                    progress.finish();
                    return Err(e);
                }
            };
            activity.touch();
            let info = match item {
                Ok(info) => info,
                Err(e) => {
                    progress.finish();
                    if let Some(h) = push::auth_hint(&e.to_string(), &registry, creds) {
                        return Err(EngineError::Stream {
                            context: format!("pulling {reference}"),
                            message: format!("{e}\n  {h}"),
                        });
                    }
                    return Err(EngineError::Api {
                        context: format!("pulling {reference}"),
                        error: e,
                    });
                }
            };
            if let Some(err) = info.error_detail.as_ref().and_then(|d| d.message.clone()) {
                progress.finish();
                return Err(EngineError::Stream {
                    context: format!("pulling {reference}"),
                    message: hinted(err),
                });
            }
            let (cur, tot) = info
                .progress_detail
                .as_ref()
                .map(|p| (p.current, p.total))
                .unwrap_or((None, None));
            progress.update(
                info.id.as_deref(),
                info.status.as_deref().unwrap_or(""),
                cur,
                tot,
            );
        }
        progress.finish();
        Ok(())
    }

    /// Inspects a local image; `Ok(None)` when it does not exist.
    pub async fn image(&self, reference: &str) -> Result<Option<LocalImage>, EngineError> {
        let what = format!("inspecting image {reference}");
        match self
            .within(
                super::bound::CALL,
                &what,
                self.docker.inspect_image(reference),
            )
            .await?
        {
            Ok(i) => Ok(Some(LocalImage::from_inspect(i))),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(EngineError::Api {
                context: what,
                error: e,
            }),
        }
    }

    /// Tags `source` as `target`.
    pub async fn tag(&self, source: &str, target: &ImageRef) -> Result<(), EngineError> {
        let opts = TagImageOptionsBuilder::new()
            .repo(&target.repository)
            .tag(target.tag.as_deref().unwrap_or("latest"))
            .build();
        self.call(
            &format!("tagging {source} as {target}"),
            self.docker.tag_image(source, Some(opts)),
        )
        .await
    }

    /// Every local image tagged in `repository`: (tag, image id).
    pub async fn repository_tags(
        &self,
        repository: &str,
    ) -> Result<Vec<(String, String)>, EngineError> {
        let images = self
            .call(
                "listing images",
                self.docker
                    .list_images(Some(ListImagesOptionsBuilder::new().all(false).build())),
            )
            .await?;
        let prefix = format!("{repository}:");
        let mut out = Vec::new();
        for img in images {
            for t in &img.repo_tags {
                if let Some(tag) = t.strip_prefix(&prefix) {
                    out.push((tag.to_string(), img.id.clone()));
                }
            }
        }
        Ok(out)
    }

    /// Removes one tag (the image goes when its last tag does).
    pub async fn untag(&self, reference: &str) -> Result<(), EngineError> {
        self.call(
            &format!("removing image {reference}"),
            self.docker.remove_image(
                reference,
                Some(RemoveImageOptionsBuilder::new().build()),
                None,
            ),
        )
        .await
        .map(|_| ())
    }
}
