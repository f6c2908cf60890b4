//! Builds through the engine's classic builder (`POST /build`; podman's
//! compat API has no BuildKit): the log is streamed, and a failure names
//! the step it happened in.

use std::collections::HashMap;
use std::io::Write;

use bollard::query_parameters::{BuildImageOptionsBuilder, BuilderVersion};
use futures_util::StreamExt;
use hyper::body::Bytes;

use super::bound::{Activity, BUILD_IDLE};
use super::{Engine, EngineError};

/// One build request.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// Containerfile path inside the context.
    pub containerfile: String,
    /// Stage to build.
    pub target: Option<String>,
    /// Build args.
    pub args: HashMap<String, String>,
    /// Labels.
    pub labels: HashMap<String, String>,
    /// The tag sent with the build.
    pub tag: String,
    /// The context tar.
    pub context: Vec<u8>,
}

/// Keeps the last `STEP n/m: …` (podman) or `Step n/m : …` (docker) line.
#[derive(Debug, Default)]
pub struct StepTracker {
    partial: String,
    /// The step being run.
    pub current: Option<String>,
}

impl StepTracker {
    /// Feeds log text (which may split lines anywhere).
    pub fn feed(&mut self, text: &str) {
        self.partial.push_str(text);
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            self.line(line.trim_end());
        }
        if is_step(self.partial.trim_end()) {
            let l = self.partial.trim_end().to_string();
            self.line(&l);
        }
    }

    fn line(&mut self, line: &str) {
        if is_step(line) {
            self.current = Some(line.to_string());
        }
    }
}

fn is_step(line: &str) -> bool {
    let l = match line.strip_prefix('[') {
        Some(rest) => rest.split_once("] ").map_or("", |(_, r)| r),
        None => line,
    };
    (l.starts_with("STEP ") || l.starts_with("Step ")) && l.contains(':')
}

impl Engine {
    /// Runs a build, printing its log to stderr; returns the built image id.
    pub async fn build(&self, req: BuildRequest) -> Result<String, EngineError> {
        let mut opts = BuildImageOptionsBuilder::new()
            .dockerfile(&req.containerfile)
            .t(&req.tag)
            .rm(true)
            .forcerm(true)
            .buildargs(&req.args)
            .labels(&req.labels)
            .version(BuilderVersion::BuilderV1);
        if let Some(t) = &req.target {
            opts = opts.target(t);
        }
        let body = bollard::body_full(Bytes::from(req.context));
        let mut stream = self.docker.build_image(opts.build(), None, Some(body));
        let mut steps = StepTracker::default();
        let mut id = None;
        let mut err = std::io::stderr();
        let fail = |steps: &StepTracker, message: String| EngineError::Stream {
            context: match &steps.current {
                Some(s) => format!("building {} failed at {s}", req.tag),
                None => format!("building {} failed", req.tag),
            },
            message: message.trim().to_string(),
        };
        let what = format!("building {}", req.tag);
        let activity = Activity::new();
        while let Some(item) = self
            .progressing(&what, &activity, BUILD_IDLE, stream.next())
            .await?
        {
            activity.touch();
            let info = match item {
                Ok(info) => info,
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Err(fail(&steps, error));
                }
                Err(e) => {
                    return Err(EngineError::Api {
                        context: match &steps.current {
                            Some(s) => format!("building {} at {s}", req.tag),
                            None => format!("building {}", req.tag),
                        },
                        error: e,
                    });
                }
            };
            if let Some(msg) = info.error_detail.and_then(|d| d.message) {
                return Err(fail(&steps, msg));
            }
            if let Some(s) = &info.stream {
                steps.feed(s);
                let _ = err.write_all(s.as_bytes());
            }
            if let Some(s) = &info.status {
                let _ = writeln!(err, "{s}");
            }
            if let Some(i) = info.aux.as_ref().and_then(|a| a.id.clone()) {
                id = Some(i);
            }
        }
        let _ = err.flush();
        // The last aux id of a multi-stage docker build may be an earlier
        // stage's: the tag is what counts.
        match self.image(&req.tag).await? {
            Some(img) => Ok(img.id),
            None => Err(EngineError::Stream {
                context: format!("building {}", req.tag),
                message: format!(
                    "the build ended without an error but {} does not exist (last id: {})",
                    req.tag,
                    id.unwrap_or_else(|| "none".into())
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_steps_of_both_engines() {
        let mut t = StepTracker::default();
        t.feed("[2/2] STEP 3/3: RUN false\n");
        assert_eq!(t.current.as_deref(), Some("[2/2] STEP 3/3: RUN false"));
        t.feed("Step 5/5 : RUN echo failing; exit 3");
        assert_eq!(
            t.current.as_deref(),
            Some("Step 5/5 : RUN echo failing; exit 3")
        );
        t.feed("\n ---> Running in 12fcbbd1af6a\nfailing\n");
        assert_eq!(
            t.current.as_deref(),
            Some("Step 5/5 : RUN echo failing; exit 3")
        );
    }
}
