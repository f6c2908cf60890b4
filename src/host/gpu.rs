//! GPU facts from the KFD topology (`/sys/class/kfd/kfd/topology/nodes/*`)
//! and the device nodes ROCm opens (`/dev/kfd`, `/dev/dri/renderD*`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::devnodes::{self, DeviceNode, StatTable};
use super::reader::Reader;

const TOPOLOGY: &str = "/sys/class/kfd/kfd/topology/nodes";
const DRM: &str = "/sys/class/drm";

/// AMD's PCI vendor id as sysfs prints it.
pub const AMD_VENDOR: &str = "0x1002";

/// A DRM card (`/sys/class/drm/cardN`) and what amdgpu exposes about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DrmCard {
    /// `card1`.
    pub name: String,
    /// PCI vendor id (`0x1002` for AMD).
    pub vendor_id: Option<String>,
    /// PCI address (`0000:c4:00.0`).
    pub pci_address: Option<String>,
    /// `device/mem_info_vram_total` in bytes: on an APU, the BIOS carve-out
    /// ("UMA frame buffer").
    pub vram_total_bytes: Option<u64>,
    /// `device/fw_version/mes_fw_version` as printed (`0x00000080`): the
    /// MES scheduler firmware amdgpu loaded.
    pub mes_fw_version: Option<String>,
    /// `device/mem_info_gtt_total` in bytes: the system memory the GPU may
    /// map (on an APU with the minimum carve-out, its memory for models).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gtt_total_bytes: Option<u64>,
    /// `device/mem_info_gtt_used` in bytes: of that, in use now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gtt_used_bytes: Option<u64>,
}

/// One KFD topology node: a CPU (gfx_target_version 0) or a GPU agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct KfdNode {
    /// The node number (folder name under `topology/nodes`).
    pub id: u32,
    /// The node's `name` file (e.g. `gfx1151`; empty for CPU nodes).
    pub name: Option<String>,
    /// `gfx_target_version` as the kernel prints it (110501 for gfx1151).
    pub gfx_target_version: Option<u32>,
    /// The LLVM target decoded from `gfx_target_version` (`gfx1151`); `None` for CPU nodes.
    pub gfx_target: Option<String>,
    /// PCI vendor id (4098 = 0x1002, AMD).
    pub vendor_id: Option<u32>,
    /// PCI device id.
    pub device_id: Option<u32>,
    /// Number of SIMDs (0 on CPU nodes).
    pub simd_count: Option<u32>,
    /// Render minor; with it the node's `/dev/dri/renderD<minor>`.
    pub drm_render_minor: Option<u32>,
    /// `/dev/dri/renderD<drm_render_minor>` for GPU nodes.
    pub render_node: Option<String>,
}

impl KfdNode {
    /// True for a GPU agent (a CPU node has gfx_target_version 0).
    pub fn is_gpu(&self) -> bool {
        self.gfx_target_version.is_some_and(|v| v != 0)
    }
}

/// Everything halobox knows about the GPU side of the host.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct GpuFacts {
    /// True when `/sys/class/kfd/kfd/topology` exists (the amdgpu KFD is loaded).
    pub kfd_topology: bool,
    /// Every topology node, CPU and GPU.
    pub nodes: Vec<KfdNode>,
    /// `/dev/kfd`, when it exists.
    pub kfd: Option<DeviceNode>,
    /// Every `/dev/dri/card*` and `/dev/dri/renderD*`.
    pub dri: Vec<DeviceNode>,
    /// Every DRM card in sysfs.
    pub cards: Vec<DrmCard>,
}

impl GpuFacts {
    /// The BIOS carve-out of the AMD iGPU in bytes (the largest
    /// `mem_info_vram_total` of an AMD card), when readable.
    pub fn carveout_bytes(&self) -> Option<u64> {
        self.amd_cards().filter_map(|c| c.vram_total_bytes).max()
    }

    /// GTT total and in use (bytes) of the AMD card with the largest GTT,
    /// when both are readable.
    pub fn gtt_bytes(&self) -> Option<(u64, u64)> {
        self.amd_cards()
            .filter_map(|c| Some((c.gtt_total_bytes?, c.gtt_used_bytes?)))
            .max_by_key(|&(total, _)| total)
    }

