//! `halobox publish` from start to end, as one library entry point
//! ([`run()`]): tag an image with its date, commit and channel (or, for a
//! candidate, its date and commit only), set its OCI labels (a new config,
//! no rebuild), and push every tag; move a channel to the image of another;
//! or move a channel to a candidate's digest once it is proven
//! ([`super::promote`]). Its words go to a [`Reporter`].

use std::collections::BTreeMap;

use super::archive::TempDir;
use super::git;
use super::promote;
use super::publish::{self, PublishInput};
use super::rewrite::{self, BaseSource};
use crate::config;
use crate::engine::auth::{self, Credentials};
use crate::engine::push::Pushed;
use crate::engine::{Engine, EngineError, block_on, connect};
use crate::error::UsageError;
use crate::image_ref::ImageRef;
use crate::reporter::Reporter;

/// What a publish does.
#[derive(Debug, Clone)]
pub enum What {
    /// Tag the image `reference` for `channel` and push every tag.
    Publish {
        /// The local image.
        reference: String,
        /// The channel's tag (`latest`, `dev`); `None`: a candidate (the
        /// dated and `sha-` tags only).
        channel: Option<String>,
    },
    /// `--promote FROM TO`: move channel `to` to the image of `from`.
    Promote {
        /// The channel whose image moves.
        from: String,
        /// The channel moved.
        to: String,
    },
    /// `--promote-digest DIGEST --channel C`: move channel `channel` to the
    /// candidate's `digest`, refusing any other digest.
    PromoteDigest {
        /// The candidate's manifest digest.
        digest: String,
        /// The channel moved.
        channel: String,
        /// Label the moved image `io.halobox.verified=false`.
        unverified: bool,
    },
}

/// One `halobox publish`: the flags as given.
#[derive(Debug, Clone)]
pub struct Options {
    /// What it does.
    pub what: What,
    /// `--to`: the repository (`None`: the config's `image`).
    pub to: Option<String>,
    /// `--revision`: the commit (`None`: the checkout's).
    pub revision: Option<String>,
    /// `--source`: the source URL (`None`: the checkout's origin).
    pub source: Option<String>,
    /// `--version`.
    pub version: Option<String>,
    /// The engine's address (`None`: discovered).
    pub engine: Option<String>,
    /// Report the plan, change nothing.
    pub dry_run: bool,
    /// JSON instead of text.
    pub json: bool,
}

/// Runs `halobox publish` as `o` asks.
pub fn run(o: &Options, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let repository = repository(o.to.as_deref())?;
    let registry = auth::registry_of(&repository);
    let found = auth::lookup(&repository, o.to.as_ref().map(|_| registry.as_str()));
    let creds = found.credentials;
    if let Some(w) = &found.withheld {
        r.note(&format!("warning: {w}\n"));
    }
    let who = describe(creds.as_ref(), &registry);
    let (reference, channel) = match &o.what {
        What::Promote { from, to } => {
            return promote(o, &repository, from, to, creds.as_ref(), &who, r);
        }
        What::PromoteDigest {
            digest,
            channel,
            unverified,
        } => {
            let p = promote::plan(&repository, digest, &revision(o)?, channel, *unverified)
                .map_err(UsageError)?;
            return promote_digest(o, &p, creds.as_ref(), &who, r);
        }
        What::Publish { reference, channel } => (reference.clone(), channel.clone()),
    };
    let revision = revision(o)?;
    let source_url = o
        .source
        .clone()
        .or_else(|| git::origin_url().and_then(|r| publish::source_url(&r)));
    block_on(async {
        let engine = connect(o.engine.as_deref()).await?;
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
            channel,
            revision,
            source_url,
            version: o.version.clone(),
        })
        .map_err(UsageError)?;
        if o.dry_run {
            if o.json {
                let mut v = serde_json::to_value(&plan)?;
                v["image"] = serde_json::json!(image.id);
                v["credentials"] = serde_json::json!(who);
                r.out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
            } else {
                r.out(&publish::render(&plan, &image.id, &who));
            }
            return Ok(());
        }
        let mut id = image.id.clone();
        if !plan.relabel.is_empty() {
            r.note(&format!(
                "writing a new config with {} label(s)\n",
                plan.relabel.len()
            ));
            id = relabel(&engine, &reference, &plan.relabel, &plan.tags[0]).await?;
        }
        let mut pushed = Vec::new();
        for t in &plan.tags {
            let t = ImageRef::parse(t).map_err(UsageError)?;
            engine.tag(&id, &t).await?;
        }
        r.note(&format!(
            "pushing {} tag(s) to {} ({who})\n",
            plan.tags.len(),
            plan.repository
        ));
        for t in &plan.tags {
            let t = ImageRef::parse(t).map_err(UsageError)?;
            match engine.push(&t, creds.as_ref()).await {
                Ok(p) => {
                    r.note(&format!("pushed {} {}\n", p.reference, p.digest));
                    pushed.push(p);
                }
                Err(e) => return Err(partial(e, &pushed, &plan.tags)),
            }
        }
        report(&pushed, &id, o.json, r)
    })?
}

