//! `cluster enable` and `cluster disable`: the cluster comes back after a
//! reboot through systemd units. [`plan`] (pure) turns every node's facts
//! into unit files and commands, [`manifest`] keeps what was written (and
//! the serve kept for boot) in the state folder, [`run`] reads the facts
//! over ssh, writes and enables, or disables and removes exactly what
//! `enable` wrote (the probe, the writes and `systemctl` over ssh).

pub mod manifest;
pub mod plan;
pub mod run;
