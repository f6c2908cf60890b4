//! The engine in the head's container, as `serve` reaches it: the
//! [`super::program`]s run there (directly for a `host` head, else through
//! `halobox enter`, secrets on its stdin), its log followed line by line,
//! its API asked over HTTP.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::program;
use crate::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};
use crate::cluster::plan;
use crate::proc::{self, Capture, Finished, Proc};

/// How long one program in the container may take (a stop waits for the
/// engine's grace period inside it).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(90);

/// Output from the container is printed: every line made safe for a
/// terminal, and bounded.
pub const CAPTURE: Capture = Capture {
    limit: 4 << 20,
    clean: Some(crate::remote::printable),
};

/// The head's container, where the engine runs.
#[derive(Debug, Clone)]
pub struct Head {
    /// The `halobox` command on the head (for `halobox enter`).
    pub halobox: String,
    /// How the container is reached.
    pub backend: NodeBackend,
    /// Its name.
    pub container: String,
    /// Its label in messages ("a", or the ssh target).
    pub label: String,
    /// Its data-plane address.
    pub ip: Ipv4Addr,
}

impl Head {
    /// The head of `cfg`.
    pub fn of(cfg: &ClusterConfig) -> Head {
        let h: &NodeConfig = cfg.head();
        Head {
            halobox: cfg.halobox.clone(),
            backend: h.backend,
            container: h.container.clone(),
            label: h.label().to_string(),
            ip: h.ip,
        }
    }

    /// `cmd` as run in the container from the head.
    pub fn argv(&self, cmd: &[String]) -> Vec<String> {
        plan::in_container(&self.halobox, self.backend, &self.container, cmd)
    }

    /// Runs `program` with `args` in the container (stdin empty).
    pub fn run(&self, program: String, args: &[String]) -> std::io::Result<Finished> {
        proc::run(&self.argv(&program::argv(program, args)), PROGRAM_TIMEOUT)
    }

    /// The argv that starts `cmd` detached in the container
    /// ([`program::start`], after `check` when one is given). Secrets go on
    /// its stdin, which `halobox enter` passes through halobox's own engine
    /// connection (the engine the container was made on, not whatever the
    /// engine's CLI defaults to).
    pub fn start_argv(
        &self,
        cmd: &[String],
        secret_names: &[String],
        clear_cache: Option<&str>,
        check: Option<&str>,
    ) -> Vec<String> {
        self.argv(&program::argv(
            program::start(secret_names, clear_cache, check),
            cmd,
        ))
    }