    /// The MES firmware version amdgpu loaded, when readable.
    pub fn mes_fw_version(&self) -> Option<&str> {
        self.amd_cards().find_map(|c| c.mes_fw_version.as_deref())
    }

    fn amd_cards(&self) -> impl Iterator<Item = &DrmCard> {
        self.cards
            .iter()
            .filter(|c| c.vendor_id.as_deref() == Some(AMD_VENDOR))
    }
}

/// Reads the KFD topology and GPU device nodes.
pub fn read(r: &Reader, stats: &StatTable) -> GpuFacts {
    let kfd_topology = r.exists(TOPOLOGY);
    let nodes = if kfd_topology {
        r.dir(TOPOLOGY)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|n| n.parse::<u32>().ok())
            .filter_map(|id| read_node(r, id))
            .collect()
    } else {
        Vec::new()
    };
    GpuFacts {
        kfd_topology,
        nodes,
        kfd: devnodes::read(r, stats, "/dev/kfd"),
        dri: devnodes::read_dir(r, stats, "/dev/dri", |n| {
            n.starts_with("card") || n.starts_with("renderD")
        }),
        cards: read_cards(r),
    }
}

fn read_cards(r: &Reader) -> Vec<DrmCard> {
    if !r.exists(DRM) {
        return Vec::new();
    }
    r.dir(DRM)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| {
            n.strip_prefix("card")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|name| {
            let dev = format!("{DRM}/{name}/device");
            let quiet = |file: &str| {
                r.text_quiet(&format!("{dev}/{file}"))
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            };
            DrmCard {
                vendor_id: quiet("vendor"),
                pci_address: super::pci::slot_name(r, &dev),
                vram_total_bytes: quiet("mem_info_vram_total").and_then(|v| v.parse().ok()),
                mes_fw_version: quiet("fw_version/mes_fw_version"),
                gtt_total_bytes: quiet("mem_info_gtt_total").and_then(|v| v.parse().ok()),
                gtt_used_bytes: quiet("mem_info_gtt_used").and_then(|v| v.parse().ok()),
                name,
            }
        })
        .collect()
}

/// One hwmon reading of a DRM card, as the kernel prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwmonReading {
    /// `temp` or `power`.
    pub kind: &'static str,
    /// The channel's `*_label` (`edge`, `PPT`), else its file stem (`temp1`).
    pub label: String,
    /// `temp*_input` in millidegrees Celsius, `power*_average` (or
    /// `power*_input`) in microwatts; `None` when not an integer.
    pub raw: Option<i64>,
}

/// What an AMD DRM card reports about its load right now: memory use, busy
/// percent and its hwmon channels (amdgpu's sysfs, `Documentation/gpu/amdgpu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardLoad {
    /// `card1`.
    pub card: String,
    /// `mem_info_vram_total` in bytes.
    pub vram_total_bytes: Option<u64>,
    /// `mem_info_vram_used` in bytes.
    pub vram_used_bytes: Option<u64>,
    /// `mem_info_gtt_total` in bytes.
    pub gtt_total_bytes: Option<u64>,
    /// `mem_info_gtt_used` in bytes.
    pub gtt_used_bytes: Option<u64>,
    /// `gpu_busy_percent` (0-100).
    pub busy_percent: Option<u64>,
    /// `hwmon/hwmon*/temp*_input` and `power*_{average,input}`.
    pub hwmon: Vec<HwmonReading>,
}

/// Reads the load of every AMD DRM card (vendor `0x1002`). Files that are
/// missing or not a number are left out; nothing here is an error.
pub fn read_load(r: &Reader) -> Vec<CardLoad> {
    read_cards(r)
        .into_iter()
        .filter(|c| c.vendor_id.as_deref() == Some(AMD_VENDOR))
        .map(|c| {
            let dev = format!("{DRM}/{}/device", c.name);
            let num = |file: &str| {
                r.text_quiet(&format!("{dev}/{file}"))
                    .and_then(|t| t.trim().parse::<u64>().ok())
            };
            CardLoad {
                vram_total_bytes: c.vram_total_bytes,
                vram_used_bytes: num("mem_info_vram_used"),
                gtt_total_bytes: c.gtt_total_bytes,
                gtt_used_bytes: c.gtt_used_bytes,
                busy_percent: num("gpu_busy_percent"),
                hwmon: read_hwmon(r, &format!("{dev}/hwmon")),
                card: c.name,
            }
        })
        .collect()
}

