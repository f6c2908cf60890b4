//! Reading the engine's log: which lines say it failed for good (vLLM exits
//! 0 after a fatal engine error, so its exit code says nothing), which node
//! a failure names, where its Ray workers run, and a short progress word
//! while it starts. Pure: lines in, verdicts out.

use std::net::Ipv4Addr;

/// Phrases after which the engine does not serve again: the engine core
/// died (`EngineDeadError`), a Ray worker actor died or its node was
/// declared dead, the llama.cpp head lost an RPC server.
///
/// Checked against the vLLM the image and the tests run (VLLM_VERSION of
/// images/vllm-therock-gfx1151.toml, 0.32.0; vllm-project/vllm v0.32.0 as
/// released on PyPI): `vllm/v1/engine/core.py` logs "EngineCore encountered a
/// fatal error." (and "EngineCore failed to start."), `vllm/v1/engine/
/// core_client.py` raises `EngineDeadError` (`vllm/v1/engine/exceptions.py`).
/// The actor phrases are Ray's (`ray.exceptions`), the last llama.cpp's.
const FATAL: [&str; 9] = [
    "EngineCore encountered a fatal error",
    "EngineDeadError",
    "ActorDiedError",
    "RayActorError",
    "ActorUnavailableError",
    "The actor died unexpectedly",
    "marked as dead",
    "has been marked dead",
    "Remote RPC server crashed",
];

/// Whether `line` says the engine failed for good.
pub fn fatal(line: &str) -> bool {
    FATAL.iter().any(|f| line.contains(f))
}

/// The exception a log line states (`RuntimeError: …`,
/// `ray.exceptions.RayTaskError(AttributeError): …`), after the logger's
/// `… [file.py:123] ` prefix, or a failed import that vLLM only warns about;
/// the root cause of a failed start is usually the first of them.
pub fn error(line: &str) -> Option<&str> {
    if let Some(i) = line.find("Failed to import from") {
        return Some(line[i..].trim());
    }
    let text = line.rsplit_once("] ").map_or(line, |(_, t)| t).trim();
    let (head, _) = text.split_once(": ")?;
    let name = head.split('(').next().unwrap_or(head);
    (!head.contains(' ') && (name.ends_with("Error") || name.ends_with("Exception")))
        .then_some(text)
}

/// The IPv4 addresses written in `line` (as `10.0.0.2`, `ip=10.0.0.2`,
/// `10.0.0.2:6379`).
pub fn addresses(line: &str) -> Vec<Ipv4Addr> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.trim_matches('.').parse().ok())
        .collect()
}

/// The node of a Ray worker's log line: Ray prefixes what a worker prints
/// with `(RayWorkerProc pid=123, ip=10.0.0.2)` on the driver
/// (`RayWorkerWrapper` before vLLM's RayExecutorV2), and leaves `ip=` out
/// for a worker on the driver's own node, `driver`. Ray names the actor's
/// class: `RayWorkerProc` in `vllm/v1/executor/ray_executor_v2.py`,
/// `RayWorkerWrapper` in `vllm/v1/executor/ray_utils.py` (vLLM v0.32.0).
/// `Failed to import from` in `exception` is vllm/platforms/rocm.py's
/// warning at the same version.
pub fn worker_ip(line: &str, driver: Ipv4Addr) -> Option<Ipv4Addr> {
    let i = line
        .find("(RayWorkerProc pid=")
        .or_else(|| line.find("(RayWorkerWrapper pid="))?;
    let prefix = &line[i..=i + line[i..].find(')')?];
    match prefix.split("ip=").nth(1) {
        Some(ip) => ip.split([')', ',', ' ']).next()?.parse().ok(),
        None => Some(driver),
    }
}

/// The cause in a fatal line, cut to something one line can say: the text
/// after the logger's `… [file.py:123] ` prefix, then after the last
/// `Error: `.
pub fn cause(line: &str) -> String {
    let t = line.rsplit_once("] ").map_or(line, |(_, t)| t).trim();
    let c = t.rsplit_once("Error: ").map_or(t, |(_, rest)| rest).trim();
    let mut c: String = c.chars().take(200).collect();
    if c.is_empty() {
        c = t.chars().take(200).collect();
    }
    c
}

