//! RCCL/NCCL net plugins for a USB4 link, as this root (a host, or the
//! container `cluster join` runs in) has them: the plugin libraries on the
//! dynamic loader's path and the provider's device nodes.
//!
//! RCCL reads `NCCL_NET_PLUGIN=NAME` as a file to `dlopen` first (an
//! absolute path works), then as `librccl-net-NAME.so` on the loader's path
//! (ROCm/rccl `src/plugin/plugin_open.cc`; NVIDIA's NCCL uses the
//! `libnccl-net-` prefix). The known USB4 provider is OdinLink-Five
//! (github.com/Geramy/OdinLink-Five): its plugin registers the net
//! `ODL_TB5` and talks to the `odl_tb5.ko` driver's `/dev/odl_tb5_N`
//! character devices. Plain data: which library to use is
//! [`crate::cluster::env`]'s decision. A snapshot keeps the files found
//! (empty) but not `LD_LIBRARY_PATH`: a plugin found only through it is
//! not found again in the snapshot.

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// One known USB4 RDMA provider behind an RCCL net plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usb4Provider {
    /// The project, for messages.
    pub project: &'static str,
    /// The plugin's name as it appears in its library's file name
    /// (compared without case: `librccl-net-ODL_TB5.so`, `librccl_net_odl_tb5.so`).
    pub stem: &'static str,
    /// The prefix of its device nodes under `/dev`.
    pub device_prefix: &'static str,
    /// The kernel module that makes those nodes.
    pub module: &'static str,
}

/// The USB4 providers halobox knows.
pub const USB4_PROVIDERS: [Usb4Provider; 1] = [Usb4Provider {
    project: "OdinLink-Five",
    stem: "odl_tb5",
    device_prefix: "odl_tb5_",
    module: "odl_tb5",
}];

/// Directories the dynamic loader searches besides `LD_LIBRARY_PATH` and
/// `/etc/ld.so.conf` (glibc's defaults, and ROCm's library folder, which
/// RCCL's own run path points at).
pub const DEFAULT_LIB_DIRS: [&str; 9] = [
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/local/lib",
    "/opt/rocm/lib",
    "/opt/rocm/lib64",
];

/// A net plugin library found on the loader's path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NetPluginLib {
    /// Its path.
    pub path: String,
    /// Its file name.
    pub file: String,
    /// The USB4 provider it belongs to (`OdinLink-Five`), when known.
    pub usb4_provider: Option<String>,
}

impl NetPluginLib {
    /// The value of `NCCL_NET_PLUGIN` that makes RCCL load exactly this
    /// file: `NAME` for `librccl-net-NAME.so` (found on the loader's path as
    /// RCCL builds the name), the absolute path for any other name.
    pub fn nccl_net_plugin(&self) -> String {
        match self
            .file
            .strip_prefix("librccl-net-")
            .and_then(|n| n.strip_suffix(".so"))
        {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => self.path.clone(),
        }
    }
}

/// The net plugins and USB4 provider devices of one root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NetPluginFacts {
    /// `librccl-net*.so` and `libnccl-net*.so` files on the loader's path, the first of each name (and
    /// a known USB4 provider's library under its build name), in search order.
    pub libraries: Vec<NetPluginLib>,
    /// Device nodes of known USB4 providers (`/dev/odl_tb5_0`).
    pub usb4_devices: Vec<String>,
}

impl NetPluginFacts {
    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.libraries.is_empty() && self.usb4_devices.is_empty()
    }

    /// The first library of a known USB4 provider.
    pub fn usb4_library(&self) -> Option<&NetPluginLib> {
        self.libraries.iter().find(|l| l.usb4_provider.is_some())
    }
}

/// The known USB4 provider a plugin file belongs to.
pub fn usb4_provider_of(file: &str) -> Option<&'static Usb4Provider> {
    let lower = file.to_ascii_lowercase();
    let is_plugin = ["librccl-net", "libnccl-net", "librccl_net", "libnccl_net"]
        .iter()
        .any(|p| lower.starts_with(p));
    USB4_PROVIDERS
        .iter()
        .find(|p| is_plugin && lower.contains(p.stem))
}

/// True for a file RCCL or NCCL could load as a net plugin.
fn is_plugin_file(file: &str) -> bool {
    let plain = (file.starts_with("librccl-net") || file.starts_with("libnccl-net"))
        && file.ends_with(".so");
    plain || (file.ends_with(".so") && usb4_provider_of(file).is_some())
}