fn read_hwmon(r: &Reader, dir: &str) -> Vec<HwmonReading> {
    if !r.exists(dir) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for hw in r.dir(dir).unwrap_or_default() {
        let base = format!("{dir}/{hw}");
        let files = r.dir(&base).unwrap_or_default();
        for f in &files {
            let (kind, stem) = if let Some(stem) = f.strip_suffix("_input") {
                if stem.starts_with("temp") {
                    ("temp", stem)
                } else if stem.starts_with("power")
                    && !files.iter().any(|g| *g == format!("{stem}_average"))
                {
                    ("power", stem)
                } else {
                    continue;
                }
            } else if let Some(stem) = f.strip_suffix("_average") {
                if !stem.starts_with("power") {
                    continue;
                }
                ("power", stem)
            } else {
                continue;
            };
            let raw = r
                .text_quiet(&format!("{base}/{f}"))
                .and_then(|t| t.trim().parse::<i64>().ok());
            let label = r
                .text_quiet(&format!("{base}/{stem}_label"))
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| stem.to_string());
            out.push(HwmonReading { kind, label, raw });
        }
    }
    out
}

fn read_node(r: &Reader, id: u32) -> Option<KfdNode> {
    let path = format!("{TOPOLOGY}/{id}/properties");
    let text = r.text(&path)?;
    let props = parse_properties(&text);
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    if props.len() < lines {
        r.note(
            &path,
            format!(
                "{} of {lines} lines are not 'key number'",
                lines - props.len()
            ),
        );
    }
    let num = |key: &str| -> Option<u32> {
        let raw = props.get(key)?;
        let v = u32::try_from(*raw).ok();
        if v.is_none() {
            r.note(&path, format!("{key} {raw} is out of range"));
        }
        v
    };
    let gfx_target_version = num("gfx_target_version");
    let drm_render_minor = num("drm_render_minor");
    let is_gpu = gfx_target_version.is_some_and(|v| v != 0);
    let name = r
        .text_quiet(&format!("{TOPOLOGY}/{id}/name"))
        .map(|s| s.trim().to_string());
    Some(KfdNode {
        id,
        name,
        gfx_target_version,
        gfx_target: gfx_target_version.and_then(gfx_target_name),
        vendor_id: num("vendor_id"),
        device_id: num("device_id"),
        simd_count: num("simd_count"),
        drm_render_minor,
        render_node: drm_render_minor
            .filter(|_| is_gpu)
            .map(|m| format!("/dev/dri/renderD{m}")),
    })
}

/// Parses a KFD `properties` file: one `key value` pair per line, values are
/// unsigned integers. Lines that do not fit are skipped.
pub fn parse_properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let key = parts.next()?;
            let value = parts.next()?.parse::<u64>().ok()?;
            parts.next().is_none().then(|| (key.to_string(), value))
        })
        .collect()
}

/// Decodes `gfx_target_version` (major·10000 + minor·100 + stepping) into the
/// LLVM target name: 110501 → `gfx1151`, 90010 → `gfx90a`. 0 (CPU) → `None`.
pub fn gfx_target_name(version: u32) -> Option<String> {
    if version == 0 {
        return None;
    }
    let major = version / 10000;
    let minor = (version / 100) % 100;
    let stepping = version % 100;
    if minor > 15 || stepping > 15 {
        return None;
    }
    Some(format!("gfx{major}{minor:x}{stepping:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_names() {
        assert_eq!(gfx_target_name(110501).as_deref(), Some("gfx1151"));
        assert_eq!(gfx_target_name(110000).as_deref(), Some("gfx1100"));
        assert_eq!(gfx_target_name(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_target_name(90402).as_deref(), Some("gfx942"));
        assert_eq!(gfx_target_name(0), None);
        assert_eq!(gfx_target_name(119999), None);
    }

    #[test]
    fn properties_skip_garbage() {
        let p = parse_properties(
            "cpu_cores_count 0\nsimd_count 80\ngarbage\ngfx_target_version 110501\nbad x\nlocation_id 49920 7\n",
        );
        assert_eq!(p.get("gfx_target_version"), Some(&110501));
        assert_eq!(p.get("simd_count"), Some(&80));
        assert_eq!(p.len(), 3);
    }
}
