//! Kernel parameters: `iommu=pt`, `pci=realloc`, `pcie_aspm=off` and the GTT
//! for this machine's RAM, for the next boot. Debian/Ubuntu: a
//! `/etc/default/grub.d` drop-in and `update-grub`; Fedora: grubby; Fedora
//! Atomic: `rpm-ostree kargs`. A parameter the next boot already gets is
//! not planned again.

use super::{Action, Cmd, Distro, Input, Step, When, write_if_changed};
use crate::doctor::kernel::gtt_for;
use crate::host::boot::unquote;

/// halobox's grub drop-in.
pub const GRUB_DROPIN: &str = "/etc/default/grub.d/90-halobox.cfg";

const DROPIN_HEAD: &str =
    "# written by halobox setup: kernel parameters for the iGPU and the RDMA NIC\n";
const DROPIN_VAR: &str = "GRUB_CMDLINE_LINUX_DEFAULT";

/// The parameters (`key=value`) the failing kernel checks want.
fn wanted(input: &Input) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add = |check: &str, params: Vec<String>| {
        if input.failing(check).is_some() {
            out.extend(params.into_iter().map(|p| (check.to_string(), p)));
        }
    };
    add("kernel.iommu", vec!["iommu=pt".into()]);
    add("kernel.pci_realloc", vec!["pci=realloc".into()]);
    add("kernel.pcie_aspm", vec!["pcie_aspm=off".into()]);
    if let Some((mib, pages)) = gtt_for(input.facts) {
        add(
            "kernel.gtt",
            vec![
                format!("amdgpu.gttsize={mib}"),
                format!("ttm.pages_limit={pages}"),
            ],
        );
    }
    out
}

fn key(param: &str) -> &str {
    param.split_once('=').map_or(param, |(k, _)| k)
}

pub(super) fn steps(input: &Input) -> Vec<Step> {
    let next = input.setup.next_cmdline.as_deref().unwrap_or_default();
    let configured: Vec<&str> = next.split_whitespace().collect();
    let mut checks: Vec<String> = Vec::new();
    let mut params: Vec<String> = Vec::new();
    for (check, p) in wanted(input) {
        if configured.contains(&p.as_str()) {
            continue;
        }
        if !checks.contains(&check) {
            checks.push(check);
        }
        params.push(p);
    }
    if params.is_empty() {
        return Vec::new();
    }
    let actions: Vec<Action> = match input.setup.distro {
        Distro::Debian | Distro::Ubuntu => {
            let old = input.setup.file(GRUB_DROPIN);
            let mut all = old.map(dropin_params).unwrap_or_default();
            for p in &params {
                all.retain(|a| key(a) != key(p));
                all.push(p.clone());
            }
            match write_if_changed(GRUB_DROPIN, old, dropin(&all)) {
                Some(w) => vec![w, input.command(Cmd::reload(&["update-grub"]))],
                None => Vec::new(),
            }
        }
        Distro::Fedora => params
            .iter()
            .map(|p| {
                let undo = undo_arg(&configured, p);
                let args = format!("--args={p}");
                input.command(match undo {
                    Some(old) => Cmd::reversible(
                        &["grubby", "--update-kernel=ALL", &args],
                        &["grubby", "--update-kernel=ALL", &format!("--args={old}")],
                    ),
                    None => Cmd::reversible(
                        &["grubby", "--update-kernel=ALL", &args],
                        &[
                            "grubby",
                            "--update-kernel=ALL",
                            &format!("--remove-args={p}"),
                        ],
                    ),
                })
            })
            .collect(),
        Distro::FedoraAtomic => params
            .iter()
            .map(|p| {
                input.command(match undo_arg(&configured, p) {
                    Some(old) => Cmd::reversible(
                        &["rpm-ostree", "kargs", &format!("--replace={p}")],
                        &["rpm-ostree", "kargs", &format!("--replace={old}")],
                    ),
                    None => Cmd::reversible(
                        &["rpm-ostree", "kargs", &format!("--append-if-missing={p}")],
                        &["rpm-ostree", "kargs", &format!("--delete-if-present={p}")],
                    ),
                })
            })
            .collect(),
        Distro::Other => Vec::new(),
    };
    if actions.is_empty() {
        return Vec::new();
    }
    vec![Step {
        family: "kernel".into(),
        checks,
        title: format!("kernel parameters {}", params.join(" ")),
        needs_root: true,
        when: When::Reboot,
        actions,
    }]
}

/// The value `p`'s key has now, as `key=value`, when it has another one.
fn undo_arg(configured: &[&str], p: &str) -> Option<String> {
    configured
        .iter()
        .rev()
        .find(|c| key(c) == key(p) && **c != p)
        .map(|c| c.to_string())
}

fn dropin(params: &[String]) -> String {
    format!(
        "{DROPIN_HEAD}{DROPIN_VAR}=\"${{{DROPIN_VAR}}} {}\"\n",
        params.join(" ")
    )
}

/// The parameters halobox's drop-in adds.
fn dropin_params(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{DROPIN_VAR}=")))
        .flat_map(|v| {
            unquote(v)
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.starts_with('$'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dropin_round_trips_and_undo_restores_the_old_value() {
        let ours = dropin(&["iommu=pt".into(), "amdgpu.gttsize=126976".into()]);
        assert_eq!(dropin_params(&ours), ["iommu=pt", "amdgpu.gttsize=126976"]);
        assert_eq!(
            undo_arg(&["amdgpu.gttsize=4096"], "amdgpu.gttsize=126976").as_deref(),
            Some("amdgpu.gttsize=4096")
        );
    }
}
