//! Whether halobox made a container. Labels alone cannot say: a `podman
//! commit` of a halobox container yields an image carrying its
//! `dev.halobox.*` labels, and every container created from that image gets
//! them too. So halobox stamps each container it creates with a fresh random
//! [`LABEL_INSTANCE`]; a container whose stamp equals its image's was given
//! the labels by the image, not by halobox.

use std::collections::HashMap;
use std::io::Read;

use serde::Serialize;

use super::spec::LABEL_MANAGED;

/// A value halobox draws fresh for every container it creates.
pub const LABEL_INSTANCE: &str = "dev.halobox.instance";

/// Who made a container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    /// halobox created it.
    Halobox,
    /// It carries halobox's labels only because its image does.
    Inherited,
    /// No halobox labels: someone else's.
    #[default]
    Foreign,
}

/// Decides the owner from the container's labels and its image's.
/// Containers from before the stamp count as halobox's when their image does
/// not carry the managed label itself.
pub fn decide(container: &HashMap<String, String>, image: &HashMap<String, String>) -> Owner {
    if container.get(LABEL_MANAGED).map(String::as_str) != Some("true") {
        return Owner::Foreign;
    }
    let inherited = match container.get(LABEL_INSTANCE) {
        Some(stamp) => image.get(LABEL_INSTANCE) == Some(stamp),
        None => image.get(LABEL_MANAGED).map(String::as_str) == Some("true"),
    };
    if inherited {
        Owner::Inherited
    } else {
        Owner::Halobox
    }
}

/// A new [`LABEL_INSTANCE`] value: 128 random bits as hex.
pub fn new_instance() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (now ^ (u128::from(std::process::id()) << 96)).to_le_bytes();
    }
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_stamp_decides() {
        let ours = labels(&[(LABEL_MANAGED, "true"), (LABEL_INSTANCE, "a1")]);
        assert_eq!(decide(&ours, &labels(&[])), Owner::Halobox);
        // made by halobox from a committed halobox container: a new stamp
        let committed = labels(&[(LABEL_MANAGED, "true"), (LABEL_INSTANCE, "0f")]);
        assert_eq!(decide(&ours, &committed), Owner::Halobox);
        // a plain container from that image: the image's stamp
        let plain = labels(&[(LABEL_MANAGED, "true"), (LABEL_INSTANCE, "0f")]);
        assert_eq!(decide(&plain, &committed), Owner::Inherited);
        assert_eq!(decide(&labels(&[]), &committed), Owner::Foreign);
        assert_eq!(
            decide(&labels(&[(LABEL_MANAGED, "false")]), &labels(&[])),
            Owner::Foreign
        );
    }

    #[test]
    fn containers_from_before_the_stamp() {
        let old = labels(&[(LABEL_MANAGED, "true")]);
        assert_eq!(decide(&old, &labels(&[])), Owner::Halobox);
        assert_eq!(decide(&old, &old), Owner::Inherited);
    }

    #[test]
    fn stamps_differ() {
        let a = new_instance();
        assert_eq!(a.len(), 32);
        assert_ne!(a, new_instance());
    }
}
