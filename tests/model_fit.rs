//! The fit check end to end: `serve --dry-run` on a head whose snapshot
//! (tests/fixtures/hosts/strix-e810, copied) carries made-up GTT figures,
//! with a model of sparse safetensors shards whose headers claim tens of
//! GiB, as a folder and in a Hugging Face cache; the configs of published
//! models (tests/fixtures/model-configs) for the layer kinds; and `halobox
//! plan` on planned nodes (`--nodes N --gtt SIZE`).

use std::io::Write;
use std::path::Path;
use std::process::Command;

const GIB: u64 = 1 << 30;

const E810_PAIR: &str = "transport = \"auto\"\n[[node]]\nssh = \"root@n1\"\nip = \"192.168.100.1\"\n[[node]]\nssh = \"root@n2\"\nip = \"192.168.100.2\"\n";

/// A copy of the strix-e810 snapshot with GTT `total` and `used` (GiB).
fn head_snapshot(dir: &Path, total: u64, used: u64) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/strix-e810");
    let dst = dir.join("head");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(ok.success());
    let dev = dst.join("sys/class/drm/card1/device");
    std::fs::write(dev.join("mem_info_gtt_total"), format!("{}\n", total * GIB)).unwrap();
    std::fs::write(dev.join("mem_info_gtt_used"), format!("{}\n", used * GIB)).unwrap();
    dst.display().to_string()
}

/// A sparse safetensors shard whose one tensor holds `bytes`.
fn shard(path: &Path, bytes: u64) {
    let header = format!(
        r#"{{"__metadata__":{{"format":"pt"}},"w":{{"dtype":"BF16","shape":[{}],"data_offsets":[0,{bytes}]}}}}"#,
        bytes / 2
    );
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    f.set_len(8 + header.len() as u64 + bytes).unwrap();
}

/// A model folder of `gib` GiB (one sparse shard) with the config.json of
/// a published model (tests/fixtures/model-configs/NAME.json).
fn published(dir: &Path, name: &str, gib: u64) {
    std::fs::create_dir_all(dir).unwrap();
    shard(&dir.join("model.safetensors"), gib * GIB);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/model-configs")
        .join(format!("{name}.json"));
    std::fs::copy(src, dir.join("config.json")).unwrap();
}

/// A 40 GiB model (two shards) with 48 layers, 8 KV heads of 128.
fn model(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    shard(&dir.join("model-00001-of-00002.safetensors"), 24 * GIB);
    shard(&dir.join("model-00002-of-00002.safetensors"), 16 * GIB);
    std::fs::write(
        dir.join("config.json"),
        r#"{"num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096, "torch_dtype": "bfloat16", "max_position_embeddings": 40960}"#,
    )
    .unwrap();
}

/// `serve --dry-run` over the two nodes with `--tp 2` (the fit check's
/// arithmetic of a two-node split); [`serve_as_planned`] gives no split.
fn serve(dir: &Path, model: &str, sysroot: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["--tp", "2"];
    args.extend(extra);
    serve_as_planned(dir, model, sysroot, &args)
}

