//! `cluster enable` and `cluster disable` against the nodes: every node's
//! facts by [`plan::PROBE`] over ssh, the plan, then per node the files
//! written through ssh's stdin ([`plan::WRITE`]: never over a file that
//! lacks the marker) and `systemctl` run there; the manifest records each
//! file as it lands, so `disable` ([`plan::REMOVE`]) takes away exactly
//! those, and only while they carry the marker.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::manifest::{self, Manifest, NodeEntry};
use super::plan::{self, NodeFacts, NodePlan, Options};
use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run::{each_node, remote_node};
use crate::error::UsageError;
use crate::reporter::Reporter;
use crate::shell;

/// How long one step on a node may take.
const STEP: Duration = Duration::from_secs(60);

/// The cluster file as the units name it: absolute (not resolved).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// The serve kept for boot for the cluster file `path` (`serve
/// --recorded`).
pub fn kept_serve(path: &Path) -> Option<crate::serve::request::Spec> {
    manifest::load(&absolute(path))?.serve
}

fn probe(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    marker: &str,
    cluster: &Path,
) -> Result<NodeFacts, String> {
    let is_head = std::ptr::eq(node, cfg.head());
    let head_only = |s: String| if is_head { s } else { String::new() };
    let mut argv: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        plan::PROBE.into(),
        "sh".into(),
        marker.into(),
        plan::engine_of(node).into(),
        head_only(cfg.halobox.clone()),
        head_only(cluster.display().to_string()),
    ];
    argv.extend(plan::unit_names(cfg, node));
    let done = remote_node(cfg, node)
        .run_ok("the probe of `cluster enable`", &argv, STEP)
        .map_err(|e| e.to_string())?;
    plan::parse_facts(&done.stdout).map_err(|e| format!("node {}: {e}", node.label()))
}

/// Every node's facts for the plan, or an error naming each node that
/// could not be looked at (nothing is written then).
fn every_node_facts(
    cfg: &ClusterConfig,
    marker: &str,
    cluster: &Path,
) -> anyhow::Result<Vec<plan::NodeFacts>> {
    let mut got = Vec::new();
    let mut errors = Vec::new();
    for f in each_node(&cfg.nodes, |n| probe(cfg, n, marker, cluster)) {
        match f {
            Ok(f) => got.push(f),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(UsageError(format!(
            "could not look at every node; nothing was written:\n  {}\n  hint: `halobox cluster doctor` checks every node, then run `halobox cluster enable` again",
            errors.join("\n  ")
        ))
        .into());
    }
    Ok(got)
}

/// `cluster enable` of `cfg` (read from `path`): true when every node has
/// its units enabled. `--dry-run` prints the plan and writes nothing.
pub fn enable(
    cfg: &ClusterConfig,
    path: &Path,
    dry_run: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<bool> {
    let cluster = absolute(path);
    let marker = plan::marker(&cluster);
    let serve = crate::serve::state::load(path)
        .or_else(|| crate::serve::state::load(&cluster))
        .and_then(|s| s.args);
    let got = every_node_facts(cfg, &marker, &cluster)?;
    let opts = Options {
        cluster: cluster.clone(),
        env: plan::CARRIED
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.to_string(), v)))
            .collect(),
        serve: serve.clone(),
        on_head: std::net::UdpSocket::bind((cfg.head().ip, 0)).is_ok(),
        uid: nix::unistd::getuid().as_raw(),
    };
    let plans = plan::plan(cfg, &got, &opts).map_err(UsageError)?;
    if dry_run {
        r.out(&plan::render(&plans));
        r.out("Nothing was written (--dry-run).\n");
        return Ok(true);
    }
    let before = manifest::load(&cluster);
    let results = each_node(&cfg.nodes, |node| {
        let p = plans
            .iter()
            .find(|p| p.node == node.label())
            .expect("a plan per node");
        let stale: Vec<String> = before
            .iter()
            .flat_map(|m| &m.nodes)
            .filter(|e| e.ssh == node.ssh)
            .flat_map(|e| &e.files)
            .filter(|f| !p.files.iter().any(|pf| &pf.path == *f))
            .cloned()
            .collect();
        apply(cfg, node, p, &marker, &stale)
    });
    let mut ok = true;
    let mut m = Manifest {
        cluster: cluster.display().to_string(),
        nodes: Vec::new(),
        serve,
    };
    for ((node, p), (written, said, err)) in cfg.nodes.iter().zip(&plans).zip(results) {
        for l in said {
            r.out(&format!("{}: {l}\n", node.label()));
        }
        for n in &p.notes {
            r.out(&format!("{}: note: {n}\n", node.label()));
        }
        let failed = err.is_some();
        if let Some(e) = err {
            ok = false;
            r.out(&format!("{}: FAILED: {e}\n", node.label()));
        }
        // Kept even when the node failed half way: disable removes what
        // landed.
        let mut files = written;
        if let Some(prev) = before
            .iter()
            .flat_map(|b| &b.nodes)
            .find(|e| e.ssh == node.ssh && e.scope == p.scope)
            && failed
        {
            for f in &prev.files {
                if !files.contains(f) {
                    files.push(f.clone());
                }
            }
        }
        if !files.is_empty() {
            m.nodes.push(NodeEntry {
                node: node.label().into(),
                ssh: node.ssh.clone(),
                scope: p.scope,
                files,
            });
        }
    }
    manifest::save(&cluster, &m).map_err(|e| {
        anyhow::anyhow!(
            "the units were written, but the record of them was not: {e}\n  hint: set XDG_STATE_HOME or HOME, then run `halobox cluster enable` again (it rewrites the same files)"
        )
    })?;
    if ok {
        r.out(&format!(
            "enabled: at the next boot every node starts its container, then the head runs `halobox cluster up --cluster {}`{}; `halobox cluster disable` undoes it\n",
            cluster.display(),
            if m.serve.is_some() {
                " and the recorded serve"
            } else {
                ""
            }
        ));
    } else {
        r.note("error: `cluster enable` did not finish on every node (see above); fix that, then run `halobox cluster enable` again (or `halobox cluster disable` to remove what was written)\n");
    }
    Ok(ok)
}

