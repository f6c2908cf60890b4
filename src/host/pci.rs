//! PCI identity of a device from its sysfs `uevent`.

use super::reader::Reader;

/// `PCI_SLOT_NAME` from `<device_dir>/uevent` (`0000:c2:00.0`): the address
/// devlink and lspci use.
pub fn slot_name(r: &Reader, device_dir: &str) -> Option<String> {
    r.text_quiet(&format!("{device_dir}/uevent"))?
        .lines()
        .find_map(|l| l.strip_prefix("PCI_SLOT_NAME="))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}
