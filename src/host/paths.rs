//! Host paths that decide how a toolbx container is bound to the host.

use super::reader::Reader;

/// Paths toolbx binds into its containers when they exist on the host.
pub const TOOLBOX_OPTIONAL: [&str; 5] = [
    "/run/dbus/system_bus_socket",
    "/media",
    "/mnt",
    "/run/media",
    "/etc/profile.d/toolbox.sh",
];

/// The paths of [`TOOLBOX_OPTIONAL`] that exist.
pub fn read(r: &Reader) -> Vec<String> {
    TOOLBOX_OPTIONAL
        .iter()
        .filter(|p| r.exists(p))
        .map(|p| p.to_string())
        .collect()
}