/// The commit: `--revision`, else the checkout's.
fn revision(o: &Options) -> anyhow::Result<String> {
    Ok(o.revision
        .clone()
        .or_else(git::revision)
        .ok_or_else(|| {
            UsageError("no git commit: run in the halobox checkout or pass --revision SHA".into())
        })?
        .to_ascii_lowercase())
}

/// A new config for `reference` with `labels` set, the same layers, loaded
/// into `engine` as `tag`; returns the new image id.
async fn relabel(
    engine: &Engine,
    reference: &str,
    labels: &BTreeMap<String, String>,
    tag: &str,
) -> anyhow::Result<String> {
    let work = TempDir::new("halobox-publish")?;
    let base = rewrite::read_base(
        &BaseSource::Engine(reference.to_string()),
        Some(engine),
        work.path(),
    )
    .await?;
    let out = rewrite::rewrite(
        &base,
        &[],
        "",
        labels,
        &[tag.to_string()],
        None,
        Some(engine),
        &work,
    )
    .await?;
    Ok(out.image.config_digest)
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

fn report(pushed: &[Pushed], id: &str, json: bool, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let digests: BTreeMap<&str, &str> = pushed
        .iter()
        .map(|p| (p.reference.as_str(), p.digest.as_str()))
        .collect();
    let same = pushed.windows(2).all(|w| w[0].digest == w[1].digest);
    if json {
        r.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::json!({
                "image": id, "pushed": digests, "same_digest": same
            }))?
        ));
    } else {
        for p in pushed {
            r.out(&format!("{}  {}\n", p.digest, p.reference));
        }
    }
    if !same {
        r.note("warning: the registry reported different digests for these tags\n");
    }
    Ok(())
}

fn promote(
    o: &Options,
    repository: &str,
    from: &str,
    to: &str,
    creds: Option<&Credentials>,
    who: &str,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    if from == to {
        return Err(UsageError(format!("--promote {from} {to}: nothing to move")).into());
    }
    let src = ImageRef::parse(repository)
        .map_err(UsageError)?
        .with_tag(from);
    let dst = src.with_tag(to);
    if o.dry_run {
        if o.json {
            r.out(&format!(
                "{}\n",
                serde_json::json!({"pull": src.to_string(), "push": dst.to_string(), "credentials": who})
            ));
        } else {
            r.out(&format!(
                "promote {src} to {dst}\n  credentials: {who}\n  pull {src}\n  tag {dst}\n  push {dst}\n"
            ));
        }
        return Ok(());
    }
    block_on(async {
        let engine: Engine = connect(o.engine.as_deref()).await?;
        engine.pull_with(&src, creds).await?;
        engine.tag(&src.to_string(), &dst).await?;
        let p = engine
            .push(&dst, creds)
            .await
            .map_err(|e| partial(e, &[], &[dst.to_string()]))?;
        r.note(&format!("pushed {} {}\n", p.reference, p.digest));
        let id = engine
            .image(&dst.to_string())
            .await?
            .map(|i| i.id)
            .unwrap_or_default();
        report(&[p], &id, o.json, r)
    })?
}

/// Moves `p.target` to the candidate's digest: pulls the candidate tag and
/// the digest, refuses unless they are one image, then tags and pushes
/// (relabelled first when unverified) and checks the digest the registry
/// stored.
fn promote_digest(
    o: &Options,
    p: &promote::Promotion,
    creds: Option<&Credentials>,
    who: &str,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    if o.dry_run {
        if o.json {
            let mut v = serde_json::to_value(p)?;
            v["credentials"] = serde_json::json!(who);
            r.out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
        } else {
            r.out(&promote::render(p, who));
        }
        return Ok(());
    }
    block_on(async {
        let engine: Engine = connect(o.engine.as_deref()).await?;
        let (candidate, source) = (
            ImageRef::parse(&p.candidate).map_err(UsageError)?,
            ImageRef::parse(&p.source).map_err(UsageError)?,
        );
        engine.pull_with(&candidate, creds).await?;
        engine.pull_with(&source, creds).await?;
        let (cand, src) = match (
            engine.image(&p.candidate).await?,
            engine.image(&p.source).await?,
        ) {
            (Some(c), Some(s)) => (c, s),
            _ => anyhow::bail!(
                "{} or {} is not in the engine after pulling it",
                p.candidate,
                p.source
            ),
        };
        promote::judge(p, &cand.repo_digests, &cand.id, &src.id).map_err(anyhow::Error::msg)?;
        let target = ImageRef::parse(&p.target).map_err(UsageError)?;
        let mut id = src.id.clone();
        if p.unverified {
            r.note(&format!(
                "writing a new config with {}=false (no Strix Halo check ran)\n",
                publish::VERIFIED
            ));
            let labels = BTreeMap::from([promote::unverified_label()]);
            id = relabel(&engine, &p.source, &labels, &p.target).await?;
        }
        engine.tag(&id, &target).await?;
        let pushed = engine
            .push(&target, creds)
            .await
            .map_err(|e| partial(e, &[], std::slice::from_ref(&p.target)))?;
        r.note(&format!("pushed {} {}\n", pushed.reference, pushed.digest));
        promote::judge_pushed(p, &pushed.digest).map_err(anyhow::Error::msg)?;
        report(&[pushed], &id, o.json, r)
    })?
}
