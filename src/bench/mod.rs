//! `halobox bench`: Ethernet (TCP) against RDMA between two nodes, in the
//! right units, with failures diagnosed.
//!
//! [`flow`] is `bench run` from start to end (the peer from the flags and
//! the cluster file, where each end runs, the run, its report; `bench
//! serve`'s server); [`probe`] is what the benchmark needs to know about
//! one end (`bench probe`), [`tcp`] is halobox's
//! own TCP client and server; [`plan`] decides what runs (pure), [`run`] runs it (ssh to the peer,
//! clients here), [`results`] derives the table from the saved raw logs
//! ([`saved`] loads any saved run's record) and
//! [`report`] prints it. The parsers ([`perftest`], [`iperf3`]) and
//! [`diagnose`] read the tools' own output ([`wc_status`] decodes completion
//! errors, [`sweep`] finds where a size sweep collapses); [`counters`] reads the RDMA
//! counters' deltas; [`peer`] picks the peer from the cluster config.
//! [`serving`] loads a running `serve` endpoint instead, [`soak`] holds one
//! under long-context load for a while and judges it; [`collective`] is
//! `bench collective` (all-reduce across the cluster). [`html`] draws saved
//! runs as one HTML page of SVG charts (`bench report --html`).
//! [`link_cost`] turns the newest saved runs into the link's costs for
//! `plan`'s speed estimate.

pub mod collective;
pub mod counters;
pub mod diagnose;
pub mod flow;
pub mod html;
pub mod iperf3;
pub mod link_cost;
pub mod peer;
pub mod perftest;
pub mod plan;
pub mod probe;
pub mod report;
pub mod results;
pub mod run;
pub mod saved;
pub mod serving;
pub mod soak;
pub mod stats;
pub mod sweep;
pub mod tcp;
pub mod usb4;
pub mod wc_status;
