//! The probe `halobox check` runs inside a container (`probe.sh`, POSIX sh,
//! with `probe.py` for the Python checks when a python is there) and the
//! parser of what it prints: `@@hbx KEY VALUE…` lines into [`Probe`].

use crate::host::limits::LimitValue;

const SHELL: &str = include_str!("probe.sh");
const PYTHON: &str = include_str!("probe.py");
/// What starts every fact line.
const MARK: &str = "@@hbx ";

/// The whole probe: the Python part in `$PYPROBE`, then the shell part.
pub fn script() -> String {
    format!("PYPROBE='{PYTHON}'\n{SHELL}")
}

/// A device node as the container user sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSeen {
    /// Path (`/dev/kfd`, `/dev/dri/renderD128`, `/dev/infiniband/uverbs0`).
    pub path: String,
    /// Permission bits (`stat %a`), when stat could tell.
    pub mode: Option<u32>,
    /// Owner uid inside.
    pub uid: Option<u32>,
    /// Group id inside.
    pub gid: Option<u32>,
    /// `test -r` and `test -w` as the container user.
    pub readable: bool,
    /// See `readable`.
    pub writable: bool,
    /// `None` when opening it read-write worked, else the shell's message.
    pub open_error: Option<String>,
}

impl DeviceSeen {
    /// True when opening failed for lack of permission (not for a missing
    /// driver behind the node).
    pub fn denied(&self) -> bool {
        !(self.readable && self.writable)
            || self.open_error.as_deref().is_some_and(|e| {
                e.contains("Permission denied") || e.contains("Operation not permitted")
            })
    }
}

/// An RDMA port under `/sys/class/infiniband` inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSeen {
    /// Device (`rocep1s0f0`, `mlx5_0`).
    pub device: String,
    /// Port number.
    pub port: u32,
    /// `Ethernet` (RoCE) or `InfiniBand`.
    pub link_layer: String,
    /// `4: ACTIVE`, `1: DOWN`, …
    pub state: String,
}

impl PortSeen {
    /// True when the port is ACTIVE.
    pub fn active(&self) -> bool {
        self.state.ends_with("ACTIVE")
    }
}

/// A KFD topology node inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KfdSeen {
    /// Node id.
    pub id: u32,
    /// `gfx_target_version` (0 for a CPU node).
    pub gfx_target_version: Option<u32>,
    /// `drm_render_minor` (its `/dev/dri/renderD*`).
    pub render_minor: Option<u32>,
}

/// What torch said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TorchSeen {
    /// The import's error, `None` when it imported.
    pub import_error: Option<String>,
    /// `torch.__version__`.
    pub version: Option<String>,
    /// `torch.version.hip`.
    pub hip: Option<String>,
    /// `torch.cuda.is_available()`.
    pub cuda: Option<bool>,
    /// `torch.cuda.device_count()`.
    pub device_count: Option<u32>,
    /// `gcnArchName` of device 0.
    pub arch: Option<String>,
    /// `torch.cuda.get_device_name(0)`.
    pub device: Option<String>,
    /// An error from the CUDA/HIP calls.
    pub cuda_error: Option<String>,
    /// `torch.distributed.is_nccl_available()`, or its error.
    pub nccl: Option<Result<bool, String>>,
}

/// The RCCL ABI gate (`/opt/halobox/bin/rccl-abi-check.sh`) run on one
/// `libtorch_hip.so` in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSeen {
    /// The `libtorch_hip.so` checked.
    pub consumer: String,
    /// The librccl the loader gives it (`ldd`); `None` when none is found.
    pub lib: Option<String>,
    /// The gate's exit status (0 all defined, 1 some missing, 2 unreadable).
    pub code: Option<i32>,
    /// The symbols the gate named as missing.
    pub missing: Vec<String>,
}

