//! `halobox metrics`: one node's GPU, RDMA and data-plane netdev figures in
//! the Prometheus text format. [`mod@collect`] reads them through the host
//! readers (so a `--sysroot` snapshot scrapes like the host), [`exposition`]
//! writes the text, [`serve`] answers `GET /metrics` on one address, [`node`]
//! says what runs on a cluster node (its container through the engine,
//! Ray's daemons in `/proc`, the serve's `GET /health`; the families pure),
//! [`top`] reads scrapes into `cluster top`'s rows (rates from counter
//! deltas, control characters stripped; `fetch` gets an endpoint's body
//! through [`crate::http`]), [`scrape_config`] is `cluster metrics`: every
//! node's endpoint and the engine's, as a Prometheus scrape config. Units
//! follow the kernel docs; labels are escaped; the server is bounded and
//! chooses its listen address.

pub mod collect;
pub mod exposition;
pub mod node;
pub mod scrape_config;
pub mod serve;
pub mod top;

pub use collect::{Target, collect};
pub use exposition::render;
