//! The word a `cluster refresh` sends a node's `refresh --stage` on its
//! stdin once every node is staged: `commit` (swap the staged container in)
//! or `discard` (remove it). The stdin is the ssh link to the cluster
//! refresh: when it closes before a word came (the cluster refresh died or
//! the link dropped), this process gets SIGTERM, so a stage in progress
//! stops and undoes what it made, and a staged container is discarded.

use std::sync::mpsc;

/// What the cluster refresh decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// Swap the staged container in.
    Commit,
    /// Remove the staged container.
    Discard,
}

impl Word {
    /// The line that carries it.
    pub fn line(self) -> &'static str {
        match self {
            Word::Commit => "commit\n",
            Word::Discard => "discard\n",
        }
    }

    /// The word a line means (anything but `commit` discards).
    pub fn parse(line: &str) -> Word {
        match line.trim() {
            "commit" => Word::Commit,
            _ => Word::Discard,
        }
    }
}

/// The word, once it arrives.
#[derive(Debug)]
pub struct Listener {
    rx: mpsc::Receiver<Word>,
}

impl Listener {
    /// Reads stdin in a thread: the first line is the word; its end before
    /// any line sends this process SIGTERM. Start it after SIGTERM is
    /// caught ([`crate::signals::Caught::install`]).
    pub fn start() -> Listener {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            match std::io::stdin().read_line(&mut line) {
                Ok(n) if n > 0 => {
                    let _ = tx.send(Word::parse(&line));
                }
                _ => {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::this(),
                        nix::sys::signal::Signal::SIGTERM,
                    );
                }
            }
        });
        Listener { rx }
    }

    /// Waits for the word (a reader that ended without one: `discard`).
    pub async fn word(self) -> Word {
        let rx = self.rx;
        tokio::task::spawn_blocking(move || rx.recv().unwrap_or(Word::Discard))
            .await
            .unwrap_or(Word::Discard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_commit_commits() {
        for w in [Word::Commit, Word::Discard] {
            assert_eq!(Word::parse(w.line()), w);
        }
        assert_eq!(Word::parse("commit\r\n"), Word::Commit);
        assert_eq!(Word::parse("commitx\n"), Word::Discard);
        assert_eq!(Word::parse(""), Word::Discard);
    }
}