/// What one librccl file in the container was built with, read from the
/// strings RCCL compiles in only with `-DFAULT_INJECTION=ON`
/// (ROCm/rocm-systems `projects/rccl/src/CMakeLists.txt`: `FAULT_INJECTION`
/// defines `ENABLE_FAULT_INJECTION`): `RCCL_INJECT_FAULTS`, the knob of every
/// build with fault injection (`RCCL_PARAM(InjectFaults, …)`, declared under
/// `#ifdef ENABLE_FAULT_INJECTION` in `src/misc/ibvwrap.cc`), and
/// `RCCL_IB_FAULT_INJECTION`, the net-ib knob of rocm-systems PR 8512, which
/// with PR 8484 keeps the net-ib fault shims off unless it is set (the fix
/// for TheRock issue 7903's multi-node slowdown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcclBuild {
    /// The file (links resolved).
    pub path: String,
    /// `RCCL_INJECT_FAULTS` is in it: fault injection is compiled in.
    pub fault_injection: bool,
    /// `RCCL_IB_FAULT_INJECTION` is in it: the net-ib gate of PR 8512.
    pub ib_gate: bool,
    /// What the image's `rccl-markers.sh` counted in it; `None` when the
    /// image has no such script (or no bash) to count with.
    pub code_objects: Option<CodeObjects>,
}

/// The offload bundles `rccl-markers.sh` read in one file: code objects are
/// bundle entries, one per target (not string hits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeObjects {
    /// Entries for gfx1151.
    pub gfx1151: u32,
    /// Offload bundles read (compressed and uncompressed).
    pub bundles: u32,
    /// Real compressed bundles it could not unpack (zlib, or no zstd).
    pub unreadable: u32,
    /// Bundle magics whose header does not fit: not a bundle (`CCOB` as an
    /// immediate in a bundle reader's code).
    pub not_bundle: u32,
}

/// A librccl mapped into the python that imported torch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcclSeen {
    /// Its sha256 (`None` when it could not be read).
    pub sha256: Option<String>,
    /// Its path (links resolved).
    pub path: String,
}

/// What amdsmi said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmdsmiSeen {
    /// The import's error, `None` when it imported.
    pub import_error: Option<String>,
    /// `amdsmi_init()`'s error.
    pub init_error: Option<String>,
    /// How many processors `amdsmi_get_processor_handles()` returned.
    pub processors: Option<u32>,
}

/// What vLLM said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VllmSeen {
    /// The import's error, `None` when it imported.
    pub import_error: Option<String>,
    /// `vllm.__version__`.
    pub version: Option<String>,
    /// The class of `vllm.platforms.current_platform`, or its error.
    pub platform: Option<String>,
}

/// A Python part that did not end well (non-zero exit: 124 timeout, 139
/// segfault, …) with the last lines it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonExit {
    /// `torch`, `amdsmi` or `vllm`.
    pub part: String,
    /// Exit status.
    pub code: i32,
    /// Its last lines of output.
    pub tail: String,
}

