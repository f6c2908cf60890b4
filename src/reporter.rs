//! How a library workflow says what it does without printing on its own:
//! the command's output, and notes (progress, warnings) beside it. The
//! CLI's [`Terminal`] sends the output to stdout and the notes to stderr.
//! A question before a change goes to an [`Ask`] (the CLI's [`Prompt`]:
//! the terminal).

use std::io::{IsTerminal as _, Write};

use anyhow::Context as _;

/// Where a workflow's words go.
pub trait Reporter {
    /// Part of the command's output, as written (stdout for the CLI).
    fn out(&mut self, text: &str);
    /// Progress or a warning, as written (stderr for the CLI).
    fn note(&mut self, text: &str);
}

/// The terminal: output to stdout, notes to stderr. A stream that is
/// gone (a staged refresh's ssh link dropped while it puts things back)
/// never fails the workflow.
pub struct Terminal;

impl Reporter for Terminal {
    fn out(&mut self, text: &str) {
        let _ = std::io::stdout().write_all(text.as_bytes());
    }
    fn note(&mut self, text: &str) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// The terminal's stderr for everything: the progress of a command whose
/// stdout is its report (`--json` stays one document).
pub struct Stderr;

impl Reporter for Stderr {
    fn out(&mut self, text: &str) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    fn note(&mut self, text: &str) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// How a workflow asks before it changes something.
pub trait Ask {
    /// Whether someone can answer (a terminal).
    fn can_ask(&self) -> bool;
    /// Shows `lines`, then asks `question`; `Ok(true)` goes on (the
    /// default is no).
    fn ask(&mut self, lines: &[String], question: &str) -> anyhow::Result<bool>;
}

/// The question on the terminal (dialoguer), when stdin is one; the
/// lines before it go to stderr.
pub struct Prompt;

impl Ask for Prompt {
    fn can_ask(&self) -> bool {
        std::io::stdin().is_terminal()
    }
    fn ask(&mut self, lines: &[String], question: &str) -> anyhow::Result<bool> {
        for line in lines {
            eprintln!("{line}");
        }
        dialoguer::Confirm::new()
            .with_prompt(question)
            .default(false)
            .interact()
            .context("reading the answer")
    }
}

/// A reporter's output as a [`Write`] (for steps that write to one).
pub struct Out<'a>(pub &'a mut dyn Reporter);

impl Write for Out<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.out(&String::from_utf8_lossy(buf));
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output and notes kept apart, as a test's reporter.
    #[derive(Default)]
    struct Kept(String, String);

    impl Reporter for Kept {
        fn out(&mut self, text: &str) {
            self.0.push_str(text);
        }
        fn note(&mut self, text: &str) {
            self.1.push_str(text);
        }
    }

    #[test]
    fn a_writer_on_a_reporter_writes_its_output() {
        let mut k = Kept::default();
        writeln!(Out(&mut k), "a {}", 1).unwrap();
        k.note("n\n");
        assert_eq!((k.0.as_str(), k.1.as_str()), ("a 1\n", "n\n"));
    }
}
