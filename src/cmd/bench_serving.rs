//! `halobox bench serving`: the endpoint (`--url`, else the serve recorded
//! for the cluster file) and its key (the engine's variable, else the
//! cluster's key file; never in an argument or the output), then the run
//! ([`crate::bench::serving`]), saved and printed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::bench::run as exec;
use crate::bench::serving::client::Key;
use crate::bench::serving::plan::{self, Endpoint, ServingOptions};
use crate::bench::serving::record::{self, ServingResults};
use crate::bench::serving::run;
use crate::cli::BenchServingArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::serve::{api_key, state};

/// The variables a serve's key may be in, by engine.
const KEY_VARS: [(&str, &str); 2] = [("vllm", "VLLM_API_KEY"), ("llama.cpp", "LLAMA_API_KEY")];

/// Where the key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFrom {
    /// This environment variable.
    Env(&'static str),
    /// The cluster's key file.
    File(PathBuf),
    /// No key, and why.
    Off(String),
}

impl KeyFrom {
    /// Where the key is (never the key).
    pub fn describe(&self) -> String {
        match self {
            KeyFrom::Env(v) => format!("sent as a bearer token, from {v} in this environment"),
            KeyFrom::File(p) => format!("sent as a bearer token, from {}", p.display()),
            KeyFrom::Off(why) => format!("none ({why})"),
        }
    }
}

/// Chooses the key: none with `--no-api-key` or for a serve recorded
/// without one; else the recorded engine's variable, else either engine's
/// variable that is set, else the cluster's key file when it exists.
pub fn key_from(
    no_key: bool,
    serve: Option<&state::ServeState>,
    cluster: Option<&Path>,
    set: impl Fn(&str) -> bool,
) -> KeyFrom {
    if no_key {
        return KeyFrom::Off("--no-api-key".into());
    }
    if serve.is_some_and(|s| !s.api_key) {
        return KeyFrom::Off("the serve was started with --no-api-key".into());
    }
    let engine = serve.map(|s| s.engine.as_str());
    let var = KEY_VARS
        .iter()
        .filter(|(e, _)| engine.is_none_or(|want| want == *e))
        .find(|(_, v)| set(v));
    if let Some((_, v)) = var {
        return KeyFrom::Env(v);
    }
    match cluster.map(api_key::path) {
        Some(p) if p.exists() => KeyFrom::File(p),
        _ => KeyFrom::Off(
            "VLLM_API_KEY and LLAMA_API_KEY are unset and there is no cluster key file".into(),
        ),
    }
}

/// `--save`, else a new folder under halobox's bench runs.
pub fn save_dir(args: &BenchServingArgs) -> anyhow::Result<PathBuf> {
    let (_, stamp) = exec::utc_now();
    match &args.save {
        Some(d) => Ok(d.clone()),
        None => exec::default_save_dir(&stamp),
    }
}

/// The key `from` names (never printed).
pub fn load_key(from: &KeyFrom) -> anyhow::Result<Option<Key>> {
    Ok(match from {
        KeyFrom::Off(_) => None,
        KeyFrom::Env(v) => std::env::var(v).ok().map(Key),
        KeyFrom::File(p) => Some(Key(crate::cluster::auth::load_or_create_secret(
            p,
            "the serving API's key for this cluster",
            "the next `halobox serve` makes a new one",
        )?
        .secret()
        .to_string())),
    })
}

/// The endpoint, where it came from, and the recorded serve (when it is
/// the default endpoint).
fn endpoint(
    args: &BenchServingArgs,
) -> anyhow::Result<(Endpoint, String, Option<state::ServeState>, Option<PathBuf>)> {
    if let Some(url) = &args.url {
        let e = Endpoint::parse(url).map_err(UsageError)?;
        let cluster = config::path(args.file.cluster.as_deref());
        return Ok((e, "--url".into(), None, cluster));
    }
    let (path, _) = config::open(args.file.cluster.as_deref())?;
    let s = state::load(&path).ok_or_else(|| {
        UsageError(format!(
            "no serve is recorded for {}\n  hint: start one with `halobox serve MODEL --detach`, or pass --url http://HOST:PORT",
            path.display()
        ))
    })?;
    let e = Endpoint::parse(&s.endpoint).map_err(UsageError)?;
    let from = format!(
        "the serve of {} ({} {})",
        path.display(),
        s.engine,
        crate::remote::printable(&s.model)
    );
    Ok((e, from, Some(s), Some(path)))
}

/// Whether the variable `v` is set (and not empty) here.
pub fn is_set(v: &str) -> bool {
    std::env::var_os(v).is_some_and(|x| !x.is_empty())
}

