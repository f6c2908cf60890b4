//! Every route vLLM's API server registers, asked without the key against
//! the real app of vLLM's CPU build (scripts/vllm-venv.sh,
//! /opt/halobox-vllm): `build_app` with halobox's flags, as `vllm serve`
//! builds it, driven in-process by Starlette's test client, no engine
//! behind it (a route that passes the key check then fails with 500: it
//! was reached). vLLM's own `--api-key` (from `VLLM_API_KEY`) leaves
//! `/invocations`, `/metrics`, `/tokenize` and more open; with halobox's
//! `--middleware` every one answers 401 but `GET /health`. Needs the venv:
//! a missing one fails. The live check of the same routes on a served
//! cluster is `tests/serve_e2e.rs`.

use std::path::Path;
use std::process::Command;

const PYTHON: &str = "/opt/halobox-vllm/bin/python";

/// Prints `METHOD PATH STATUS` for every route of the app `vllm serve m
/// ARGS…` builds (a mount as GET; a WebSocket as `WS PATH closed` when it
/// is refused), each asked without the key.
const PROBE: &str = r#"
import sys, warnings
warnings.simplefilter("ignore")
from fastapi.testclient import TestClient
from starlette.routing import Mount, WebSocketRoute
from starlette.websockets import WebSocketDisconnect
from vllm.entrypoints.launchers.app import build_app
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

args = make_arg_parser(FlexibleArgumentParser()).parse_args(["m"] + sys.argv[1:])
app = build_app(args, ("generate",))
client = TestClient(app, raise_server_exceptions=False)
for r in app.routes:
    path = r.path.replace("{", "").replace("}", "") or "/"
    if isinstance(r, WebSocketRoute):
        try:
            with client.websocket_connect(path):
                print("WS", r.path, "open")
        except WebSocketDisconnect:
            print("WS", r.path, "closed")
        continue
    methods = ["GET"] if isinstance(r, Mount) else sorted(set(r.methods) - {"HEAD"})
    for m in methods:
        body = {} if m in ("POST", "PUT", "PATCH") else None
        print(m, r.path or "/", client.request(m, path, json=body).status_code, flush=True)
"#;

/// The app's routes and their statuses without the key, with `VLLM_API_KEY`
/// set and `args` after the model, halobox's middleware importable.
fn statuses(args: &[&str]) -> Vec<(String, String, String)> {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run scripts/vllm-venv.sh"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path()
            .join(format!("{}.py", halobox::serve::api_key::VLLM_MODULE)),
        halobox::serve::api_key::VLLM_MODULE_SOURCE,
    )
    .unwrap();
    let out = Command::new(PYTHON)
        .arg("-c")
        .arg(PROBE)
        .args(args)
        .env("VLLM_API_KEY", "k3y")
        .env("PYTHONPATH", dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.into(), w.next()?.into(), w.next()?.into()))
        })
        .collect()
}

#[test]
fn every_route_needs_the_key_with_halobox_middleware() {
    // vLLM alone: its key guards /v1, /v2, /inference and /cohere only.
    let alone = statuses(&[]);
    let open: Vec<_> = alone
        .iter()
        .filter(|(m, p, _)| m == "POST" && p == "/invocations")
        .filter(|(_, _, code)| code != "401")
        .collect();
    assert!(
        !open.is_empty(),
        "vLLM's own key now guards /invocations: {alone:?}"
    );

    let guarded = statuses(&["--middleware", halobox::serve::api_key::VLLM_MIDDLEWARE]);
    assert!(guarded.len() > 20, "too few routes: {guarded:?}");
    assert_eq!(guarded.len(), alone.len());
    let wrong: Vec<_> = guarded
        .iter()
        .filter(|(m, p, code)| match (m.as_str(), p.as_str()) {
            ("GET", "/health") => code == "401",
            ("WS", _) => code != "closed",
            _ => code != "401",
        })
        .collect();
    assert!(wrong.is_empty(), "not as halobox documents: {wrong:?}");
    for want in [
        "/invocations",
        "/metrics",
        "/ping",
        "/tokenize",
        "/openapi.json",
    ] {
        assert!(
            guarded.iter().any(|(_, p, _)| p == want),
            "{want} not among the routes: {guarded:?}"
        );
    }
}
