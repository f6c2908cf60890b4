//! A new image config from a base one: added layers (diff_id and history
//! entry each) and labels. Pure: the same inputs give the same config.

use std::collections::BTreeMap;

use oci_spec::image::{History, HistoryBuilder};
use serde_json::{Map, Value, json};

/// A layer to append: its diff_id and what made it (history `created_by`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// `sha256:` of the uncompressed tar.
    pub diff_id: String,
    /// History text (`halobox image add-layer /opt/x:0644`).
    pub created_by: String,
}

/// RFC 3339 (UTC, seconds) of a Unix time.
pub fn rfc3339(secs: u64) -> String {
    chrono::DateTime::from_timestamp(secs as i64, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `base` with `layers` appended, `labels` set (an empty value removes a
/// label) and, when given, `created` as the image's and the new history
/// entries' time (else the base's `created` is kept).
pub fn compose(
    base: &Value,
    layers: &[Appended],
    labels: &BTreeMap<String, String>,
    created: Option<&str>,
) -> Value {
    let mut cfg = base.clone();
    let obj = cfg.as_object_mut().expect("an image config is an object");
    if let Some(c) = created {
        obj.insert("created".into(), json!(c));
    }
    let when = obj
        .get("created")
        .and_then(Value::as_str)
        .map(str::to_string);
    let rootfs = obj
        .entry("rootfs")
        .or_insert_with(|| json!({"type": "layers", "diff_ids": []}));
    if let Some(ids) = rootfs.get_mut("diff_ids").and_then(Value::as_array_mut) {
        ids.extend(layers.iter().map(|l| json!(l.diff_id)));
    }
    let history = obj.entry("history").or_insert_with(|| json!([]));
    if let Some(h) = history.as_array_mut() {
        for l in layers {
            let mut b = HistoryBuilder::default()
                .created_by(l.created_by.clone())
                .comment("halobox");
            if let Some(w) = &when {
                b = b.created(w.clone());
            }
            let entry: History = b.build().expect("history fields are optional");
            h.push(serde_json::to_value(entry).expect("serialisable"));
        }
    }
    if !labels.is_empty() {
        let config = obj
            .entry("config")
            .or_insert_with(|| Value::Object(Map::new()));
        if !config.is_object() {
            *config = Value::Object(Map::new());
        }
        let c = config.as_object_mut().expect("object");
        let l = c
            .entry("Labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if !l.is_object() {
            *l = Value::Object(Map::new());
        }
        let l = l.as_object_mut().expect("object");
        for (k, v) in labels {
            if v.is_empty() {
                l.remove(k);
            } else {
                l.insert(k.clone(), json!(v));
            }
        }
    }
    cfg
}

/// The labels of a config.
pub fn labels(config: &Value) -> BTreeMap<String, String> {
    config
        .pointer("/config/Labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_layers_and_labels() {
        let base = json!({
            "created": "2024-01-01T00:00:00Z",
            "architecture": "amd64", "os": "linux",
            "config": {"Labels": null, "Cmd": ["sh"]},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:aa"]},
            "history": [{"created_by": "base"}],
            "container_config": {"Hostname": "x"}
        });
        let labels = BTreeMap::from([("a".to_string(), "1".to_string())]);
        let out = compose(
            &base,
            &[Appended {
                diff_id: "sha256:bb".into(),
                created_by: "halobox image add-layer /x".into(),
            }],
            &labels,
            None,
        );
        assert_eq!(out["rootfs"]["diff_ids"], json!(["sha256:aa", "sha256:bb"]));
        assert_eq!(out["history"][1]["created"], "2024-01-01T00:00:00Z");
        assert_eq!(out["config"]["Labels"], json!({"a": "1"}));
        assert_eq!(out["container_config"]["Hostname"], "x");
        assert_eq!(out["config"]["Cmd"], json!(["sh"]));
        let relabel = compose(
            &out,
            &[],
            &BTreeMap::from([("a".to_string(), String::new())]),
            Some(&rfc3339(0)),
        );
        assert_eq!(relabel["config"]["Labels"], json!({}));
        assert_eq!(relabel["created"], "1970-01-01T00:00:00Z");
        assert_eq!(compose(&base, &[], &BTreeMap::new(), None), base);
    }
}
