//! The system `ssh` client as halobox runs it: `BatchMode=yes` (key login,
//! never a prompt), host keys always checked, bounded connect time. Shared by
//! `bench` (the peer's servers) and `cluster` (every node's commands).

/// `ssh … -- TARGET REMOTE`: run the shell line `remote` on `target`.
/// `options` become `-o OPT` (check them with [`unsafe_option`] first).
pub fn command(target: &str, options: &[String], remote: &str) -> Vec<String> {
    let mut argv: Vec<String> = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "ServerAliveInterval=5",
    ]
    .map(String::from)
    .to_vec();
    for o in options {
        argv.push("-o".into());
        argv.push(o.clone());
    }
    argv.push("--".into());
    argv.push(target.to_string());
    argv.push(remote.to_string());
    argv
}

/// ssh options halobox refuses: they turn off host key checking.
pub fn unsafe_option(opt: &str) -> bool {
    let o = opt.to_ascii_lowercase().replace(' ', "=");
    o.starts_with("stricthostkeychecking=no")
        || o.starts_with("stricthostkeychecking=off")
        || o == "userknownhostsfile=/dev/null"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_mode_and_target_after_double_dash() {
        let a = command("root@n1", &["IdentityFile=/k".into()], "true");
        assert_eq!(a[..3], ["ssh", "-o", "BatchMode=yes"]);
        assert!(a.windows(2).any(|w| w == ["-o", "IdentityFile=/k"]));
        assert_eq!(a[a.len() - 3..], ["--", "root@n1", "true"]);
    }

    #[test]
    fn refuses_disabling_host_keys() {
        assert!(unsafe_option("StrictHostKeyChecking=no"));
        assert!(unsafe_option("stricthostkeychecking off"));
        assert!(unsafe_option("UserKnownHostsFile=/dev/null"));
        assert!(!unsafe_option("UserKnownHostsFile=/tmp/kh"));
        assert!(!unsafe_option("StrictHostKeyChecking=yes"));
    }
}
