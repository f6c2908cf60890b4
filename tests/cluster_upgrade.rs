//! `cluster refresh --verify` against the real parts: two namespace nodes
//! with their own podman, llama.cpp's CPU build serving a random-weight
//! GGUF over an RPC server, and three new images in the nodes' registry:
//! one whose llama-server computes other tokens (its rope base changed in
//! the image's environment), one whose llama-server does not start, and
//! the node image with one more layer. The first two roll back (the old
//! serve gives its golden tokens again, the difference named), the last is
//! proven and the old containers go. Then the steps by hand (`serve stop;
//! cluster refresh --no-verify --restart; serve --detach`): the RPC servers
//! stop for the swap and start again. One cluster for the four cases.

mod common;

use std::process::Command;

use serde_json::Value;

use common::serve::{HALOBOX, Ran, Serving};

/// The node image with `extra` (Containerfile lines) on top, pushed to the
/// nodes' registry as `halobox/upgrade:NAME`; its reference there.
fn image(s: &Serving, name: &str, extra: &str) -> String {
    let local_base = format!(
        "localhost/halobox-node:{}",
        s.image.rsplit_once(':').expect("the node image's tag").1
    );
    let local = format!("localhost/halobox-upgrade-test:{name}");
    let dir = s.path(&format!("image-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    if extra.is_empty() {
        // The node image with one more layer, added by halobox itself.
        let file = dir.join("upgrade-note");
        std::fs::write(&file, "one more layer\n").unwrap();
        let out = Command::new(HALOBOX)
            .args(["image", "add-layer", &local_base])
            .args(["--engine", "unix:///run/podman/podman.sock"])
            .arg("--add")
            .arg(format!("{}:/etc/halobox-upgrade-note", file.display()))
            .args(["--tag", &local, "--load"])
            .output()
            .unwrap();
        common::ok(&out);
    } else {
        std::fs::write(
            dir.join("Containerfile"),
            format!("FROM {local_base}\n{extra}\n"),
        )
        .unwrap();
        let out = Command::new("podman")
            .args(["build", "-q", "-t", &local])
            .arg(&dir)
            .output()
            .unwrap();
        common::ok(&out);
    }
    let remote = format!("{}/halobox/upgrade:{name}", s.nodes().registry());
    let out = Command::new("ip")
        .args(["netns", "exec", &format!("hb-{}-sw", s.nodes().tag)])
        .args(["skopeo", "copy", "-q", "--dest-tls-verify=false"])
        .arg(format!("containers-storage:{local}"))
        .arg(format!("docker://{remote}"))
        .output()
        .unwrap();
    common::ok(&out);
    remote
}

/// The image id of node `x`'s container `name` (`None`: there is none).
fn container_image(s: &Serving, x: char, name: &str) -> Option<String> {
    let r = s.engine_cli(x, &["container", "inspect", name, "--format", "{{.Image}}"]);
    r.ok().then(|| r.out.trim().to_string())
}

/// Every node's container image id.
fn images(s: &Serving) -> Vec<Option<String>> {
    s.names
        .iter()
        .map(|&x| container_image(s, x, "vllm"))
        .collect()
}

fn refresh(s: &Serving, image: &str, more: &[&str]) -> Ran {
    let cfg = s.cfg();
    let mut args = vec![
        "cluster",
        "refresh",
        "--image",
        image,
        "--memlock",
        "8M",
        "--yes",
        "--cluster",
        &cfg,
    ];
    args.extend_from_slice(more);
    s.hb(&args)
}

/// The serve's golden tokens, checked now: `serve golden`'s output.
fn golden_now(s: &Serving) -> Ran {
    s.hb(&["serve", "golden", "--cluster", &s.cfg()])
}

#[test]
fn cluster_refresh_proves_a_new_image_or_puts_every_node_back() {
    let s = Serving::llama("podman", 2, None, [2, 128, 4, 2]);
    let cfg = s.cfg();
    // The containers `cluster refresh` makes keep the engine's build and
    // the model bound in, as each node's halobox config says.
    let volumes = format!(
        "volumes = [\"{0}:{0}:ro\", \"{1}:/models:ro\"]\n",
        s.llama.display(),
        s.model_host.display()
    );
    for &x in &s.names {
        let cmd = s.on_node(
            x,
            &[
                "sh",
                "-c",
                "mkdir -p /root/.config/halobox && printf '%s' \"$1\" > /root/.config/halobox/config.toml",
                "sh",
                &volumes,
            ],
        );
        s.run(&format!("config-{x}"), cmd)
            .expect_ok("writing the node's halobox config");
    }
    s.refresh();
    let tokens = image(
        &s,
        "tokens",
        "ENV LLAMA_ARG_ROPE_FREQ_BASE=1.5 LLAMA_ARG_ROPE_SCALING=linear LLAMA_ARG_ROPE_FREQ_SCALE=0.25",
    );
    let dead = image(&s, "dead", "ENV LLAMA_ARG_CACHE_TYPE_K=no-such-type");
    let good = image(&s, "good", "");
    let again = image(&s, "again", "LABEL io.halobox.test=again");

    // No serve recorded: --verify has nothing to prove with, and says so.
    let refused = refresh(&s, &good, &["--verify"]);
    assert!(
        !refused.ok()
            && refused.both().contains("no serve is recorded")
            && refused.both().contains("--no-verify"),
        "--verify without a serve was not refused with the fix: {refused}"
    );
    assert_eq!(images(&s).iter().flatten().count(), 2);

    s.hb(&["cluster", "up", "--cluster", &cfg])
        .expect_ok("cluster up");
    let serve = s
        .hb(&["serve", &s.model, "--detach", "--cluster", &cfg])
        .expect_ok("halobox serve --detach");
    assert!(
        serve.both().contains("golden completions"),
        "serve recorded no golden tokens: {serve}"
    );
    let before = images(&s);

    // The plan says how the proof goes and how each node would go back.
    let plan = refresh(&s, &good, &["--dry-run"]).expect_ok("cluster refresh --dry-run");
    assert!(
        plan.out
            .contains("verify (the recorded serve proves the new containers")
            && plan
                .out
                .contains("refresh --rollback --name vllm --backend podman --yes"),
        "the dry run does not plan the proof: {plan}"
    );

    // 1. Other greedy tokens: rolled back, the first differing token named,
    //    the old serve giving its golden tokens again.
    let r = refresh(&s, &tokens, &[]);
    assert!(!r.ok(), "an image that serves other tokens was kept: {r}");
    for want in [
        "verify: FAILED at the golden tokens",
        "first differing token #",
        "the engine's version is the same",
        "verify: rolled back: every node is on its old container again; the serve was down",
        "the old serve gives its 4 golden completions again",
    ] {
        assert!(
            r.out.contains(want),
            "the rollback does not say {want:?}: {r}"
        );
    }
    assert_eq!(images(&s), before, "a node is not on its old container");
    golden_now(&s).expect_ok("serve golden after the rollback");

    // 2. An engine that does not start on the new image: rolled back.
    let r = refresh(&s, &dead, &["--json"]);
    assert!(
        !r.ok(),
        "an image whose engine does not start was kept: {r}"
    );
    let report: Value = serde_json::from_str(&r.out).unwrap_or_else(|e| panic!("{e}: {r}"));
    assert_eq!(report["verify"]["failed"]["step"], "serve", "{r}");
    assert_eq!(report["verify"]["outcome"], "rolled_back", "{r}");
    assert!(
        report["verify"]["rollback_down_s"].as_f64().is_some(),
        "{r}"
    );
    assert!(
        report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["outcome"] == "rolled back"),
        "{r}"
    );
    assert_eq!(images(&s), before, "a node is not on its old container");
    golden_now(&s).expect_ok("serve golden after the second rollback");

    // 3. The node image with one more layer: proven, the old containers go.
    let r = refresh(&s, &good, &["--soak", "10s"]);
    assert!(r.ok(), "the good image was not taken: {r}");
    assert!(
        r.out
            .contains("verify: proven: the serve answered on the new containers")
            && r.out.contains("the soak passed (PASS"),
        "{r}"
    );
    let after = images(&s);
    for (x, (a, b)) in s.names.iter().zip(after.iter().zip(&before)) {
        assert!(a.is_some() && a != b, "node {x} is still on its old image");
        assert!(
            r.out.contains(&format!(
                "verify: node {x}: the old container vllm-prev was removed"
            )),
            "{r}"
        );
        assert_eq!(
            container_image(&s, *x, "vllm-prev"),
            None,
            "node {x} kept its old container after the proof"
        );
    }
    let g = golden_now(&s).expect_ok("serve golden on the new image");
    assert!(g.out.contains("4 of 4"), "{g}");

    // 4. By hand (`serve stop; cluster refresh --no-verify --restart;
    //    serve --detach`): the RPC servers run in the containers the swap
    //    replaces, so without --restart the swap is refused naming them,
    //    and with it they stop for the swap and start again on the new
    //    containers, where the serve starts and gives its golden tokens.
    s.hb(&["serve", "stop", "--cluster", &cfg])
        .expect_ok("serve stop");
    let before = images(&s);
    let refused = refresh(&s, &again, &["--no-verify"]);
    assert!(
        !refused.ok()
            && refused.both().contains(
                "llama.cpp's RPC servers are running in the cluster (the RPC server runs on node(s) b): swapping the containers would stop them"
            )
            && refused.both().contains("hint: pass --restart"),
        "a swap that stops the RPC servers was not refused: {refused}"
    );
    assert_eq!(images(&s), before, "the refused swap changed a container");
    let r = refresh(&s, &again, &["--no-verify", "--restart", "--json"]);
    assert!(r.ok(), "refresh --no-verify --restart failed: {r}");
    let report: Value = serde_json::from_str(&r.out).unwrap_or_else(|e| panic!("{e}: {r}"));
    assert_eq!(report["restarted"], true, "{r}");
    assert!(report["verify"].is_null(), "{r}");
    let status = s
        .hb(&["cluster", "status", "--cluster", &cfg])
        .expect_ok("cluster status after refresh --restart");
    assert!(
        status
            .out
            .lines()
            .any(|l| l.starts_with('b') && l.contains("running")),
        "the RPC server is not running again: {status}"
    );
    s.hb(&["serve", &s.model, "--detach", "--cluster", &cfg])
        .expect_ok("serve --detach after refresh --no-verify --restart");
    let g = golden_now(&s).expect_ok("serve golden after the refresh by hand");
    assert!(g.out.contains("4 of 4"), "{g}");
    assert!(
        images(&s)
            .iter()
            .zip(&before)
            .all(|(a, b)| a.is_some() && a != b),
        "a node is still on its old image"
    );
}
