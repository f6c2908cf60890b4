//! Loading a saved run's record (`bench run`, `bench collective` and
//! `bench serving` with `--save`): one bounded read of a regular file (the
//! folder may come from a node), every string made printable, the schema
//! version checked, and errors that name the file and what made it.

use std::path::Path;

use anyhow::Context as _;
use serde::de::DeserializeOwned;

/// What a kind of saved record is.
pub struct Kind<'a> {
    /// The record's file in the run's folder (`run.json`, `serving.json`).
    pub file: &'a str,
    /// The command whose `--save` folder holds it, for the hint.
    pub made_by: &'a str,
    /// What the record is, for the parse error ("bench record").
    pub what: &'a str,
    /// The largest file read.
    pub max_bytes: u64,
    /// The schema version this halobox reads.
    pub schema_version: u32,
}

/// Reads `kind.file` from `dir`; `version_of` gives the record's
/// `schema_version`, which must be `kind.schema_version`.
pub fn load<T: DeserializeOwned>(
    dir: &Path,
    kind: &Kind,
    version_of: impl Fn(&T) -> u32,
) -> anyhow::Result<T> {
    let path = dir.join(kind.file);
    let bytes = crate::confine::read_regular(&path, true, kind.max_bytes).with_context(|| {
        format!(
            "cannot read {} (is this a `{}` folder?)",
            path.display(),
            kind.made_by
        )
    })?;
    let rec: T = crate::remote::parse_json_lines(&String::from_utf8_lossy(&bytes))
        .with_context(|| format!("{} is not a halobox {}", path.display(), kind.what))?;
    let found = version_of(&rec);
    anyhow::ensure!(
        found == kind.schema_version,
        "{} has schema_version {found}, this halobox reads {}",
        path.display(),
        kind.schema_version
    );
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Rec {
        schema_version: u32,
        name: String,
    }

    const KIND: Kind = Kind {
        file: "run.json",
        made_by: "halobox bench run --save",
        what: "bench record",
        max_bytes: 1024,
        schema_version: 2,
    };

    fn load_text(text: &str) -> anyhow::Result<Rec> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("run.json"), text).unwrap();
        load(dir.path(), &KIND, |r: &Rec| r.schema_version)
    }

    #[test]
    fn a_record_is_read_cleaned_and_its_version_checked() {
        let r = load_text(r#"{"schema_version": 2, "name": "a\u001b[2Jb"}"#).unwrap();
        assert!(!r.name.contains('\u{1b}'), "{:?}", r.name);
        let old = load_text(r#"{"schema_version": 1, "name": ""}"#).unwrap_err();
        assert!(format!("{old:#}").contains("has schema_version 1, this halobox reads 2"));
        let bad = load_text("not json").unwrap_err();
        assert!(format!("{bad:#}").contains("is not a halobox bench record"));
        let big = load_text(&format!(
            r#"{{"schema_version": 2, "name": "{}"}}"#,
            "x".repeat(2000)
        ))
        .unwrap_err();
        assert!(format!("{big:#}").contains("(is this a `halobox bench run --save` folder?)"));
    }

    #[test]
    fn a_missing_record_names_the_command_that_saves_one() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(dir.path(), &KIND, |r: &Rec| r.schema_version).unwrap_err();
        assert!(format!("{e:#}").contains("(is this a `halobox bench run --save` folder?)"));
    }
}