/// Writes `p`'s files on `node`, removes `stale` ones of an earlier
/// enable, runs its commands: the files written, what to say, the error.
fn apply(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    p: &NodePlan,
    marker: &str,
    stale: &[String],
) -> (Vec<String>, Vec<String>, Option<String>) {
    let n = remote_node(cfg, node);
    let mut written = Vec::new();
    let mut said = Vec::new();
    if !stale.is_empty() {
        let mut argv = remove_argv(p.scope, marker);
        argv.extend(stale.iter().cloned());
        match n.run_ok("the removal of stale units", &argv, STEP) {
            Ok(done) => said.extend(done.stdout.lines().map(str::to_string)),
            Err(e) => return (stale.to_vec(), said, Some(e.to_string())),
        }
    }
    for f in &p.files {
        let argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            plan::WRITE.into(),
            "sh".into(),
            f.path.clone(),
            marker.into(),
        ];
        match n.run_with_input("writing a unit", &argv, f.content.as_bytes(), STEP) {
            Ok(_) => {
                written.push(f.path.clone());
                said.push(format!("wrote {}", f.path));
            }
            Err(e) => return (written, said, Some(e.to_string())),
        }
    }
    for c in p.commands() {
        match n.run_ok(&format!("`{}`", shell::line(&c)), &c, STEP) {
            Ok(_) => said.push(format!("ran {}", shell::line(&c))),
            Err(e) => return (written, said, Some(e.to_string())),
        }
    }
    (written, said, None)
}

fn remove_argv(scope: plan::Scope, marker: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        plan::REMOVE.into(),
        "sh".into(),
        match scope {
            plan::Scope::System => "system",
            plan::Scope::User => "user",
        }
        .into(),
        marker.into(),
    ]
}

/// `cluster disable` of `cfg` (read from `path`): on every node of the
/// manifest, each file `enable` wrote is disabled and removed while it
/// carries the marker; true when every node was done.
pub fn disable(
    cfg: &ClusterConfig,
    path: &Path,
    dry_run: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<bool> {
    let cluster = absolute(path);
    let marker = plan::marker(&cluster);
    let Some(m) = manifest::load(&cluster) else {
        r.out(&format!(
            "nothing is enabled for {} (no record of `halobox cluster enable` in this user's state folder)\n",
            cluster.display()
        ));
        return Ok(true);
    };
    let node_of = |e: &NodeEntry| match cfg.nodes.iter().find(|n| n.ssh == e.ssh) {
        Some(n) => remote_node(cfg, n),
        None => crate::remote::Node::new(
            &e.ssh,
            &cfg.ssh_options,
            format!("node {} ({})", e.node, e.ssh),
            "install systemd's `systemctl` there".into(),
        ),
    };
    if dry_run {
        for e in &m.nodes {
            let sc = shell::line(&e.scope.systemctl());
            r.out(&format!("node {}:\n", e.node));
            for f in &e.files {
                let unit = f.rsplit('/').next().unwrap_or(f);
                r.out(&format!(
                    "  when {f} still starts with the marker line:\n    run: {sc} disable {unit}\n    remove {f}\n"
                ));
            }
            r.out(&format!(
                "  run: {sc} daemon-reload (when a systemd manager runs there)\n"
            ));
        }
        r.out(&format!(
            "  (the marker line: {marker})\nNothing was removed (--dry-run).\n"
        ));
        return Ok(true);
    }
    let results: Vec<Result<String, String>> = crate::fan_out::each(&m.nodes, |_, e| {
        let mut argv = remove_argv(e.scope, &marker);
        argv.extend(e.files.iter().cloned());
        node_of(e)
            .run_ok("`cluster disable`", &argv, STEP)
            .map(|d| d.stdout)
            .map_err(|err| err.to_string())
    });
    let mut left = Manifest {
        nodes: Vec::new(),
        ..m.clone()
    };
    for (e, res) in m.nodes.iter().zip(results) {
        match res {
            Ok(out) => {
                for l in out.lines().filter(|l| !l.trim().is_empty()) {
                    r.out(&format!("{}: {}\n", e.node, crate::remote::printable(l)));
                }
            }
            Err(err) => {
                r.out(&format!("{}: FAILED: {err}\n", e.node));
                left.nodes.push(e.clone());
            }
        }
    }
    if left.nodes.is_empty() {
        manifest::remove(&cluster)?;
        r.out("disabled: nothing of `halobox cluster enable` is left on the nodes\n");
        Ok(true)
    } else {
        manifest::save(&cluster, &left)?;
        r.note("error: some nodes were not reached (see above); their files are still recorded: run `halobox cluster disable` again once they answer\n");
        Ok(false)
    }
}
