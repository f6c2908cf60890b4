//! Pull and push progress: one bar per layer on a terminal, plain lines when
//! the output is not a terminal (CI logs, pipes).

use std::collections::HashMap;
use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress for a stream of per-layer events.
pub struct LayerProgress {
    bars: Option<(MultiProgress, HashMap<String, ProgressBar>)>,
    last_status: HashMap<String, String>,
    what: String,
}

impl LayerProgress {
    /// Bars on a terminal stderr, lines otherwise. `what` prefixes each line.
    pub fn new(what: &str) -> Self {
        let tty = std::io::stderr().is_terminal();
        Self {
            bars: tty.then(|| {
                (
                    MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
                    HashMap::new(),
                )
            }),
            last_status: HashMap::new(),
            what: what.to_string(),
        }
    }

    /// One event: a layer id, its status text, and bytes done/total when known.
    pub fn update(
        &mut self,
        id: Option<&str>,
        status: &str,
        current: Option<i64>,
        total: Option<i64>,
    ) {
        let Some(id) = id.filter(|i| !i.is_empty()) else {
            if !status.is_empty() {
                self.line(&format!("{}: {status}", self.what));
            }
            return;
        };
        let short: String = id.chars().take(12).collect();
        match &mut self.bars {
            Some((multi, bars)) => {
                let bar = bars.entry(short.clone()).or_insert_with(|| {
                    let b = multi.add(ProgressBar::new(0));
                    b.set_style(
                        ProgressStyle::with_template(
                            "{prefix:12} {msg:20} [{bar:30}] {bytes}/{total_bytes}",
                        )
                        .expect("valid template")
                        .progress_chars("=> "),
                    );
                    b.set_prefix(short.clone());
                    b
                });
                if let (Some(c), Some(t)) = (current, total)
                    && t > 0
                {
                    bar.set_length(t as u64);
                    bar.set_position(c.max(0) as u64);
                }
                bar.set_message(status.to_string());
            }
            None => {
                if self.last_status.get(&short).map(String::as_str) != Some(status) {
                    self.last_status.insert(short.clone(), status.to_string());
                    self.line(&format!("{}: {short}: {status}", self.what));
                }
            }
        }
    }

    fn line(&self, text: &str) {
        match &self.bars {
            Some((multi, _)) => {
                let _ = multi.println(text);
            }
            None => eprintln!("{text}"),
        }
    }

    /// Removes the bars.
    pub fn finish(self) {
        if let Some((multi, bars)) = self.bars {
            for b in bars.values() {
                b.finish_and_clear();
            }
            let _ = multi.clear();
        }
    }
}
