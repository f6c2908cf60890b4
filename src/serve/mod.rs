//! `halobox serve`: the inference engine (vLLM, tensor-parallel over the
//! cluster's Ray) in the head's container, started detached there and
//! watched from the head until it is ready, then (in the foreground) until
//! it fails or Ctrl-C stops it; `serve status`, `logs` and `stop` for a
//! serve left running with `--detach`.
//!
//! - [`keep::serve`]: the library's entry point for `serve` (what
//!   `src/cmd/serve.rs` calls): it starts the serve through [`start`](mod@start),
//!   then a detached supervisor or the foreground supervises it;
//! - [`start`](mod@start): a [`request::Request`] checked, planned and
//!   started, vLLM or llama.cpp; [`request`]: what a serve is, as asked and
//!   as recorded (`Spec`, `Request`);
//! - [`api_key`]: the API key (and `require_key.py`, the vLLM middleware
//!   that asks for it on every route); [`llama`]: llama-server's command and
//!   checks; [`rpc`]: llama.cpp's RPC server programs; [`rpc_servers`]: the
//!   RPC servers on every worker (`cluster up`/`status`/`down` for engine
//!   llama.cpp);
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
//! - [`watch`]: judging vLLM's log lines (fatal, worker nodes, progress,
//!   errors);
//! - [`supervise`]: ready, then serving, then the end, named (the API's
//!   `/health`, `/v1/models` and a completion through [`crate::http`]);
//! - [`control`]: status, logs and stop of a recorded serve;
//! - [`state`]: what a serve recorded on the head (the serve, its
//!   restarts, its supervisor's pid file); [`interrupt`]: Ctrl-C;
//! - [`restart`]: `--restart`'s policy, window, events and progress probe
//!   (pure); [`keep`]: the supervisor that acts on them (stop, wait for the
//!   nodes, `cluster up`, start again from the record).

pub mod api_key;
pub mod control;
pub mod decide;
pub mod engine;
pub mod fit;
pub mod interrupt;
pub mod keep;
pub mod llama;
pub mod plan;
pub mod preflight;
pub mod prepare;
pub mod program;
pub mod request;
pub mod restart;
pub mod rpc;
pub mod rpc_servers;
pub mod start;
pub mod state;
pub mod supervise;
pub mod watch;
