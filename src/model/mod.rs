//! Model weights in the Hugging Face cache of every node: the cache layout
//! ([`cache`]), what a node holds ([`facts`], with the hashes it verified
//! in [`record`]), what a sync will do ([`plan`], pure), and doing it
//! ([`sync`] over ssh, the bytes by [`transfer`] over the data plane).

pub mod cache;
pub mod facts;
pub mod plan;
pub mod record;
pub mod sync;
pub mod transfer;
