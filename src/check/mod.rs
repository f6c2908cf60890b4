//! `halobox check`: proves a container on its node. A probe runs inside the
//! container the way `halobox enter` gets in ([`probe`]: what the container
//! user sees, from `probe.sh` and `probe.py`, and its parser), then pure checks (`system`, `python`) judge it against
//! what halobox knows from outside ([`Context`]: the image's labels, how the
//! container was made, the host's own facts), each PASS / WARN / FAIL / SKIP
//! with the fix, as `doctor` does. [`run`] does the effects.

mod abi;
mod llama;
mod netplugin;
pub mod probe;
mod python;
pub mod run;
mod system;

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::doctor::render::{self, Style};
use crate::doctor::{Check, Summary};
use crate::host::HostFacts;
use probe::Probe;
pub use system::IRDMA_RDMA_CORE_MIN;

/// The label carrying the sha256 of the image's `librccl.so.1` (stock or patched)
/// (containerfiles/vllm-therock-gfx1151.Containerfile, from CI's rccl stage).
pub const LABEL_RCCL_SHA256: &str = "io.halobox.rccl.sha256";
/// The label carrying the image's `RAY_VERSION` pin.
pub const LABEL_RAY_VERSION: &str = "io.halobox.ray.version";
/// The label naming the engine an image is for (`llama.cpp` for
/// containerfiles/llama-cpp-gfx1151.Containerfile).
pub const LABEL_ENGINE: &str = "io.halobox.engine";
/// The label carrying the llama.cpp commit the image was built from.
pub const LABEL_LLAMA_CPP_COMMIT: &str = "io.halobox.llama-cpp.commit";
/// `gfx_target_version` of gfx1151 (Strix Halo).
pub const GFX1151: u32 = 110501;

/// What halobox knows about the container from outside it.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// Container name.
    pub name: &'a str,
    /// Its `dev.halobox.backend` label (`toolbox`, `distrobox`, `podman`, `docker`).
    pub backend: Option<&'a str>,
    /// The memlock it was created with (`-1` unlimited), when the engine says.
    pub memlock_asked: Option<i64>,
    /// The labels of its image.
    pub labels: &'a HashMap<String, String>,
    /// `RAY_VERSION` of the image definition this halobox was built with,
    /// for images without the [`LABEL_RAY_VERSION`] label.
    pub ray_pin: Option<&'a str>,
    /// This machine's facts when the engine runs here (device nodes, KFD and
    /// RDMA devices the container should see); `None` for a remote engine.
    pub host: Option<&'a HostFacts>,
}

impl Context<'_> {
    /// The command that re-creates the container the way halobox makes it.
    fn recreate(&self) -> String {
        let backend = self
            .backend
            .map(|b| format!(" --backend {b}"))
            .unwrap_or_default();
        format!("halobox refresh --name {}{backend}", self.name)
    }

    /// A non-empty label of the image.
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }
}

/// The report of `halobox check` (`--json`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    /// Schema version of this document (1).
    pub schema_version: u32,
    /// The container checked.
    pub container: String,
    /// Its backend label, when halobox made it.
    pub backend: Option<String>,
    /// The image reference it was created from.
    pub image: String,
    /// The image id.
    pub image_id: String,
    /// How the probe got in: `toolbox run`, `distrobox exec` (the API, as
    /// distrobox's user) or `engine exec`.
    pub via: String,
    /// The python the Python checks used, `null` when there is none.
    pub python: Option<String>,
    /// Every check, in a fixed order.
    pub checks: Vec<Check>,
    /// Counts per status.
    pub summary: Summary,
}

impl Report {
    /// True when any check failed.
    pub fn has_failures(&self) -> bool {
        self.summary.fail > 0
    }
}

/// The report as text: what was checked and how, then doctor's layout.
pub fn human(report: &Report, style: Style) -> String {
    let python = report
        .python
        .as_deref()
        .map(|p| format!(", python {p}"))
        .unwrap_or_default();
    let title = format!(
        "halobox check: {} ({}; through {}{python})",
        report.container, report.image, report.via
    );
    render::checks(&title, &report.checks, report.summary, style)
}

/// Judges the probe: every check, in a fixed order. A llama.cpp image (its
/// [`LABEL_ENGINE`], or a `llama-server` in it) gets llama.cpp's contract
/// instead of the vLLM stack's (torch, RCCL, vLLM, Ray).
pub fn judge(probe: &Probe, ctx: &Context) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.extend(system::checks(probe, ctx));
    checks.extend(netplugin::check(probe, ctx));
    if llama::is_llama_image(probe, ctx) {
        checks.extend(llama::checks(probe, ctx));
    } else {
        checks.extend(abi::checks(probe, ctx));
        checks.extend(python::checks(probe, ctx));
    }
    checks
}

/// `RAY_VERSION` of images/vllm-therock-gfx1151.toml as this halobox was built.
pub fn ray_pin() -> Option<String> {
    let text = include_str!("../../images/vllm-therock-gfx1151.toml");
    let def: crate::image::definition::DefinitionFile = toml::from_str(text).ok()?;
    def.versions.get("RAY_VERSION").cloned()
}

/// The last `n` non-empty lines of `text`, on one line.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// The check `id` of `checks` (tests).
#[cfg(test)]
fn find<'a>(checks: &'a [Check], id: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id} in {checks:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ray_pin_is_read_from_the_definition() {
        let pin = ray_pin().expect("RAY_VERSION");
        assert!(pin.split('.').all(|p| p.parse::<u32>().is_ok()), "{pin}");
    }
}
