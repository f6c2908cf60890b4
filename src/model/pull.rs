//! `model pull`, the plan (pure): `hf download` (huggingface_hub's CLI,
//! resumable) in a node's halobox container, into the Hugging Face cache
//! the containers share. `HF_TOKEN` reaches it on stdin, never in an
//! argument; the hub's settings that are not secrets (`HF_HUB_OFFLINE`,
//! `HF_ENDPOINT`, …) are passed on from this environment. [`run`] does it
//! over ssh on the node, its progress printed as it comes.

use std::time::Duration;

use super::cache::ModelRef;
use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run as cluster_run;
use crate::remote::STOP_GRACE;

/// Settings of huggingface_hub passed on from this environment (none of
/// them a secret).
pub const PASSED_ON: &[&str] = &[
    "HF_HUB_OFFLINE",
    "HF_ENDPOINT",
    "HF_HUB_ENABLE_HF_TRANSFER",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_HUB_ETAG_TIMEOUT",
];

/// What to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// The model and revision.
    pub model: ModelRef,
    /// `--include` patterns.
    pub include: Vec<String>,
    /// `--exclude` patterns.
    pub exclude: Vec<String>,
    /// `NAME=VALUE` of [`PASSED_ON`] set here.
    pub env: Vec<(String, String)>,
    /// Whether `HF_TOKEN` goes on stdin.
    pub token: bool,
    /// The `vllm` command of cluster.toml: an `hf` beside it (same venv) comes first.
    pub vllm: String,
}

