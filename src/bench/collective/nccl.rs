//! What RCCL/NCCL says about its network in its `NCCL_DEBUG=INFO` log: the
//! network it chose (`Using network IB` / `Socket`), the devices it opened
//! (`NET/IB : Using [0]mlx5_0:1/RoCE …`, `NET/Socket : Using [0]eth0:…`),
//! the GID index it was given, and the transport each connection really
//! runs on (`… via NET/IB/0`, `… via NET/Socket/0`); and a net plugin it
//! loaded (`NET/Plugin: Plugin name set by env to librccl-net-ODL_TB5.so`,
//! `Using network ODL_TB5`, `… via NET/ODL_TB5/0`), named as the USB4
//! plugin when it is a known USB4 provider's. Pure.

use serde::{Deserialize, Serialize};

use crate::host::netplugin::usb4_provider_of;

/// The transport a rank used, as its log shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "net", rename_all = "snake_case")]
pub enum Used {
    /// `NET/IB` (RoCE or InfiniBand verbs).
    Ib {
        /// The devices it listed (`mlx5_0:1/RoCE`).
        devices: Vec<String>,
        /// `NCCL_IB_GID_INDEX` as RCCL read it, when it said so.
        gid_index: Option<u32>,
    },
    /// `NET/Socket` (TCP).
    Socket {
        /// The interfaces it listed (`eth0:10.0.0.1<0>`).
        interfaces: Vec<String>,
    },
    /// A net plugin's network (`NET/ODL_TB5`).
    Plugin {
        /// The network's name as RCCL logs it (`ODL_TB5`).
        name: String,
        /// The library RCCL loaded, when it said so.
        library: Option<String>,
        /// The USB4 provider it belongs to (`OdinLink-Five`), when known.
        usb4: Option<String>,
    },
    /// The log names no network (one node, or no INFO lines).
    Unknown,
}

impl std::fmt::Display for Used {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Used::Ib { devices, gid_index } => {
                write!(f, "NET/IB {}", devices.join(" "))?;
                match gid_index {
                    Some(g) => write!(f, ", GID index {g}"),
                    None => Ok(()),
                }
            }
            Used::Socket { interfaces } => write!(f, "NET/Socket {}", interfaces.join(" ")),
            Used::Plugin {
                name,
                library,
                usb4,
            } => {
                write!(f, "NET/{name}")?;
                let lib = library
                    .as_deref()
                    .map(|l| format!(" {l}"))
                    .unwrap_or_default();
                match usb4 {
                    Some(p) => write!(f, " (the USB4 net plugin{lib}, {p})"),
                    None => write!(f, " (net plugin{lib})"),
                }
            }
            Used::Unknown => f.write_str("unknown (no NET line in the RCCL log)"),
        }
    }
}

/// One rank's log, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NcclLog {
    /// `Using network X`.
    pub network: Option<String>,
    /// The devices of `NET/IB : Using`.
    pub ib_devices: Vec<String>,
    /// The interfaces of `NET/Socket : Using`.
    pub socket_interfaces: Vec<String>,
    /// `NCCL_IB_GID_INDEX set by environment to N`.
    pub gid_index: Option<u32>,
    /// A connection ran `via NET/IB`.
    pub via_ib: bool,
    /// A connection ran `via NET/Socket`.
    pub via_socket: bool,
    /// A connection ran over another network (`via NET/ODL_TB5/0` → `ODL_TB5`).
    pub via_other: Option<String>,
    /// The net plugin library RCCL loaded (`Plugin name set by env to …`,
    /// `Loaded net plugin …`).
    pub plugin: Option<String>,
    /// `NET/IB : No device found`.
    pub no_ib_device: bool,
    /// The first `NCCL WARN` lines (what went wrong, when something did).
    pub warnings: Vec<String>,
}

/// The list after `NET/xx : Using`: `[0]mlx5_0:1/RoCE [1]… [RO]; OOB …` →
/// `mlx5_0:1/RoCE`, ….
fn listed(rest: &str) -> Vec<String> {
    rest.split(';')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('['))
        .filter_map(|w| w.split_once(']'))
        .map(|(_, dev)| dev.to_string())
        .filter(|d| !d.is_empty())
        .collect()
}

