//! `cluster enable`'s plan, pure: every node's facts (read over ssh by
//! [`PROBE`]) and the options in, the unit files and commands out, per
//! node. Each node with a container gets a unit that starts that container
//! by name at boot (`podman start NAME` / `docker start NAME`: the
//! container halobox made, so a `refresh` that replaces it keeps its unit);
//! the head also gets `halobox-cluster.service` (`cluster up` with a
//! bounded retry for late nodes) and, for a recorded serve,
//! `halobox-serve.service` (the serve in the foreground, restarted on
//! failure). Root's units are system units (`/etc/systemd/system`), a
//! user's are user units (`~/.config/systemd/user`, which need lingering).
//! Every file starts with [`marker`]: `disable` removes only files that
//! carry it. No unit holds a secret: they name files, never values.

use std::path::Path;

use crate::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};
use crate::serve::request::Spec;

/// The unit that runs `cluster up` on the head.
pub const CLUSTER_UNIT: &str = "halobox-cluster.service";
/// The unit that runs the recorded serve on the head.
pub const SERVE_UNIT: &str = "halobox-serve.service";

/// Seconds between two tries of `cluster up` (a node that boots late).
pub const RETRY_SEC: u64 = 30;
/// How many tries of `cluster up` within [`RETRY_WINDOW_SEC`].
pub const RETRY_BURST: u32 = 10;
/// The window of [`RETRY_BURST`].
pub const RETRY_WINDOW_SEC: u64 = 3600;

/// The variables the head's units carry from the `enable` run, so halobox
/// finds the same files there (its state folder, the Hugging Face cache).
/// Never a secret: a name [`crate::proc::is_secret`] names is not here.
pub const CARRIED: &[&str] = &[
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
];

/// Whether a recorded serve gets a unit that starts it at boot: one
/// recorded with `serve --restart` does.
pub fn wants_serve_unit(spec: &Spec) -> bool {
    spec.restart.is_some()
}

/// The first line of every file `enable` writes for the cluster file
/// `cluster`.
pub fn marker(cluster: &Path) -> String {
    format!(
        "# Written by `halobox cluster enable` for {}; `halobox cluster disable` removes it.",
        cluster.display().to_string().replace(['\n', '\r'], "?")
    )
}

/// System units (root) or the user's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `/etc/systemd/system`, `systemctl`.
    System,
    /// `~/.config/systemd/user`, `systemctl --user`.
    User,
}

impl Scope {
    /// `systemctl` with its scope flag.
    pub fn systemctl(self) -> Vec<String> {
        match self {
            Scope::System => vec!["systemctl".into()],
            Scope::User => vec!["systemctl".into(), "--user".into()],
        }
    }

    /// Where its units go, for a user whose home is `home`.
    pub fn dir(self, home: &str) -> String {
        match self {
            Scope::System => "/etc/systemd/system".into(),
            Scope::User => format!("{}/.config/systemd/user", home.trim_end_matches('/')),
        }
    }

    fn target(self) -> &'static str {
        match self {
            Scope::System => "multi-user.target",
            Scope::User => "default.target",
        }
    }
}

/// A file there now, as the probe saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// None.
    Absent,
    /// One `enable` wrote for this cluster file (it carries the marker).
    Ours,
    /// Somebody else's.
    Foreign,
}

/// What one node told the probe.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    /// `id -u` of the ssh user.
    pub uid: u32,
    /// Its name.
    pub user: String,
    /// Its home.
    pub home: String,
    /// A systemd manager runs there (`/run/systemd/system` exists).
    pub systemd: bool,
    /// The user's manager lingers (`/var/lib/systemd/linger/USER`).
    pub linger: bool,
    /// `systemctl`'s path there (empty: none).
    pub systemctl: String,
    /// The container engine's path there (empty: none, or no container).
    pub engine: String,
    /// halobox's path there (the head only; empty elsewhere or none).
    pub halobox: String,
    /// The files of the unit names asked about, each path with its state.
    pub files: Vec<(String, FileState)>,
    /// Who may change what the head's units run and read: halobox and the
    /// cluster file (as named and with links resolved) and their folders.
    pub guards: Vec<Guard>,
}

/// One file or folder a boot unit depends on, as the probe saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// Its owner's uid.
    pub uid: u32,
    /// Its permission bits (`stat -c %a`, sticky bit included).
    pub mode: u32,
    /// A folder (else a file).
    pub folder: bool,
    /// Its path.
    pub path: String,
}

