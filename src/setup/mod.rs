//! Setup: the host fixes `doctor` prints, as a plan of file writes and
//! commands that [`apply`] carries out and [`journal`] can undo (backups,
//! atomic writes); [`flow`] is the whole `halobox setup` run (plan, confirm
//! per group through an `Ask`, refuse without root, apply, checks before
//! and after, `--undo`). `facts.rs` reads the files a fix touches, the next
//! boot's command line, the user to fix and the tools; one planner per fix
//! family (`memlock.rs`, `groups.rs`, `kernel.rs`, `network.rs`: MTU,
//! firewall, RoCE mode; `usb4.rs`: the NetworkManager connection of a USB4
//! link, asked for by `--usb4-address`); `diff.rs` and `render.rs` are its
//! diffs and text.
//!
//! [`plan`] is pure: doctor's report, the host facts and the current content
//! of every file a fix would touch ([`SetupFacts`]) give the same steps every
//! time. A fix whose files are already in place plans nothing, so a second
//! run is empty even before a re-login or reboot makes the change visible.

pub mod apply;
pub mod diff;
mod facts;
pub mod flow;
mod groups;
mod hold;
pub mod journal;
mod kernel;
pub mod lock;
mod memlock;
mod network;
pub mod render;
pub mod usb4;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use facts::{Distro, SetupFacts, gather};

use crate::doctor::{Report, Status};
use crate::host::HostFacts;
use crate::host::net::Ipv4Net;

/// When a step's change is seen by the system.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// As soon as it is applied.
    Now,
    /// After the user logs out and back in.
    Relogin,
    /// After a reboot.
    Reboot,
}

impl When {
    /// The group heading.
    pub fn heading(self) -> &'static str {
        match self {
            When::Now => "takes effect now",
            When::Relogin => "takes effect after logging out and back in",
            When::Reboot => "takes effect after a reboot",
        }
    }
}

/// One command of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Cmd {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The command that reverses it; `None` for commands that only make the
    /// system read files again (daemon-reload, update-grub): `--undo` runs
    /// those again after the files are restored.
    pub undo: Option<Vec<String>>,
}

impl Cmd {
    /// A command reversed by `undo`.
    pub fn reversible(argv: &[&str], undo: &[&str]) -> Self {
        Self {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            undo: Some(undo.iter().map(|s| s.to_string()).collect()),
        }
    }

    /// A command that re-reads files (run again by `--undo`).
    pub fn reload(argv: &[&str]) -> Self {
        Self {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            undo: None,
        }
    }

    /// The command as one shell-quoted line.
    pub fn line(&self) -> String {
        crate::shell::line(&self.argv)
    }
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Write a whole file (created, or replaced after a backup).
    Write {
        /// Host path.
        path: String,
        /// What is there now (`None`: the file does not exist).
        old: Option<String>,
        /// What will be there.
        new: String,
        /// The user (uid, gid) a file of theirs is written as, when root
        /// writes it for them on the live host.
        owner: Option<(u32, u32)>,
        /// Mode of a created file (`null`: 0644).
        mode: Option<u32>,
    },
    /// Run a command on the live host.
    Run(Cmd),
    /// A command that is not run: `why` says why (e.g. under `--sysroot`).
    NotRun {
        /// The command.
        cmd: Cmd,
        /// Why it is not run.
        why: String,
    },
    /// Something setup cannot do that the fix still needs: printed, and
    /// named again in what is left to do.
    ByHand {
        /// What to do.
        what: String,
    },
}

impl Action {
    /// True for a file write or a command that runs.
    pub fn applies(&self) -> bool {
        matches!(self, Action::Write { .. } | Action::Run(_))
    }

    /// What is left to do after this action, when anything: a command
    /// listed but not run (with why), or an instruction.
    pub fn left_to_do(&self) -> Option<String> {
        match self {
            Action::NotRun { cmd, why } => Some(format!("{}   # {why}", cmd.line())),
            Action::ByHand { what } => Some(what.clone()),
            _ => None,
        }
    }
}

/// One fix: what it changes, for which checks, and when it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Step {
    /// The fix family (`memlock`, `podman`, `groups`, `kernel`, `mtu`, `firewall`, `roce`).
    pub family: String,
    /// The doctor checks it fixes.
    pub checks: Vec<String>,
    /// One line saying what it does.
    pub title: String,
    /// Needs root (refused without it on the live host).
    pub needs_root: bool,
    /// When it takes effect.
    pub when: When,
    /// Files and commands, in order.
    pub actions: Vec<Action>,
}

/// A fix halobox cannot apply: printed as an instruction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Manual {
    /// The doctor check.
    pub check: String,
    /// Why it failed.
    pub summary: String,
    /// What to do.
    pub fix: String,
}

/// Everything setup would do.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Plan {
    /// The snapshot written to, or `null` for this host.
    pub sysroot: Option<String>,
    /// The user whose limits, groups and user units are fixed.
    pub user: Option<String>,
    /// Steps, grouped by [`When`] in this order.
    pub steps: Vec<Step>,
    /// Failing checks halobox cannot fix.
    pub manual: Vec<Manual>,
}

