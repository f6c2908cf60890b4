//! `halobox refresh`: pull, pin, create beside the old container, check it
//! stays up, then swap and keep the old one as `NAME-prev`, then prune.
//! [`prepare`] gathers what the plan needs (config, environment, engine),
//! [`plan`] decides ([`pull`]: whether the image is pulled), [`run`] carries it out ([`check`] is its start check,
//! [`signals`] holds SIGINT/SIGTERM across the swap; [`word`] is how a
//! staged run hears `cluster refresh`'s decision). [`lock`] keeps it to
//! one run per engine and name; [`journal`] records each run's steps and
//! [`repair`] puts back what an interrupted run left.

pub mod check;
pub mod flow;
pub mod journal;
pub mod lock;
pub mod plan;
pub mod prepare;
pub mod pull;
pub mod render;
pub mod repair;
pub mod run;
pub mod signals;
pub mod word;