impl Guard {
    /// Why a user other than `uid` (and root) could change it, if one can:
    /// another owner, or write permission for group or others (a folder
    /// with the sticky bit lets nobody replace a file they do not own).
    pub fn fault(&self, uid: u32) -> Option<String> {
        if self.uid != 0 && self.uid != uid {
            return Some(format!("is owned by uid {}", self.uid));
        }
        let sticky = self.folder && self.mode & 0o1000 != 0;
        (self.mode & 0o022 != 0 && !sticky)
            .then(|| format!("is writable by others (mode {:04o})", self.mode & 0o7777))
    }
}

/// Reads the probe's output.
pub fn parse_facts(stdout: &str) -> Result<NodeFacts, String> {
    let mut f = NodeFacts {
        uid: u32::MAX,
        user: String::new(),
        home: String::new(),
        systemd: false,
        linger: false,
        systemctl: String::new(),
        engine: String::new(),
        halobox: String::new(),
        files: Vec::new(),
        guards: Vec::new(),
    };
    for line in stdout.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        match k {
            "uid" => f.uid = v.trim().parse().map_err(|_| format!("uid {v:?}"))?,
            "user" => f.user = v.into(),
            "home" => f.home = v.into(),
            "systemd" => f.systemd = v == "yes",
            "linger" => f.linger = v == "yes",
            "systemctl" => f.systemctl = v.into(),
            "engine" => f.engine = v.into(),
            "halobox" => f.halobox = v.into(),
            "guard" => {
                let mut w = v.splitn(4, ' ');
                let (Some(uid), Some(mode), Some(kind), Some(path)) =
                    (w.next(), w.next(), w.next(), w.next())
                else {
                    return Err(format!(
                        "a guard line without uid, mode, kind and path: {v:?}"
                    ));
                };
                f.guards.push(Guard {
                    uid: uid.parse().map_err(|_| format!("guard uid {uid:?}"))?,
                    mode: u32::from_str_radix(mode, 8)
                        .map_err(|_| format!("guard mode {mode:?}"))?,
                    folder: kind == "d",
                    path: path.into(),
                });
            }
            "file" => {
                let (state, path) = v.split_once(' ').ok_or("a file line without a path")?;
                let state = match state {
                    "absent" => FileState::Absent,
                    "ours" => FileState::Ours,
                    _ => FileState::Foreign,
                };
                f.files.push((path.into(), state));
            }
            _ => {}
        }
    }
    if f.uid == u32::MAX || f.home.is_empty() {
        return Err("the probe printed no uid or home".into());
    }
    Ok(f)
}

