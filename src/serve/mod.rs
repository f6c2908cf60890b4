//! `halobox serve`: the inference engine (vLLM, tensor-parallel over the
//! cluster's Ray) in the head's container, started detached there and
//! watched from the head until it is ready, then (in the foreground) until
//! it fails or Ctrl-C stops it; `serve status`, `logs` and `stop` for a
//! serve left running with `--detach`.
//!
//! - [`crate::fleet::supervisor::serve`] (beside the other workflows over
//!   the cluster, since a restart brings lost nodes back with `cluster
//!   up`) is the library's one entry point for `serve` (what
//!   `src/cmd/serve.rs` and the cluster menu call): it starts the serve
//!   through [`start`](mod@start), then a detached supervisor or the
//!   foreground supervises it (a plain foreground serve too, under the
//!   policy "never restart"); [`DEFAULT_PORT`] and [`DEFAULT_TIMEOUT_S`]:
//!   its defaults;
//! - [`start`](mod@start): a [`request::Request`] checked, planned and
//!   started, vLLM or llama.cpp; [`request`]: what a serve is, as asked and
//!   as recorded (`Spec`, `Request`);
//! - [`api_key`]: the API key (and `require_key.py`, the vLLM middleware
//!   that asks for it on every route); [`llama`]: llama-server's command and
//!   checks; [`rpc`]: llama.cpp's RPC server programs; [`rpc_servers`]: the
//!   RPC servers on every worker (their commands and `cluster status`'s
//!   view; [`crate::fleet::rpc_up`] starts and stops them);
//! - [`plan`]: `vllm serve`'s command, environment and parallelism (pure);
//! - [`preflight`]: cluster up, GPUs, port, vLLM, the model on every node;
//! - [`fit`]: the model's weights and KV cache against each node's GPU
//!   memory;
//! - [`decide`]: the split `plan` shows and `serve` starts (one function
//!   for both), and `--max-model-len auto`;
//! - [`prepare`]: the plan (vLLM's argv and the head's env) from the
//!   cluster file and the head's facts;
//! - [`program`]: the `sh` programs run in the head's container (start
//!   detached, state, stop with its shm segments, logs);
//! - [`engine`]: running them in the head's container, following the log;
//! - [`log_lines`]: judging vLLM's log lines (fatal, worker nodes, progress,
//!   errors); [`kv_check`]: the engine's own KV-cache figures from its log
//!   against plan's bytes per token (pure);
//! - [`launch`]: the engine started and awaited until ready (the API's
//!   `/health` and `/v1/models` through [`crate::http`]), a failure named;
//! - [`checks`]: each check of a serving engine, its interval and its
//!   verdict (pure); [`watcher`]: the one loop that runs them and says how
//!   watching ended;
//! - [`control`]: status, logs and stop of a recorded serve; [`golden`]:
//!   the greedy completions recorded when it first answers, and checked
//!   again (`serve golden`);
//! - [`state`]: what a serve recorded on the head (the serve, its
//!   restarts, its supervisor's pid file); [`interrupt`]: Ctrl-C;
//! - [`restart_policy`]: `--restart`'s policy, window, events and progress
//!   probe (pure), which [`crate::fleet::supervisor`] acts on (stop, wait
//!   for the nodes, `cluster up`, start again from the record).

pub mod api_key;
pub mod checks;
pub mod control;
pub mod decide;
pub mod engine;
pub mod fit;
pub mod golden;
pub mod interrupt;
pub mod kv_check;
pub mod launch;
pub mod llama;
pub mod log_lines;
pub mod plan;
pub mod preflight;
pub mod prepare;
pub mod program;
pub mod request;
pub mod restart_policy;
pub mod rpc;
pub mod rpc_servers;
pub mod start;
pub mod state;
pub mod watcher;

/// The API port a serve listens on unless `--port` says otherwise.
pub const DEFAULT_PORT: u16 = 8000;

/// The seconds an engine may take to become ready unless `--timeout` says
/// otherwise.
pub const DEFAULT_TIMEOUT_S: u64 = 1800;
