//! `halobox detect`'s text: every host fact as indented sections (beside
//! [`super::render`], doctor's).

use std::fmt::Write;

use crate::host::HostFacts;

fn or_dash(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// Renders facts as indented sections.
pub fn human(f: &HostFacts) -> String {
    let mut o = String::new();
    let source = f
        .sysroot
        .as_deref()
        .map(|s| format!("snapshot {s}"))
        .unwrap_or_else(|| "this host".into());
    let _ = writeln!(o, "halobox detect: {source}");
    gpu(&mut o, f);
    rdma(&mut o, f);
    network(&mut o, f);
    limits(&mut o, f);
    user(&mut o, f);
    kernel(&mut o, f);
    environment(&mut o, f);
    tools(&mut o, f);
    firewall(&mut o, f);
    unread(&mut o, f);
    o
}

/// The KFD nodes with their gfx targets, and the GPU device nodes.
fn gpu(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nGPU");
    if !f.gpu.kfd_topology {
        let _ = writeln!(o, "  no KFD topology (/sys/class/kfd absent)");
    }
    for n in &f.gpu.nodes {
        match &n.gfx_target {
            Some(t) => {
                let _ = writeln!(
                    o,
                    "  node {}: {t} (gfx_target_version {}), render {}",
                    n.id,
                    or_dash(n.gfx_target_version),
                    or_dash(n.render_node.as_deref())
                );
            }
            None => {
                let _ = writeln!(o, "  node {}: CPU", n.id);
            }
        }
    }
    for d in f.gpu.kfd.iter().chain(&f.gpu.dri) {
        let _ = writeln!(
            o,
            "  {} mode {} uid {} gid {}",
            d.path,
            or_dash(d.mode.as_deref()),
            or_dash(d.uid),
            or_dash(d.gid)
        );
    }
}

/// Each RDMA device: transport, PCI, driver, firmware, link, ports and GIDs.
fn rdma(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nRDMA");
    if f.rdma.devices.is_empty() {
        let _ = writeln!(
            o,
            "  no RDMA devices (/sys/class/infiniband empty or absent)"
        );
    }
    for d in &f.rdma.devices {
        let transport = match d.transport {
            Some(crate::host::rdma::RdmaTransport::Roce) => "RoCE",
            Some(crate::host::rdma::RdmaTransport::Iwarp) => "iWARP",
            Some(crate::host::rdma::RdmaTransport::Infiniband) => "InfiniBand",
            None => "unknown transport",
        };
        let _ = writeln!(
            o,
            "  {}: {transport} (node type {}), PCI {}:{}, driver {}, fw {}, netdevs {}",
            d.name,
            or_dash(d.node_type.as_deref()),
            or_dash(d.vendor_id.as_deref()),
            or_dash(d.device_id.as_deref()),
            or_dash(d.driver.as_deref()),
            or_dash(d.fw_ver.as_deref()),
            if d.netdevs.is_empty() {
                "-".into()
            } else {
                d.netdevs.join(",")
            }
        );
        if let Some(p) = &d.pcie {
            let _ = writeln!(
                o,
                "    PCIe {} GT/s x{} (max {} GT/s x{})",
                or_dash(p.current_speed_gts),
                or_dash(p.current_width),
                or_dash(p.max_speed_gts),
                or_dash(p.max_width)
            );
        }
        for p in &d.ports {
            let _ = writeln!(
                o,
                "    port {}: {}/{} {} {}",
                p.number,
                or_dash(p.state.as_deref()),
                or_dash(p.phys_state.as_deref()),
                or_dash(p.link_layer.as_deref()),
                or_dash(p.rate.as_deref())
            );
            for g in &p.gids {
                let _ = writeln!(
                    o,
                    "      gid {:>3} {} {} {}{}",
                    g.index,
                    g.gid,
                    or_dash(g.gid_type.as_deref()),
                    or_dash(g.netdev.as_deref()),
                    g.ipv4.map(|ip| format!(" ({ip})")).unwrap_or_default()
                );
            }
        }
    }
    for d in &f.rdma.dev_nodes {
        let _ = writeln!(o, "  {} mode {}", d.path, or_dash(d.mode.as_deref()));
    }
}

/// Each interface: MTU, state, IPv4 addresses, a USB4 link.
fn network(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nNetwork");
    for i in &f.network.interfaces {
        let addrs: Vec<String> = i
            .ipv4
            .iter()
            .map(|a| format!("{}/{}", a.address, a.prefix_len))
            .collect();
        let usb4 = i.usb4.as_ref().map(|l| {
            format!(
                ", USB4 link (thunderbolt-net{}{})",
                l.xdomain
                    .as_ref()
                    .map(|x| format!(" {x}"))
                    .unwrap_or_default(),
                l.total_gbps()
                    .map(|g| format!(", {g} Gb/s"))
                    .unwrap_or_default()
            )
        });
        let _ = writeln!(
            o,
            "  {}: mtu {} {} {}{}",
            i.name,
            or_dash(i.mtu),
            or_dash(i.operstate.as_deref()),
            if addrs.is_empty() {
                "no IPv4".into()
            } else {
                addrs.join(" ")
            },
            usb4.unwrap_or_default()
        );
    }
}

/// memlock: this process, the podman services, the next login, the units.
fn limits(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nLimits");
    match &f.limits.memlock {
        Some(l) => {
            let _ = writeln!(
                o,
                "  memlock (this process): soft {}, hard {}",
                l.soft, l.hard
            );
        }
        None => {
            let _ = writeln!(o, "  memlock (this process): unknown");
        }
    }
    if f.limits.podman_services.is_empty() {
        let _ = writeln!(o, "  no podman API service running");
    }
    for p in &f.limits.podman_services {
        let _ = writeln!(
            o,
            "  podman service pid {}: memlock {}",
            p.pid,
            p.limits
                .memlock
                .map(|l| format!("soft {}, hard {}", l.soft, l.hard))
                .unwrap_or_else(|| "unknown".into())
        );
    }

    if let Some(c) = &f.limits.configured {
        let side = |s: &Option<crate::host::pam_limits::Setting>| {
            s.as_ref()
                .map_or("unset".to_string(), |s| format!("{} ({})", s.value, s.file))
        };
        let _ = writeln!(
            o,
            "  memlock at the next login{}: soft {}, hard {}",
            if c.every_login {
                " (every login: the user is not known)"
            } else {
                ""
            },
            side(&c.soft),
            side(&c.hard)
        );
    }
    for u in f.limits.podman_units.iter().filter(|u| u.file.is_some()) {
        let _ = writeln!(
            o,
            "  {} ({}) LimitMEMLOCK: {} ({})",
            u.unit,
            match u.scope {
                crate::host::unit_limits::Scope::System => "system",
                crate::host::unit_limits::Scope::User => "user",
            },
            u.memlock.map_or("reset".to_string(), |l| format!(
                "soft {}, hard {}",
                l.soft, l.hard
            )),
            or_dash(u.file.as_deref())
        );
    }
}

/// The user, its groups and the device groups.
fn user(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nUser");
    let _ = writeln!(
        o,
        "  {} uid {} gid {} groups {:?}",
        or_dash(f.user.name.as_deref()),
        or_dash(f.user.uid),
        or_dash(f.user.gid),
        f.user.groups
    );
    for g in &f.user.device_groups {
        let _ = writeln!(
            o,
            "  group {}: gid {}, member {}",
            g.name,
            or_dash(g.gid),
            g.member
                .map(|m| if m { "yes" } else { "no" })
                .unwrap_or("unknown")
        );
    }
}

/// The kernel release, command line, memory and the next boot.
fn kernel(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nKernel");
    let from = match f.kernel.release_from.as_deref() {
        Some(from) if from != crate::host::kernel::OSRELEASE => format!(" (from {from})"),
        _ => String::new(),
    };
    let _ = writeln!(
        o,
        "  release {}{from}",
        or_dash(f.kernel.release.as_deref())
    );
    let _ = writeln!(o, "  cmdline {}", or_dash(f.kernel.cmdline.as_deref()));
    let _ = writeln!(o, "  MemTotal {} KiB", or_dash(f.kernel.mem_total_kib));
    if let Some(next) = f.boot.next_boot() {
        let _ = writeln!(
            o,
            "  next boot {} ({})",
            next.cmdline,
            next.files.join(", ")
        );
    }
}

/// GPU/NCCL override variables set.
fn environment(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nEnvironment");
    if f.env_hazards.is_empty() {
        let _ = writeln!(o, "  no GPU/NCCL override variables set");
    }
    for v in &f.env_hazards {
        let _ = writeln!(o, "  {}={}", v.name, v.value);
    }
}

/// The tools found and the NIC drivers.
fn tools(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nTools");
    for t in &f.tools {
        let _ = writeln!(
            o,
            "  {:<12} {}{}",
            t.name,
            or_dash(t.path.as_deref()),
            t.version
                .as_deref()
                .map(|v| format!("  ({v})"))
                .unwrap_or_default()
        );
    }
    for d in &f.nic_drivers {
        let _ = writeln!(
            o,
            "  ethtool -i {}: driver {}, firmware {}",
            d.netdev,
            or_dash(d.driver.as_deref()),
            or_dash(d.firmware_version.as_deref())
        );
    }
}

/// firewalld and its zones.
fn firewall(o: &mut String, f: &HostFacts) {
    let _ = writeln!(o, "\nFirewall");
    let _ = writeln!(
        o,
        "  firewalld {}, default zone {}, trusted {}",
        if f.firewall.firewalld_running {
            "running"
        } else {
            "not running"
        },
        or_dash(f.firewall.default_zone.as_deref()),
        if f.firewall.trusted_interfaces.is_empty() {
            "-".into()
        } else {
            f.firewall.trusted_interfaces.join(",")
        }
    );
}

/// The files that could not be read.
fn unread(o: &mut String, f: &HostFacts) {
    if !f.read_issues.is_empty() {
        let _ = writeln!(o, "\nCould not read");
        for i in &f.read_issues {
            let _ = writeln!(o, "  {}: {}", i.path, i.error);
        }
    }
}