/// Everything the probe printed, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    /// The probe's format version (`@@hbx probe 1`).
    pub version: Option<u32>,
    /// True when the last line (`@@hbx end`) arrived.
    pub complete: bool,
    /// `id -u`.
    pub uid: Option<u32>,
    /// `id -un`.
    pub user: Option<String>,
    /// `id -G`.
    pub groups: Vec<u32>,
    /// `ulimit -l` (in bytes).
    pub memlock: Option<LimitValue>,
    /// Hazardous variables set inside (`HSA_OVERRIDE_GFX_VERSION`).
    pub env: Vec<(String, String)>,
    /// `/dev/kfd`, `/dev/dri/renderD*`, `/dev/infiniband/*` as seen.
    pub devices: Vec<DeviceSeen>,
    /// True when `/sys/class/infiniband` exists inside.
    pub rdma_class: bool,
    /// Its ports.
    pub rdma_ports: Vec<PortSeen>,
    /// True when `/sys/class/kfd/kfd/topology/nodes` exists inside.
    pub kfd: bool,
    /// Its nodes.
    pub kfd_nodes: Vec<KfdSeen>,
    /// `/opt/halobox/librccl.so.1.sha256` of the image.
    pub rccl_file: Option<String>,
    /// The python used and its version; `None` when there is none.
    pub python: Option<(String, String)>,
    /// torch, when python ran it.
    pub torch: Option<TorchSeen>,
    /// The librccl files torch loaded (after `import torch`).
    pub rccl_loaded: Vec<RcclSeen>,
    /// amdsmi, when python ran it.
    pub amdsmi: Option<AmdsmiSeen>,
    /// vLLM, when python ran it.
    pub vllm: Option<VllmSeen>,
    /// Python parts that exited non-zero.
    pub python_exits: Vec<PythonExit>,
    /// `ray --version`: the path and what it printed; `None` when there is
    /// no ray.
    pub ray: Option<(String, String)>,
    /// The driver of each RDMA device (`rocep194s0f0`, `irdma`).
    pub rdma_drivers: Vec<(String, String)>,
    /// The packaged rdma-core (libibverbs) version, `None` when none is installed.
    pub rdma_core: Option<String>,
    /// The RCCL ABI gate on each `libtorch_hip.so`.
    pub rccl_gates: Vec<GateSeen>,
    /// What each librccl file was built with (fault injection, the net-ib gate).
    pub rccl_builds: Vec<RcclBuild>,
    /// Why the gate did not run (`unavailable`: no gate script, bash, nm or
    /// ldd in the image; `notorch`: no `libtorch_hip.so`).
    pub rccl_gate_skipped: Option<String>,
    /// llama.cpp's binaries (`llama-server`, `ggml-rpc-server`, `rpc-server`)
    /// and where each was found (`None`: nowhere).
    pub llama_bins: Vec<(String, Option<String>)>,
    /// `llama-server --version` (its `version: …` line).
    pub llama_version: Option<String>,
    /// What `llama-server --list-devices` printed, line by line.
    pub llama_list: Vec<String>,
    /// Its exit status, when it ran.
    pub llama_list_exit: Option<i32>,
    /// RCCL net plugins on the loader's path and how loading each went.
    pub net_plugins: Vec<NetPluginSeen>,
}

/// An RCCL net plugin library in the container, loaded there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPluginSeen {
    /// Its path.
    pub path: String,
    /// `dlopen(RTLD_NOW)`: the `ncclNetPlugin_vN` versions it exports
    /// (`v7`), or the loader's error; `None` when there was no python to
    /// load it with.
    pub load: Option<Result<Vec<String>, String>>,
}

impl Probe {
    /// Devices whose path starts with `prefix`.
    pub fn devices_under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a DeviceSeen> {
        self.devices
            .iter()
            .filter(move |d| d.path.starts_with(prefix))
    }

    /// The device at `path`.
    pub fn device(&self, path: &str) -> Option<&DeviceSeen> {
        self.devices.iter().find(|d| d.path == path)
    }

    /// Where llama.cpp's binary `name` was found.
    pub fn llama_bin(&self, name: &str) -> Option<&str> {
        self.llama_bins
            .iter()
            .filter(|(n, _)| n == name)
            .find_map(|(_, p)| p.as_deref())
    }

    /// How the Python part `part` ended when it did not exit 0.
    pub fn python_exit(&self, part: &str) -> Option<&PythonExit> {
        self.python_exits.iter().find(|e| e.part == part)
    }
}

/// `-` (the probe's "none") as `None`.
fn value(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty() && s != "-").then(|| s.to_string())
}

/// The first word and the rest.
fn split(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.split_once(' ') {
        Some((a, b)) => (a, b.trim_start()),
        None => (s, ""),
    }
}