fn serve_as_planned(
    dir: &Path,
    model: &str,
    sysroot: &str,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let cluster = dir.join("cluster.toml");
    std::fs::write(&cluster, E810_PAIR).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["serve", model, "--cluster"])
        .arg(&cluster)
        .args(["--sysroot", sysroot, "--dry-run"])
        .args(extra)
        .env("HF_HOME", dir.join("hf"))
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_plan_that_fits_shows_its_arithmetic() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m");
    model(&m);
    let snap = head_snapshot(d.path(), 120, 2);
    let (code, stdout, stderr) = serve(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "32768"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for want in [
        "# fit check (tensor-parallel 2 × pipeline-parallel 1, --gpu-memory-utilization 0.90):",
        "#   weights 40 GiB (2 safetensors files) / 2 = 20 GiB per GPU",
        "#   KV cache per GPU, one request of 32768 tokens (the whole model's layers: 98304 B/token on each GPU of tp 2): 3 GiB",
        "#     48 full-attention layers: 4 KV heads (8 / tp 2) × (128 K + 128 V) × 2 B = 2048 B/token × 32768 tokens = 3 GiB",
        "#   node root@n1: needs 20 GiB + 3 GiB = 23 GiB; usable (GTT 120 GiB − 2 GiB in use) × 0.90 = 106.2 GiB: fits (22% of usable)",
        "#   node root@n2: needs 20 GiB + 3 GiB = 23 GiB; its GPU memory is unknown (--sysroot holds one machine; without it each node is read over ssh): not checked",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
}

#[test]
fn a_plan_too_big_for_the_head_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m");
    model(&m);
    // (120 − 100) × 0.9 = 18 GiB usable < 20 GiB of weights alone.
    let snap = head_snapshot(d.path(), 120, 100);
    let (code, stdout, stderr) = serve(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "32768"],
    );
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("× 0.90 = 18 GiB: DOES NOT FIT (128%, 5 GiB short)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("serve would refuse this plan: the model does not fit in the GPU memory of node root@n1 (the arithmetic is above)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: serve over more nodes (--tp)")
            && stderr.contains("a shorter --max-model-len (now 32768)"),
        "{stderr}"
    );
}

#[test]
fn close_to_the_limit_warns_and_the_models_context_is_the_default() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m");
    model(&m);
    // No --max-model-len: the model's 40960 tokens, 3.75 GiB of KV per GPU;
    // (30 − 3) × 0.9 = 24.3 GiB usable for 23.75 GiB.
    let snap = head_snapshot(d.path(), 30, 3);
    let (code, stdout, stderr) = serve(d.path(), m.to_str().unwrap(), &snap, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("× 40960 tokens = 3.8 GiB"), "{stdout}");
    assert!(
        stdout.contains("fits, but close (98% of usable)")
            && stdout.contains("# warning: the model fits node root@n1 with less than 10%"),
        "{stdout}"
    );
}

#[test]
fn a_model_id_is_read_from_the_hugging_face_cache() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("hf/hub/models--acme--big");
    let rev = "0123456789abcdef0123456789abcdef01234567";
    model(&repo.join("snapshots").join(rev));
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), rev).unwrap();
    let snap = head_snapshot(d.path(), 120, 100);
    let (code, stdout, stderr) = serve(d.path(), "acme/big", &snap, &["--max-model-len", "4096"]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("weights 40 GiB (2 safetensors files) / 2"),
        "{stdout}"
    );
    // Not in the cache: the check is not made, and says how to get the model.
    let (code, stdout, stderr) = serve(d.path(), "acme/other", &snap, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(
            "# fit check: not made: acme/other@main is not in this machine's Hugging Face cache"
        ) && stdout.contains("`halobox model pull acme/other` puts it there"),
        "{stdout}"
    );
}

