//! `setup --usb4-address ADDR/PREFIX`: the guides' steps for a USB4 pair as
//! one NetworkManager keyfile for the thunderbolt-net interface (static
//! address, MTU 65520, firewalld's trusted zone for that interface only),
//! loaded and brought up; `--undo` takes it down and removes it.

use super::{Action, Cmd, Input, Step, When, write_if_changed};
use crate::doctor::{JUMBO_MTU, Status, USB4_MTU};
use crate::host::net::Ipv4Net;

/// Where NetworkManager keeps the connections it owns.
pub const NM_DIR: &str = "/etc/NetworkManager/system-connections";

/// The connection's name for `iface`.
pub fn connection(iface: &str) -> String {
    format!("halobox-usb4-{iface}")
}

/// The keyfile's path for `iface`.
pub fn keyfile_path(iface: &str) -> String {
    format!("{NM_DIR}/{}.nmconnection", connection(iface))
}

/// The keyfile: an ethernet connection bound to `iface` by name, manual
/// IPv4, no IPv6, the MTU and the trusted zone.
pub fn keyfile(iface: &str, addr: Ipv4Net, mtu: u32) -> String {
    format!(
        "# written by halobox setup: the USB4 link to the peer node\n\
         [connection]\nid={id}\ntype=ethernet\ninterface-name={iface}\nzone=trusted\nautoconnect=true\n\n\
         [ethernet]\nmtu={mtu}\n\n\
         [ipv4]\nmethod=manual\naddress1={}/{}\n\n\
         [ipv6]\nmethod=disabled\n",
        addr.address,
        addr.prefix_len,
        id = connection(iface)
    )
}

pub(super) fn steps(input: &Input) -> Vec<Step> {
    let Some(addr) = input.usb4 else {
        return Vec::new();
    };
    let usb4: Vec<&str> = input
        .facts
        .network
        .usb4()
        .map(|i| i.name.as_str())
        .collect();
    let [iface] = usb4.as_slice() else {
        return vec![by_hand(&usb4)];
    };
    // The connection fixes a link without an address, not a cable that is out.
    let unaddressed = input
        .facts
        .network
        .interface(iface)
        .is_some_and(|i| i.ipv4.is_empty());
    let mut checks: Vec<String> = vec!["net.mtu".into(), "net.firewall".into()];
    if unaddressed {
        checks.insert(0, "net.usb4".into());
    }
    // A link whose frames of the MTU set now did not come back keeps 1500.
    let mtu = match input.report.checks.iter().find(|c| c.id == "net.jumbo") {
        Some(c) if c.status == Status::Fail => 1500,
        _ => USB4_MTU,
    };
    let path = keyfile_path(iface);
    let id = connection(iface);
    let mut actions: Vec<Action> =
        write_if_changed(&path, input.setup.file(&path), keyfile(iface, addr, mtu))
            .map(|mut w| {
                // NetworkManager ignores a keyfile others can read.
                if let Action::Write { mode, .. } = &mut w {
                    *mode = Some(0o600);
                }
                w
            })
            .into_iter()
            .collect();
    if actions.is_empty() {
        return Vec::new();
    }
    actions.push(input.command(Cmd::reload(&["nmcli", "connection", "reload"])));
    actions.push(input.command(Cmd::reversible(
        &["nmcli", "connection", "up", &id],
        &["nmcli", "connection", "down", &id],
    )));
    vec![Step {
        family: "usb4".into(),
        checks,
        title: format!(
            "{}/{} on the USB4 link {iface}, MTU {mtu}, in firewalld's trusted zone (NetworkManager connection {id})",
            addr.address, addr.prefix_len
        ),
        needs_root: true,
        when: When::Now,
        actions,
    }]
}

/// No single thunderbolt-net interface to configure: what to do instead.
fn by_hand(found: &[&str]) -> Step {
    let what = if found.is_empty() {
        "no thunderbolt-net interface here: plug the USB4/Thunderbolt cable between the nodes and load the driver (sudo modprobe thunderbolt-net), then run setup --usb4-address again".to_string()
    } else {
        format!(
            "several USB4 interfaces ({}): configure the one cabled to the peer by hand (nmcli connection add type ethernet ifname IF ipv4.method manual ipv4.addresses ADDR/PREFIX ethernet.mtu {JUMBO_MTU} connection.zone trusted)",
            found.join(", ")
        )
    };
    Step {
        family: "usb4".into(),
        checks: vec!["net.usb4".into()],
        title: "a NetworkManager connection for the USB4 link".into(),
        needs_root: true,
        when: When::Now,
        actions: vec![Action::ByHand { what }],
    }
}
