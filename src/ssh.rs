//! The system `ssh` client as halobox runs it: host keys always checked
//! (`StrictHostKeyChecking=yes` comes first, and ssh keeps the first value
//! of an option, so neither later options nor ~/.ssh/config can lower it),
//! `BatchMode=yes` (key login, never a prompt), bounded connect time; and
//! the targets and `-o` options halobox accepts from flags and cluster
//! files. Commands on a node run through [`crate::remote`].

use std::path::{Path, PathBuf};

/// `ssh … -- TARGET REMOTE`: run the shell line `remote` on `target`.
/// `options` become `-o OPT` (check them with [`check_options`] first);
/// they may set the connect timeout and keepalive, never host key checks.
pub fn command(target: &str, options: &[String], remote: &str) -> Vec<String> {
    let mut argv = base(options);
    argv.push("--".into());
    argv.push(target.to_string());
    argv.push(remote.to_string());
    argv
}

/// [`command`] through the master connection whose socket is `control`
/// (halobox's own options, after the user's: a master that is gone makes
/// ssh connect directly).
pub fn command_via(target: &str, options: &[String], control: &Path, remote: &str) -> Vec<String> {
    let mut argv = base(options);
    argv.extend(control_options(control, "no"));
    argv.extend(["--".into(), target.to_string(), remote.to_string()]);
    argv
}

/// The master connection to `target` at the socket `control`: it logs in,
/// then goes to the background (the command exits 0) and runs no command
/// (`-N`) until `-O exit` ([`master_exit`]), or until it has had no client
/// for [`MASTER_IDLE_S`] seconds (when halobox was killed).
pub fn master(target: &str, options: &[String], control: &Path) -> Vec<String> {
    let mut argv = base(options);
    argv.extend(control_options(control, "yes"));
    argv.extend([
        "-o".into(),
        format!("ControlPersist={MASTER_IDLE_S}"),
        "-N".into(),
        "--".into(),
        target.to_string(),
    ]);
    argv
}

/// Seconds a master connection stays without clients before it ends.
pub const MASTER_IDLE_S: u32 = 5;

/// Asks the master at `control` to close its connection and exit.
pub fn master_exit(target: &str, control: &Path) -> Vec<String> {
    let mut argv: Vec<String> = vec!["ssh".into(), "-o".into(), "BatchMode=yes".into()];
    argv.extend(control_options(control, "no"));
    argv.extend(["-O".into(), "exit".into(), "--".into(), target.to_string()]);
    argv
}

fn control_options(control: &Path, master: &str) -> Vec<String> {
    vec![
        "-o".into(),
        format!("ControlMaster={master}"),
        "-o".into(),
        format!("ControlPath={}", control.display()),
    ]
}

/// `ssh` with host key checks, batch mode, `options` and the timeouts.
fn base(options: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = [
        "ssh",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
    ]
    .map(String::from)
    .to_vec();
    for o in options {
        argv.push("-o".into());
        argv.push(o.clone());
    }
    argv.extend(["-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5"].map(String::from));
    argv
}

/// ssh's own failure (connection, authentication, host key) is exit 255.
pub fn unreachable(code: Option<i32>) -> bool {
    code == Some(255)
}

/// The hint printed when a node cannot be reached.
pub fn reach_hint(target: &str) -> String {
    format!(
        "`ssh -o BatchMode=yes {target} true` must work without a password prompt: check the \
         address, that sshd runs there, your key (ssh-copy-id) and known_hosts (ssh-keyscan, \
         then verify the fingerprint)"
    )
}

fn user_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-".contains(c)
}

fn host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || ".-_:".contains(c)
}

/// Checks an ssh destination: `[user@]host` (a name, an address, or a Host
/// of ~/.ssh/config), nothing ssh could read as an option and nothing a
/// shell would expand.
pub fn check_target(target: &str) -> Result<(), String> {
    let (user, host) = match target.split_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, target),
    };
    let user_ok =
        user.is_none_or(|u| !u.is_empty() && !u.starts_with('-') && u.chars().all(user_char));
    let host_ok = !host.is_empty() && !host.starts_with(['-', '.']) && host.chars().all(host_char);
    if user_ok && host_ok {
        Ok(())
    } else {
        Err(format!(
            "{target:?} is not an ssh destination of the form [user@]host: use letters, digits, \
             '.', '-' and '_' (':' in an IPv6 address), one '@' at most, and no leading '-'"
        ))
    }
}