/// `ulimit -l`: `unlimited` or KiB.
fn memlock(s: &str) -> Option<LimitValue> {
    match s.trim() {
        "unlimited" => Some(LimitValue::Unlimited),
        n => n
            .parse::<u64>()
            .ok()
            .map(|k| LimitValue::Finite(k.saturating_mul(1024))),
    }
}

fn device(rest: &str) -> Option<DeviceSeen> {
    let (path, rest) = split(rest);
    let (mode, rest) = split(rest);
    let (uid, rest) = split(rest);
    let (gid, rest) = split(rest);
    let (access, open) = split(rest);
    if !path.starts_with("/dev/") {
        return None;
    }
    Some(DeviceSeen {
        path: path.to_string(),
        mode: u32::from_str_radix(mode, 8).ok(),
        uid: uid.parse().ok(),
        gid: gid.parse().ok(),
        readable: access.contains('r'),
        writable: access.contains('w'),
        open_error: match open.trim() {
            "ok" => None,
            e => Some(e.to_string()),
        },
    })
}

/// Error text after `error` (`import error ModuleNotFoundError: …`).
fn outcome(rest: &str) -> Result<String, String> {
    let (word, rest) = split(rest);
    if word == "ok" {
        Ok(rest.trim().to_string())
    } else {
        Err(rest.trim().to_string())
    }
}

/// `rdma.port DEVICE PORT LINK_LAYER STATE`.
fn rdma_port(rest: &str) -> Option<PortSeen> {
    let (device, rest) = split(rest);
    let (port, rest) = split(rest);
    let (link_layer, state) = split(rest);
    Some(PortSeen {
        device: device.to_string(),
        port: port.parse().ok()?,
        link_layer: link_layer.to_string(),
        state: state.trim().to_string(),
    })
}

/// `kfd.node ID GFX_TARGET_VERSION RENDER_MINOR`.
fn kfd_node(rest: &str) -> Option<KfdSeen> {
    let mut w = rest.split_whitespace();
    Some(KfdSeen {
        id: w.next()?.parse().ok()?,
        gfx_target_version: w.next().and_then(|g| g.parse().ok()),
        render_minor: w.next().and_then(|m| m.parse().ok()),
    })
}

/// `rccl.gate CONSUMER LIB CODE MISSING…`, or `rccl.gate - - WHY` when the
/// gate did not run: the gate, or why it was skipped.
fn rccl_gate(rest: &str) -> Result<GateSeen, String> {
    let (consumer, rest) = split(rest);
    let (lib, rest) = split(rest);
    let (code, missing) = split(rest);
    if consumer == "-" {
        return Err(code.to_string());
    }
    Ok(GateSeen {
        consumer: consumer.to_string(),
        lib: value(lib),
        code: code.parse().ok(),
        missing: missing.split_whitespace().map(str::to_string).collect(),
    })
}

/// `rccl.build PATH INJECT IB [GFX1151 BUNDLES UNREADABLE NOT_BUNDLE]`.
fn rccl_build(rest: &str) -> RcclBuild {
    let (path, rest) = split(rest);
    let (inject, rest) = split(rest);
    let (ib, counts) = split(rest);
    let n: Vec<u32> = counts
        .split_whitespace()
        .map_while(|c| c.parse().ok())
        .collect();
    RcclBuild {
        path: path.to_string(),
        fault_injection: inject == "yes",
        ib_gate: ib.trim() == "yes",
        code_objects: match n[..] {
            [gfx1151, bundles, unreadable, not_bundle] => Some(CodeObjects {
                gfx1151,
                bundles,
                unreadable,
                not_bundle,
            }),
            _ => None,
        },
    }
}

/// `rccl.loaded SHA PATH`, `rccl.loaded unreadable PATH` or
/// `rccl.loaded none`.
fn rccl_loaded(rest: &str) -> Option<RcclSeen> {
    let (sha, path) = split(rest);
    match sha {
        "none" => None,
        "unreadable" => Some(RcclSeen {
            sha256: None,
            path: split(path).0.to_string(),
        }),
        sha => Some(RcclSeen {
            sha256: Some(sha.to_string()),
            path: path.trim().to_string(),
        }),
    }
}

