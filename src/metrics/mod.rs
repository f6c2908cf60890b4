//! `halobox metrics`: one node's GPU, RDMA and data-plane netdev figures in
//! the Prometheus text format. [`mod@collect`] reads them through the host
//! readers (so a `--sysroot` snapshot scrapes like the host), [`exposition`]
//! writes the text, [`serve`] answers `GET /metrics` on one address.

pub mod collect;
pub mod exposition;
pub mod scrape_config;
pub mod serve;

pub use collect::{Target, collect};
pub use exposition::render;
