//! Model weights in the Hugging Face cache of every node: the cache layout
//! ([`cache`]), what a node holds ([`facts`], with the hashes it verified
//! in [`record`]), what a sync will do ([`plan`], pure), and doing it
//! ([`sync`] over ssh, the bytes by [`transfer`] over the data plane);
//! whether every node holds a model complete, for `serve` ([`complete`]).

pub mod cache;
pub mod complete;
pub mod facts;
pub mod plan;
pub mod record;
pub mod sync;
pub mod transfer;
