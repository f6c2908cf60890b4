//! The executor: carries out steps through the journal, one action at a
//! time (each recorded before it is done, with SIGINT and SIGTERM held
//! until it is), and says what it did.

use super::hold::Held;
use super::journal::{Store, run_command};
use super::{Action, Step};

/// Applies `steps` in order; `say` gets one line per action. Stops at the
/// first failure (what ran before it stays in the journal for `--undo`).
pub fn apply(
    store: &mut Store,
    steps: &[&Step],
    say: &mut dyn FnMut(String),
) -> anyhow::Result<()> {
    for step in steps {
        say(format!("[{}] {}", step.family, step.title));
        for action in &step.actions {
            let held = Held::start()?;
            match action {
                Action::Write {
                    path,
                    new,
                    owner,
                    mode,
                    ..
                } => {
                    store.write_file(path, new, *owner, *mode)?;
                    say(format!("  wrote {path}"));
                }
                Action::Run(cmd) => {
                    store.run(cmd, &run_command)?;
                    say(format!("  ran {}", cmd.line()));
                }
                Action::NotRun { cmd, why } => say(format!("  {why}: {}", cmd.line())),
                Action::ByHand { what } => {
                    say(format!("  by hand: {}", what.replace('\n', "\n    ")))
                }
            }
            drop(held);
        }
    }
    Ok(())
}
