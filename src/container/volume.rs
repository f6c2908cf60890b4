//! The user's own bind mounts (`refresh --volume SRC:DEST[:ro|rw]`, and
//! `volumes` in the config file): a model store on NFS, a venv, a data
//! folder, seen in the container at DEST. Parsed and checked here, before
//! anything is created; [`super::spec`] adds them to every backend's spec.

use std::path::{Component, Path};

use super::binds::{BIN_DIR, HOST_ROOT};
use super::model::Mount;

/// Container paths a volume may not cover: the devices, the kernel's
/// files, and what halobox itself binds there.
const RESERVED: [&str; 7] = ["/", "/dev", "/proc", "/sys", "/etc", BIN_DIR, HOST_ROOT];

/// A `--volume` (or config `volumes`) entry that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("volume {spec:?}: {why}\n  hint: {hint}")]
pub struct VolumeError {
    /// The entry as given.
    pub spec: String,
    /// What is wrong.
    pub why: String,
    /// How to write it.
    pub hint: String,
}

const FORM: &str =
    "write it as SRC:DEST[:ro|rw] with absolute paths, e.g. --volume /srv/models:/models:ro";

/// Parses `SRC:DEST[:ro|rw]` (paths absolute, without `..`, `:` or `,`).
/// Whether SRC exists is the host's fact: see [`check_sources`].
pub fn parse(spec: &str) -> Result<Mount, VolumeError> {
    let err = |why: String| VolumeError {
        spec: spec.to_string(),
        why,
        hint: FORM.into(),
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (src, dest, mode) = match parts.as_slice() {
        [s, d] => (*s, *d, "rw"),
        [s, d, m] => (*s, *d, *m),
        _ => return Err(err("expected SRC:DEST or SRC:DEST:MODE".into())),
    };
    for (what, p) in [("SRC", src), ("DEST", dest)] {
        if !p.starts_with('/') {
            return Err(err(format!("{what} {p:?} is not an absolute path")));
        }
        if p.contains(',') {
            return Err(err(format!(
                "{what} {p:?} holds a comma, which the engines read as an option separator"
            )));
        }
        if Path::new(p).components().any(|c| c == Component::ParentDir) {
            return Err(err(format!("{what} {p:?} holds `..`")));
        }
    }
    let dest = normal(dest);
    if let Some(r) = RESERVED
        .iter()
        .find(|r| dest == **r || (**r != "/" && Path::new(&dest).starts_with(r)))
    {
        return Err(VolumeError {
            spec: spec.to_string(),
            why: format!("DEST {dest} is {r}, which the container needs for itself"),
            hint: "mount it somewhere of its own: `--volume SRC:/models:ro` or `/opt/NAME`".into(),
        });
    }
    let opts: &[&str] = match mode {
        "ro" => &["ro"],
        "rw" => &[],
        other => return Err(err(format!("mode {other:?} is neither ro nor rw"))),
    };
    Ok(Mount::new(&normal(src), &dest, opts))
}

/// `p` without a trailing `/` (but `/` itself).
fn normal(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() { "/".into() } else { t.into() }
}

/// The volumes of the config file, then those of the command line: a
/// command-line volume replaces a config one with the same DEST; two on the
/// command line with one DEST are an error.
pub fn merge(config: &[String], flags: &[String]) -> Result<Vec<Mount>, VolumeError> {
    let mut out: Vec<Mount> = Vec::new();
    for s in config {
        let m = parse(s)?;
        out.retain(|o| o.destination != m.destination);
        out.push(m);
    }
    let mut from_flags: Vec<String> = Vec::new();
    for s in flags {
        let m = parse(s)?;
        if from_flags.contains(&m.destination) {
            return Err(VolumeError {
                spec: s.clone(),
                why: format!("another --volume already mounts {}", m.destination),
                hint: "give each DEST once: `--volume A:/x --volume B:/y`".into(),
            });
        }
        out.retain(|o| o.destination != m.destination);
        from_flags.push(m.destination.clone());
        out.push(m);
    }
    Ok(out)
}

/// Every volume whose SRC is not a folder or file on this host, as an
/// error naming it (the engines would fail later, or make an empty folder).
pub fn check_sources(volumes: &[Mount]) -> Result<(), VolumeError> {
    for m in volumes {
        if !Path::new(&m.source).exists() {
            return Err(VolumeError {
                spec: m.volume(),
                why: format!("SRC {} does not exist on this host", m.source),
                hint: format!(
                    "create it (mkdir -p {}) or mount the share first, then refresh again",
                    m.source
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(
            parse("/srv/models:/models:ro").unwrap(),
            Mount::new("/srv/models", "/models", &["ro"])
        );
        assert_eq!(
            parse("/srv/data/:/data").unwrap(),
            Mount::new("/srv/data", "/data", &[])
        );
        assert_eq!(parse("/a:/b:rw").unwrap(), Mount::new("/a", "/b", &[]));
    }

    #[test]
    fn refuses_what_cannot_work() {
        for bad in [
            "models:/models",
            "/models",
            "/a:/b:ro:x",
            "/a:/b:z",
            "/a:relative",
            "/a,b:/b",
            "/a:/b/../etc",
            "/a:/dev/shm",
            "/a:/",
            "/a:/run/halobox/bin",
            "/a:/etc/",
            "/a:/run/host/x",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.to_string().contains("hint:"), "{bad}: {e}");
        }
    }

    #[test]
    fn flags_replace_config_by_destination() {
        let v = merge(
            &["/nfs/models:/models:ro".into(), "/x:/y".into()],
            &["/local/models:/models".into()],
        )
        .unwrap();
        assert_eq!(
            v,
            vec![
                Mount::new("/x", "/y", &[]),
                Mount::new("/local/models", "/models", &[])
            ]
        );
        let e = merge(&[], &["/a:/m".into(), "/b:/m/".into()]).unwrap_err();
        assert!(e.why.contains("already mounts /m"), "{e}");
    }

    #[test]
    fn a_missing_source_is_named() {
        let e =
            check_sources(&[Mount::new("/nonexistent-halobox-src", "/m", &["ro"])]).unwrap_err();
        assert!(
            e.to_string()
                .contains("/nonexistent-halobox-src does not exist"),
            "{e}"
        );
    }
}