/// A short note of how far the engine got, from one of its start lines.
///
/// Each phrase is a log line of vLLM v0.32.0 (the version of
/// images/vllm-therock-gfx1151.toml): `vllm/v1/engine/core.py` "Initializing a
/// V1 LLM engine (v%s) …"; `vllm/v1/executor/ray_utils.py` "Using the existing
/// placement group" / "… Creating a new placement group."; `vllm/model_executor/
/// model_loader/default_loader.py` "Loading weights took %.2f seconds";
/// `vllm/v1/worker/gpu/model_runner.py` "Loading model from scratch..." and
/// "Model loading took %s GiB memory …"; `vllm/v1/core/kv_cache_utils.py` "%s KV
/// cache size: %s tokens"; `vllm/entrypoints/launchers/api_server/entry.py`
/// "Starting vLLM server on %s" (older releases said "Starting vLLM API
/// server", which 0.32 no longer logs).
pub fn progress(line: &str) -> Option<&'static str> {
    const STEPS: [(&str, &str); 7] = [
        ("Initializing a V1 LLM engine", "engine starting"),
        ("placement group", "placing workers on the nodes"),
        ("Loading weights", "loading weights"),
        ("Loading model", "loading weights"),
        ("Model loading took", "weights loaded"),
        ("KV cache", "sizing the KV cache"),
        ("Starting vLLM server on", "API server starting"),
    ];
    STEPS
        .iter()
        .find(|(needle, _)| line.contains(needle))
        .map(|(_, word)| *word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_lines_and_their_node() {
        let l = "(EngineCore pid=9) ERROR 11-26 10:00:01 [core.py:1512] EngineCore encountered a fatal error.";
        assert!(fatal(l));
        assert_eq!(cause(l), "EngineCore encountered a fatal error.");
        let died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. The actor's node 4f2a was at 10.77.3.2:40123: connection reset";
        assert!(fatal(died));
        assert_eq!(addresses(died), vec![Ipv4Addr::new(10, 77, 3, 2)]);
        assert_eq!(
            cause(died),
            "The actor died unexpectedly before finishing this task. The actor's node 4f2a was at 10.77.3.2:40123: connection reset"
        );
        assert!(!fatal("INFO 11-26 [api_server.py] Started server process"));
    }

    #[test]
    fn error_lines() {
        assert_eq!(
            error(
                "(EngineCore pid=9) ERROR 11-26 10:47:55 [core.py:1510] AttributeError: '_C' object has no attribute 'x'"
            ),
            Some("AttributeError: '_C' object has no attribute 'x'")
        );
        assert!(error("RuntimeError: Gloo connectFullMesh failed").is_some());
        assert!(error("ray.exceptions.RayTaskError(AttributeError): ray::RayWorkerProc.initialize_worker()").is_some());
        assert!(
            error("(EngineCore pid=9) ERROR 11-26 [core.py:1] EngineCore failed to start.")
                .is_none()
        );
        assert!(error("INFO 11-26 loading (no Error: here)").is_none());
        assert!(error("WARNING [cpu.py:660] Failed to import from vllm._C_AVX2: ImportError('libnuma.so.1')").is_some());
    }

    #[test]
    fn workers_by_ray_prefix() {
        let head = Ipv4Addr::new(10, 77, 3, 1);
        let l = "(RayWorkerWrapper pid=4711, ip=10.77.3.2) INFO 11-26 worker.py: loading";
        assert_eq!(worker_ip(l, head), Some(Ipv4Addr::new(10, 77, 3, 2)));
        let l = "(RayWorkerProc pid=165, ip=10.77.104.2) (MainProcess pid=165) WARNING cpu.py";
        assert_eq!(worker_ip(l, head), Some(Ipv4Addr::new(10, 77, 104, 2)));
        // vLLM 0.32's log: Ray names no address for the driver's own node.
        let l = "\x1b[36m(RayWorkerProc pid=851)\x1b[0m Loading safetensors checkpoint shards: 100% (ip=10.9.9.9)";
        assert_eq!(worker_ip(l, head), Some(head));
        assert_eq!(worker_ip("INFO plain line ip=10.0.0.1", head), None);
    }

    #[test]
    fn progress_words() {
        assert_eq!(
            progress("INFO Loading weights took 0.2 s"),
            Some("loading weights")
        );
        assert_eq!(progress("nothing"), None);
    }

    /// Start lines of vLLM 0.32.0 as it logs them (the API server's line
    /// is "Starting vLLM server on …" since the launcher moved to
    /// vllm/entrypoints/launchers/).
    #[test]
    fn progress_words_of_vllm_0_32() {
        for (line, word) in [
            (
                "(EngineCore pid=9) INFO 11-28 10:00:00 [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: model='/m'",
                "engine starting",
            ),
            (
                "(EngineCore pid=9) INFO 11-28 10:00:01 [ray_utils.py:607] No current placement group found. Creating a new placement group.",
                "placing workers on the nodes",
            ),
            (
                "(EngineCore pid=9) INFO 11-28 10:00:09 [kv_cache_utils.py:2328] CPU KV cache size: 4096 tokens, max concurrency 2",
                "sizing the KV cache",
            ),
            (
                "(APIServer pid=1) INFO 11-28 10:00:12 [entry.py:140] Starting vLLM server on http://0.0.0.0:8000",
                "API server starting",
            ),
        ] {
            assert_eq!(progress(line), Some(word), "{line}");
        }
    }
}