/// Options a cluster file or `--ssh-option` may set (lowercase, as ssh
/// matches them). Everything else goes in ~/.ssh/config.
const ALLOWED: &[&str] = &[
    "port",
    "user",
    "identityfile",
    "identitiesonly",
    "certificatefile",
    "proxyjump",
    "connecttimeout",
    "connectionattempts",
    "serveraliveinterval",
    "serveralivecountmax",
    "tcpkeepalive",
    "userknownhostsfile",
    "loglevel",
    "addressfamily",
    "bindaddress",
    "bindinterface",
];

/// Why an option is refused outright.
fn refused(keyword: &str) -> Option<&'static str> {
    Some(match keyword {
        "stricthostkeychecking" => {
            "halobox keeps host key checking on (it passes StrictHostKeyChecking=yes first)"
        }
        "proxycommand" => "it runs a local command for every connection",
        "localcommand" | "permitlocalcommand" => "it runs a local command after each login",
        "knownhostscommand" => {
            "it lets a command, instead of known_hosts, say which host keys to trust"
        }
        _ => return None,
    })
}

/// One `-o` option split as ssh reads it: the keyword (lowercase) and its
/// arguments. `Key value`, `Key=value` and `Key = value` with any
/// whitespace and any case are the same option.
pub fn parse_option(opt: &str) -> Result<(String, Vec<&str>), String> {
    let s = opt.trim_start_matches([' ', '\t']);
    let end = s.find([' ', '\t', '=']).unwrap_or(s.len());
    let (keyword, rest) = s.split_at(end);
    // One '=' at most separates the keyword from its value.
    let rest = match rest.strip_prefix('=') {
        Some(r) => r.trim_start_matches([' ', '\t']),
        None => {
            let r = rest.trim_start_matches([' ', '\t']);
            r.strip_prefix('=').unwrap_or(r)
        }
    };
    if keyword.is_empty() {
        return Err("no option name".into());
    }
    let args: Vec<&str> = rest.split([' ', '\t']).filter(|a| !a.is_empty()).collect();
    Ok((keyword.to_ascii_lowercase(), args))
}

/// `path` with a leading `~/` expanded as ssh does (this user's home).
fn expand_home(path: &str) -> Option<PathBuf> {
    if let Some(rest) = path.strip_prefix("~/") {
        return dirs::home_dir().map(|h| h.join(rest));
    }
    if path == "~" || path.starts_with('~') {
        return None;
    }
    Some(PathBuf::from(path))
}

/// A known-hosts file that can hold keys: an existing regular file (a
/// symlink is followed), never /dev/null however it is spelled.
fn check_known_hosts(file: &str) -> Result<(), String> {
    let path = expand_home(file)
        .filter(|p| p.is_absolute())
        .ok_or_else(|| format!("{file} is not an absolute path (or ~/…)"))?;
    let real = std::fs::canonicalize(&path)
        .map_err(|e| format!("{file} cannot be used as known_hosts: {e}"))?;
    if real == Path::new("/dev/null") {
        return Err(format!(
            "{file} is /dev/null: ssh would find no recorded host key there and record none"
        ));
    }
    let meta = std::fs::metadata(&real)
        .map_err(|e| format!("{file} cannot be used as known_hosts: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{file} (which is {}) is not a regular file",
            real.display()
        ));
    }
    Ok(())
}

fn one<'a>(args: &[&'a str]) -> Result<&'a str, String> {
    match args {
        [a] => Ok(a),
        [] => Err("it has no value".into()),
        _ => Err("it takes one value".into()),
    }
}

fn check_value(keyword: &str, args: &[&str]) -> Result<(), String> {
    let number = |max: u64| -> Result<(), String> {
        let v = one(args)?;
        match v.parse::<u64>() {
            Ok(n) if n <= max => Ok(()),
            _ => Err(format!("{v} is not a number from 0 to {max}")),
        }
    };
    let choice = |allowed: &[&str]| -> Result<(), String> {
        let v = one(args)?;
        if allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) {
            Ok(())
        } else {
            Err(format!("{v} is not one of {}", allowed.join(", ")))
        }
    };
    match keyword {
        "port" => match one(args)?.parse::<u16>() {
            Ok(p) if p > 0 => Ok(()),
            _ => Err("not a port (1..65535)".into()),
        },
        "user" => {
            let u = one(args)?;
            if !u.starts_with('-') && u.chars().all(user_char) {
                Ok(())
            } else {
                Err(format!("{u} is not a user name"))
            }
        }
        "identityfile" | "certificatefile" => one(args).map(|_| ()),
        "identitiesonly" | "tcpkeepalive" => choice(&["yes", "no"]),
        "connecttimeout" | "serveraliveinterval" => number(86_400),
        "connectionattempts" | "serveralivecountmax" => number(1000),
        "loglevel" => choice(&[
            "QUIET", "FATAL", "ERROR", "INFO", "VERBOSE", "DEBUG", "DEBUG1", "DEBUG2", "DEBUG3",
        ]),
        "addressfamily" => choice(&["any", "inet", "inet6"]),
        "bindaddress" => {
            let v = one(args)?;
            v.parse::<std::net::IpAddr>()
                .map(|_| ())
                .map_err(|_| format!("{v} is not an IP address"))
        }
        "bindinterface" => {
            let v = one(args)?;
            if v.len() <= 15 && v.chars().all(user_char) {
                Ok(())
            } else {
                Err(format!("{v} is not an interface name"))
            }
        }
        "proxyjump" => {
            let v = one(args)?;
            if v.eq_ignore_ascii_case("none") {
                return Ok(());
            }
            v.split(',').try_for_each(check_target)
        }
        "userknownhostsfile" => {
            if args.is_empty() {
                return Err("it has no value".into());
            }
            args.iter().try_for_each(|f| check_known_hosts(f))
        }
        _ => Ok(()),
    }
}

