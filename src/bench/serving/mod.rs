//! `halobox bench serving`: load against a running OpenAI endpoint (what
//! `halobox serve` brings up: vLLM or llama.cpp's llama-server), in what a
//! user feels: time to first token, inter-token latency, output tokens
//! and requests per second, at several concurrency levels.
//!
//! [`plan`] decides from the flags (pure); [`prompts`] makes fixed-length
//! random prompts; [`client`] speaks HTTP and times streams ([`sse`] reads
//! them); [`run`] runs the levels; [`record`] saves, derives and renders;
//! [`ab`] plans and judges `--ab-transport`.

pub mod ab;
pub mod client;
pub mod plan;
pub mod prompts;
pub mod record;
pub mod run;
pub mod sse;
