//! `halobox refresh`: pull, pin, create beside the old container, check it
//! runs, then swap, then prune. [`plan`] decides; [`run`] carries it out.

pub mod plan;
pub mod run;
