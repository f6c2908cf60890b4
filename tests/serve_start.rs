//! `serve` hands its secrets (`HF_TOKEN`, the API key) to the engine it
//! starts on the stdin of halobox's own exec, over the engine halobox is
//! configured for: never through the engine's CLI, whose default engine can
//! be another one. Here the podman CLI's default is halotest's rootless
//! podman (`CONTAINER_HOST`) while halobox's config names the rootful
//! engine where the head's container lives: the start must reach that
//! container with both secrets. Needs root and the engines of
//! scripts/engines/start.sh (a missing one fails).

use std::process::Command;
use std::time::Duration;

use halobox::cluster::config::NodeBackend;
use halobox::serve::engine::Head;

const ROOTFUL: &str = "unix:///run/podman/podman.sock";
const ROOTLESS: &str = "unix:///run/user/1500/podman/podman.sock";
const IMAGE: &str = "localhost/halobox-test:1";

/// Removes the container when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .env_remove("CONTAINER_HOST")
            .args(["rm", "-f", "-t", "0", &self.0])
            .output();
    }
}

#[test]
fn secrets_go_through_halobox_engine_not_the_cli_default() {
    for sock in [ROOTFUL, ROOTLESS] {
        let path = sock.trim_start_matches("unix://");
        assert!(
            std::path::Path::new(path).exists(),
            "{path} is missing: start the engines with scripts/engines/start.sh"
        );
    }
    let name = format!("hb-serve-start-{}", std::process::id());
    let made = Command::new("podman")
        .env_remove("CONTAINER_HOST")
        .args(["run", "-d", "--name", &name, IMAGE, "sleep", "600"])
        .output()
        .unwrap();
    assert!(made.status.success(), "podman run: {made:?}");
    let _gone = Container(name.clone());

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, format!("engine = \"{ROOTFUL}\"\n")).unwrap();
    // SAFETY: this binary's only test, before it starts any thread or child.
    unsafe {
        std::env::set_var("HALOBOX_CONFIG", &config);
        std::env::set_var("CONTAINER_HOST", ROOTLESS);
    }
    let cli = Command::new("podman")
        .args(["exec", &name, "true"])
        .output()
        .unwrap();
    assert!(
        !cli.status.success(),
        "the podman CLI should default to another engine here: {cli:?}"
    );

    let head = Head {
        halobox: env!("CARGO_BIN_EXE_halobox").into(),
        backend: NodeBackend::Podman,
        container: name.clone(),
        label: "head".into(),
        ip: std::net::Ipv4Addr::LOCALHOST,
    };
    let cmd: Vec<String> = [
        "sh",
        "-c",
        "printf '%s|%s\\n' \"$HF_TOKEN\" \"$VLLM_API_KEY\"; exec sleep 300",
    ]
    .map(String::from)
    .to_vec();
    let names = ["HF_TOKEN".to_string(), "VLLM_API_KEY".to_string()];
    let secrets = [
        "hf_start_secret".to_string(),
        "key start secret".to_string(),
    ];
    let pid = head
        .start(&cmd, &names, &secrets, None, None, false)
        .expect("the start reaches the container on halobox's engine");
    assert!(pid > 0);
    let mut log = String::new();
    for _ in 0..50 {
        log = head.log_tail(5).unwrap_or_default();
        if log.contains('|') {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(log.trim(), "hf_start_secret|key start secret");
    let said = head.stop(Duration::from_secs(5), false).unwrap();
    assert!(said.contains(&format!("stopped {pid}")), "{said}");
}