/// Reads a log (any prefix before `NCCL INFO` is allowed: host:pid:tid,
/// `[rank]`, mpirun's `[1,0]<stdout>:`).
pub fn parse(log: &str) -> NcclLog {
    let mut out = NcclLog::default();
    for line in log.lines() {
        if let Some(i) = line.find("NCCL WARN ") {
            if out.warnings.len() < 3 {
                out.warnings.push(line[i..].trim().to_string());
            }
            continue;
        }
        let Some(i) = line.find("NCCL INFO ") else {
            continue;
        };
        let msg = line[i + "NCCL INFO ".len()..].trim();
        if let Some(rest) = msg.strip_prefix("NET/IB : Using") {
            out.ib_devices = listed(rest);
        } else if let Some(rest) = msg.strip_prefix("NET/Socket : Using") {
            out.socket_interfaces = listed(rest);
        } else if msg.starts_with("NET/IB : No device found") {
            out.no_ib_device = true;
        } else if let Some(net) = msg.strip_prefix("Using network ") {
            out.network = Some(net.trim().to_string());
        } else if let Some(v) = msg.strip_prefix("NCCL_IB_GID_INDEX set by environment to ") {
            out.gid_index = v.trim().trim_end_matches('.').parse().ok();
        } else if let Some(lib) = plugin_loaded(msg) {
            out.plugin = Some(lib);
        }
        if let Some(i) = msg.find(" via NET/") {
            let net = msg[i + " via NET/".len()..]
                .split(['/', ' '])
                .next()
                .unwrap_or("");
            match net {
                "IB" => out.via_ib = true,
                "Socket" => out.via_socket = true,
                "" => {}
                other => out.via_other = Some(other.to_string()),
            }
        }
    }
    out
}

/// The library of `NET/Plugin: Plugin name set by env to LIB` (RCCL, NCCL
/// 2.2x) or `NET/Plugin: Loaded net plugin NAME (vN)` (the net's name
/// when that is all the log gives).
fn plugin_loaded(msg: &str) -> Option<String> {
    let rest = msg
        .strip_prefix("NET/Plugin: ")
        .or_else(|| msg.strip_prefix("NET/Plugin : "))?;
    let name = rest
        .strip_prefix("Plugin name set by env to ")
        .or_else(|| rest.strip_prefix("Loaded net plugin "))?;
    name.split_whitespace().next().map(str::to_string)
}