/// Checks one `-o` option from a flag or a cluster file: only the options
/// in the allow-list, with values ssh would read as meant.
pub fn check_option(opt: &str) -> Result<(), String> {
    let bad = |why: String, hint: &str| format!("ssh option {opt:?}: {why}\n  hint: {hint}");
    let (keyword, args) = parse_option(opt).map_err(|e| bad(e, "write it as Key=value"))?;
    if let Some(why) = refused(&keyword) {
        return Err(bad(
            format!("halobox refuses it: {why}"),
            "add the nodes' host keys to known_hosts (ssh-keyscan, then verify the \
             fingerprints); anything else belongs in your ~/.ssh/config",
        ));
    }
    if let Some(c) = opt
        .chars()
        .find(|&c| (c.is_control() && c != '\t') || "\"'\\%$#`".contains(c))
    {
        return Err(bad(
            format!("{c:?} in it, which ssh would read in its own way"),
            "write the plain value: no quotes, escapes, %-tokens, variables or comments",
        ));
    }
    if !ALLOWED.contains(&keyword.as_str()) {
        return Err(bad(
            format!("{keyword} is not one of the options halobox passes on"),
            "set it for these hosts in ~/.ssh/config; allowed here: Port, User, IdentityFile, \
             IdentitiesOnly, CertificateFile, ProxyJump, ConnectTimeout, ConnectionAttempts, \
             ServerAliveInterval, ServerAliveCountMax, TCPKeepAlive, UserKnownHostsFile, \
             LogLevel, AddressFamily, BindAddress, BindInterface",
        ));
    }
    check_value(&keyword, &args).map_err(|e| {
        bad(
            e,
            if keyword == "userknownhostsfile" {
                "point it at an existing known_hosts file holding the nodes' keys \
                 (ssh-keyscan, then verify the fingerprints)"
            } else {
                "see `man ssh_config` for its values"
            },
        )
    })
}

