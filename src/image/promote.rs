//! What `halobox publish --promote-digest DIGEST --channel C` does (pure):
//! the candidate tag that must name the digest (`sha-<7 hex>` of the
//! revision that `publish --candidate` pushed), the channel tag it moves,
//! and the verdicts on what the registry answered. A channel moves only to
//! the candidate's own digest, by digest: nothing is rebuilt. An unverified
//! move (no Strix Halo check ran) gets a new config with
//! `io.halobox.verified=false`, the same layers.

use serde::Serialize;

use super::publish::{VERIFIED, is_revision};
use crate::image_ref::ImageRef;

/// One promotion, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Promotion {
    /// The repository (no tag).
    pub repository: String,
    /// The digest asked for (`sha256:…`).
    pub digest: String,
    /// `REPO:sha-<7 hex>`: the candidate tag that must be at `digest`.
    pub candidate: String,
    /// `REPO@DIGEST`: what is pulled and moved.
    pub source: String,
    /// `REPO:CHANNEL`: the tag moved.
    pub target: String,
    /// True: relabel `io.halobox.verified=false` (a new config, same layers).
    pub unverified: bool,
}

/// True for `sha256:` and 64 lowercase hex digits.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Resolves a promotion from the flags.
pub fn plan(
    repository: &str,
    digest: &str,
    revision: &str,
    channel: &str,
    unverified: bool,
) -> Result<Promotion, String> {
    if !is_digest(digest) {
        return Err(format!(
            "--promote-digest {digest:?} is not a digest; hint: give the sha256:… that `halobox publish --candidate` printed"
        ));
    }
    if !is_revision(revision) {
        return Err(format!(
            "revision {revision:?} is not a git commit (7-40 hex); hint: pass the --revision the candidate was published with"
        ));
    }
    let repo = ImageRef::parse(repository).map_err(|e| format!("--to: {e}"))?;
    let candidate = repo.with_tag(&format!("sha-{}", &revision[..7]));
    Ok(Promotion {
        repository: repo.repository.clone(),
        digest: digest.to_string(),
        source: format!("{}@{digest}", repo.repository),
        candidate: candidate.to_string(),
        target: repo.with_tag(channel).to_string(),
        unverified,
    })
}

/// Whether the candidate tag names the digest: `candidate_digests` are the
/// repo digests of the image the candidate tag pulled, `candidate_id` its
/// id, `source_id` the id of the image pulled by digest.
pub fn judge(
    p: &Promotion,
    candidate_digests: &[String],
    candidate_id: &str,
    source_id: &str,
) -> Result<(), String> {
    let at: Vec<&str> = candidate_digests
        .iter()
        .filter_map(|d| d.strip_prefix(&format!("{}@", p.repository)))
        .collect();
    if at.contains(&p.digest.as_str()) && candidate_id == source_id {
        return Ok(());
    }
    Err(format!(
        "{} is not the candidate's digest: {} is at {}; nothing moved\n  hint: promote the digest `halobox publish --candidate` printed for this revision, or pass the --revision that candidate was published with",
        p.digest,
        p.candidate,
        if at.is_empty() {
            "no digest of this repository".to_string()
        } else {
            at.join(", ")
        }
    ))
}

/// After a verified move: the registry must hold the channel at the very
/// digest that was checked.
pub fn judge_pushed(p: &Promotion, pushed: &str) -> Result<(), String> {
    if p.unverified || pushed == p.digest {
        return Ok(());
    }
    Err(format!(
        "{} now points at {pushed}, not the candidate's {}: the engine rewrote the manifest on push\n  hint: move it with a registry tool that copies by digest (`skopeo copy --preserve-digests docker://{} docker://{}`)",
        p.target, p.digest, p.source, p.target
    ))
}

/// The label an unverified move adds.
pub fn unverified_label() -> (String, String) {
    (VERIFIED.to_string(), "false".to_string())
}

/// The plan as text for `--dry-run`.
pub fn render(p: &Promotion, credentials: &str) -> String {
    let mut s = format!(
        "promote {} to {}\n  credentials: {credentials}\n  check: {} is at {}\n  pull {}\n",
        p.source, p.target, p.candidate, p.digest, p.source
    );
    if p.unverified {
        s.push_str(&format!(
            "  new config with {VERIFIED}=false (no Strix Halo check ran), same layers\n"
        ));
    }
    s.push_str(&format!("  tag {}\n  push {}\n", p.target, p.target));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const E: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
    const REV: &str = "4cdcc08347371de1d92fdb887822d840b5f8d833";

    #[test]
    fn the_channel_moves_to_the_candidate_only() {
        let p = plan("127.0.0.1:5001/h/x", D, REV, "latest", false).unwrap();
        assert_eq!(p.candidate, "127.0.0.1:5001/h/x:sha-4cdcc08");
        assert_eq!(p.target, "127.0.0.1:5001/h/x:latest");
        assert_eq!(p.source, format!("127.0.0.1:5001/h/x@{D}"));
        let at = |d: &str| vec![format!("127.0.0.1:5001/h/x@{d}"), format!("other/r@{D}")];
        assert!(judge(&p, &at(D), "sha256:i", "sha256:i").is_ok());
        let wrong = judge(&p, &at(E), "sha256:j", "sha256:i").unwrap_err();
        assert!(wrong.contains(&format!("sha-4cdcc08 is at {E}")), "{wrong}");
        assert!(wrong.contains("nothing moved"), "{wrong}");
        assert!(
            judge(&p, &at(D), "sha256:j", "sha256:i").is_err(),
            "the digest pulled must be the candidate's image"
        );
        assert!(
            judge(&p, &[format!("other/r@{D}")], "sha256:i", "sha256:i").is_err(),
            "a digest of another repository does not count"
        );
    }

    #[test]
    fn bad_flags_and_pushes_are_named() {
        assert!(plan("r/x", "sha256:12", REV, "latest", false).is_err());
        assert!(plan("r/x", D, "HEAD", "latest", false).is_err());
        let p = plan("r/x", D, REV, "latest", false).unwrap();
        assert!(judge_pushed(&p, D).is_ok());
        let e = judge_pushed(&p, E).unwrap_err();
        assert!(e.contains("rewrote the manifest"), "{e}");
        let u = plan("r/x", D, REV, "latest", true).unwrap();
        assert!(
            judge_pushed(&u, E).is_ok(),
            "an unverified move has a new config"
        );
        assert!(render(&u, "anonymous").contains("io.halobox.verified=false"));
    }
}