impl NcclLog {
    /// The transport this rank used: the connections' `via` first (what
    /// ran), else the network RCCL chose.
    pub fn used(&self) -> Used {
        let ib = || Used::Ib {
            devices: self.ib_devices.clone(),
            gid_index: self.gid_index,
        };
        let socket = || Used::Socket {
            interfaces: self.socket_interfaces.clone(),
        };
        let plugin = |net: &str| {
            let usb4 = self
                .plugin
                .iter()
                .map(|l| l.rsplit('/').next().unwrap_or(l))
                .chain([format!("librccl-net-{net}.so").as_str()])
                .find_map(usb4_provider_of)
                .map(|p| p.project.to_string());
            Used::Plugin {
                name: net.to_string(),
                library: self.plugin.clone(),
                usb4,
            }
        };
        match (self.via_ib, self.via_socket, self.network.as_deref()) {
            (_, true, _) => socket(),
            _ if self.via_other.is_some() => plugin(self.via_other.as_deref().unwrap_or("")),
            (true, false, _) => ib(),
            (_, _, Some(n)) if n.starts_with("IB") => ib(),
            (_, _, Some(n)) if n.starts_with("Socket") => socket(),
            (_, _, Some(n)) => plugin(n),
            _ => Used::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RCCL on a Strix Halo node with RoCE (the shape of NVIDIA/nccl-tests#185
    /// and ROCm/rccl logs: host:pid:tid [dev] NCCL INFO …).
    const ROCE: &str = "\
halo1:4411:4411 [0] NCCL INFO Bootstrap : Using enp194s0np0:192.168.100.1<0>
halo1:4411:4411 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to =enp194s0np0
halo1:4411:4411 [0] NCCL INFO NET/Plugin : No plugin found (librccl-net.so), using internal implementation
halo1:4411:4470 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 1.
halo1:4411:4470 [0] NCCL INFO NCCL_IB_HCA set to =rocep194s0:1
halo1:4411:4470 [0] NCCL INFO NET/IB : Using [0]rocep194s0:1/RoCE [RO]; OOB enp194s0np0:192.168.100.1<0>
halo1:4411:4470 [0] NCCL INFO Using network IB
halo1:4411:4470 [0] NCCL INFO comm 0x55d0c8a0 rank 0 nranks 2 cudaDev 0 busId c1000 commId 0x6d1f - Init START
halo1:4411:4470 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0
halo1:4411:4470 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0
halo1:4411:4470 [0] NCCL INFO Connected all rings
";

    /// NCCL_IB_DISABLE=1 or no usable device: sockets (NVIDIA/nccl#1267, #278).
    const SOCKET: &str = "\
instance-8g-96c-3:2744870:2744870 [0] NCCL INFO Bootstrap : Using ens7:10.128.0.32<0>
instance-8g-96c-3:2744870:2745046 [0] NCCL INFO NET/IB : No device found.
instance-8g-96c-3:2744870:2745046 [0] NCCL INFO NET/Socket : Using [0]ens7:10.128.0.32<0>
instance-8g-96c-3:2744870:2745046 [0] NCCL INFO Using non-device net plugin version 0
instance-8g-96c-3:2744870:2745046 [0] NCCL INFO Using network Socket
sh-01:98911:98923 [3] NCCL INFO Ring 00 : 3[b01000] -> 4[201000] [send] via NET/Socket/0
";

    /// mpirun's prefix, several RoCE devices, IB chosen but no channel line yet.
    const MPIRUN: &str = "\
[1,0]<stdout>:dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>
[1,0]<stdout>:dgxh100-4:460770:460842 [0] NCCL INFO Using network IB
";

    #[test]
    fn roce_with_device_and_gid() {
        let l = parse(ROCE);
        assert_eq!(
            l.used(),
            Used::Ib {
                devices: vec!["rocep194s0:1/RoCE".into()],
                gid_index: Some(1)
            }
        );
        assert_eq!(
            l.used().to_string(),
            "NET/IB rocep194s0:1/RoCE, GID index 1"
        );
    }

    #[test]
    fn sockets_after_no_device() {
        let l = parse(SOCKET);
        assert!(l.no_ib_device);
        assert_eq!(
            l.used(),
            Used::Socket {
                interfaces: vec!["ens7:10.128.0.32<0>".into()]
            }
        );
    }

    #[test]
    fn chosen_network_without_channels_and_a_prefix() {
        let l = parse(MPIRUN);
        assert_eq!(
            l.used(),
            Used::Ib {
                devices: vec!["mlx5_10:1/RoCE".into(), "mlx5_11:1/RoCE".into()],
                gid_index: None
            }
        );
    }

    /// IB listed, but a connection ran over sockets: what ran wins.
    #[test]
    fn a_socket_channel_beats_the_listed_ib() {
        let log = format!(
            "{ROCE}halo1:4411:4470 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
        );
        assert!(matches!(parse(&log).used(), Used::Socket { .. }));
    }

    /// RCCL with OdinLink's plugin (`NCCL_NET_PLUGIN=ODL_TB5`): the lines
    /// of ROCm/rccl's plugin_open.cc and init, and the channel's `via`.
    const ODL: &str = "\
halo1:5120:5120 [0] NCCL INFO Bootstrap : Using thunderbolt0:10.0.0.1<0>
halo1:5120:5120 [0] NCCL INFO NET/Plugin: Plugin name set by env to librccl-net-ODL_TB5.so
halo1:5120:5180 [0] NCCL INFO Using network ODL_TB5
halo1:5120:5180 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/ODL_TB5/0
";

    #[test]
    fn the_usb4_plugin_is_named() {
        let l = parse(ODL);
        assert_eq!(l.plugin.as_deref(), Some("librccl-net-ODL_TB5.so"));
        assert_eq!(
            l.used(),
            Used::Plugin {
                name: "ODL_TB5".into(),
                library: Some("librccl-net-ODL_TB5.so".into()),
                usb4: Some("OdinLink-Five".into()),
            }
        );
        assert_eq!(
            l.used().to_string(),
            "NET/ODL_TB5 (the USB4 net plugin librccl-net-ODL_TB5.so, OdinLink-Five)"
        );
        // Chosen but no channel yet, loaded by its path: still the plugin.
        let l = parse(
            "h:1:2 [0] NCCL INFO NET/Plugin: Plugin name set by env to /usr/local/lib/odinlink/librccl_net_odl_tb5.so\nh:1:2 [0] NCCL INFO Using network ODL_TB5\n",
        );
        assert!(
            matches!(l.used(), Used::Plugin { usb4: Some(_), .. }),
            "{}",
            l.used()
        );
        // Another plugin is named, not taken for USB4.
        let l = parse(
            "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0\n",
        );
        assert_eq!(l.used().to_string(), "NET/AWS (net plugin)");
        // The plugin loaded but a connection fell back to sockets: sockets.
        let log = format!(
            "{ODL}halo1:5120:5180 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
        );
        assert!(matches!(parse(&log).used(), Used::Socket { .. }));
    }

    #[test]
    fn warnings_kept_and_nothing_known_without_net_lines() {
        let l = parse(
            "n:1:2 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable\nplain text\n",
        );
        assert_eq!(l.used(), Used::Unknown);
        assert_eq!(
            l.warnings,
            ["NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable"]
        );
    }
}