    /// Starts the engine (`cmd`, argv with its env words) detached in the
    /// container, `secrets` (values) on the start program's stdin; its pid
    /// in the container. A `check` that refuses ends it with [`Refused`].
    /// With `restart` (a supervisor's), a stop that holds the serve
    /// refuses it with [`Held`].
    pub fn start(
        &self,
        cmd: &[String],
        secret_names: &[String],
        secrets: &[String],
        clear_cache: Option<&str>,
        check: Option<&str>,
        restart: bool,
    ) -> anyhow::Result<u32> {
        let argv = self.argv(&program::argv(
            program::start_with(secret_names, clear_cache, check, restart),
            cmd,
        ));
        let mut input = String::new();
        for v in secrets {
            input.push_str(v);
            input.push('\n');
        }
        let run = || -> anyhow::Result<_> {
            let mut p = Proc::spawn_with(&argv, CAPTURE)?;
            p.send(input.as_bytes())?;
            Ok(p.wait(PROGRAM_TIMEOUT))
        };
        let mut done = run()?;
        // A refusal started nothing, so it is asked once more when its word
        // was lost: podman 4's exec can drop a short command's output
        // ("read unixpacket …/attach: connection reset by peer").
        let lost_word = |d: &Finished| {
            d.status.and_then(|s| s.code()) == Some(program::CHECK_REFUSED)
                && !d.stdout.contains("halobox-check ")
        };
        if lost_word(&done) {
            done = run()?;
        }
        let out = done.output.clone();
        match done.status.and_then(|s| s.code()) {
            Some(0) => {
                for l in out.lines().filter(|l| !l.starts_with("halobox-serve-pid ")) {
                    eprintln!("{l}");
                }
            }
            Some(program::CHECK_REFUSED) => {
                if let Some(word) = done
                    .stdout
                    .lines()
                    .find_map(|l| l.strip_prefix("halobox-check "))
                {
                    return Err(Refused(word.trim().to_string()).into());
                }
                anyhow::bail!(
                    "the start check in container {} refused without saying why: {}",
                    self.container,
                    crate::remote::tail(&out, 3)
                )
            }
            Some(program::HELD) => return Err(Held.into()),
            Some(94) => anyhow::bail!(
                "{}\n  hint: `halobox serve status` says what it serves; `halobox serve stop` stops it",
                crate::remote::tail(&out, 1)
            ),
            Some(127) => anyhow::bail!(
                "the head's container {} has no `sh`: {}\n  hint: `halobox refresh --image REF` the head with an image that has a POSIX shell",
                self.container,
                crate::remote::tail(&out, 2)
            ),
            code => anyhow::bail!(
                "could not start the engine in container {} on the head ({}) (exit {}): {}\n  hint: `halobox enter {}` and look; `halobox cluster status`",
                self.container,
                self.label,
                code.map_or("killed".into(), |c| c.to_string()),
                crate::remote::tail(&out, 4),
                self.container
            ),
        }
        done.stdout
            .lines()
            .find_map(|l| l.strip_prefix("halobox-serve-pid ")?.trim().parse().ok())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "the start program in container {} printed no pid: {}",
                    self.container,
                    crate::remote::tail(&out, 3)
                )
            })
    }

    /// The engine's state there: `running PID`, `exited PID`, `none`.
    pub fn state(&self) -> anyhow::Result<EngineState> {
        Ok(self.look()?.0)
    }

    /// The engine's state, and whether a deliberate stop holds the serve
    /// ([`program::HELD_FILE`]: no supervisor may restart it).
    pub fn look(&self) -> anyhow::Result<(EngineState, bool)> {
        let done = self.run(program::state(), &[])?;
        let held = done.stdout.lines().any(|l| l.trim() == program::HELD_FILE);
        Ok((self.parse_state(&done)?, held))
    }

    fn parse_state(&self, done: &Finished) -> anyhow::Result<EngineState> {
        let line = done.stdout.lines().last().unwrap_or("").trim().to_string();
        let pid = |w: &str| line.strip_prefix(w).and_then(|p| p.trim().parse().ok());
        if let Some(p) = pid("running ") {
            return Ok(EngineState::Running(p));
        }
        if let Some(p) = pid("exited ") {
            return Ok(EngineState::Exited(p));
        }
        if line == "none" {
            return Ok(EngineState::None);
        }
        anyhow::bail!(
            "cannot look into container {} on the head ({}): {}\n  hint: is it running? `halobox list`, `halobox cluster status`",
            self.container,
            self.label,
            crate::remote::tail(&done.output, 3)
        )
    }

    /// Stops the engine (SIGTERM, then SIGKILL after `grace`) and removes
    /// the shm segments it left; what the stop program said. With `hold`
    /// (a deliberate stop), no supervisor restarts it afterwards.
    pub fn stop(&self, grace: Duration, hold: bool) -> anyhow::Result<String> {
        let mut args = vec![grace.as_secs().to_string()];
        if hold {
            args.push("hold".into());
        }
        let done = self.run(program::stop(), &args)?;
        let line = done.stdout.lines().last().unwrap_or("").trim().to_string();
        if done.status.is_some_and(|s| s.success()) && !line.is_empty() {
            return Ok(line);
        }
        anyhow::bail!(
            "could not stop the engine in container {c} on the head ({}): {}\n  hint: run `halobox serve stop` again; if it fails again, read the pid (the first number) in engine.pid of halobox's serve folder there (`halobox enter {c} -- sh -c 'cat \"${{XDG_STATE_HOME:-$HOME/.local/state}}/halobox/serve/engine.pid\"'`; an older halobox kept it in /tmp/halobox-serve-UID) and check it with `halobox enter {c} -- ps -p PID -o pid,user,args`: signal it only if it is above 1 and is the engine (vllm or llama-server) started by you",
            self.label,
            crate::remote::tail(&done.output, 3),
            c = self.container,
        )
    }

    /// The last `lines` lines of the engine's log.
    pub fn log_tail(&self, lines: usize) -> anyhow::Result<String> {
        let done = self.run(program::logs(), &[lines.to_string()])?;
        Ok(done.stdout)
    }

    /// How many lines the engine's log has now (0 when it cannot be read).
    pub fn log_length(&self) -> usize {
        self.run(program::log_length(), &[])
            .ok()
            .and_then(|d| d.stdout.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Follows the engine's log: `last` lines back (`+1`: from its start), then what it writes.
    pub fn follow(&self, last: &str) -> std::io::Result<Proc> {
        let argv = self.argv(&program::argv(
            program::logs(),
            &[last.to_string(), "-f".into()],
        ));
        Proc::spawn_with(&argv, CAPTURE)
    }
}

/// The start's check refused: the word it printed (the caller says what it
/// means).
#[derive(Debug, thiserror::Error)]
#[error("the start check refused: {0}")]
pub struct Refused(pub String);

/// A supervisor's restart was refused: a `serve stop`, `cluster down` or
/// `--ab-transport` holds the serve.
#[derive(Debug, thiserror::Error)]
#[error("a serve stop, cluster down or --ab-transport holds the serve: no restart")]
pub struct Held;

/// The engine's state in the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineState {
    /// Running, with this pid.
    Running(u32),
    /// Started, and ended since.
    Exited(u32),
    /// Never started there (or stopped by halobox).
    None,
}

/// Where the API is asked from the head: the bind address, or loopback when
/// it binds every interface.
pub fn api_addr(host: Option<IpAddr>, port: u16) -> SocketAddr {
    let ip = match host {
        Some(ip) if !ip.is_unspecified() => ip,
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    SocketAddr::new(ip, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop that fails names the pid file and tells the user to check
    /// the pid before anything is signalled: no command to run on the pid
    /// the file holds (a planted `-1` would be every process of the user).
    #[test]
    fn a_failed_stop_never_hints_at_signalling_an_unchecked_pid() {
        let head = Head {
            halobox: "false".into(),
            backend: NodeBackend::Podman,
            container: "vllm".into(),
            label: "a".into(),
            ip: Ipv4Addr::LOCALHOST,
        };
        let e = head.stop(Duration::from_secs(1), true).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("could not stop the engine in container vllm"),
            "{e}"
        );
        assert!(!e.contains("kill"), "{e}");
        assert!(e.contains("engine.pid") && e.contains("ps -p PID"), "{e}");
    }
}
