//! A command in a real terminal: a private tmux server, its screen read
//! back and keys sent to it (dialoguer prompts and menus).

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of its own with one session, `tui`; killed on drop.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `command` (a shell line) in a 120x50 terminal on a server
    /// named after `name` and this process.
    pub fn start(name: &str, command: &str) -> Self {
        let tmux = Tmux {
            socket: format!("{name}-{}", std::process::id()),
        };
        let started = Command::new("tmux")
            .args(["-L", &tmux.socket])
            .args(["new-session", "-d", "-s", "tui", "-x", "120", "-y", "50"])
            .arg(command)
            .status()
            .expect("tmux (scripts/test.sh installs it)");
        assert!(started.success());
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux (scripts/test.sh installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen and its scrollback.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-t", "tui", "-p", "-J", "-S", "-200"])
    }

    /// The screen once it shows `text` (30 s at most).
    pub fn wait_for(&self, text: &str) -> String {
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

    /// Sends keys (tmux key names), one at a time.
    pub fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", "tui", k]);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `text` and Enter.
    pub fn type_line(&self, text: &str) {
        self.run(&["send-keys", "-t", "tui", "-l", text]);
        self.keys(&["Enter"]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}