/// `netplugin PATH ok V7,V8`, `netplugin PATH err WHY` or
/// `netplugin PATH -` (not loaded).
fn net_plugin(rest: &str) -> NetPluginSeen {
    let (path, rest) = split(rest);
    let (word, detail) = split(rest);
    let load = match word {
        "ok" => Some(Ok(detail
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty() && *v != "-")
            .map(str::to_string)
            .collect())),
        "err" => Some(Err(detail.trim().to_string())),
        _ => None,
    };
    NetPluginSeen {
        path: path.to_string(),
        load,
    }
}

/// Parses the probe's stdout; lines without the mark are ignored.
pub fn parse(stdout: &str) -> Probe {
    let mut p = Probe::default();
    for line in stdout.lines() {
        let Some(fact) = line.trim_end_matches('\r').strip_prefix(MARK) else {
            continue;
        };
        let (key, rest) = split(fact);
        p.read(key, rest);
    }
    p
}

impl Probe {
    /// Takes in one fact, `KEY REST`, by the family its key names (the word
    /// before its first dot); a key no family knows is ignored.
    fn read(&mut self, key: &str, rest: &str) {
        match key.split_once('.').map_or(key, |(family, _)| family) {
            "rdma" | "kfd" => self.read_hardware(key, rest),
            "rccl" | "netplugin" => self.read_rccl(key, rest),
            "torch" => self.read_torch(key, rest),
            "python" | "py" | "amdsmi" | "vllm" => self.read_python(key, rest),
            "llama" => self.read_llama(key, rest),
            _ => self.read_container(key, rest),
        }
    }

    /// The probe's own lines, the user, limits, environment, devices and
    /// ray.
    fn read_container(&mut self, key: &str, rest: &str) {
        match key {
            "probe" => self.version = rest.trim().parse().ok(),
            "end" => self.complete = true,
            "uid" => self.uid = rest.trim().parse().ok(),
            "user" => self.user = value(rest),
            "groups" => {
                self.groups = rest
                    .split_whitespace()
                    .filter_map(|g| g.parse().ok())
                    .collect()
            }
            "memlock" => self.memlock = memlock(rest),
            "env" => {
                let (name, val) = split(rest);
                self.env.push((name.to_string(), val.trim().to_string()));
            }
            "dev" => self.devices.extend(device(rest)),
            "ray" => {
                let (path, out) = split(rest);
                self.ray = value(path).map(|path| (path, out.trim().to_string()));
            }
            _ => {}
        }
    }

    /// The RDMA class, ports, drivers and rdma-core; the KFD topology.
    fn read_hardware(&mut self, key: &str, rest: &str) {
        match key {
            "rdma" => self.rdma_class = rest.trim() == "yes",
            "rdma.port" => self.rdma_ports.extend(rdma_port(rest)),
            "rdma.driver" => {
                let (device, driver) = split(rest);
                self.rdma_drivers
                    .push((device.to_string(), driver.trim().to_string()));
            }
            "rdma.core" => self.rdma_core = value(rest),
            "kfd" => self.kfd = rest.trim() == "yes",
            "kfd.node" => self.kfd_nodes.extend(kfd_node(rest)),
            _ => {}
        }
    }

    /// RCCL: the ABI gate, each build, the image's file, what torch
    /// loaded; the net plugins.
    fn read_rccl(&mut self, key: &str, rest: &str) {
        match key {
            "rccl.gate" => match rccl_gate(rest) {
                Ok(gate) => self.rccl_gates.push(gate),
                Err(why) => self.rccl_gate_skipped = Some(why),
            },
            "rccl.build" => self.rccl_builds.push(rccl_build(rest)),
            "rccl.file" => self.rccl_file = value(rest),
            "rccl.loaded" => self.rccl_loaded.extend(rccl_loaded(rest)),
            "netplugin" => self.net_plugins.push(net_plugin(rest)),
            _ => {}
        }
    }

