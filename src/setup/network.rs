//! The data plane: a persistent MTU of 9000 (nmcli, or a netplan file on
//! Ubuntu), the interface trusted by the firewall (firewalld's trusted zone
//! file, or a ufw rule), and an E810 switched from iWARP to RoCE v2.

use super::{Action, Cmd, Distro, Input, Step, When, write_if_changed};
use crate::dataplane::Selection;
use crate::host::rdma::RdmaTransport;

/// firewalld's trusted zone, as the administrator's configuration.
pub const TRUSTED_ZONE: &str = "/etc/firewalld/zones/trusted.xml";
/// firewalld's shipped trusted zone.
pub const TRUSTED_ZONE_VENDOR: &str = "/usr/lib/firewalld/zones/trusted.xml";
/// halobox's netplan file.
pub const NETPLAN_FILE: &str = "/etc/netplan/90-halobox-mtu.yaml";
/// The unit that puts the E810 in RoCE mode at boot.
pub const ROCE_UNIT: &str = "/etc/systemd/system/halobox-e810-roce.service";

const JUMBO: &str = "9000";

const TRUSTED_TEMPLATE: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n\
<zone target=\"ACCEPT\">\n  <short>Trusted</short>\n  \
<description>All network connections are accepted.</description>\n  <forward/>\n</zone>\n";

pub(super) fn steps(input: &Input) -> Vec<Step> {
    let Selection::Chosen(plane) = &input.report.data_plane else {
        return Vec::new();
    };
    let iface = plane.interface.as_str();
    // `--usb4-address` writes the link's MTU and zone in its connection.
    if input.usb4.is_some() && plane.is_usb4() {
        return Vec::new();
    }
    let mut steps = Vec::new();
    if input.failing("net.mtu").is_some() {
        steps.push(mtu(input, iface, plane.mtu));
    }
    if input.failing("net.firewall").is_some()
        && let Some(step) = firewall(input, iface)
    {
        steps.push(step);
    }
    if input.failing("rdma.mode").is_some()
        && let Some(step) = roce(input, plane.rdma.as_ref().map(|r| r.device.as_str()))
    {
        steps.push(step);
    }
    steps
}

fn mtu(input: &Input, iface: &str, now: Option<u32>) -> Step {
    let old = now.map_or("1500".to_string(), |m| m.to_string());
    let mut actions = vec![input.command(Cmd::reversible(
        &["ip", "link", "set", iface, "mtu", JUMBO],
        &["ip", "link", "set", iface, "mtu", &old],
    ))];
    let netplan = input.setup.distro == Distro::Ubuntu
        && (input.setup.has_program("netplan") || input.setup.sysroot.is_some());
    let persistent = if netplan {
        let body = format!(
            "# written by halobox setup: jumbo frames on the data plane\nnetwork:\n  version: 2\n  ethernets:\n    {iface}:\n      mtu: {JUMBO}\n"
        );
        // `netplan generate` warns about a file others can read (it may hold secrets).
        actions.extend(
            write_if_changed(NETPLAN_FILE, input.setup.file(NETPLAN_FILE), body).map(|mut w| {
                if let Action::Write { mode, .. } = &mut w {
                    *mode = Some(0o600);
                }
                w
            }),
        );
        true
    } else if let Some(conn) = &input.setup.nm_connection {
        let old_mtu = input.setup.nm_mtu.clone().unwrap_or_else(|| "auto".into());
        actions.push(input.command(Cmd::reversible(
            &["nmcli", "connection", "modify", conn, "ethernet.mtu", JUMBO],
            &[
                "nmcli",
                "connection",
                "modify",
                conn,
                "ethernet.mtu",
                &old_mtu,
            ],
        )));
        true
    } else {
        actions.push(Action::ByHand {
            what: persist_by_hand(input, iface),
        });
        false
    };
    Step {
        family: "mtu".into(),
        checks: vec!["net.mtu".into()],
        title: if persistent {
            format!("MTU {JUMBO} on {iface}, now and at every boot")
        } else {
            format!("MTU {JUMBO} on {iface}, now (until the next reboot)")
        },
        needs_root: true,
        when: When::Now,
        actions,
    }
}

/// How to keep the MTU at boot when setup has no connection or file to
/// write it to.
fn persist_by_hand(input: &Input, iface: &str) -> String {
    let why = if input.setup.sysroot.is_some() {
        "which tool configures it at boot is not known in a snapshot"
    } else if input.setup.has_program("nmcli") {
        "NetworkManager has no connection on it (or is not running)"
    } else {
        "neither NetworkManager nor netplan manages it"
    };
    format!(
        "keep MTU {JUMBO} on {iface} after a reboot ({why}): set it where {iface} is configured\n\
         ifupdown: `mtu {JUMBO}` in its stanza of /etc/network/interfaces\n\
         systemd-networkd: `MTUBytes={JUMBO}` under [Link] in its .network file\n\
         NetworkManager: sudo nmcli connection modify <its connection> ethernet.mtu {JUMBO}"
    )
}

