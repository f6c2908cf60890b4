//! Whether `refresh` pulls its image (`--pull always|missing|never`),
//! decided from the policy asked for, the reference and whether the engine
//! already has the image. `localhost/` names no registry (podman's prefix
//! for images built or loaded here), so such an image is used as it is.

use serde::Serialize;

use crate::image_ref::ImageRef;

/// The words a refresh uses when the image is absent and will not be
/// pulled; `cluster refresh` looks for them in a node's error.
pub const ABSENT: &str = "is not in this engine's image store";

/// `--pull`: when `refresh` pulls the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Pull every time (the default for a registry image).
    Always,
    /// Pull only when the engine does not have the image (the default for a `localhost/` image).
    Missing,
    /// Never pull: use the image the engine has, or refuse.
    Never,
}

impl std::fmt::Display for PullPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PullPolicy::Always => "always",
            PullPolicy::Missing => "missing",
            PullPolicy::Never => "never",
        })
    }
}

/// What the plan does about the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pulling {
    /// The policy in force (asked for, else the default for the image).
    pub policy: PullPolicy,
    /// Whether the image is pulled.
    pub pull: bool,
    /// Why, in words.
    pub why: String,
}

/// Why the image cannot be had; nothing has been changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// `--pull never` and the engine does not have the image.
    #[error(
        "{image} {ABSENT} and --pull never forbids pulling it\n  hint: {}",
        fix(image)
    )]
    Never {
        /// The reference.
        image: String,
    },
    /// A `localhost/` image the engine does not have: there is no registry to pull it from.
    #[error(
        "{image} {ABSENT}, and localhost/ names images built or loaded on this machine, not a registry to pull from\n  hint: {}; `halobox refresh --pull always` tries a registry at localhost anyway",
        fix(image)
    )]
    LocalAbsent {
        /// The reference.
        image: String,
    },
}

/// How to put `image` into the engine: pull it (a registry image), build
/// it or load it.
fn fix(image: &str) -> String {
    let pull = match image.starts_with("localhost/") {
        true => String::new(),
        false => format!("pull it with `halobox refresh --image {image} --pull missing`, "),
    };
    format!(
        "{pull}build it with `halobox build --tag {image}`, or load it with `podman load -i FILE` (`docker load -i FILE`)"
    )
}

/// True for a reference under `localhost/` (no port: `localhost:5000/…`
/// is a registry).
pub fn is_local(image: &ImageRef) -> bool {
    image.repository.starts_with("localhost/")
}

/// Decides whether `image` is pulled under `asked` (`None`: the default)
/// when the engine has it (`present`).
pub fn decide(
    asked: Option<PullPolicy>,
    image: &ImageRef,
    present: bool,
) -> Result<Pulling, PullError> {
    let local = is_local(image);
    let policy = asked.unwrap_or(if local {
        PullPolicy::Missing
    } else {
        PullPolicy::Always
    });
    let given = match (asked, local) {
        (Some(_), _) => format!("--pull {policy}"),
        (None, true) => format!("--pull {policy}, the default for a localhost/ image"),
        (None, false) => format!("--pull {policy}, the default for a registry image"),
    };
    let image_s = image.to_string();
    let (pull, why) = match (policy, present) {
        (PullPolicy::Always, _) => (true, given),
        (PullPolicy::Missing | PullPolicy::Never, true) => {
            (false, format!("the engine has {image_s} ({given})"))
        }
        (PullPolicy::Never, false) => return Err(PullError::Never { image: image_s }),
        (PullPolicy::Missing, false) if local => {
            return Err(PullError::LocalAbsent { image: image_s });
        }
        (PullPolicy::Missing, false) => (
            true,
            format!("the engine does not have {image_s} ({given})"),
        ),
    };
    Ok(Pulling { policy, pull, why })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap()
    }

    #[test]
    fn registry_images_are_pulled_by_default() {
        for present in [true, false] {
            let p = decide(None, &r("ghcr.io/halobox/vllm:latest"), present).unwrap();
            assert_eq!((p.policy, p.pull), (PullPolicy::Always, true));
        }
        // localhost with a port is a registry.
        let p = decide(None, &r("localhost:5000/x:1"), true).unwrap();
        assert_eq!((p.policy, p.pull), (PullPolicy::Always, true));
    }

    #[test]
    fn a_local_image_the_engine_has_is_used_as_it_is() {
        let p = decide(None, &r("localhost/vllm-therock-gfx1151:latest"), true).unwrap();
        assert_eq!((p.policy, p.pull), (PullPolicy::Missing, false));
        assert!(p.why.contains("the engine has"), "{}", p.why);
        let e = decide(None, &r("localhost/vllm:latest"), false).unwrap_err();
        assert!(matches!(e, PullError::LocalAbsent { .. }));
        let text = e.to_string();
        assert!(
            text.contains(ABSENT)
                && text.contains("hint: build it with `halobox build --tag localhost/vllm:latest`"),
            "{text}"
        );
        // Asked for explicitly, always means always.
        let p = decide(Some(PullPolicy::Always), &r("localhost/vllm:1"), true).unwrap();
        assert!(p.pull);
    }

    #[test]
    fn missing_and_never_follow_the_engine() {
        let img = r("ghcr.io/halobox/vllm:latest");
        let p = decide(Some(PullPolicy::Missing), &img, false).unwrap();
        assert!(p.pull);
        let p = decide(Some(PullPolicy::Missing), &img, true).unwrap();
        assert!(!p.pull);
        let p = decide(Some(PullPolicy::Never), &img, true).unwrap();
        assert!(!p.pull);
        let e = decide(Some(PullPolicy::Never), &img, false).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("--pull never forbids") && text.contains("hint: pull it with `halobox refresh --image ghcr.io/halobox/vllm:latest --pull missing`"),
            "{text}"
        );
        // A local image the engine lacks has no registry to come from.
        assert!(decide(Some(PullPolicy::Missing), &r("localhost/x:1"), false).is_err());
    }
}