    /// What torch said.
    fn read_torch(&mut self, key: &str, rest: &str) {
        match key {
            "torch.import" => {
                let t = self.torch();
                match outcome(rest) {
                    Ok(v) => {
                        let (version, hip) = split(&v);
                        t.version = value(version);
                        t.hip = value(hip);
                    }
                    Err(e) => t.import_error = Some(e),
                }
            }
            "torch.cuda" => {
                let t = self.torch();
                let (ok, count) = split(rest);
                t.cuda = Some(ok == "True");
                t.device_count = count.trim().parse().ok();
            }
            "torch.arch" => self.torch().arch = value(rest),
            "torch.device" => self.torch().device = value(rest),
            "torch.cuda.error" => self.torch().cuda_error = value(rest),
            "torch.nccl" => {
                self.torch().nccl = Some(match rest.trim() {
                    "True" => Ok(true),
                    "False" => Ok(false),
                    other => Err(split(other).1.trim().to_string()),
                })
            }
            _ => {}
        }
    }

    /// What torch said so far, begun at its first fact.
    fn torch(&mut self) -> &mut TorchSeen {
        self.torch.get_or_insert_with(TorchSeen::default)
    }

    /// The python, how its parts exited, and what amdsmi and vLLM said.
    fn read_python(&mut self, key: &str, rest: &str) {
        match key {
            "python" => {
                let (path, version) = split(rest);
                self.python = value(path).map(|path| (path, version.trim().to_string()));
            }
            "py.exit" => {
                let (part, rest) = split(rest);
                let (code, tail) = split(rest);
                self.python_exits.push(PythonExit {
                    part: part.to_string(),
                    code: code.parse().unwrap_or(-1),
                    tail: tail.trim().to_string(),
                });
            }
            "amdsmi.import" => {
                self.amdsmi
                    .get_or_insert_with(AmdsmiSeen::default)
                    .import_error = outcome(rest).err()
            }
            "amdsmi.init" => {
                self.amdsmi
                    .get_or_insert_with(AmdsmiSeen::default)
                    .init_error = outcome(rest).err()
            }
            "amdsmi.processors" => {
                self.amdsmi
                    .get_or_insert_with(AmdsmiSeen::default)
                    .processors = rest.trim().parse().ok()
            }
            "vllm.import" => {
                let v = self.vllm.get_or_insert_with(VllmSeen::default);
                match outcome(rest) {
                    Ok(version) => v.version = value(&version),
                    Err(e) => v.import_error = Some(e),
                }
            }
            "vllm.platform" => {
                self.vllm.get_or_insert_with(VllmSeen::default).platform = value(rest)
            }
            _ => {}
        }
    }

