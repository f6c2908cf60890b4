//! Environment variables that change which GPU or network ROCm and NCCL use.
//! Set on the host, they leak into containers and override what halobox sets.

use schemars::JsonSchema;
use serde::Serialize;

use super::procs::split_nul;
use super::reader::Reader;

/// Variables that are hazards when set on the host.
pub const HAZARDS: [&str; 9] = [
    "HSA_OVERRIDE_GFX_VERSION",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
    "GLOO_SOCKET_IFNAME",
];

/// A hazardous variable that is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// The hazardous variables that are set (live: this process's environment;
/// snapshot: `/proc/self/environ`).
pub fn read(r: &Reader) -> Vec<EnvVar> {
    let pairs: Vec<(String, String)> = if r.root().is_live() {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    } else {
        r.bytes("/proc/self/environ")
            .map(|b| {
                split_nul(&String::from_utf8_lossy(&b))
                    .into_iter()
                    .filter_map(|kv| {
                        let (k, v) = kv.split_once('=')?;
                        Some((k.to_string(), v.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let found: Vec<EnvVar> = HAZARDS
        .iter()
        .filter_map(|&name| {
            pairs.iter().find(|(k, _)| k == name).map(|(_, v)| EnvVar {
                name: name.to_string(),
                value: v.clone(),
            })
        })
        .collect();
    // A snapshot keeps only these variables of the environment: the rest
    // may hold secrets.
    let kept: String = found
        .iter()
        .map(|v| format!("{}={}\0", v.name, v.value))
        .collect();
    r.write("/proc/self/environ", kept.as_bytes());
    found
}
