//! `halobox refresh`: pull, pin, create beside the old container, check it
//! runs, then swap, then prune. [`prepare`] gathers what the plan needs
//! (config, environment, engine), [`plan`] decides, [`run`] carries it out.

pub mod plan;
pub mod prepare;
pub mod run;