    /// llama.cpp's binaries, version and devices.
    fn read_llama(&mut self, key: &str, rest: &str) {
        match key {
            "llama.bin" => {
                let (name, path) = split(rest);
                self.llama_bins.push((name.to_string(), value(path)));
            }
            "llama.version" => self.llama_version = value(rest),
            "llama.dev" => self.llama_list.push(rest.trim().to_string()),
            "llama.list" => self.llama_list_exit = rest.trim().parse().ok(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_of_a_known_family_is_ignored() {
        let p = parse("@@hbx torch.future 1\n@@hbx rdma.future x\n@@hbx vllm\n@@hbx end\n");
        assert_eq!(
            p,
            Probe {
                complete: true,
                ..Probe::default()
            }
        );
    }

    #[test]
    fn the_python_part_fits_in_single_quotes() {
        assert!(!PYTHON.contains('\''));
        assert!(script().starts_with("PYPROBE='"));
    }

    #[test]
    fn parses_a_container_without_gpu_or_python() {
        let p = parse(include_str!(
            "../../tests/fixtures/probe/podman-busybox.txt"
        ));
        assert!(p.complete);
        assert_eq!(p.version, Some(1));
        assert_eq!(p.uid, Some(0));
        assert_eq!(p.memlock, Some(LimitValue::Finite(8 << 20)));
        let uverbs = p.device("/dev/infiniband/uverbs0").expect("uverbs0");
        assert_eq!(uverbs.mode, Some(0o666));
        assert!(uverbs.readable && uverbs.writable && !uverbs.denied());
        assert!(
            uverbs
                .open_error
                .as_deref()
                .unwrap()
                .contains("No such device or address")
        );
        assert!(!p.kfd && !p.rdma_class && p.python.is_none() && p.ray.is_none());
    }

    #[test]
    fn parses_a_strix_halo_node() {
        let p = parse(include_str!("../../tests/fixtures/probe/strix-halo.txt"));
        assert!(p.complete);
        assert_eq!(p.memlock, Some(LimitValue::Unlimited));
        assert_eq!(p.kfd_nodes.len(), 2);
        assert_eq!(p.kfd_nodes[1].gfx_target_version, Some(110501));
        assert_eq!(p.kfd_nodes[1].render_minor, Some(128));
        let t = p.torch.as_ref().unwrap();
        assert_eq!(t.cuda, Some(true));
        assert_eq!(t.arch.as_deref(), Some("gfx1151"));
        assert_eq!(p.rccl_loaded.len(), 1);
        assert_eq!(p.rdma_ports[0].state, "4: ACTIVE");
        assert!(p.rdma_ports[0].active());
        assert_eq!(p.amdsmi.as_ref().unwrap().processors, Some(1));
        assert_eq!(
            p.vllm.as_ref().unwrap().platform.as_deref(),
            Some("RocmPlatform")
        );
        assert_eq!(p.ray.as_ref().unwrap().1, "ray, version 2.51.1");
        assert_eq!(
            p.rdma_drivers,
            vec![("rocep194s0f0".to_string(), "irdma".to_string())]
        );
        assert_eq!(p.rdma_core.as_deref(), Some("62.0"));
        assert_eq!(p.rccl_gates.len(), 1);
        assert_eq!(p.rccl_gates[0].code, Some(0));
        assert!(p.rccl_gates[0].missing.is_empty());
        assert_eq!(t.nccl, Some(Ok(true)));
    }

    #[test]
    fn parses_the_gate_naming_symbols_and_its_skips() {
        let p = parse(
            "@@hbx rccl.gate /t/libtorch_hip.so /o/librccl.so.1 1 ncclCommResume ncclCommShrink \n@@hbx rccl.gate /u/libtorch_hip.so - none\n@@hbx torch.nccl error RuntimeError: x\n@@hbx rdma.core -\n",
        );
        assert_eq!(p.rccl_gates[0].lib.as_deref(), Some("/o/librccl.so.1"));
        assert_eq!(
            p.rccl_gates[0].missing,
            vec!["ncclCommResume", "ncclCommShrink"]
        );
        assert_eq!(p.rccl_gates[1].lib, None);
        assert_eq!(
            p.torch.unwrap().nccl,
            Some(Err("RuntimeError: x".to_string()))
        );
        assert_eq!(p.rdma_core, None);
        let p = parse("@@hbx rccl.gate - - unavailable\n");
        assert_eq!(p.rccl_gate_skipped.as_deref(), Some("unavailable"));
    }

    #[test]
    fn noise_and_cut_output_are_survived() {
        let p = parse(
            "toolbox: warning\n@@hbx probe 1\n@@hbx memlock 64\n@@hbx dev /dev/kfd 660 0 105 - sh: can't open '/dev/kfd': Permission denied\nINFO vllm says hi\n",
        );
        assert!(!p.complete);
        assert_eq!(p.memlock, Some(LimitValue::Finite(64 << 10)));
        assert!(p.device("/dev/kfd").unwrap().denied());
    }
}