/// The program run in the container (`sh -c PROGRAM halobox-pull TOKEN
/// VLLM ARGS…`): reads `HF_TOKEN` from one stdin line when `$1` is
/// `token`, then runs `hf download ARGS` (the `hf` beside `$2` first, then
/// `hf` or `huggingface-cli` on PATH); exit 127 when there is none.
pub const PROGRAM: &str = r#"if [ "$1" = token ]; then IFS= read -r HF_TOKEN || exit 97; export HF_TOKEN; fi
v=$2; shift 2
case "$v" in */*) h="${v%/*}/hf"; if [ -x "$h" ]; then exec "$h" download "$@"; fi ;; esac
if command -v hf >/dev/null 2>&1; then exec hf download "$@"; fi
if command -v huggingface-cli >/dev/null 2>&1; then exec huggingface-cli download "$@"; fi
echo "halobox: no hf (huggingface_hub) in this container" >&2; exit 127"#;

/// The argv run in the container (no secret in it).
pub fn command(req: &PullRequest) -> Vec<String> {
    let mut a: Vec<String> = vec!["env".into()];
    a.extend(req.env.iter().map(|(k, v)| format!("{k}={v}")));
    a.extend([
        "sh".into(),
        "-c".into(),
        PROGRAM.into(),
        "halobox-pull".into(),
        if req.token { "token" } else { "-" }.into(),
        req.vllm.clone(),
        req.model.id.clone(),
        "--revision".into(),
        req.model.revision.clone(),
    ]);
    for p in &req.include {
        a.extend(["--include".into(), p.clone()]);
    }
    for p in &req.exclude {
        a.extend(["--exclude".into(), p.clone()]);
    }
    a
}

/// The `hf download` line as the user would type it (for `--dry-run`).
pub fn shown(req: &PullRequest) -> String {
    let mut a: Vec<String> = req.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    a.extend(
        [
            "hf",
            "download",
            &req.model.id,
            "--revision",
            &req.model.revision,
        ]
        .map(String::from),
    );
    for p in &req.include {
        a.extend(["--include".into(), p.clone()]);
    }
    for p in &req.exclude {
        a.extend(["--exclude".into(), p.clone()]);
    }
    crate::shell::line(&a)
}

/// Why a download failed, from `hf`'s last lines: the cause and its fix.
pub fn failure(model: &ModelRef, node: &str, output: &str, code: Option<i32>) -> String {
    let id = &model.id;
    let rev = &model.revision;
    let low = output.to_lowercase();
    let has = |s: &str| low.contains(&s.to_lowercase());
    if code == Some(127) {
        return format!(
            "node {node}: its container has no `hf` (huggingface_hub)\n  hint: `halobox refresh` it with an image that has vLLM (it brings huggingface_hub), or set `vllm = \"/path/to/venv/bin/vllm\"` in cluster.toml so halobox uses the `hf` beside it"
        );
    }
    if code == Some(97) {
        return format!(
            "node {node}: HF_TOKEN did not arrive on stdin\n  hint: is the container running? `halobox cluster status`"
        );
    }
    if has("LocalEntryNotFound") || has("local entry not found") || has("offline mode") {
        return format!(
            "node {node}: {id}@{rev} is not in its cache and the hub cannot be asked (offline)\n  hint: unset HF_HUB_OFFLINE, or pull on a node that has it and `halobox model sync {id}`"
        );
    }
    if has("RevisionNotFound") || has("Invalid rev id") {
        return format!(
            "{id} has no revision {rev} on the hub\n  hint: give a branch, tag or commit that exists: `halobox model pull {id}` (main), or look at https://huggingface.co/{id}/tree/main"
        );
    }
    if has("GatedRepo") || has("gated repo") {
        return format!(
            "{id} is gated: the hub refused the download\n  hint: accept its terms on https://huggingface.co/{id}, then `read -rs HF_TOKEN; export HF_TOKEN` and pull again (halobox hands it over on stdin)"
        );
    }
    if has("RepositoryNotFound") || has("Repository Not Found") {
        return format!(
            "no model {id} on the hub (or it is private)\n  hint: check the id (ORG/NAME, as on https://huggingface.co/{id}); for a private model `read -rs HF_TOKEN; export HF_TOKEN`"
        );
    }
    if has("401 Client Error") || has("403 Client Error") {
        return format!(
            "the hub refused {id}: HF_TOKEN is missing or not allowed to read it\n  hint: `read -rs HF_TOKEN; export HF_TOKEN` with a token that can read {id}"
        );
    }
    format!(
        "node {node}: hf download {id} failed (exit {}): {}\n  hint: run it again to resume (downloaded files are kept); `halobox cluster status` if the node is down",
        code.map_or("killed".into(), |c| c.to_string()),
        crate::remote::tail(output, 4)
    )
}

/// `cmd` in `node`'s container; the token goes on its stdin, which
/// `halobox enter` passes through halobox's own engine connection.
pub fn in_container(cfg: &ClusterConfig, node: &NodeConfig, cmd: &[String]) -> Vec<String> {
    crate::cluster::plan::in_container(&cfg.halobox, node.backend, &node.container, cmd)
}

/// Runs the download on `node` (`token`: `HF_TOKEN`'s value, sent as the
/// one line of stdin), printing its output as it comes, prefixed with the
/// node, as notes to `r`; the snapshot folder `hf` printed last.
pub fn run(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    req: &PullRequest,
    token: Option<&str>,
    r: &mut dyn crate::reporter::Reporter,
) -> anyhow::Result<String> {
    let argv = in_container(cfg, node, &command(req));
    let rn = cluster_run::remote_node(cfg, node);
    let mut p = match token {
        Some(t) => rn.spawn_with_line(&argv, t)?,
        None => rn.spawn(&argv)?,
    };
    let mut last = String::new();
    loop {
        let lines = p.lines(Duration::from_millis(500));
        for l in &lines {
            let l = l.trim_end();
            if !l.is_empty() {
                r.note(&format!("  {}: {l}\n", node.label()));
                last = l.to_string();
            }
        }
        if lines.is_empty() && p.try_status().is_some() {
            break;
        }
    }
    let done = p.complete(Duration::from_secs(5), STOP_GRACE);
    if done.status.is_some_and(|s| s.success()) {
        let line = done.stdout.lines().last().unwrap_or(&last).trim();
        // hf ≥ 1.0 prints `path: DIR`; older ones the folder alone.
        return Ok(line
            .strip_prefix("path:")
            .unwrap_or(line)
            .trim()
            .to_string());
    }
    anyhow::bail!(
        "{}",
        failure(
            &req.model,
            node.label(),
            &done.output,
            done.status.and_then(|s| s.code())
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(token: bool) -> PullRequest {
        PullRequest {
            model: ModelRef::parse("acme/m@v1").unwrap(),
            include: vec!["*.safetensors".into()],
            exclude: vec!["*.bin".into()],
            env: vec![("HF_HUB_OFFLINE".into(), "1".into())],
            token,
            vllm: "/opt/v/bin/vllm".into(),
        }
    }

    #[test]
    fn the_command_passes_patterns_and_never_the_token() {
        let a = command(&req(true));
        assert_eq!(a[..4], ["env", "HF_HUB_OFFLINE=1", "sh", "-c"]);
        assert_eq!(
            a[5..],
            [
                "halobox-pull",
                "token",
                "/opt/v/bin/vllm",
                "acme/m",
                "--revision",
                "v1",
                "--include",
                "*.safetensors",
                "--exclude",
                "*.bin"
            ]
        );
        assert!(command(&req(false)).contains(&"-".to_string()));
        assert_eq!(
            shown(&req(true)),
            "HF_HUB_OFFLINE=1 hf download acme/m --revision v1 --include '*.safetensors' --exclude '*.bin'"
        );
    }

    #[test]
    fn failures_name_the_fix() {
        let m = ModelRef::parse("acme/m@v1").unwrap();
        let f = |out: &str, code| failure(&m, "a", out, Some(code));
        assert!(
            f("huggingface_hub.errors.RevisionNotFoundError: 404", 1).contains("no revision v1")
        );
        assert!(f("RepositoryNotFoundError: 404 Client Error", 1).contains("no model acme/m"));
        assert!(f("GatedRepoError: 401", 1).contains("HF_TOKEN"));
        assert!(f("Error: Local entry not found. Cannot reach https://huggingface.co/api/models/acme/m/revision/v1: offline mode is enabled.", 1).contains("HF_HUB_OFFLINE"));
        assert!(f("", 127).contains("no `hf`"));
        assert!(f("boom", 2).contains("exit 2): boom"));
    }
}
