//! Ray's token authentication (`RAY_AUTH_MODE=token`, Ray ≥ 2.52): one
//! token per cluster, made by `cluster up` and kept 0600 next to the
//! cluster file; `up` hands it to each node's `cluster join` on ssh stdin,
//! which writes it 0600 where Ray runs ([`node_token_path`]) and starts Ray
//! with `RAY_AUTH_TOKEN_PATH` naming that file. Every driver halobox runs
//! on the head (the state query, `serve`) reads the same file
//! ([`driver_exports`]). The token never appears in an argument, an env
//! line of `--dry-run`, or a log.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Ray's switch for authentication.
pub const MODE_VAR: &str = "RAY_AUTH_MODE";
/// The variable naming the file Ray reads its token from.
pub const TOKEN_PATH_VAR: &str = "RAY_AUTH_TOKEN_PATH";
/// The variable Ray reads a token from directly (never set by halobox).
pub const TOKEN_VAR: &str = "RAY_AUTH_TOKEN";
/// The first Ray with token authentication.
pub const MIN_RAY: (u32, u32) = (2, 52);

/// How `cluster up` starts Ray.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Token authentication (the default).
    Token,
    /// No authentication (`--insecure-ray`).
    Insecure,
}

impl Mode {
    /// The `cluster join` flag for a start in this mode.
    pub fn join_flag(self) -> &'static str {
        match self {
            Mode::Token => "--ray-token-stdin",
            Mode::Insecure => "--insecure-ray",
        }
    }
}

/// The node's token file as a shell word expands it where Ray runs (the
/// same place [`node_token_path`] names for that user: halobox's config
/// folder, `$XDG_CONFIG_HOME/halobox` or `~/.config/halobox`).
pub const NODE_TOKEN_SH: &str = "${XDG_CONFIG_HOME:-$HOME/.config}/halobox/ray-auth-token";

/// The node's token file for this process's user (where Ray runs).
pub fn node_token_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("halobox").join("ray-auth-token"))
}

/// The cluster's token file: next to the cluster file (`cluster.toml` →
/// `cluster.ray-token`).
pub fn cluster_token_path(config: &Path) -> PathBuf {
    beside_cluster_file(config, "ray-token")
}

/// A file kept next to the cluster file, named by its stem and `suffix`
/// (`cluster.toml` → `cluster.SUFFIX`).
pub fn beside_cluster_file(config: &Path, suffix: &str) -> PathBuf {
    let stem = config
        .file_stem()
        .map_or("cluster".into(), |s| s.to_string_lossy().into_owned());
    config.with_file_name(format!("{stem}.{suffix}"))
}

/// A Ray token (64 hex digits); its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(********)")
    }
}

impl Token {
    /// The token's text (only ever written to stdin or a 0600 file).
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Checks a token's text: 32 to 256 characters of `[0-9A-Za-z_-]`.
    pub fn parse(text: &str) -> Result<Token, String> {
        let t = text.trim_end_matches(['\n', '\r']);
        let ok = (32..=256).contains(&t.len())
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
        if ok {
            Ok(Token(t.to_string()))
        } else {
            Err("not a token (32 to 256 letters, digits, '_' or '-')".into())
        }
    }

    /// A new token: 32 random bytes from the kernel, in hex (as Ray's own
    /// `ray get-auth-token --generate`).
    pub fn generate() -> std::io::Result<Token> {
        let mut b = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(Token(hex::encode(b)))
    }
}

/// Writes `text` to `path` with mode 0600 (its folder made 0700 when
/// missing), replacing it atomically.
pub fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.halobox-{}",
        path.file_name()
            .map_or("token".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let res = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    res.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })
}

/// The cluster's token from `path`, made there (0600) when missing. A file
/// others may read, or that holds no token, is refused.
pub fn load_or_create(path: &Path) -> anyhow::Result<Token> {
    load_or_create_secret(
        path,
        "Ray's token for this cluster",
        "`halobox cluster down`, then `halobox cluster up` makes a new one",
    )
}

