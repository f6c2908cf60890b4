//! `bench report --html` and `bench compare --html` on the saved runs of
//! `tests/fixtures/bench-runs/`: each kind of result draws its charts (axes
//! with units, legends) and only its own; a hostile record cannot inject
//! markup; a bad path is named with what to do; and headless Chromium
//! renders the page to a picture that is not blank.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn runs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-runs")
}

fn run(name: &str) -> String {
    runs().join(name).display().to_string()
}

/// `halobox ARGS --html OUT` in a fresh folder: the page.
fn page(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.html");
    let mut all = args.to_vec();
    let o = out.display().to_string();
    all.extend(["--html", &o]);
    let res = common::run(&all);
    assert!(
        res.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert!(String::from_utf8_lossy(&res.stdout).contains(&o));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["out.html"], "the temporary file is gone");
    std::fs::read_to_string(out).unwrap()
}

/// The chart ids on the page, in order.
fn charts(html: &str) -> Vec<String> {
    html.split("id=\"chart-")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect()
}

/// The SVG of one chart.
fn chart<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("id=\"chart-{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}: {:?}", charts(html)));
    let len = html[start..].find("</svg>").unwrap();
    &html[start..start + len]
}

/// The page needs nothing from outside and runs nothing.
fn self_contained(html: &str) {
    let lower = html.to_lowercase();
    for bad in [
        "<script", "<link", "<img", "<iframe", " src=\"", "href=\"", "url(", "@import",
    ] {
        assert!(!lower.contains(bad), "{bad} in the page");
    }
    assert!(lower.contains("content-security-policy"));
}

fn has_all(svg: &str, texts: &[&str]) {
    for t in texts {
        assert!(svg.contains(t), "{t:?} not in {svg}");
    }
}

#[test]
fn a_bench_run_draws_latency_percentiles_and_bandwidth_by_size() {
    let html = page(&["bench", "report", &run("rdma-before")]);
    self_contained(&html);
    assert_eq!(charts(&html), ["bench-latency", "bench-bandwidth"]);
    has_all(
        chart(&html, "bench-latency"),
        &[
            "Latency (µs)",
            "Percentile (of samples)",
            ">p99<",
            "class=\"legend-entry\"",
            ">tcp halobox<",
            ">rdma ib_write_lat<",
        ],
    );
    has_all(
        chart(&html, "bench-bandwidth"),
        &[
            "Bandwidth (Gb/s)",
            "Message size (bytes, log scale)",
            ">4 KiB<",
            ">1 MiB<",
            "rdma ib_write_bw (size sweep)",
            "tcp halobox x4 (51.2 Gb/s)",
            "path ceiling (100 Gb/s)",
            "<polyline",
        ],
    );
}

#[test]
fn a_collective_run_draws_bus_bandwidth_against_the_line_rate() {
    let html = page(&["bench", "report", &run("collective"), "--line-rate", "100"]);
    self_contained(&html);
    assert_eq!(charts(&html), ["collective-busbw", "collective-latency"]);
    has_all(
        chart(&html, "collective-busbw"),
        &[
            "Bus bandwidth (Gb/s)",
            "Message size (bytes, log scale)",
            ">4 KiB<",
            ">16 MiB<",
            "all_reduce (gloo, 2 ranks)",
            "all_gather (gloo, 2 ranks)",
            "line rate (100 Gb/s)",
        ],
    );
    has_all(chart(&html, "collective-latency"), &["Latency (µs)"]);
    // Without --line-rate (and no bench run on the page): said how to draw it.
    let html = page(&["bench", "report", &run("collective")]);
    assert!(!html.contains("line rate ("));
    assert!(html.contains("--line-rate GBPS"));
    // With a bench run on the page: its path ceiling.
    let html = page(&["bench", "report", &run("collective"), &run("rdma-before")]);
    assert!(html.contains("line rate (100 Gb/s)"));
}

#[test]
fn a_serving_run_draws_only_the_serving_charts() {
    let html = page(&["bench", "report", &run("serving-before")]);
    self_contained(&html);
    assert_eq!(
        charts(&html),
        ["serving-ttft", "serving-itl", "serving-throughput"]
    );
    has_all(
        chart(&html, "serving-ttft"),
        &[
            "Time to first token (ms)",
            "Concurrency (requests in flight, log scale)",
            ">p50<",
            ">p99<",
            ">8<",
        ],
    );
    has_all(chart(&html, "serving-itl"), &["Inter-token latency (ms)"]);
    has_all(
        chart(&html, "serving-throughput"),
        &["Output throughput (tokens/s)", "output tokens/s"],
    );
    assert!(html.contains("Qwen/Qwen3-8B"));
}

