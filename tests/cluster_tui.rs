//! `halobox cluster tui` in a real terminal (tmux): the menu shows, its
//! entries run the same operations as the flags, errors keep the menu alive,
//! and quit leaves with status 0. Its ssh targets are loopback addresses
//! where nothing listens, so nothing leaves this machine.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux (scripts/test.sh installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-t", "tui", "-p", "-S", "-200"])
    }

    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "{text:?} never appeared:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", "tui", k]);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

#[test]
fn menu_shows_the_config_survives_errors_and_quits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        "transport = \"auto\"\nray_port = 6379\n\n\
         [[node]]\nssh = \"root@127.0.0.9\"\nip = \"10.9.0.1\"\ncontainer = \"vllm\"\nbackend = \"host\"\n\n\
         [[node]]\nssh = \"root@127.0.0.10\"\nip = \"10.9.0.2\"\ncontainer = \"vllm\"\nbackend = \"host\"\n",
    )
    .unwrap();
    let tmux = Tmux {
        socket: format!("halobox-tui-{}", std::process::id()),
    };
    let command = format!(
        "{} cluster tui --cluster {}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_halobox"),
        file.display()
    );
    let started = Command::new("tmux")
        .args([
            "-L",
            &tmux.socket,
            "new-session",
            "-d",
            "-s",
            "tui",
            "-x",
            "120",
            "-y",
            "50",
        ])
        .arg(&command)
        .status()
        .unwrap();
    assert!(started.success());
    tmux.wait_for("show cluster.toml");

    // "show cluster.toml" is the sixth entry.
    tmux.keys(&["Down", "Down", "Down", "Down", "Down", "Enter"]);
    tmux.wait_for("ip = \"10.9.0.2\"");

    // status: the head cannot be reached; the error names it and the menu comes back.
    tmux.wait_for("halobox cluster");
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for("127.0.0.9");
    assert!(s.contains("error"), "{s}");

    // quit is the last entry.
    tmux.keys(&["Up", "Enter"]);
    tmux.wait_for("EXIT=0");
}