/// The probe run on each node (`sh -c PROBE sh MARKER ENGINE HALOBOX
/// CLUSTER UNIT...`; HALOBOX and CLUSTER given for the head only):
/// read-only. `guard=UID MODE f|d PATH` for halobox and the cluster file,
/// as named and with links resolved, and for each one's folder.
pub const PROBE: &str = r#"marker=$1; engine=$2; halobox=$3; cluster=$4; shift 4
guard() {
  for p in "$1" "$(readlink -f -- "$1" 2>/dev/null)"; do
    [ -n "$p" ] || continue
    d=${p%/*}; [ -n "$d" ] || d=/
    s=$(stat -c '%u %a' -- "$p" 2>/dev/null) && echo "guard=$s f $p"
    s=$(stat -c '%u %a' -- "$d" 2>/dev/null) && echo "guard=$s d $d"
  done
}
echo "uid=$(id -u)"
echo "user=$(id -un)"
echo "home=$HOME"
if [ -d /run/systemd/system ]; then echo systemd=yes; else echo systemd=no; fi
if [ -e "/var/lib/systemd/linger/$(id -un)" ]; then echo linger=yes; else echo linger=no; fi
echo "systemctl=$(command -v systemctl || true)"
if [ -n "$engine" ]; then echo "engine=$(command -v "$engine" || true)"; fi
if [ -n "$halobox" ]; then h=$(command -v "$halobox" || true); echo "halobox=$h"; case $h in /*) guard "$h";; esac; fi
if [ -n "$cluster" ]; then guard "$cluster"; fi
for n in "$@"; do
  for f in "/etc/systemd/system/$n" "$HOME/.config/systemd/user/$n"; do
    if [ ! -e "$f" ]; then s=absent; elif grep -qxF -- "$marker" "$f"; then s=ours; else s=foreign; fi
    echo "file=$s $f"
  done
done"#;

/// Writes stdin to `$1` (0644, beside then renamed) unless a file there
/// lacks the marker `$2` (exit 3: left alone).
pub const WRITE: &str = r#"set -e
f=$1; marker=$2; d=${f%/*}
if [ -e "$f" ] && ! grep -qxF -- "$marker" "$f"; then echo "$f exists and was not written by halobox cluster enable for this cluster: left alone" >&2; exit 3; fi
mkdir -p "$d"
tmp=$(mktemp "$d/.halobox-enable.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cat >"$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$f"
trap - EXIT
echo "wrote $f""#;

/// Disables and removes each file `$3...` that carries the marker `$2`
/// (`$1`: `system` or `user`), leaves any other alone, then reloads a
/// running manager.
pub const REMOVE: &str = r#"scope=$1; marker=$2; shift 2
if [ "$scope" = user ]; then sc="systemctl --user"; else sc=systemctl; fi
for f in "$@"; do
  if [ ! -e "$f" ]; then echo "absent $f"; continue; fi
  if ! grep -qxF -- "$marker" "$f"; then echo "left alone (not written by halobox cluster enable for this cluster) $f"; continue; fi
  $sc disable "${f##*/}" 2>&1 || true
  rm -f -- "$f"
  echo "removed $f"
done
if [ -d /run/systemd/system ]; then $sc daemon-reload; fi"#;

/// What `enable` is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The cluster file (absolute).
    pub cluster: std::path::PathBuf,
    /// [`CARRIED`] variables set in the enable run, in that order.
    pub env: Vec<(String, String)>,
    /// The recorded serve, when there is one.
    pub serve: Option<Spec>,
    /// This machine holds the head's data-plane address.
    pub on_head: bool,
    /// This user's uid.
    pub uid: u32,
}

/// One file to write.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitFile {
    /// Its unit name.
    pub unit: String,
    /// Its full path on the node.
    pub path: String,
    /// Its content.
    pub content: String,
}

/// What `enable` does on one node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePlan {
    /// The node's name.
    pub node: String,
    /// Its scope.
    pub scope: Scope,
    /// The files, in order.
    pub files: Vec<UnitFile>,
    /// A manager runs there (`daemon-reload` then).
    pub reload: bool,
    /// What to tell the user about this node.
    pub notes: Vec<String>,
}

impl NodePlan {
    /// The commands run there after the files are written.
    pub fn commands(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        if self.reload {
            let mut c = self.scope.systemctl();
            c.push("daemon-reload".into());
            out.push(c);
        }
        let mut c = self.scope.systemctl();
        c.push("enable".into());
        c.extend(self.files.iter().map(|f| f.unit.clone()));
        out.push(c);
        out
    }
}

/// The container unit's name for container `name`.
pub fn container_unit(name: &str) -> String {
    format!("halobox-container-{name}.service")
}

/// The unit names `enable` writes on `node` (for the probe).
pub fn unit_names(cfg: &ClusterConfig, node: &NodeConfig) -> Vec<String> {
    let mut v = Vec::new();
    if node.backend.is_container() {
        v.push(container_unit(&node.container));
    }
    if std::ptr::eq(node, cfg.head()) {
        v.push(CLUSTER_UNIT.into());
        v.push(SERVE_UNIT.into());
    }
    v
}

/// The engine command the container unit runs on `node` (empty: none).
pub fn engine_of(node: &NodeConfig) -> &'static str {
    match node.backend {
        NodeBackend::Host => "",
        NodeBackend::Docker => "docker",
        NodeBackend::Podman | NodeBackend::Toolbox | NodeBackend::Distrobox => "podman",
    }
}