/// The loader's search path: `LD_LIBRARY_PATH` (`ld_library_path`), the
/// `/etc/ld.so.conf` folders (one level of `include`), then the defaults;
/// each once.
pub fn search_dirs(r: &Reader, ld_library_path: Option<&str>) -> Vec<String> {
    let mut dirs: Vec<String> = ld_library_path
        .unwrap_or("")
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(str::to_string)
        .collect();
    let mut conf = vec!["/etc/ld.so.conf".to_string()];
    conf.extend(r.files_ending("/etc/ld.so.conf.d", ".conf"));
    for file in conf {
        for line in r.text_quiet(&file).unwrap_or_default().lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.starts_with('/') {
                dirs.push(line.to_string());
            }
        }
    }
    dirs.extend(DEFAULT_LIB_DIRS.iter().map(|d| d.to_string()));
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|d| seen.insert(d.trim_end_matches('/').to_string()));
    dirs
}

/// Reads the plugins on `dirs` and the providers' device nodes.
pub fn read_in(r: &Reader, dirs: &[String]) -> NetPluginFacts {
    let mut libraries: Vec<NetPluginLib> = Vec::new();
    for dir in dirs {
        let dir = dir.trim_end_matches('/');
        for file in r.dir(dir).unwrap_or_default() {
            // The loader takes the first file of a name on its path.
            if is_plugin_file(&file) && !libraries.iter().any(|l| l.file == file) {
                let path = format!("{dir}/{file}");
                // A snapshot keeps the file (empty), so it finds the same.
                r.touch_stat(&path);
                libraries.push(NetPluginLib {
                    path,
                    usb4_provider: usb4_provider_of(&file).map(|p| p.project.to_string()),
                    file,
                });
            }
        }
    }
    let usb4_devices = r
        .dir("/dev")
        .unwrap_or_default()
        .into_iter()
        .filter(|n| {
            USB4_PROVIDERS
                .iter()
                .any(|p| n.starts_with(p.device_prefix))
        })
        .map(|n| format!("/dev/{n}"))
        .inspect(|p| r.touch_stat(p))
        .collect();
    NetPluginFacts {
        libraries,
        usb4_devices,
    }
}

/// Reads the plugins on the loader's path (with this process's
/// `LD_LIBRARY_PATH` on the live root) and the providers' device nodes.
pub fn read(r: &Reader) -> NetPluginFacts {
    let ld = r
        .root()
        .is_live()
        .then(|| std::env::var("LD_LIBRARY_PATH").ok())
        .flatten();
    read_in(r, &search_dirs(r, ld.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::HostRoot;

    fn root_with(files: &[&str]) -> (tempfile::TempDir, Reader) {
        let d = tempfile::tempdir().unwrap();
        for f in files {
            let p = d.path().join(f.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
        }
        let r = Reader::new(HostRoot::sysroot(d.path()).unwrap());
        (d, r)
    }

    #[test]
    fn the_usb4_plugin_on_the_path_and_its_devices() {
        let (_d, r) = root_with(&[
            "/etc/ld.so.conf.d/odinlink.conf",
            "/usr/local/lib/odinlink/librccl-net-ODL_TB5.so",
            "/opt/rocm/lib/librccl-net.so",
            "/usr/lib/libc.so.6",
            "/dev/odl_tb5_0",
            "/dev/kfd",
        ]);
        std::fs::write(
            r.root().path("/etc/ld.so.conf.d/odinlink.conf"),
            "# OdinLink\n/usr/local/lib/odinlink\n",
        )
        .unwrap();
        let f = read(&r);
        assert_eq!(f.usb4_devices, ["/dev/odl_tb5_0"]);
        let files: Vec<&str> = f.libraries.iter().map(|l| l.file.as_str()).collect();
        assert_eq!(files, ["librccl-net-ODL_TB5.so", "librccl-net.so"]);
        let usb4 = f.usb4_library().unwrap();
        assert_eq!(usb4.usb4_provider.as_deref(), Some("OdinLink-Five"));
        assert_eq!(usb4.nccl_net_plugin(), "ODL_TB5");
    }

    /// The build's own name (and NCCL's prefix) is not what RCCL builds from
    /// a name: the absolute path is what loads it.
    #[test]
    fn other_names_load_by_their_path() {
        let (_d, r) = root_with(&[
            "/opt/x/librccl_net_odl_tb5.so",
            "/opt/x/libnccl-net-ODL_TB5.so",
        ]);
        let f = read_in(&r, &search_dirs(&r, Some("/opt/x:relative")));
        let values: Vec<String> = f.libraries.iter().map(|l| l.nccl_net_plugin()).collect();
        assert_eq!(
            values,
            [
                "/opt/x/libnccl-net-ODL_TB5.so",
                "/opt/x/librccl_net_odl_tb5.so"
            ]
        );
        assert!(f.usb4_devices.is_empty());
        assert!(!f.is_empty());
    }

    #[test]
    fn nothing_on_a_plain_root() {
        let (_d, r) = root_with(&["/usr/lib/librccl.so.1", "/dev/null"]);
        assert!(read(&r).is_empty());
    }
}
