//! `halobox refresh`: pull, pin, create beside the old container, check it
//! stays up, then swap and keep the old one as `NAME-prev`, then prune.
//! [`flow`] is the whole run as one entry point (dry run, staged or at
//! once, the check from inside; it asks before a replace through an
//! `Ask`); [`render`] is what it shows (the dry run's plan, what a replace
//! does to the containers that exist). The start check has a settle window.
//! [`prepare`] gathers what the plan needs (config, environment, engine),
//! [`plan`] decides ([`pull`]: whether the image is pulled), [`run`] carries it out ([`check`] is its start check,
//! [`crate::signals`] holds SIGINT/SIGTERM across the swap; [`word`] is how a
//! staged run hears `cluster refresh`'s decision). [`crate::lock`] keeps it to
//! one run per engine and name; [`journal`] records each run's steps and
//! [`repair`] puts back what an interrupted run left.

pub mod check;
pub mod flow;
pub mod journal;
pub mod plan;
pub mod prepare;
pub mod pull;
pub mod render;
pub mod repair;
pub mod run;
pub mod word;