/// A word of an `Exec*=` line: `%` and `$` escaped, quoted when needed.
pub fn exec_word(w: &str) -> String {
    let w = w.replace('%', "%%").replace('$', "$$");
    if !w.is_empty() && !w.chars().any(|c| c.is_whitespace() || "\"'\\;".contains(c)) {
        return w;
    }
    format!("\"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""))
}

fn exec_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| exec_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `Environment=` of one variable.
fn env_line(name: &str, value: &str) -> String {
    let v = value
        .replace('%', "%%")
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    format!("Environment=\"{name}={v}\"\n")
}

/// The plan on every node, in node order; `Err` says what stops it (with
/// the fix).
pub fn plan(
    cfg: &ClusterConfig,
    facts: &[NodeFacts],
    opts: &Options,
) -> Result<Vec<NodePlan>, String> {
    let head = cfg.head();
    if !opts.on_head {
        return Err(format!(
            "this machine does not hold the head's address {} ({}): the head's units run `halobox cluster up` and the serve with this machine's cluster file, ssh keys and serve record, so `enable` runs on the head\n  hint: run `halobox cluster enable` on {} (`ssh {} halobox cluster enable --cluster FILE`)",
            head.ip,
            head.label(),
            head.label(),
            head.ssh
        ));
    }
    cfg.nodes
        .iter()
        .zip(facts)
        .map(|(node, f)| node_plan(cfg, node, f, std::ptr::eq(node, head), opts))
        .collect()
}

/// What every unit file starts with: halobox's marker and its description.
fn unit_header(mark: &str, what: &str) -> String {
    format!(
        "{mark}\n[Unit]\nDescription=halobox: {}\n",
        what.replace('%', "%%")
    )
}

/// A system unit waits for the network; a user unit cannot.
fn online(scope: Scope) -> &'static str {
    match scope {
        Scope::System => "Wants=network-online.target\nAfter=network-online.target\n",
        Scope::User => "",
    }
}

/// One node's plan: its container's unit, and on the head the cluster's
/// and the serve's.
fn node_plan(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    f: &NodeFacts,
    is_head: bool,
    opts: &Options,
) -> Result<NodePlan, String> {
    let label = node.label().to_string();
    if is_head && f.uid != opts.uid {
        return Err(format!(
            "node {label}: ssh reaches it as {} (uid {}), but this halobox runs as uid {}: the head's units must run as the user whose cluster file, keys and serve record they use\n  hint: run `halobox cluster enable` as {}, or set the head's `ssh` in {} to this user",
            f.user,
            f.uid,
            opts.uid,
            f.user,
            opts.cluster.display()
        ));
    }
    if f.systemctl.is_empty() {
        return Err(format!(
            "node {label}: no `systemctl` there: `cluster enable` brings the cluster back at boot with systemd units\n  hint: start it by hand after a boot there (`halobox cluster up`), or leave {label} out of {}",
            opts.cluster.display()
        ));
    }
    let scope = if f.uid == 0 {
        Scope::System
    } else {
        Scope::User
    };
    let mut files = Vec::new();
    let mut notes = Vec::new();
    if node.backend.is_container() {
        files.push(container_unit_file(node, f, scope, opts)?);
    }
    if is_head {
        files.extend(head_unit_files(cfg, f, scope, opts, &mut notes)?);
    }
    for file in &files {
        if let Some((_, FileState::Foreign)) = f.files.iter().find(|(p, _)| *p == file.path) {
            return Err(format!(
                "node {label}: {} exists and was not written by `halobox cluster enable` for {}: it is left alone\n  hint: move it away (or remove it) there, then run `halobox cluster enable` again",
                file.path,
                opts.cluster.display()
            ));
        }
    }
    if scope == Scope::User && !f.linger {
        notes.push(format!(
            "user units start at boot only when {}'s manager lingers: run `sudo loginctl enable-linger {}` there",
            f.user, f.user
        ));
    }
    if !f.systemd {
        notes.push(
            "no systemd manager runs there now: the units are enabled for its next boot (no daemon-reload)".into(),
        );
    }
    Ok(NodePlan {
        node: label,
        scope,
        files,
        reload: f.systemd,
        notes,
    })
}

