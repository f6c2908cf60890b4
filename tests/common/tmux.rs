//! A command in a real terminal: a private tmux server, its screen read
//! back and keys sent to it (dialoguer prompts and menus).

use std::cell::RefCell;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of its own with one session, `tui`; killed on drop.
pub struct Tmux {
    socket: String,
    /// The whole scrollback when keys were last sent.
    before_keys: RefCell<String>,
}

impl Tmux {
    /// Starts `command` (a shell line) in a 120x50 terminal on a server
    /// named after `name` and this process.
    pub fn start(name: &str, command: &str) -> Self {
        let tmux = Tmux {
            socket: format!("{name}-{}", std::process::id()),
            before_keys: RefCell::new(String::new()),
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

    /// The screen once a line containing every one of `parts` has appeared
    /// since keys were last sent (more such lines than there were then),
    /// 30 s at most: text already on the screen does not count.
    pub fn wait_for_new(&self, parts: &[&str]) -> String {
        let lines = |s: &str| {
            s.lines()
                .filter(|l| parts.iter().all(|p| l.contains(p)))
                .count()
        };
        let had = lines(&self.before_keys.borrow());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.history();
            if lines(&s) > had {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "no new line with {parts:?} appeared:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The whole scrollback.
    fn history(&self) -> String {
        self.run(&["capture-pane", "-t", "tui", "-p", "-J", "-S", "-"])
    }

    /// Sends keys (tmux key names), one at a time.
    pub fn keys(&self, keys: &[&str]) {
        *self.before_keys.borrow_mut() = self.history();
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
