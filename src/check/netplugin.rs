//! The USB4 net plugin in the container (`rccl.usb4_plugin`): whether a
//! known USB4 provider's RCCL net plugin is on the loader's path, loads
//! (`dlopen` with every symbol bound) and exports the net plugin entry
//! (`ncclNetPlugin_vN`), and whether the provider's device opens inside.
//! What it cannot prove: that the plugin moves data (that takes the
//! provider's driver and a cable; `bench collective` shows which network
//! RCCL really used). Only judged where USB4 matters: the host has a
//! thunderbolt-net link or a provider's device, or the image has the plugin.

use super::Context;
use super::probe::{NetPluginSeen, Probe};
use crate::doctor::Check;
use crate::host::netplugin::{USB4_PROVIDERS, usb4_provider_of};

const ID: &str = "rccl.usb4_plugin";

/// The check, when USB4 matters for this container.
pub(super) fn check(p: &Probe, ctx: &Context) -> Option<Check> {
    let plugin = p
        .net_plugins
        .iter()
        .find(|l| usb4_provider_of(file_name(&l.path)).is_some());
    let host_usb4 = ctx.host.is_some_and(|h| {
        h.network.usb4().next().is_some() || !h.net_plugins.usb4_devices.is_empty()
    });
    let devices: Vec<&str> = p
        .devices
        .iter()
        .filter(|d| {
            USB4_PROVIDERS
                .iter()
                .any(|u| d.path.starts_with(&format!("/dev/{}", u.device_prefix)))
        })
        .map(|d| d.path.as_str())
        .collect();
    let Some(plugin) = plugin else {
        return host_usb4.then(|| {
            Check::skip(
                ID,
                "no USB4 net plugin (librccl-net-ODL_TB5.so, OdinLink-Five) on the container's loader path: with transport usb4, RCCL runs on TCP sockets over thunderbolt-net",
            )
        });
    };
    Some(judge(plugin, &devices, ctx))
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn judge(plugin: &NetPluginSeen, devices: &[&str], ctx: &Context) -> Check {
    let path = &plugin.path;
    let provider = usb4_provider_of(file_name(path)).expect("a USB4 plugin");
    let versions = match &plugin.load {
        None => {
            return Check::warn(
                ID,
                format!(
                    "{path} ({}) is in the container, but there is no python to load it with, so halobox did not try",
                    provider.project
                ),
                "RCCL loads it at the first collective: `halobox bench collective` says whether it did",
            );
        }
        Some(Err(e)) => {
            return Check::fail(
                ID,
                format!("{path} ({}) does not load: {e}", provider.project),
                format!(
                    "install what it needs in the image (`ldd {path}` names the missing library), or remove it; RCCL falls back to TCP sockets without it"
                ),
            );
        }
        Some(Ok(v)) => v,
    };
    if versions.is_empty() {
        return Check::fail(
            ID,
            format!("{path} loads but exports no ncclNetPlugin_vN: it is not an RCCL net plugin"),
            "rebuild the plugin from its project (it must export ncclNetPlugin_v6 or newer)",
        );
    }
    let entry = format!("ncclNetPlugin_{}", versions.join("/"));
    let Some(dev) = devices.first() else {
        return Check::warn(
            ID,
            format!(
                "{path} ({}) loads ({entry}), but no /dev/{}* is in the container: RCCL stays on TCP sockets",
                provider.project, provider.device_prefix
            ),
            format!(
                "load the {} kernel module on the host, then `{}` so the container gets the device",
                provider.module,
                ctx.recreate()
            ),
        );
    };
    Check::pass(
        ID,
        format!(
            "{path} ({}) loads ({entry}) and {dev} is here: with transport usb4, halobox sets NCCL_NET_PLUGIN for it",
            provider.project
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::probe;
    use std::collections::HashMap;

    fn ctx(labels: &HashMap<String, String>) -> Context<'_> {
        Context {
            name: "vllm",
            backend: Some("podman"),
            memlock_asked: None,
            labels,
            ray_pin: None,
            host: None,
        }
    }

    fn judged(lines: &str) -> Option<Check> {
        let labels = HashMap::new();
        check(&probe::parse(lines), &ctx(&labels))
    }

    #[test]
    fn loads_with_its_device() {
        let c = judged(
            "@@hbx dev /dev/odl_tb5_0 666 0 0 rw ok\n@@hbx netplugin /usr/lib/librccl-net-ODL_TB5.so ok v7\n",
        )
        .unwrap();
        assert_eq!(c.status, crate::doctor::Status::Pass, "{c:?}");
        assert!(
            c.summary
                .contains("loads (ncclNetPlugin_v7) and /dev/odl_tb5_0 is here"),
            "{}",
            c.summary
        );
    }

    #[test]
    fn the_loader_error_without_device_and_untried() {
        let c = judged("@@hbx netplugin /usr/lib/librccl-net-ODL_TB5.so err libodl_tb5.so.1: cannot open shared object file: No such file or directory\n").unwrap();
        assert_eq!(c.status, crate::doctor::Status::Fail, "{c:?}");
        assert!(
            c.summary
                .contains("does not load: libodl_tb5.so.1: cannot open shared object file"),
            "{}",
            c.summary
        );
        let c = judged("@@hbx netplugin /usr/lib/librccl-net-ODL_TB5.so ok v8,v7\n").unwrap();
        assert_eq!(c.status, crate::doctor::Status::Warn, "{c:?}");
        assert!(c.summary.contains("ncclNetPlugin_v8/v7"), "{}", c.summary);
        assert!(
            c.fix
                .as_deref()
                .unwrap_or("")
                .contains("odl_tb5 kernel module"),
            "{c:?}"
        );
        let c = judged("@@hbx netplugin /usr/lib/librccl-net-ODL_TB5.so -\n").unwrap();
        assert_eq!(c.status, crate::doctor::Status::Warn, "{c:?}");
        let c = judged("@@hbx netplugin /usr/lib/librccl-net-ODL_TB5.so ok -\n").unwrap();
        assert_eq!(c.status, crate::doctor::Status::Fail, "{c:?}");
    }

    /// No USB4 anywhere: no check at all (the report of other nodes stays as it was).
    #[test]
    fn silent_without_usb4() {
        assert!(judged("@@hbx netplugin /usr/lib/librccl-net.so ok v7\n").is_none());
    }
}