#[test]
fn an_mla_model_that_fits_is_not_refused() {
    // DeepSeek-V3's config at its own 163840 tokens over 2 nodes: one
    // latent of 576 per layer, 61 × 576 × 2 B × 163840 = 10.7 GiB on each
    // GPU. The old check counted 2 × 61 × 64 heads × 56 × 2 B per token
    // (133 GiB per GPU) and refused.
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("ds");
    published(&m, "deepseek-ai--DeepSeek-V3", 90);
    let snap = head_snapshot(d.path(), 124, 2);
    let (code, stdout, stderr) = serve(d.path(), m.to_str().unwrap(), &snap, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for want in [
        "#     61 MLA layers: one latent of 576 × 2 B = 1152 B/token, whole on every rank × 163840 tokens = 10.7 GiB",
        "node root@n1: needs 45 GiB + 10.7 GiB = 55.7 GiB",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
}

#[test]
fn hybrid_and_sliding_models_count_their_layers_by_kind() {
    let d = tempfile::tempdir().unwrap();
    let snap = head_snapshot(d.path(), 124, 2);
    let q = d.path().join("qnext");
    published(&q, "Qwen--Qwen3-Next-80B-A3B-Instruct", 150);
    let (code, stdout, stderr) = serve(
        d.path(),
        q.to_str().unwrap(),
        &snap,
        &["--", "--max-num-seqs", "4"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for want in [
        "#     36 linear-attention/Mamba layers: fixed state (conv 4096×3 + 16 heads × 128×128) × 2 B = 548864 B, padded to one attention page (544 tokens, 557056 B), 2 pages × 4 sequence(s) (prefix caching's align mode), whatever the context = 153 MiB",
        "#     12 full-attention layers: 1 KV heads (2 / tp 2) × (256 K + 256 V) × 2 B = 1024 B/token × 262144 tokens = 3 GiB",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
    let g = d.path().join("gptoss");
    published(&g, "openai--gpt-oss-120b", 61);
    let (code, stdout, stderr) = serve(
        d.path(),
        g.to_str().unwrap(),
        &snap,
        &["--", "--max-model-len", "32768"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for want in [
        "#     18 sliding-window layers: window 128: 4 KV heads (8 / tp 2) × (64 K + 64 V) × 2 B = 1024 B/token × 8336 tokens held (min(window − 1 + 8192 tokens in flight, context) + a block)",
        "#     18 full-attention layers: 4 KV heads (8 / tp 2) × (64 K + 64 V) × 2 B = 1024 B/token × 32768 tokens = 576 MiB",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
}

#[test]
fn memory_arguments_after_the_dashes_are_the_ones_counted() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m");
    model(&m);
    let snap = head_snapshot(d.path(), 120, 2);
    // `-- --max-model-len 8192 --kv-cache-dtype fp8`: 48 × 4 × 256 × 1 B × 8192 = 384 MiB.
    let (code, stdout, stderr) = serve(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--", "--max-model-len", "8192", "--kv-cache-dtype", "fp8"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("× (128 K + 128 V) × 1 B = 1024 B/token × 8192 tokens = 384 MiB"),
        "{stdout}"
    );
    // The same argument twice with two values is refused, naming both.
    let (code, stdout, stderr) = serve(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "32768", "--", "--max-model-len", "8192"],
    );
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("--max-model-len is given twice with two values: 32768 (halobox's --max-model-len) and 8192 (--max-model-len after `--`)"),
        "{stderr}"
    );
}

#[test]
fn no_fit_check_starts_anyway_and_warns() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m");
    model(&m);
    let snap = head_snapshot(d.path(), 120, 100);
    let (code, stdout, stderr) = serve(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "32768", "--no-fit-check"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("# WARNING: --no-fit-check: starting anyway, though the model does not fit in the GPU memory of node root@n1"),
        "{stdout}"
    );
}

fn plan(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .arg("plan")
        .args(args)
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn plan_previews_every_split_offline() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m");
    model(&m);
    let (code, stdout, stderr) = plan(&[
        m.to_str().unwrap(),
        "--nodes",
        "2",
        "--gtt",
        "30G",
        "--max-model-len",
        "32768",
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for want in [
        "model: weights 40 GiB (2 safetensors files); KV cache 196608 B/token for the whole model, checked for 32768 tokens",
        "  tp 1 × pp 1: does not fit; longest context that fits: none",
        "* tp 2 × pp 1: fits; longest context that fits: 40960",
        "    node node2: weights 20 GiB + KV 3 GiB = 23 GiB of 27 GiB usable; 4 GiB left",
        "chosen: tp 2 × pp 1: the fastest split that fits with room, about",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
    let (code, stdout, _) = plan(&[
        m.to_str().unwrap(),
        "--nodes",
        "2",
        "--gtt",
        "30G",
        "--json",
        "--",
        "--max-model-len",
        "32768",
    ]);
    assert_eq!(code, Some(0));
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let s = &doc["splits"][doc["chosen"].as_u64().unwrap() as usize];
    assert_eq!(s["split"], "tp 2 × pp 1");
    assert_eq!(
        (s["tp"].as_u64(), s["pp"].as_u64(), s["nodes"].as_u64()),
        (Some(2), Some(1), Some(2))
    );
    assert_eq!(s["weights_bytes_per_gpu"].as_u64(), Some(20 * GIB));
    assert_eq!(s["kv_bytes_per_gpu"].as_u64(), Some(3 * GIB));
    assert_eq!(s["kv_bytes_per_token"].as_u64(), Some(196608));
    assert_eq!(s["max_context_that_fits"].as_u64(), Some(40960));
    assert_eq!(s["fits"], true);
    // Nothing fits: exit 1 and the nearest split named.
    let (code, stdout, _) = plan(&[m.to_str().unwrap(), "--nodes", "1", "--gtt", "16G"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("none chosen: no split fits: the nearest is tp 1 × pp 1"),
        "{stdout}"
    );
    // Every split carries its estimate and concurrency.
    let (code, stdout, _) = plan(&[
        m.to_str().unwrap(),
        "--nodes",
        "2",
        "--gtt",
        "30G",
        "--max-model-len",
        "32768",
        "--prefer",
        "fewest-nodes",
    ]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("speed estimate: link roce, memory bandwidth 215 / 215 GB/s (node by node), 1 sequence(s) decoding at once; chosen by: fewest nodes"),
        "{stdout}"
    );
    // (27 GiB − 20 GiB) / 3 GiB for one sequence of 32768 tokens.
    assert!(
        stdout.contains("2 sequence(s) of 32768 tokens fit at once"),
        "{stdout}"
    );
    // --gtt without --nodes is a usage error.
    let (code, _, stderr) = plan(&[m.to_str().unwrap(), "--gtt", "16G"]);
    assert_eq!(code, Some(2), "{stderr}");
}

/// `plan --json` on `--nodes 2 --gtt SIZE` for a published config of `gib`
/// GiB, and the chosen split's index.
fn plan_json(dir: &Path, name: &str, gib: u64, gtt: &str, args: &[&str]) -> serde_json::Value {
    let m = dir.join(name);
    if !m.exists() {
        published(&m, name, gib);
    }
    let mut all = vec![m.to_str().unwrap(), "--nodes", "2", "--gtt", gtt, "--json"];
    all.extend(args);
    let (code, stdout, stderr) = plan(&all);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn chosen(doc: &serde_json::Value) -> (String, f64) {
    let s = &doc["splits"][doc["chosen"].as_u64().unwrap() as usize];
    (
        s["split"].as_str().unwrap().to_string(),
        s["decode_tokens_per_s"].as_f64().unwrap(),
    )
}

#[test]
fn the_link_decides_between_tensor_parallel_and_one_node() {
    let d = tempfile::tempdir().unwrap();
    // Qwen3-Next-80B-A3B, 150 GiB, fits one node of 256 GiB: 3B active
    // parameters read little, so 96 all-reduces a token decide.
    let name = "Qwen--Qwen3-Next-80B-A3B-Instruct";
    let roce = plan_json(
        d.path(),
        name,
        150,
        "256G",
        &["--transport", "roce", "--max-model-len", "32768"],
    );
    let tcp = plan_json(
        d.path(),
        name,
        150,
        "256G",
        &["--transport", "tcp", "--max-model-len", "32768"],
    );
    assert_eq!(chosen(&roce).0, "tp 2 × pp 1", "{roce:#}");
    assert_eq!(chosen(&tcp).0, "tp 1 × pp 1", "{tcp:#}");
    assert!(
        roce["why"]
            .as_str()
            .unwrap()
            .contains("runner-up tp 1 × pp 1 at"),
        "{}",
        roce["why"]
    );
    // Every split has both estimates; prefill is compute-bound.
    for s in roce["splits"].as_array().unwrap() {
        assert!(s["decode_tokens_per_s"].as_f64().unwrap() > 0.0, "{s:#}");
        assert!(s["prefill_tokens_per_s"].as_f64().unwrap() > 0.0, "{s:#}");
        assert!(s["max_concurrency"].as_u64().unwrap() >= 1, "{s:#}");
    }
    // A dense 61 GiB model: tensor parallel halves the reads, over RoCE
    // and even over TCP; --prefer fewest-nodes keeps one node.
    let dense = "Qwen--Qwen3-32B";
    for link in ["roce", "tcp"] {
        let doc = plan_json(
            d.path(),
            dense,
            61,
            "128G",
            &["--transport", link, "--max-model-len", "32768"],
        );
        assert_eq!(chosen(&doc).0, "tp 2 × pp 1", "{link}: {doc:#}");
    }
    let fewest = plan_json(
        d.path(),
        dense,
        61,
        "128G",
        &["--prefer", "fewest-nodes", "--max-model-len", "32768"],
    );
    let (split, one) = chosen(&fewest);
    assert_eq!(split, "tp 1 × pp 1");
    // Half the memory bandwidth: about half the tokens/s on one node.
    let slow = plan_json(
        d.path(),
        dense,
        61,
        "128G",
        &[
            "--prefer",
            "fewest-nodes",
            "--memory-bandwidth-gbs",
            "107.5",
            "--max-model-len",
            "32768",
        ],
    );
    let ratio = chosen(&slow).1 / one;
    assert!((0.5..0.6).contains(&ratio), "{ratio}");
    // Eight sequences share each read.
    let busy = plan_json(
        d.path(),
        dense,
        61,
        "128G",
        &[
            "--prefer",
            "fewest-nodes",
            "--concurrency",
            "8",
            "--max-model-len",
            "32768",
        ],
    );
    assert!(chosen(&busy).1 > 7.0 * one, "{busy:#}");
}

#[test]
fn serve_without_a_split_starts_the_one_plan_chooses() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m");
    model(&m);
    // The head fits the 40 GiB model alone; the other node is not read
    // from a snapshot, so plan can choose only the head.
    let snap = head_snapshot(d.path(), 120, 2);
    let (code, stdout, stderr) = serve_as_planned(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "32768"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("# split: tp 1 × pp 1 on 1 of 2 node(s), chosen by `halobox plan`: tp 1 × pp 1: the fastest split that fits with room, about"),
        "{stdout}"
    );
    assert!(stdout.contains("--tensor-parallel-size 1"), "{stdout}");
    assert!(
        stdout.contains("# fit check (tensor-parallel 1 × pipeline-parallel 1"),
        "{stdout}"
    );
    // A split given is kept, and said so.
    let (code, stdout, _) = serve(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "32768"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.starts_with("# split: as given (--tp or --pipeline-parallel-size), not plan's\n"),
        "{stdout}"
    );
    assert!(stdout.contains("--tensor-parallel-size 2"), "{stdout}");
    // --max-model-len auto: the longest context the head fits, in 16-token
    // blocks: (48 GiB × 0.9 − 40 GiB) / 196608 B per token.
    let small = d.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let snap = head_snapshot(&small, 50, 2);
    let (code, stdout, stderr) = serve_as_planned(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "auto"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let fits = (((48 * GIB) as f64 * 0.9) as u64 - 40 * GIB) / 196608 / 16 * 16;
    assert!(
        stdout.contains(&format!(
            "--max-model-len auto: {fits} (the longest that fits"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("--max-model-len {fits}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("one request of {fits} tokens")),
        "{stdout}"
    );
    // With `--block-size 128` after `--`: whole blocks of 128.
    let (code, stdout, stderr) = serve_as_planned(
        d.path(),
        m.to_str().unwrap(),
        &snap,
        &["--max-model-len", "auto", "--", "--block-size", "128"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let fits128 = fits / 128 * 128;
    assert!(
        stdout.contains(&format!(
            "--max-model-len auto: {fits128} (the longest that fits, in whole 128-token blocks)"
        )),
        "{stdout}"
    );
}