#[test]
fn an_ab_run_draws_its_legs_side_by_side() {
    let html = page(&["bench", "report", &run("ab")]);
    self_contained(&html);
    assert_eq!(charts(&html), ["ab-ttft", "ab-itl", "ab-throughput"]);
    has_all(
        chart(&html, "ab-throughput"),
        &[
            "ethernet (ethernet) output tokens/s",
            "configured (roce) output tokens/s",
        ],
    );
    has_all(
        chart(&html, "ab-ttft"),
        &["ethernet (ethernet) p50", "configured (roce) p99"],
    );
}

#[test]
fn compare_draws_before_against_after() {
    let html = page(&["bench", "compare", &run("rdma-before"), &run("rdma-after")]);
    self_contained(&html);
    assert_eq!(charts(&html), ["bench-latency", "bench-bandwidth"]);
    has_all(
        chart(&html, "bench-latency"),
        &[
            ">before tcp halobox<",
            ">after tcp halobox<",
            ">before rdma ib_write_lat<",
            ">after rdma ib_write_lat<",
        ],
    );
    has_all(
        chart(&html, "bench-bandwidth"),
        &[
            "before rdma ib_write_bw (size sweep)",
            "after rdma ib_write_bw (size sweep)",
        ],
    );
    let html = page(&[
        "bench",
        "compare",
        &run("serving-before"),
        &run("serving-after"),
    ]);
    has_all(
        chart(&html, "serving-throughput"),
        &["before output tokens/s", "after output tokens/s"],
    );
    has_all(chart(&html, "serving-ttft"), &["before p50", "after p99"]);
    // Two kinds of run: refused, nothing written.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.html");
    let o = common::run(&[
        "bench",
        "compare",
        &run("rdma-before"),
        &run("serving-after"),
        "--html",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("same kind"));
    assert!(!out.exists());
}

/// A record (as a node may send back) whose model, endpoint and peer
/// carry markup, in a folder whose name carries markup too: all of it is
/// text on the page.
#[test]
fn a_hostile_record_cannot_inject_markup() {
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
    let tmp = tempfile::tempdir().unwrap();
    let serving = tmp.path().join("s<svg onload=alert(3)>");
    std::fs::create_dir(&serving).unwrap();
    let rec = std::fs::read_to_string(runs().join("serving-before/serving.json")).unwrap();
    let hostile = serde_json::to_string(evil).unwrap();
    let rec = rec.replace("\"Qwen/Qwen3-8B\"", &hostile);
    assert!(rec.contains("alert(1)"));
    std::fs::write(serving.join("serving.json"), rec).unwrap();
    let bench = tmp.path().join("b");
    std::fs::create_dir(&bench).unwrap();
    for e in std::fs::read_dir(runs().join("rdma-before")).unwrap() {
        let e = e.unwrap();
        let text = std::fs::read_to_string(e.path()).unwrap();
        let text = text.replace("\"node2\"", &hostile);
        std::fs::write(bench.join(e.file_name()), text).unwrap();
    }
    let html = page(&[
        "bench",
        "report",
        serving.to_str().unwrap(),
        bench.to_str().unwrap(),
    ]);
    self_contained(&html);
    assert!(!html.contains("<svg onload"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x"));
    assert!(html.contains("&quot;&#39;&amp;"));
    assert!(html.contains("s&lt;svg onload=alert(3)&gt; p50"), "legend");
    assert_eq!(html.matches("<svg").count(), charts(&html).len());
}

#[test]
fn a_bad_html_path_is_named_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no/such/folder/out.html");
    let o = common::run(&[
        "bench",
        "report",
        &run("serving-before"),
        "--html",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    assert!(
        err.contains("does not exist") && err.contains("hint:"),
        "{err}"
    );
    let o = common::run(&[
        "bench",
        "report",
        &run("serving-before"),
        "--html",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a folder"));
    // --html with --json: one output at a time.
    let o = common::run(&[
        "bench",
        "report",
        &run("serving-before"),
        "--json",
        "--html",
        "x.html",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--json"));
    // Several runs need --html.
    let o = common::run(&["bench", "report", &run("serving-before"), &run("ab")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--html"));
}

/// Runs `cmd` with a time bound; its stdout.
fn bounded(mut cmd: Command, secs: u64) -> (std::process::ExitStatus, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run chromium ({e}): this test needs it\n  hint: apt-get install chromium (scripts/test.sh does)"
            )
        });
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, reader.join().unwrap())
}

/// Headless Chromium with its own HOME and profile in `home`.
fn chromium(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("chromium");
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            home.join("profile").display()
        ))
        .args(args);
    c
}

/// A PNG's pixels as RGB (8-bit RGB or RGBA, not interlaced: what
/// Chromium writes).
fn decode_png(bytes: &[u8]) -> (usize, usize, Vec<[u8; 3]>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut at, mut idat) = (8, Vec::new());
    let (mut w, mut h, mut channels) = (0, 0, 0);
    while at + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let kind = &bytes[at + 4..at + 8];
        let data = &bytes[at + 8..at + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                h = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                assert_eq!(data[8], 8, "bit depth");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    t => panic!("colour type {t}"),
                };
                assert_eq!(data[12], 0, "interlaced");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = w * channels;
    assert_eq!(raw.len(), h * (stride + 1));
    let mut prev = vec![0u8; stride];
    let mut pixels = Vec::with_capacity(w * h);
    for row in raw.chunks(stride + 1) {
        let (filter, line) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for i in 0..stride {
            let a = if i >= channels { cur[i - channels] } else { 0 };
            let b = prev[i];
            let c = if i >= channels { prev[i - channels] } else { 0 };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("filter {f}"),
            };
            cur[i] = line[i].wrapping_add(pred);
        }
        pixels.extend(cur.chunks(channels).map(|p| [p[0], p[1], p[2]]));
        prev = cur;
    }
    (w, h, pixels)
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// Chromium opens the page written for every kind of run: its DOM holds
/// the charts, and its screenshot is not blank: many pixels differ from
/// the white background and the series' colours are there.
#[test]
fn chromium_renders_the_charts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bench.html");
    let o = common::run(&[
        "bench",
        "report",
        &run("rdma-before"),
        &run("rdma-after"),
        &run("collective"),
        &run("serving-before"),
        &run("ab"),
        "--html",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let url = format!("file://{}", out.display());
    let n_charts = charts(&std::fs::read_to_string(&out).unwrap()).len();
    assert_eq!(n_charts, 10);

    let (status, dom) = bounded(chromium(tmp.path(), &["--dump-dom", &url]), 90);
    assert!(status.success(), "chromium --dump-dom: {status}");
    assert_eq!(dom.matches("<svg").count(), n_charts, "{dom}");
    assert!(dom.matches("<polyline").count() >= 12);
    assert!(dom.contains("Bus bandwidth (Gb/s)"));

    let png = tmp.path().join("shot.png");
    let (status, _) = bounded(
        chromium(
            tmp.path(),
            &[
                &format!("--screenshot={}", png.display()),
                "--window-size=1200,2400",
                &url,
            ],
        ),
        90,
    );
    assert!(status.success(), "chromium --screenshot: {status}");
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    if let Ok(keep) = std::env::var("HALOBOX_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    let (w, h, pixels) = decode_png(&bytes);
    assert!(w >= 1000 && h >= 2000, "{w}x{h}");
    let white = [255u8, 255, 255];
    let inked = pixels.iter().filter(|p| **p != white).count();
    assert!(
        inked * 100 >= pixels.len() * 2,
        "only {inked} of {} pixels are not background",
        pixels.len()
    );
    let near = |p: &[u8; 3], c: [u8; 3]| (0..3).all(|i| p[i].abs_diff(c[i]) <= 24);
    let seen: Vec<&str> = halobox::bench::html::svg::PALETTE
        .iter()
        .copied()
        .filter(|hex| pixels.iter().filter(|p| near(p, rgb(hex))).count() >= 50)
        .collect();
    assert!(
        seen.len() >= 4,
        "series colours in the screenshot: {seen:?}"
    );
}

/// A link planted at the temporary name `--html` once used beside OUT
/// (`.OUT.PID.tmp`) pointing at a root-owned file: the real command (in a
/// PID namespace of its own, so its pid is one of those planted) writes the
/// page and never writes through the link.
#[test]
fn a_link_planted_beside_the_page_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    for pid in 1..=16 {
        std::os::unix::fs::symlink(&victim, dir.path().join(format!(".out.html.{pid}.tmp")))
            .unwrap();
    }
    let out = dir.path().join("out.html");
    for args in [
        vec!["report", &run("serving-after")],
        vec!["compare", &run("serving-before"), &run("serving-after")],
    ] {
        let o = Command::new("unshare")
            .args(["--pid", "--fork", env!("CARGO_BIN_EXE_halobox"), "bench"])
            .args(&args)
            .arg("--html")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "keep\n",
            "{args:?}"
        );
        assert!(std::fs::read_to_string(&out).unwrap().contains("<svg"));
        let links = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_symlink())
            .count();
        assert_eq!(links, 16, "{args:?}");
    }
}