/// The run the flags ask for, against `endpoint`, checked.
pub fn options(
    args: &BenchServingArgs,
    endpoint: Endpoint,
    endpoint_from: String,
    from: &KeyFrom,
) -> anyhow::Result<ServingOptions> {
    let opts = ServingOptions {
        endpoint,
        endpoint_from,
        model: args.model.clone(),
        concurrency: plan::parse_levels(&args.concurrency).map_err(UsageError)?,
        requests: args.requests,
        input_tokens: args.input_tokens,
        output_tokens: args.output_tokens,
        seed: args.seed,
        timeout_s: args.timeout,
        key: from.describe(),
    };
    opts.check().map_err(UsageError)?;
    Ok(opts)
}

/// Runs the benchmark, saved in `dir` after every level (progress on
/// stderr); the results derived from the saved file, as `bench report`
/// derives them.
pub fn bench(
    opts: &ServingOptions,
    key: Option<&Key>,
    dir: &Path,
) -> anyhow::Result<ServingResults> {
    let (started, _) = exec::utc_now();
    let rec = crate::engine::block_on(run::run(
        opts,
        key,
        started,
        |line| eprintln!("{line}"),
        |rec| record::save(dir, rec),
    ))??;
    Ok(record::derive(&record::load(dir).unwrap_or(rec)))
}

/// Runs `bench serving` (without `--ab-transport`, which
/// [`super::bench_ab`] runs on these helpers).
pub fn run(args: &BenchServingArgs) -> anyhow::Result<ExitCode> {
    plan::parse_levels(&args.concurrency).map_err(UsageError)?;
    let (endpoint, endpoint_from, serve, cluster) = endpoint(args)?;
    let from = key_from(args.no_api_key, serve.as_ref(), cluster.as_deref(), is_set);
    let opts = options(args, endpoint, endpoint_from, &from)?;
    if args.mode.dry_run() {
        if args.mode.json() {
            println!("{}", serde_json::to_string_pretty(&opts)?);
        } else {
            print!("{}", plan::render(&opts));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let key = load_key(&from)?;
    let dir = save_dir(args)?;
    let res = bench(&opts, key.as_ref(), &dir)?;
    print(&res, args.mode.json())?;
    if !args.mode.json() {
        println!("saved in {}", dir.display());
    }
    Ok(status(&res))
}

/// Prints the results as text or JSON.
pub fn print(res: &ServingResults, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(res)?);
    } else {
        print!("{}", record::render(res));
    }
    Ok(())
}

/// 0 when every level ran and every request finished, else 1.
pub fn status(res: &ServingResults) -> ExitCode {
    if res.partial.is_none() && res.levels.iter().all(|l| l.status == "ok") {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `bench report DIR` of a serving run.
pub fn report(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let res = record::derive(&record::load(dir)?);
    print(&res, json)?;
    Ok(status(&res))
}

/// `bench compare A B` of two serving runs.
pub fn compare(a: &Path, b: &Path) -> anyhow::Result<ExitCode> {
    let (sa, sb) = (record::is_saved(a), record::is_saved(b));
    if sa != sb {
        let (s, l) = if sa { (a, b) } else { (b, a) };
        return Err(UsageError(format!(
            "{} is a `bench serving` run but {} is not: compare two runs of the same kind",
            s.display(),
            l.display()
        ))
        .into());
    }
    let ra = record::derive(&record::load(a)?);
    let rb = record::derive(&record::load(b)?);
    print!("{}", record::compare(&ra, &rb));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(engine: &str, key: bool) -> state::ServeState {
        state::ServeState {
            cluster: "/c.toml".into(),
            engine: engine.into(),
            model: "m".into(),
            endpoint: "http://10.0.0.1:8000".into(),
            started: 0,
            pid: 1,
            container: "vllm".into(),
            api_key: key,
            detached: true,
            watcher: None,
            args: None,
        }
    }

    #[test]
    fn the_key_follows_the_serve_and_the_environment() {
        let none = |_: &str| false;
        let all = |_: &str| true;
        let llama = |v: &str| v == "LLAMA_API_KEY";
        assert_eq!(
            key_from(true, None, None, all),
            KeyFrom::Off("--no-api-key".into())
        );
        assert!(matches!(
            key_from(false, Some(&serve("vllm", false)), None, all),
            KeyFrom::Off(_)
        ));
        assert_eq!(
            key_from(false, Some(&serve("llama.cpp", true)), None, all),
            KeyFrom::Env("LLAMA_API_KEY")
        );
        assert_eq!(
            key_from(false, None, None, all),
            KeyFrom::Env("VLLM_API_KEY")
        );
        assert_eq!(
            key_from(false, None, None, llama),
            KeyFrom::Env("LLAMA_API_KEY")
        );
        // vLLM's serve does not take llama.cpp's variable.
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("cluster.toml");
        assert!(matches!(
            key_from(false, Some(&serve("vllm", true)), Some(&c), llama),
            KeyFrom::Off(_)
        ));
        std::fs::write(dir.path().join("cluster.api-key"), "x").unwrap();
        assert_eq!(
            key_from(false, None, Some(&c), none),
            KeyFrom::File(dir.path().join("cluster.api-key"))
        );
    }
}
