//! Image references: repository, tag and digest, and the channel and date
//! tags halobox uses.

use std::fmt;

use chrono::{DateTime, Utc};

/// A parsed image reference (`registry/repo[:tag][@digest]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Everything before the tag or digest (`docker.io/kyuz0/vllm-therock-gfx1151`).
    pub repository: String,
    /// The tag, if any.
    pub tag: Option<String>,
    /// The digest (`sha256:…`), if any.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses a reference; a `:` after the last `/` starts the tag.
    pub fn parse(s: &str) -> Result<ImageRef, String> {
        let s = s.trim();
        if s.is_empty() || s.chars().any(char::is_whitespace) {
            return Err(format!("{s:?} is not an image reference"));
        }
        let (rest, digest) = match s.split_once('@') {
            Some((r, d)) if d.contains(':') => (r, Some(d.to_string())),
            Some(_) => return Err(format!("{s:?}: a digest looks like @sha256:<hex>")),
            None => (s, None),
        };
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match rest[slash..].rfind(':') {
            Some(i) => (
                rest[..slash + i].to_string(),
                Some(rest[slash + i + 1..].to_string()),
            ),
            None => (rest.to_string(), None),
        };
        if repository.is_empty() || tag.as_deref() == Some("") {
            return Err(format!("{s:?} is not an image reference"));
        }
        Ok(ImageRef {
            repository,
            tag,
            digest,
        })
    }

    /// The reference for a channel: a reference with a tag or digest is
    /// used as it is, a bare repository gets `:<channel>`.
    pub fn for_channel(&self, channel: &str) -> ImageRef {
        if self.tag.is_some() || self.digest.is_some() {
            return self.clone();
        }
        ImageRef {
            tag: Some(channel.to_string()),
            ..self.clone()
        }
    }

    /// The same repository with another tag.
    pub fn with_tag(&self, tag: &str) -> ImageRef {
        ImageRef {
            repository: self.repository.clone(),
            tag: Some(tag.to_string()),
            digest: None,
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The pinned date tag (`YYYYMMDD-HHMMSS`, UTC) of an RFC 3339 time.
pub fn date_tag(created: &str) -> Result<String, String> {
    let t = DateTime::parse_from_rfc3339(created.trim())
        .map_err(|e| format!("{created:?} is not an RFC 3339 time: {e}"))?;
    Ok(t.with_timezone(&Utc).format("%Y%m%d-%H%M%S").to_string())
}

/// True for a tag of the `YYYYMMDD-HHMMSS` form.
pub fn is_date_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    b.len() == 15
        && b[8] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 8 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_refs() {
        let r = ImageRef::parse("docker.io/kyuz0/vllm-therock-gfx1151").unwrap();
        assert_eq!(r.tag, None);
        assert_eq!(
            r.for_channel("dev").to_string(),
            "docker.io/kyuz0/vllm-therock-gfx1151:dev"
        );
        let r = ImageRef::parse("127.0.0.1:5000/halobox/test:2").unwrap();
        assert_eq!(r.repository, "127.0.0.1:5000/halobox/test");
        assert_eq!(r.tag.as_deref(), Some("2"));
        assert_eq!(
            r.for_channel("latest").to_string(),
            "127.0.0.1:5000/halobox/test:2"
        );
        let r = ImageRef::parse("localhost:5000/x@sha256:abcd").unwrap();
        assert_eq!(r.repository, "localhost:5000/x");
        assert_eq!(r.digest.as_deref(), Some("sha256:abcd"));
        assert_eq!(
            r.with_tag("20260101-000000").to_string(),
            "localhost:5000/x:20260101-000000"
        );
        assert!(ImageRef::parse("bad ref").is_err());
        assert!(ImageRef::parse("x:").is_err());
        assert!(ImageRef::parse("x@nodigest").is_err());
    }

    #[test]
    fn date_tags() {
        assert_eq!(date_tag("2026-11-20T10:11:12Z").unwrap(), "20261120-101112");
        assert_eq!(
            date_tag("2026-11-20T23:30:00-02:00").unwrap(),
            "20261121-013000"
        );
        assert_eq!(
            date_tag("2026-11-20T10:11:12.123456789Z").unwrap(),
            "20261120-101112"
        );
        assert!(date_tag("yesterday").is_err());
        assert!(is_date_tag("20261120-101112"));
        assert!(!is_date_tag("latest"));
        assert!(!is_date_tag("2026112-1011120"));
    }
}
