//! Model weights in the Hugging Face cache of every node (`model pull|sync|ls|rm`
//! from start to end in [`flow`]): the cache layout
//! ([`cache`]), what a node holds ([`facts`], with the hashes it verified
//! in [`record`]), what a sync will do ([`plan`], pure), and doing it
//! ([`sync`] over ssh, the bytes by [`transfer`] over the data plane);
//! whether every node holds a model complete, for `serve` ([`complete`]);
//! the model downloaded into one node's cache ([`pull`]); the model's size
//! from its files' headers ([`weights`]), its KV cache layer by layer as
//! the engine counts it ([`kv`]), the engine arguments that change memory
//! ([`memory_args`]), whether a serve plan fits each node's GPU memory
//! ([`fit`], pure) and every split the nodes allow ([`placement`], pure);
//! the weights one decoded token reads ([`active`]) and how fast each
//! split decodes ([`speed`], pure).

pub mod active;
pub mod cache;
pub mod complete;
pub mod facts;
pub mod fit;
pub mod flow;
pub mod kv;
pub mod memory_args;
pub mod placement;
pub mod plan;
pub mod pull;
pub mod record;
pub mod speed;
pub mod sync;
pub mod transfer;
pub mod weights;

/// A public model's `config.json` from `tests/fixtures/model-configs`, for
/// the unit tests of the model's arithmetic (KV, active weights, speed).
#[cfg(test)]
pub(crate) fn fixture_config(name: &str) -> serde_json::Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/model-configs")
        .join(name);
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}
