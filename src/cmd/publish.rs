//! `halobox publish`: tag an image with its date, commit and channel, set
//! its OCI labels (a new config, no rebuild), and push every tag; or
//! `--promote FROM TO`: move a channel to the image of another.

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::cli::PublishArgs;
use crate::config;
use crate::engine::auth::{self, Credentials};
use crate::engine::push::Pushed;
use crate::engine::{Engine, EngineError, block_on, connect};
use crate::error::UsageError;
use crate::image::archive::TempDir;
use crate::image::git;
use crate::image::publish::{self, PublishInput};
use crate::image::rewrite::{self, BaseSource};
use crate::image_ref::ImageRef;

/// Runs `halobox publish`.
pub fn run(args: &PublishArgs) -> anyhow::Result<ExitCode> {
    let repository = repository(args.to.as_deref())?;
    let registry = auth::registry_of(&repository);
    let found = auth::lookup(&repository, args.to.as_ref().map(|_| registry.as_str()));
    let creds = found.credentials;
    if let Some(w) = &found.withheld {
        eprintln!("warning: {w}");
    }
    let who = describe(creds.as_ref(), &registry);
    if let [from, to] = args.promote.as_slice() {
        return promote(
            args,
            &repository,
            from.tag(),
            to.tag(),
            creds.as_ref(),
            &who,
        );
    }
    let reference = args
        .reference
        .clone()
        .expect("clap requires REF without --promote");
    let channel = args
        .channel
        .expect("clap requires --channel without --promote");
    let revision = args
        .revision
        .clone()
        .or_else(git::revision)
        .ok_or_else(|| {
            UsageError("no git commit: run in the halobox checkout or pass --revision SHA".into())
        })?
        .to_ascii_lowercase();
    let source_url = args
        .source
        .clone()
        .or_else(|| git::origin_url().and_then(|r| publish::source_url(&r)));
    block_on(async {
        let engine = connect(args.engine.engine.as_deref()).await?;
        let image = engine.image(&reference).await?.ok_or_else(|| {
            UsageError(format!(
                "{reference} is not in {} at {}; hint: `halobox build` it, or pull it first",
                engine.info.kind, engine.info.address
            ))
        })?;
        let plan = publish::plan(&PublishInput {
            source: reference.clone(),
            labels: image.labels.clone().into_iter().collect(),
            created: image.created.clone(),
            repository: repository.clone(),
            channel: channel.tag().to_string(),
            revision,
            source_url,
            version: args.version.clone(),
        })
        .map_err(UsageError)?;
        if args.mode.dry_run() {
            if args.mode.json() {
                let mut v = serde_json::to_value(&plan)?;
                v["image"] = serde_json::json!(image.id);
                v["credentials"] = serde_json::json!(who);
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", publish::render(&plan, &image.id, &who));
            }
            return Ok(ExitCode::SUCCESS);
        }
        let mut id = image.id.clone();
        if !plan.relabel.is_empty() {
            eprintln!("writing a new config with {} label(s)", plan.relabel.len());
            let work = TempDir::new("halobox-publish")?;
            let base = rewrite::read_base(
                &BaseSource::Engine(reference.clone()),
                Some(&engine),
                work.path(),
            )
            .await?;
            let out = rewrite::rewrite(
                &base,
                &[],
                "",
                &plan.relabel,
                &plan.tags[..1],
                None,
                Some(&engine),
                &work,
            )
            .await?;
            id = out.image.config_digest;
        }
        let mut pushed = Vec::new();
        for t in &plan.tags {
            let r = ImageRef::parse(t).map_err(UsageError)?;
            engine.tag(&id, &r).await?;
        }
        eprintln!(
            "pushing {} tag(s) to {} ({who})",
            plan.tags.len(),
            plan.repository
        );
        for t in &plan.tags {
            let r = ImageRef::parse(t).map_err(UsageError)?;
            match engine.push(&r, creds.as_ref()).await {
                Ok(p) => {
                    eprintln!("pushed {} {}", p.reference, p.digest);
                    pushed.push(p);
                }
                Err(e) => return Err(partial(e, &pushed, &plan.tags)),
            }
        }
        report(&pushed, &id, args.mode.json())
    })?
}

