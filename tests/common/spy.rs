//! Programs on PATH that record how halobox started them (arguments,
//! environment, stdin), then run the real program or exit: how a test sees
//! what a child process was given.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A folder of spy programs (world-readable, so another user can run them).
pub struct Spies {
    dir: tempfile::TempDir,
}

impl Spies {
    /// An empty folder.
    pub fn new() -> Spies {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Spies { dir }
    }

    fn log(&self, program: &str) -> PathBuf {
        self.dir.path().join(format!("{program}.log"))
    }

    /// A `program` that appends `== program ARGS`, its environment and (with
    /// `read_stdin`) its stdin to its log, then runs the shell line `then`
    /// (`exec /usr/bin/toolbox "$@"`, `exit 255`).
    pub fn add(&self, program: &str, read_stdin: bool, then: &str) {
        let log = self.log(program);
        std::fs::write(&log, "").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
        let stdin = if read_stdin {
            format!(
                "echo '-- stdin:' >> {log}; cat >> {log}\n",
                log = log.display()
            )
        } else {
            String::new()
        };
        let script = format!(
            "#!/bin/sh\n{{ echo \"== {program} $*\"; env; }} >> {log}\n{stdin}{then}\n",
            log = log.display()
        );
        let path = self.dir.path().join(program);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// `PATH` with the spies first.
    pub fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// What `program` recorded (empty when it never ran).
    pub fn record(&self, program: &str) -> String {
        std::fs::read_to_string(self.log(program)).unwrap_or_default()
    }
}

/// Secrets a test puts in halobox's environment; no child may get them.
pub const SECRETS: &[(&str, &str)] = &[
    ("HF_TOKEN", "hf_w10e_token_1f2e3d"),
    ("HUGGING_FACE_HUB_TOKEN", "hf_w10e_hub_4c5b6a"),
    ("VLLM_API_KEY", "vllm_w10e_key_7d8e9f"),
    ("HALOBOX_REGISTRY_USER", "w10e_user_0a1b2c"),
    ("HALOBOX_REGISTRY_PASSWORD", "w10e_password_3d4e5f"),
    ("LLAMA_API_KEY", "llama_w36_key_8a9b0c"),
];

/// Panics when `record` holds any secret value.
pub fn assert_no_secret(record: &str) {
    assert!(!record.is_empty(), "the child never ran");
    for (name, value) in SECRETS {
        assert!(
            !record.contains(value),
            "{name} reached a child process:\n{record}"
        );
    }
}