impl Plan {
    /// True when there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The steps that take effect at `when`.
    pub fn group(&self, when: When) -> Vec<&Step> {
        self.steps.iter().filter(|s| s.when == when).collect()
    }
}

/// Which fixes to plan (`--only`, `--skip`: a check id or a family name),
/// and the USB4 connection asked for (`--usb4-address`).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these.
    pub only: Vec<String>,
    /// Not these.
    pub skip: Vec<String>,
    /// The address of this node on its USB4 link.
    pub usb4: Option<Ipv4Net>,
}

impl Selection {
    fn names(step: &Step) -> impl Iterator<Item = &str> {
        std::iter::once(step.family.as_str()).chain(step.checks.iter().map(String::as_str))
    }

    fn keeps(&self, step: &Step) -> bool {
        let hit = |list: &[String]| Self::names(step).any(|n| list.iter().any(|o| o == n));
        (self.only.is_empty() || hit(&self.only)) && !hit(&self.skip)
    }

    /// Names given that match no family or check id.
    pub fn unknown(&self) -> Vec<String> {
        self.only
            .iter()
            .chain(&self.skip)
            .filter(|n| !FAMILIES.contains(&n.as_str()) && !FIXED_CHECKS.contains(&n.as_str()))
            .cloned()
            .collect()
    }
}

/// Fix families, as `--only`/`--skip` accept them.
pub const FAMILIES: [&str; 8] = [
    "memlock", "podman", "groups", "kernel", "mtu", "firewall", "roce", "usb4",
];

/// The doctor checks setup can fix.
pub const FIXED_CHECKS: [&str; 13] = [
    "memlock.user",
    "memlock.podman_service",
    "gpu.kfd_access",
    "gpu.render_access",
    "rdma.access",
    "kernel.iommu",
    "kernel.pci_realloc",
    "kernel.pcie_aspm",
    "kernel.gtt",
    "net.mtu",
    "net.firewall",
    "net.usb4",
    "rdma.mode",
];

/// The context every family planner gets.
pub struct Input<'a> {
    /// Host facts.
    pub facts: &'a HostFacts,
    /// Doctor's report on them.
    pub report: &'a Report,
    /// File contents and tools setup needs.
    pub setup: &'a SetupFacts,
    /// `--usb4-address`.
    pub usb4: Option<Ipv4Net>,
}

impl Input<'_> {
    /// The check `id` when it is WARN or FAIL.
    pub fn failing(&self, id: &str) -> Option<&crate::doctor::Check> {
        self.report
            .checks
            .iter()
            .find(|c| c.id == id && c.is_fault())
    }

    /// `argv` as a step action: run on the live host; under `--sysroot`, or
    /// when the program is not installed, listed as not run.
    pub fn command(&self, cmd: Cmd) -> Action {
        if self.setup.sysroot.is_some() {
            return Action::NotRun {
                cmd,
                why: "not run under --sysroot".into(),
            };
        }
        if !self.setup.has_program(&cmd.argv[0]) {
            let why = format!("{} is not installed", cmd.argv[0]);
            return Action::NotRun { cmd, why };
        }
        Action::Run(cmd)
    }
}

/// Every step that fixes a WARN/FAIL of `report`, and the failures left as
/// instructions (those no step can fix, a check setup fixes elsewhere
/// among them).
pub fn plan(facts: &HostFacts, report: &Report, setup: &SetupFacts, sel: &Selection) -> Plan {
    let input = Input {
        facts,
        report,
        setup,
        usb4: sel.usb4,
    };
    let mut steps = Vec::new();
    steps.extend(memlock::steps(&input));
    steps.extend(groups::steps(&input));
    steps.extend(kernel::steps(&input));
    steps.extend(network::steps(&input));
    steps.extend(usb4::steps(&input));
    let covered: Vec<String> = steps.iter().flat_map(|s| s.checks.clone()).collect();
    steps.retain(|s| sel.keeps(s));
    steps.sort_by_key(|s| s.when);
    let (steps, inert): (Vec<Step>, Vec<Step>) = steps
        .into_iter()
        .partition(|s| s.actions.iter().any(Action::applies));
    let mut manual: Vec<Manual> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail || c.status == Status::Warn)
        .filter(|c| !FIXED_CHECKS.contains(&c.id.as_str()) || !covered.contains(&c.id))
        .map(|c| Manual {
            check: c.id.clone(),
            summary: c.summary.clone(),
            fix: c.fix.clone().unwrap_or_default(),
        })
        .collect();
    manual.extend(inert.into_iter().map(|s| {
        Manual {
            check: s.checks.join(", "),
            summary: s.title,
            fix: s
                .actions
                .iter()
                .filter_map(Action::left_to_do)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }));
    Plan {
        sysroot: setup.sysroot.clone(),
        user: setup.user.as_ref().map(|u| u.name.clone()),
        steps,
        manual,
    }
}

/// A file write when `new` differs from what is there, else nothing.
pub(crate) fn write_if_changed(path: &str, old: Option<&str>, new: String) -> Option<Action> {
    (old != Some(new.as_str())).then(|| Action::Write {
        path: path.to_string(),
        old: old.map(str::to_string),
        new,
        owner: None,
        mode: None,
    })
}