fn repository(to: Option<&str>) -> anyhow::Result<String> {
    let cfg = config::load(config::path().as_deref())?;
    let raw = to
        .map(str::to_string)
        .or_else(|| {
            std::env::var("HALOBOX_IMAGE")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .or(cfg.image)
        .ok_or_else(|| {
            UsageError(
                "where to? pass --to REPO (or set `image` in the config or HALOBOX_IMAGE)".into(),
            )
        })?;
    let r = ImageRef::parse(&raw).map_err(UsageError)?;
    if to.is_some() && (r.tag.is_some() || r.digest.is_some()) {
        return Err(UsageError(format!(
            "--to {raw}: give a repository without a tag; publish adds the tags"
        ))
        .into());
    }
    Ok(r.repository)
}

/// Who pushes, without the secret.
fn describe(creds: Option<&Credentials>, registry: &str) -> String {
    match creds {
        Some(c) => format!("user {} for {registry} from {}", c.username, c.source),
        None => format!("no credentials for {registry} (anonymous)"),
    }
}

/// The push error plus what did and did not reach the registry.
fn partial(e: EngineError, pushed: &[Pushed], tags: &[String]) -> anyhow::Error {
    let done: Vec<&str> = pushed.iter().map(|p| p.reference.as_str()).collect();
    let left: Vec<&String> = tags
        .iter()
        .filter(|t| !done.contains(&t.as_str()))
        .collect();
    anyhow::anyhow!(
        "{e}\n  publish failed: pushed {} of {} tag(s){}; not pushed: {}",
        done.len(),
        tags.len(),
        if done.is_empty() {
            String::new()
        } else {
            format!(" ({})", done.join(", "))
        },
        left.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn report(pushed: &[Pushed], id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let digests: BTreeMap<&str, &str> = pushed
        .iter()
        .map(|p| (p.reference.as_str(), p.digest.as_str()))
        .collect();
    let same = pushed.windows(2).all(|w| w[0].digest == w[1].digest);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "image": id, "pushed": digests, "same_digest": same
            }))?
        );
    } else {
        for p in pushed {
            println!("{}  {}", p.digest, p.reference);
        }
    }
    if !same {
        eprintln!("warning: the registry reported different digests for these tags");
    }
    Ok(ExitCode::SUCCESS)
}

fn promote(
    args: &PublishArgs,
    repository: &str,
    from: &str,
    to: &str,
    creds: Option<&Credentials>,
    who: &str,
) -> anyhow::Result<ExitCode> {
    if from == to {
        return Err(UsageError(format!("--promote {from} {to}: nothing to move")).into());
    }
    let src = ImageRef::parse(repository)
        .map_err(UsageError)?
        .with_tag(from);
    let dst = src.with_tag(to);
    if args.mode.dry_run() {
        if args.mode.json() {
            println!(
                "{}",
                serde_json::json!({"pull": src.to_string(), "push": dst.to_string(), "credentials": who})
            );
        } else {
            println!(
                "promote {src} to {dst}\n  credentials: {who}\n  pull {src}\n  tag {dst}\n  push {dst}"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    block_on(async {
        let engine: Engine = connect(args.engine.engine.as_deref()).await?;
        engine.pull_with(&src, creds).await?;
        engine.tag(&src.to_string(), &dst).await?;
        let p = engine
            .push(&dst, creds)
            .await
            .map_err(|e| partial(e, &[], &[dst.to_string()]))?;
        eprintln!("pushed {} {}", p.reference, p.digest);
        let id = engine
            .image(&dst.to_string())
            .await?
            .map(|i| i.id)
            .unwrap_or_default();
        report(&[p], &id, args.mode.json())
    })?
}