/// The unit that starts a node's container at boot.
fn container_unit_file(
    node: &NodeConfig,
    f: &NodeFacts,
    scope: Scope,
    opts: &Options,
) -> Result<UnitFile, String> {
    let engine = engine_of(node);
    if f.engine.is_empty() {
        return Err(format!(
            "node {}: `{engine}` is not on the PATH there, but its container {} is a {} container\n  hint: install {engine} there (`halobox cluster doctor` checks every node), or fix the node's `backend` in {}",
            node.label(),
            node.container,
            node.backend,
            opts.cluster.display()
        ));
    }
    let unit = container_unit(&node.container);
    let daemon = match (engine, scope) {
        ("docker", Scope::System) => "Requires=docker.service\nAfter=docker.service\n",
        ("docker", Scope::User) => "After=docker.service\n",
        _ => "",
    };
    let content = format!(
        "{}{}{daemon}StartLimitIntervalSec=300\nStartLimitBurst=5\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={}\nExecStop={}\nRestart=on-failure\nRestartSec=10\nTimeoutStartSec=120\nTimeoutStopSec=60\n\n[Install]\nWantedBy={}\n",
        unit_header(
            &marker(&opts.cluster),
            &format!("the container {} (made by halobox)", node.container)
        ),
        online(scope),
        exec_line(&[f.engine.clone(), "start".into(), node.container.clone()]),
        exec_line(&[
            f.engine.clone(),
            "stop".into(),
            "-t".into(),
            "10".into(),
            node.container.clone()
        ]),
        scope.target()
    );
    Ok(UnitFile {
        path: format!("{}/{unit}", scope.dir(&f.home)),
        unit,
        content,
    })
}

