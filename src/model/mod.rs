//! Model weights: their size from the files' headers ([`weights`]) and
//! whether a plan fits each node's GPU memory ([`fit`]).

pub mod fit;
pub mod weights;