/// A secret token kept in `path` (`what` it is, for errors), made there
/// (0600) when missing; `remake` says how a new one comes about after the
/// file is removed. A link, a file another user owns (they could have
/// planted it: its token would be theirs), one others may read, or one
/// that holds no token, is refused.
pub fn load_or_create_secret(path: &Path, what: &str, remake: &str) -> anyhow::Result<Token> {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            if m.file_type().is_symlink() {
                anyhow::bail!(
                    "{} ({what}) is a symbolic link: not used\n  hint: remove it: {remake}",
                    path.display()
                );
            }
            let me = nix::unistd::geteuid().as_raw();
            if m.uid() != me {
                anyhow::bail!(
                    "{} ({what}) belongs to uid {}, not to you (uid {me}): not used\n  hint: remove it: {remake}",
                    path.display(),
                    m.uid()
                );
            }
            if m.permissions().mode() & 0o077 != 0 {
                anyhow::bail!(
                    "{} ({what}) can be read by others (mode {:o})\n  hint: `chmod 600 {}`, or remove it: {remake}",
                    path.display(),
                    m.permissions().mode() & 0o777,
                    path.display()
                );
            }
            let bytes = crate::confine::read_regular(path, true, 4096)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            Token::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| {
                anyhow::anyhow!(
                    "{} ({what}): {e}\n  hint: remove it: {remake}",
                    path.display()
                )
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let t =
                Token::generate().map_err(|e| anyhow::anyhow!("cannot read /dev/urandom: {e}"))?;
            write_private(path, &format!("{}\n", t.secret()))?;
            Ok(t)
        }
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
}

/// Reads the token `cluster up` sends on stdin (one line).
pub fn read_token_line(from: impl Read) -> anyhow::Result<Token> {
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(from.take(1024)), &mut line)
        .map_err(|e| anyhow::anyhow!("cannot read Ray's token from stdin: {e}"))?;
    Token::parse(&line).map_err(|e| {
        anyhow::anyhow!(
            "stdin: {e}\n  hint: `halobox cluster up` sends it; run `cluster join` through it"
        )
    })
}

/// The shell words (for a `sh -c` program, before the driver's `exec`)
/// that set a driver's authentication where Ray runs: for a cluster `up`
/// starts in `mode`, that mode (token mode names the node's token file even
/// before `join` writes it: Ray reads it when the driver first connects);
/// for a cluster already up (`None`), token mode when the node's token
/// file is there (it is not after `--insecure-ray`).
pub fn driver_exports(mode: Option<Mode>) -> String {
    let token = format!("export {MODE_VAR}=token {TOKEN_PATH_VAR}=\"{NODE_TOKEN_SH}\"; ");
    match mode {
        Some(Mode::Token) => token,
        Some(Mode::Insecure) => format!("export {MODE_VAR}=disabled; "),
        None => format!("if [ -e \"{NODE_TOKEN_SH}\" ]; then {token}fi; "),
    }
}

/// `cmd` (a Ray driver, argv where Ray runs) with [`driver_exports`] in
/// front.
pub fn driver_argv(cmd: &[String], mode: Option<Mode>) -> Vec<String> {
    let mut a = vec![
        "sh".to_string(),
        "-c".into(),
        format!("{}exec \"$@\"", driver_exports(mode)),
        "halobox-ray-driver".into(),
    ];
    a.extend(cmd.iter().cloned());
    a
}

/// The variables `ray start` gets on a node: token mode with the file, or
/// authentication off (`--insecure-ray`).
pub fn ray_start_env(token_file: Option<&Path>) -> Vec<(String, String)> {
    match token_file {
        Some(p) => vec![
            (MODE_VAR.into(), "token".into()),
            (TOKEN_PATH_VAR.into(), p.display().to_string()),
        ],
        None => vec![(MODE_VAR.into(), "disabled".into())],
    }
}

/// The warning `--insecure-ray` prints every time.
pub const INSECURE_WARNING: &str = "warning: --insecure-ray: Ray starts WITHOUT token authentication: anyone who reaches a node's Ray ports (the GCS on the head, every raylet) can run any code there, with the GPU, the network and the model cache";

/// Whether Ray `version` (`2.60.0`) has token authentication.
pub fn supports_token(version: &str) -> bool {
    let mut parts = version.trim().split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= MIN_RAY,
        _ => false,
    }
}

/// The Python program that prints the installed Ray's version without
/// importing Ray (its package metadata).
const VERSION_PY: &str = "import importlib.metadata as m; print(m.version('ray'))";

/// The Python that runs `ray` (its `#!` line; a `ray` without a path is
/// looked up in `PATH`), else `python3`.
pub fn ray_python(ray: &str) -> String {
    let path = if ray.contains('/') {
        Some(PathBuf::from(ray))
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(ray))
                .find(|p| p.is_file())
        })
    };
    let shebang = path.and_then(|p| {
        let mut first = [0u8; 256];
        let n = std::fs::File::open(p).ok()?.read(&mut first).ok()?;
        let text = String::from_utf8_lossy(&first[..n]).into_owned();
        let line = text.lines().next()?.strip_prefix("#!")?.trim().to_string();
        let mut words = line.split_whitespace();
        let prog = words.next()?.to_string();
        if prog.ends_with("/env") {
            words.find(|w| !w.starts_with('-')).map(str::to_string)
        } else {
            Some(prog)
        }
    });
    shebang.unwrap_or_else(|| "python3".into())
}