/// Checks every option; the first refused one is the error.
pub fn check_options(options: &[String]) -> Result<(), String> {
    options.iter().try_for_each(|o| check_option(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_keys_first_then_batch_mode_and_target_after_double_dash() {
        let a = command("root@n1", &["IdentityFile=/k".into()], "true");
        assert_eq!(
            a[..5],
            [
                "ssh",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes"
            ]
        );
        assert!(a.windows(2).any(|w| w == ["-o", "IdentityFile=/k"]));
        assert_eq!(a[a.len() - 3..], ["--", "root@n1", "true"]);
    }

    #[test]
    fn master_and_its_clients_keep_host_keys_and_the_users_options_first() {
        let opts = ["IdentityFile=/k".to_string()];
        let sock = Path::new("/tmp/halobox-ssh-1/0");
        let m = master("root@n1", &opts, sock);
        let c = command_via("root@n1", &opts, sock, "true");
        for a in [&m, &c] {
            assert_eq!(a[..3], ["ssh", "-o", "StrictHostKeyChecking=yes"]);
            let user = a.iter().position(|w| w == "IdentityFile=/k").unwrap();
            let path = a
                .iter()
                .position(|w| w == "ControlPath=/tmp/halobox-ssh-1/0")
                .unwrap();
            assert!(user < path, "{a:?}");
        }
        assert!(m.windows(2).any(|w| w == ["-o", "ControlMaster=yes"]));
        assert_eq!(
            m[m.len() - 5..],
            ["-o", "ControlPersist=5", "-N", "--", "root@n1"]
        );
        assert!(c.windows(2).any(|w| w == ["-o", "ControlMaster=no"]));
        assert_eq!(c[c.len() - 3..], ["--", "root@n1", "true"]);
        let x = master_exit("root@n1", sock);
        assert_eq!(x[x.len() - 4..], ["-O", "exit", "--", "root@n1"]);
    }

    #[test]
    fn options_parse_as_ssh_reads_them() {
        for o in [
            "Port=22",
            "Port 22",
            "port\t22",
            "  PORT = 22",
            "Port =22",
            "Port= 22",
        ] {
            assert_eq!(parse_option(o).unwrap(), ("port".into(), vec!["22"]), "{o}");
        }
        assert_eq!(
            parse_option("UserKnownHostsFile /a  /b").unwrap().1,
            ["/a", "/b"]
        );
        assert!(check_option("Port \"22\"").is_err());
        assert!(check_option("IdentityFile ~/.ssh/%h").is_err());
    }

    #[test]
    fn refuses_what_weakens_host_keys_or_runs_commands() {
        for o in [
            "StrictHostKeyChecking=no",
            "stricthostkeychecking off",
            "StrictHostKeyChecking  no",
            "StrictHostKeyChecking\tno",
            "StrictHostKeyChecking=accept-new",
            "STRICTHOSTKEYCHECKING yes",
            "ProxyCommand nc %h %p",
            "ProxyCommand=sh -c x",
            "LocalCommand=touch /tmp/x",
            "PermitLocalCommand yes",
            "KnownHostsCommand /bin/true",
            "UserKnownHostsFile=/dev/null",
            "UserKnownHostsFile /dev//null",
            "UserKnownHostsFile=/dev/../dev/null",
            "UserKnownHostsFile /etc/hosts /dev/null",
            "UserKnownHostsFile=/nonexistent/kh",
            "UserKnownHostsFile=relative",
            "UserKnownHostsFile=none",
            "UserKnownHostsFile=/tmp",
            "ForwardAgent yes",
            "ControlMaster auto",
            "Port 0",
            "User -oProxyCommand=x",
            "ProxyJump -oProxyCommand=x",
            "Include /etc/ssh/x",
        ] {
            let e = check_option(o).expect_err(o);
            assert!(
                e.contains(&format!("{o:?}")) && e.contains("hint:"),
                "{o}: {e}"
            );
        }
        let e = check_option("StrictHostKeyChecking=no").unwrap_err();
        assert!(e.contains("host key checking"), "{e}");
        let e = check_option("ProxyCommand nc %h %p").unwrap_err();
        assert!(e.contains("runs a local command"), "{e}");
        let e = check_option("IdentityFile=~/%d/k").unwrap_err();
        assert!(e.contains("'%'"), "{e}");
        let e = check_option("ProxyCommand=nc x 22").unwrap_err();
        assert!(e.contains("runs a local command"), "{e}");
        let e = check_option("UserKnownHostsFile=/dev/../dev/null").unwrap_err();
        assert!(e.contains("is /dev/null"), "{e}");
    }

    #[test]
    fn symlinks_to_dev_null_are_refused_real_files_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("kh");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let e = check_option(&format!("UserKnownHostsFile={}", link.display())).unwrap_err();
        assert!(e.contains("is /dev/null"), "{e}");
        let real = dir.path().join("known_hosts");
        std::fs::write(&real, "").unwrap();
        check_option(&format!("UserKnownHostsFile {}", real.display())).unwrap();
        for o in [
            "Port=2222",
            "User=root",
            "IdentityFile=~/.ssh/id_ed25519",
            "IdentitiesOnly=yes",
            "ProxyJump=admin@bastion:2222,gw",
            "ConnectTimeout=5",
            "ServerAliveInterval=10",
            "serveralivecountmax 4",
            "LogLevel=ERROR",
        ] {
            check_option(o).unwrap_or_else(|e| panic!("{o}: {e}"));
        }
    }

    #[test]
    fn targets_are_user_at_host() {
        for t in [
            "n1",
            "root@n1",
            "root@10.0.0.2",
            "a.b-c_d",
            "u@fe80::1",
            "node-1.lan",
        ] {
            check_target(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        }
        for t in [
            "",
            "-oProxyCommand=x",
            "root@-x",
            "-u@h",
            "a b",
            "h;rm",
            "u@h@k",
            "$(x)",
            "h`x`",
            "ssh://h",
            "@h",
            "u@",
            "h\n",
        ] {
            assert!(check_target(t).is_err(), "{t:?}");
        }
    }
}
