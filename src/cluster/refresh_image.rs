//! `cluster refresh`'s first step unless `--from-registry`: the image moved
//! once to every node with a container ([`super::image_sync`]: the head
//! gets it, every other node receives the blobs it lacks over the data
//! plane), so the nodes' own refreshes then use what their engine holds
//! (`--pull never`), a registry image pinned to the digest the head got.

use super::config::{ClusterConfig, NodeConfig};
use super::image_sync;
use crate::image_ref::ImageRef;
use crate::refresh::pull::{self, PullPolicy};
use crate::reporter::Reporter;

/// The notes of the move, kept for the refresh's report.
#[derive(Default)]
struct Notes(Vec<String>);

impl Reporter for Notes {
    fn out(&mut self, text: &str) {
        self.0.extend(text.lines().map(str::to_string));
    }
    fn note(&mut self, text: &str) {
        self.0.extend(text.lines().map(str::to_string));
    }
}

/// The image the nodes stage once it was moved, and their pull policy:
/// a registry image as `REPO@DIGEST` (the digest every node now holds), a
/// `localhost/` one as it is (with no digest when the head exported
/// nothing, every node holding its image id already); neither pulled.
pub fn staged_image(
    image: &ImageRef,
    digest: Option<&str>,
) -> Result<(ImageRef, PullPolicy), String> {
    if pull::is_local(image) {
        return Ok((image.clone(), PullPolicy::Never));
    }
    let digest = digest.ok_or_else(|| format!("the move of {image} named no digest"))?;
    let pinned = ImageRef::parse(&format!("{}@{digest}", image.repository))?;
    Ok((pinned, PullPolicy::Never))
}

/// Moves `image` to `nodes` (the first is the source); the image and
/// pull policy the nodes' refreshes then use, and the move's lines; or
/// why it failed (every node keeps its old image and container).
pub fn move_first(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    image: &ImageRef,
) -> Result<(ImageRef, PullPolicy, Vec<String>), String> {
    if let Some(why) = image_sync::refusal(nodes) {
        return Err(why);
    }
    let mut sub = cfg.clone();
    sub.nodes = nodes.to_vec();
    let masters = super::run::masters(&sub);
    let mut notes = Notes::default();
    let rep = image_sync::move_image(&sub, &masters, &image.to_string(), false, &mut notes)
        .map_err(|e| format!("moving {image} to the nodes over the data plane: {e:#}"))?;
    let failed: Vec<String> = rep.nodes.iter().filter_map(|n| n.error.clone()).collect();
    if !failed.is_empty() {
        return Err(format!(
            "moving {image} to the nodes over the data plane failed, nothing was swapped: {}\n  hint: run `halobox cluster refresh` again: it sends only what is still missing (or `--from-registry` to let every node pull)",
            failed.join("\n")
        ));
    }
    notes
        .0
        .push(image_sync::render_report(&rep).trim_end().to_string());
    let (staged, policy) = staged_image(image, rep.plan.digest.as_deref())?;
    Ok((staged, policy, notes.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_registry_image_is_staged_by_its_digest_and_never_pulled() {
        let d = format!("sha256:{}", "a".repeat(64));
        let (r, p) = staged_image(&ImageRef::parse("reg:5000/x/y:v2").unwrap(), Some(&d)).unwrap();
        assert_eq!(r.to_string(), format!("reg:5000/x/y@{d}"));
        assert_eq!(p, PullPolicy::Never);
        let (r, _) = staged_image(&ImageRef::parse("localhost/z:1").unwrap(), None).unwrap();
        assert_eq!(r.to_string(), "localhost/z:1");
    }
}