/// The firewalls doctor judges, each told to trust `iface`: firewalld when
/// it runs (its trusted zone file), ufw when it is enabled and doctor's fix
/// names its rule (a rule already there is not added twice). Zone files
/// alone (NetworkManager ships one) are no running firewall.
fn firewall(input: &Input, iface: &str) -> Option<Step> {
    let fw = &input.facts.firewall;
    let ufw_rule = format!("sudo ufw allow in on {iface}");
    let ufw_drops = input
        .failing("net.firewall")
        .and_then(|c| c.fix.as_deref())
        .is_some_and(|f| f.lines().any(|l| l == ufw_rule));
    let mut actions = Vec::new();
    if fw.firewalld_running {
        let old = input.setup.file(TRUSTED_ZONE);
        let base = old
            .or(input.setup.file(TRUSTED_ZONE_VENDOR))
            .unwrap_or(TRUSTED_TEMPLATE);
        if let Some(w) =
            trust_interface(base, iface).and_then(|new| write_if_changed(TRUSTED_ZONE, old, new))
        {
            actions.push(w);
            actions.push(input.command(Cmd::reload(&["firewall-cmd", "--reload"])));
        }
    }
    if fw.ufw.enabled && ufw_drops {
        actions.push(input.command(Cmd::reversible(
            &["ufw", "allow", "in", "on", iface],
            &["ufw", "delete", "allow", "in", "on", iface],
        )));
    }
    if actions.is_empty() {
        return None;
    }
    Some(Step {
        family: "firewall".into(),
        checks: vec!["net.firewall".into()],
        title: format!("trust the data-plane interface {iface} in the firewall"),
        needs_root: true,
        when: When::Now,
        actions,
    })
}

/// The zone XML with `<interface name="IFACE"/>` added (before `</zone>`),
/// or `None` when it is there already or the XML has no `</zone>`.
fn trust_interface(xml: &str, iface: &str) -> Option<String> {
    let tag = format!("<interface name=\"{iface}\"/>");
    if xml.contains(&tag) {
        return None;
    }
    let at = xml.rfind("</zone>")?;
    let line_start = xml[..at].rfind('\n').map_or(0, |i| i + 1);
    let (head, tail) = xml.split_at(line_start);
    Some(format!("{head}  {tag}\n{tail}"))
}

fn roce(input: &Input, device: Option<&str>) -> Option<Step> {
    let dev = input
        .facts
        .rdma
        .devices
        .iter()
        .find(|d| Some(d.name.as_str()) == device)?;
    if dev.driver.as_deref() != Some("ice") || dev.transport != Some(RdmaTransport::Iwarp) {
        return None;
    }
    let pci = dev.pci_address.clone()?;
    let target = format!("pci/{pci}");
    let param = |name: &str, value: &str, undo: &str| {
        Cmd::reversible(
            &[
                "devlink", "dev", "param", "set", &target, "name", name, "value", value, "cmode",
                "runtime",
            ],
            &[
                "devlink", "dev", "param", "set", &target, "name", name, "value", undo, "cmode",
                "runtime",
            ],
        )
    };
    let iwarp = param("enable_iwarp", "false", "true");
    let roce = param("enable_roce", "true", "false");
    let unit = format!(
        "[Unit]\nDescription=E810 {pci} in RoCE v2 mode (halobox setup)\nAfter=systemd-modules-load.service\n\n[Service]\nType=oneshot\nExecStart=/usr/sbin/{}\nExecStart=/usr/sbin/{}\n\n[Install]\nWantedBy=multi-user.target\n",
        iwarp.line(),
        roce.line()
    );
    let mut actions = vec![input.command(iwarp), input.command(roce)];
    actions.extend(write_if_changed(
        ROCE_UNIT,
        input.setup.file(ROCE_UNIT),
        unit,
    ));
    actions.push(input.command(Cmd::reload(&["systemctl", "daemon-reload"])));
    actions.push(input.command(Cmd::reversible(
        &["systemctl", "enable", "halobox-e810-roce.service"],
        &["systemctl", "disable", "halobox-e810-roce.service"],
    )));
    Some(Step {
        family: "roce".into(),
        checks: vec!["rdma.mode".into()],
        title: format!(
            "{} ({pci}) from iWARP to RoCE v2, now and at every boot",
            dev.name
        ),
        needs_root: true,
        when: When::Now,
        actions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interface_joins_the_zone_once() {
        let out = trust_interface(TRUSTED_TEMPLATE, "enp1s0").unwrap();
        assert!(
            out.contains("  <interface name=\"enp1s0\"/>\n</zone>\n"),
            "{out}"
        );
        assert_eq!(trust_interface(&out, "enp1s0"), None);
    }
}
