//! `halobox metrics`: one node's GPU, RDMA and data-plane netdev figures in
//! the Prometheus text format. [`mod@collect`] reads them through the host
//! readers (so a `--sysroot` snapshot scrapes like the host), [`exposition`]
//! writes the text, [`serve`] answers `GET /metrics` on one address, [`node`]
//! says what runs on a cluster node (its container, Ray, the serve), [`top`]
//! reads scrapes into `cluster top`'s rows.

pub mod collect;
pub mod exposition;
pub mod node;
pub mod scrape_config;
pub mod serve;
pub mod top;

pub use collect::{Target, collect};
pub use exposition::render;