/// The version of the Ray that `ray` runs, or why it cannot be told.
pub fn ray_version(ray: &str) -> Result<String, String> {
    let python = ray_python(ray);
    let argv = [python.clone(), "-c".into(), VERSION_PY.into()];
    let done = crate::proc::run(&argv, Duration::from_secs(30))
        .map_err(|e| format!("cannot run {python} (the Python of {ray}): {e}"))?;
    match done.status.and_then(|s| s.code()) {
        Some(0) => Ok(done.stdout.trim().to_string()),
        _ => Err(format!(
            "cannot tell Ray's version with {python} (the Python of {ray}): {}",
            crate::remote::tail(&done.output, 2)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_with_token_auth() {
        for v in ["2.52.0", "2.60.0", "3.0.0", "2.52.0rc1", "2.61.0.dev0"] {
            assert!(supports_token(v), "{v}");
        }
        for v in ["2.51.1", "2.9.3", "1.13.0", "", "garbage"] {
            assert!(!supports_token(v), "{v}");
        }
    }

    #[test]
    fn tokens_are_checked_and_never_shown() {
        let t = Token::generate().unwrap();
        assert_eq!(t.secret().len(), 64);
        assert_eq!(format!("{t:?}"), "Token(********)");
        assert_eq!(Token::parse(&format!("{}\n", t.secret())).unwrap(), t);
        assert!(Token::parse("short").is_err());
        assert!(Token::parse(&format!("{} x", t.secret())).is_err());
    }

    #[test]
    fn the_cluster_token_is_made_once_and_kept_private() {
        let d = tempfile::tempdir().unwrap();
        let cfg = d.path().join("cluster.toml");
        let p = cluster_token_path(&cfg);
        assert_eq!(p, d.path().join("cluster.ray-token"));
        let a = load_or_create(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create(&p).unwrap(), a);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load_or_create(&p).unwrap_err().to_string();
        assert!(
            e.contains("can be read by others") && e.contains("chmod 600"),
            "{e}"
        );
    }

    /// A token or API key file that is a link (to a private file of this
    /// user's, with a good token), or that another user owns, is refused:
    /// it names what is wrong and the way out.
    #[test]
    fn planted_secret_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("elsewhere");
        let t = Token::generate().unwrap();
        write_private(&real, &format!("{}\n", t.secret())).unwrap();
        let link = d.path().join("cluster.ray-token");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = load_or_create(&link).unwrap_err().to_string();
        assert!(
            e.contains("is a symbolic link") && e.contains("hint: remove it"),
            "{e}"
        );
        let key = d.path().join("cluster.api-key");
        write_private(&key, &format!("{}\n", t.secret())).unwrap();
        let other = nix::unistd::Uid::from_raw(nix::unistd::geteuid().as_raw() + 4242);
        nix::unistd::chown(&key, Some(other), None).unwrap();
        let e = load_or_create_secret(&key, "the serving API's key", "make a new one")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("belongs to uid") && !e.contains(t.secret()),
            "{e}"
        );
    }

    #[test]
    fn drivers_read_the_node_file_through_the_shell() {
        let d = tempfile::tempdir().unwrap();
        let run = |mode: Option<Mode>| {
            let argv = driver_argv(
                &[
                    "sh".into(),
                    "-c".into(),
                    "echo \"$RAY_AUTH_MODE:$RAY_AUTH_TOKEN_PATH\"".into(),
                ],
                mode,
            );
            let out = crate::proc::command(&argv[0])
                .args(&argv[1..])
                .env("XDG_CONFIG_HOME", d.path())
                .env_remove(MODE_VAR)
                .env_remove(TOKEN_PATH_VAR)
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        let f = d.path().join("halobox/ray-auth-token");
        let token = format!("token:{}\n", f.display());
        assert_eq!(run(None), ":\n");
        assert_eq!(run(Some(Mode::Token)), token);
        assert_eq!(run(Some(Mode::Insecure)), "disabled:\n");
        write_private(&f, "x").unwrap();
        assert_eq!(run(None), token);
    }
}
