//! `halobox bench serving`'s flags.

use std::path::PathBuf;

use clap::Args;

use super::common::{ClusterFileArgs, PlanOutputArgs};

/// `halobox bench serving`.
#[derive(Debug, Args)]
pub struct BenchServingArgs {
    /// The OpenAI endpoint, http://HOST:PORT (default: the serve recorded for the cluster file, the one `serve status` shows).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// The model to ask for (default: the first one the endpoint lists).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Concurrency levels, comma-separated: requests in flight at once.
    #[arg(long, value_name = "LIST", default_value = "1,4,8")]
    pub concurrency: String,
    /// Requests per concurrency level.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub requests: u32,
    /// Prompt length in tokens (random words).
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=131_072))]
    pub input_tokens: u32,
    /// Output length in tokens (end of sequence ignored).
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub output_tokens: u32,
    /// Seed of the random prompts (the same seed, the same prompts).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Seconds a request may wait for its next bytes (a frozen server ends the run after it).
    #[arg(long, value_name = "S", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Send no API key (for a serve started with --no-api-key).
    #[arg(long)]
    pub no_api_key: bool,
    /// Run it twice, restarting the cluster and the recorded serve: first with transport = "ethernet" (in memory; cluster.toml is not changed), then with cluster.toml's transport, and show both and their ratio. Refused while anybody uses the serve.
    #[arg(long)]
    pub ab_transport: bool,
    /// Save serving.json here (default: $XDG_STATE_HOME/halobox/bench/<UTC time>).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}

impl BenchServingArgs {
    /// `--save`, else a new folder under halobox's bench runs.
    pub fn save_dir(&self) -> anyhow::Result<PathBuf> {
        let (_, stamp) = crate::bench::run::utc_now();
        match &self.save {
            Some(d) => Ok(d.clone()),
            None => crate::bench::run::default_save_dir(&stamp),
        }
    }

    /// The run the flags ask for, against `endpoint`, checked.
    pub fn options(
        &self,
        endpoint: crate::bench::serving::plan::Endpoint,
        endpoint_from: String,
        from: &crate::bench::serving::key::KeyFrom,
    ) -> anyhow::Result<crate::bench::serving::plan::ServingOptions> {
        let opts = crate::bench::serving::plan::ServingOptions {
            endpoint,
            endpoint_from,
            model: self.model.clone(),
            concurrency: crate::bench::serving::plan::parse_levels(&self.concurrency)
                .map_err(crate::error::UsageError)?,
            requests: self.requests,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            seed: self.seed,
            timeout_s: self.timeout,
            key: from.describe(),
        };
        opts.check().map_err(crate::error::UsageError)?;
        Ok(opts)
    }
}