/// The head's units: `cluster up` at boot (retried), and the recorded
/// serve when it was started with `--restart` (else a note says why not).
fn head_unit_files(
    cfg: &ClusterConfig,
    f: &NodeFacts,
    scope: Scope,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<Vec<UnitFile>, String> {
    let node = cfg.head();
    let label = node.label();
    if f.halobox.is_empty() {
        return Err(format!(
            "node {label}: `{}` (cluster.toml's `halobox`) is not on the PATH there\n  hint: `halobox cluster install`, or set `halobox` in {} to its path",
            cfg.halobox,
            opts.cluster.display()
        ));
    }
    guarded(label, f, scope)?;
    let (mark, dir) = (marker(&opts.cluster), scope.dir(&f.home));
    let cluster = opts.cluster.display().to_string();
    let env: String = opts.env.iter().map(|(k, v)| env_line(k, v)).collect();
    let container_dep = if node.backend.is_container() {
        let u = container_unit(&node.container);
        format!("Wants={u}\nAfter={u}\n")
    } else {
        String::new()
    };
    let hb = |args: &[&str]| {
        let mut w = vec![f.halobox.clone()];
        w.extend(args.iter().map(|s| s.to_string()));
        exec_line(&w)
    };
    // A try that failed half way leaves Ray on some nodes: each try
    // starts with `cluster down` (its failure ignored: a node that
    // is not up yet).
    let content = format!(
        "{}{}{container_dep}StartLimitIntervalSec={RETRY_WINDOW_SEC}\nStartLimitBurst={RETRY_BURST}\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n{env}ExecStartPre=-{}\nExecStart={}\nRestart=on-failure\nRestartSec={RETRY_SEC}\nTimeoutStartSec={}\n\n[Install]\nWantedBy={}\n",
        unit_header(&mark, &format!("cluster up of {cluster} at boot")),
        online(scope),
        hb(&["cluster", "down", "--cluster", &cluster]),
        hb(&["cluster", "up", "--cluster", &cluster]),
        900 + cfg.timeout_s,
        scope.target()
    );
    let mut files = vec![UnitFile {
        unit: CLUSTER_UNIT.into(),
        path: format!("{dir}/{CLUSTER_UNIT}"),
        content,
    }];
    match &opts.serve {
        Some(spec) if wants_serve_unit(spec) => {
            let content = format!(
                "{}Requires={CLUSTER_UNIT}\nAfter={CLUSTER_UNIT}\n\n[Service]\nType=simple\n{env}ExecStart={}\nRestart=on-failure\nRestartSec=30\nTimeoutStopSec=90\n\n[Install]\nWantedBy={}\n",
                unit_header(&mark, &format!("the recorded serve of {cluster} ({})", spec.model)),
                hb(&["serve", "--recorded", "--cluster", &cluster]),
                scope.target()
            );
            files.push(UnitFile {
                unit: SERVE_UNIT.into(),
                path: format!("{dir}/{SERVE_UNIT}"),
                content,
            });
            notes.push(format!(
                "the serve of {} is kept for boot as recorded now; after serving another model, run `halobox cluster enable` again",
                spec.model
            ));
        }
        Some(spec) => notes.push(format!(
            "the serve of {} was started without --restart: no serve unit (start it with `halobox serve MODEL --restart on-failure --detach`, then run `halobox cluster enable` again)",
            spec.model
        )),
        None => notes.push(
            "no serve is recorded for this cluster file: no serve unit (start one with `halobox serve MODEL --restart on-failure --detach`, then run `halobox cluster enable` again)".into(),
        ),
    }
    Ok(files)
}

/// Refuses a head whose units would run a halobox, or read a cluster file,
/// that a user other than the node's (or root) can change: that user would
/// run code as the node's user (as root, for system units) at the next boot.
fn guarded(label: &str, f: &NodeFacts, scope: Scope) -> Result<(), String> {
    for g in &f.guards {
        let Some(why) = g.fault(f.uid) else {
            continue;
        };
        let runs = match scope {
            Scope::System => "as root",
            Scope::User => "as that user",
        };
        return Err(format!(
            "node {label}: {} {why}: the boot units run halobox and read the cluster file from there {runs}, so whoever can change it could run anything {runs} at the next boot; nothing was written\n  hint: `chmod go-w {p}` and `chown {} {p}` there (or move it where only {} can write), then run `halobox cluster enable` again",
            g.path,
            f.user,
            f.user,
            p = crate::shell::quote(&g.path),
        ));
    }
    Ok(())
}

/// The plan as `--dry-run` prints it: per node every file in full and
/// every command.
pub fn render(plans: &[NodePlan]) -> String {
    let mut s = String::new();
    for p in plans {
        s.push_str(&format!(
            "node {} ({} units):\n",
            p.node,
            match p.scope {
                Scope::System => "system",
                Scope::User => "user",
            }
        ));
        for f in &p.files {
            s.push_str(&format!("  write {} (0644):\n", f.path));
            for l in f.content.lines() {
                s.push_str(&format!("    | {l}\n"));
            }
        }
        for c in p.commands() {
            s.push_str(&format!("  run: {}\n", crate::shell::line(&c)));
        }
        for n in &p.notes {
            s.push_str(&format!("  note: {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::config::NodeConfig;

    fn node(name: &str, ip: &str, backend: NodeBackend) -> NodeConfig {
        NodeConfig {
            name: Some(name.into()),
            ssh: format!("root@{ip}"),
            ip: ip.parse().unwrap(),
            container: "vllm".into(),
            backend,
            cpus: None,
            env: Default::default(),
            memory_bandwidth_gbs: None,
        }
    }

    fn facts(uid: u32) -> NodeFacts {
        NodeFacts {
            uid,
            user: if uid == 0 {
                "root".into()
            } else {
                "ann".into()
            },
            home: if uid == 0 {
                "/root".into()
            } else {
                "/home/ann".into()
            },
            systemd: true,
            linger: false,
            systemctl: "/usr/bin/systemctl".into(),
            engine: "/usr/bin/podman".into(),
            halobox: "/usr/local/bin/halobox".into(),
            files: vec![],
            guards: vec![],
        }
    }

    fn spec() -> Spec {
        Spec {
            model: "m".into(),
            tp: None,
            max_model_len: None,
            max_model_len_auto: false,
            gpu_memory_utilization: None,
            no_eager: false,
            host: None,
            port: 8000,
            no_api_key: false,
            nccl_debug: false,
            timeout: 60,
            no_fit_check: false,
            restart: Some("on-failure".parse().unwrap()),
            stall_timeout: None,
            extra: vec![],
        }
    }

    fn opts(serve: Option<Spec>) -> Options {
        Options {
            cluster: "/root/.config/halobox/cluster.toml".into(),
            env: vec![("HOME".into(), "/root".into())],
            serve,
            on_head: true,
            uid: 0,
        }
    }

    fn two(backend: NodeBackend) -> ClusterConfig {
        ClusterConfig::new(vec![
            node("a", "10.0.0.1", backend),
            node("b", "10.0.0.2", backend),
        ])
    }

    #[test]
    fn root_nodes_get_system_units_and_the_head_the_cluster_and_serve() {
        let cfg = two(NodeBackend::Podman);
        let p = plan(&cfg, &[facts(0), facts(0)], &opts(Some(spec()))).unwrap();
        let names: Vec<Vec<&str>> = p
            .iter()
            .map(|n| n.files.iter().map(|f| f.unit.as_str()).collect())
            .collect();
        assert_eq!(
            names,
            [
                vec!["halobox-container-vllm.service", CLUSTER_UNIT, SERVE_UNIT],
                vec!["halobox-container-vllm.service"]
            ]
        );
        assert_eq!(
            p[0].files[0].path,
            "/etc/systemd/system/halobox-container-vllm.service"
        );
        let c = &p[0].files[0].content;
        assert!(c.starts_with(&marker(&opts(None).cluster)), "{c}");
        assert!(c.contains("ExecStart=/usr/bin/podman start vllm\n"), "{c}");
        assert!(
            c.contains("ExecStop=/usr/bin/podman stop -t 10 vllm\n"),
            "{c}"
        );
        assert!(c.contains("WantedBy=multi-user.target"));
        let up = &p[0].files[1].content;
        assert!(up.contains(
            "ExecStart=/usr/local/bin/halobox cluster up --cluster /root/.config/halobox/cluster.toml\n"
        ));
        assert!(up.contains("ExecStartPre=-/usr/local/bin/halobox cluster down"));
        assert!(up.contains("Restart=on-failure\nRestartSec=30"));
        assert!(up.contains("StartLimitBurst=10"));
        assert!(up.contains("After=halobox-container-vllm.service"));
        assert!(up.contains("Environment=\"HOME=/root\""));
        let serve = &p[0].files[2].content;
        assert!(serve.contains("serve --recorded --cluster /root/.config/halobox/cluster.toml"));
        assert!(serve.contains("Requires=halobox-cluster.service"));
        assert_eq!(
            p[1].commands(),
            [
                vec!["systemctl", "daemon-reload"],
                vec!["systemctl", "enable", "halobox-container-vllm.service"]
            ]
        );
    }

    #[test]
    fn a_user_gets_user_units_and_the_linger_note() {
        let cfg = two(NodeBackend::Docker);
        let mut o = opts(None);
        o.uid = 1000;
        let p = plan(&cfg, &[facts(1000), facts(1000)], &o).unwrap();
        assert_eq!(p[1].scope, Scope::User);
        assert_eq!(
            p[1].files[0].path,
            "/home/ann/.config/systemd/user/halobox-container-vllm.service"
        );
        assert!(p[1].files[0].content.contains("WantedBy=default.target"));
        assert!(!p[1].files[0].content.contains("network-online"));
        assert!(
            p[1].notes
                .iter()
                .any(|n| n.contains("loginctl enable-linger ann"))
        );
        assert_eq!(p[1].commands()[1][..3], ["systemctl", "--user", "enable"]);
        assert!(
            p[0].notes
                .iter()
                .any(|n| n.contains("no serve is recorded"))
        );
        assert_eq!(p[0].files.len(), 2, "no serve unit without a record");
    }

    #[test]
    fn docker_needs_its_daemon_and_host_nodes_get_no_container_unit() {
        let p = plan(
            &two(NodeBackend::Docker),
            &[facts(0), facts(0)],
            &opts(None),
        )
        .unwrap();
        assert!(p[1].files[0].content.contains("Requires=docker.service"));
        let p = plan(&two(NodeBackend::Host), &[facts(0), facts(0)], &opts(None)).unwrap();
        assert!(p[1].files.is_empty());
        assert_eq!(p[0].files[0].unit, CLUSTER_UNIT);
        assert!(!p[0].files[0].content.contains("halobox-container"));
    }

    #[test]
    fn refusals_name_the_node_and_the_fix() {
        let cfg = two(NodeBackend::Podman);
        let mut o = opts(None);
        o.on_head = false;
        let e = plan(&cfg, &[facts(0), facts(0)], &o).unwrap_err();
        assert!(e.contains("hint: run `halobox cluster enable` on a"), "{e}");
        let mut foreign = facts(0);
        foreign.files = vec![(
            "/etc/systemd/system/halobox-container-vllm.service".into(),
            FileState::Foreign,
        )];
        let e = plan(&cfg, &[facts(0), foreign], &opts(None)).unwrap_err();
        assert!(e.contains("node b") && e.contains("left alone"), "{e}");
        let mut ours = facts(0);
        ours.files = vec![(
            "/etc/systemd/system/halobox-container-vllm.service".into(),
            FileState::Ours,
        )];
        assert!(plan(&cfg, &[facts(0), ours], &opts(None)).is_ok());
        let mut no_engine = facts(0);
        no_engine.engine.clear();
        let e = plan(&cfg, &[facts(0), no_engine], &opts(None)).unwrap_err();
        assert!(e.contains("`podman` is not on the PATH"), "{e}");
        let e = plan(&cfg, &[facts(1000), facts(0)], &opts(None)).unwrap_err();
        assert!(e.contains("uid 1000") && e.contains("hint:"), "{e}");
        let mut no_sd = facts(0);
        no_sd.systemctl.clear();
        assert!(plan(&cfg, &[facts(0), no_sd], &opts(None)).is_err());
    }

    /// What the head's units run and read must be changeable only by the
    /// node's user or root: another owner, or write permission for others
    /// (but a sticky folder), is refused with the fix.
    #[test]
    fn a_halobox_or_cluster_file_others_can_change_is_refused() {
        let cfg = two(NodeBackend::Podman);
        let head = parse_facts(
            "uid=0\nuser=root\nhome=/root\nsystemctl=/usr/bin/systemctl\nengine=/usr/bin/podman\nhalobox=/opt/hb/halobox\n\
             guard=0 755 f /opt/hb/halobox\nguard=0 755 d /opt/hb\nguard=0 600 f /root/c.toml\nguard=0 1777 d /tmp\n",
        )
        .unwrap();
        assert_eq!(head.guards.len(), 4);
        assert!(head.guards[3].folder && !head.guards[0].folder);
        assert!(plan(&cfg, &[head.clone(), facts(0)], &opts(None)).is_ok());
        for (i, uid, mode, want) in [
            (
                0,
                0,
                0o777,
                "/opt/hb/halobox is writable by others (mode 0777)",
            ),
            (0, 4242, 0o755, "/opt/hb/halobox is owned by uid 4242"),
            (1, 0, 0o775, "/opt/hb is writable by others (mode 0775)"),
            (
                2,
                0,
                0o666,
                "/root/c.toml is writable by others (mode 0666)",
            ),
            (2, 4242, 0o600, "/root/c.toml is owned by uid 4242"),
            (3, 0, 0o777, "/tmp is writable by others (mode 0777)"),
        ] {
            let mut f = head.clone();
            f.guards[i].uid = uid;
            f.guards[i].mode = mode;
            let e = plan(&cfg, &[f, facts(0)], &opts(None)).unwrap_err();
            assert!(e.contains(&format!("node a: {want}")), "{e}");
            assert!(
                e.contains("as root") && e.contains("chmod go-w") && e.contains("chown root"),
                "{e}"
            );
        }
        // The node's own user may own them.
        let mut mine = head.clone();
        mine.uid = 1000;
        mine.guards[0].uid = 1000;
        let mut o = opts(None);
        o.uid = 1000;
        assert!(plan(&cfg, &[mine, facts(1000)], &o).is_ok());
    }

    #[test]
    fn no_manager_no_reload() {
        let mut f = facts(0);
        f.systemd = false;
        let p = plan(&two(NodeBackend::Podman), &[facts(0), f], &opts(None)).unwrap();
        assert_eq!(p[1].commands().len(), 1);
        assert!(p[1].notes.iter().any(|n| n.contains("next boot")));
    }

    #[test]
    fn exec_words_are_escaped() {
        assert_eq!(exec_word("/usr/bin/podman"), "/usr/bin/podman");
        assert_eq!(exec_word("/a b/c"), "\"/a b/c\"");
        assert_eq!(exec_word("100%$x"), "100%%$$x");
        assert_eq!(
            env_line("HOME", "/h \"x\""),
            "Environment=\"HOME=/h \\\"x\\\"\"\n"
        );
    }

    #[test]
    fn the_probe_is_read() {
        let f = parse_facts(
            "uid=0\nuser=root\nhome=/root\nsystemd=no\nlinger=no\nsystemctl=/usr/bin/systemctl\nengine=/usr/bin/podman\nfile=ours /etc/systemd/system/x.service\nfile=absent /root/.config/systemd/user/x.service\n",
        )
        .unwrap();
        assert_eq!(f.uid, 0);
        assert!(!f.systemd);
        assert_eq!(f.files[0].1, FileState::Ours);
        assert_eq!(f.files[1].1, FileState::Absent);
        assert!(parse_facts("nothing").is_err());
    }

    #[test]
    fn nothing_secret_is_carried() {
        assert!(CARRIED.iter().all(|n| !crate::proc::is_secret(n)));
    }
}
