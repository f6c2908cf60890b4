//! The scripts the image build runs around RCCL (containerfiles/), run for
//! real on ELF files compiled here with the system C compiler, on offload
//! bundles written here in LLVM's format and on a real compressed bundle cut
//! from AMD's XLA plugin (tests/fixtures/amd): the ABI gate, the consumer
//! finder, the marker check.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GATE: &str = "containerfiles/rccl-abi-check.sh";
const CONSUMERS: &str = "containerfiles/rccl-consumers.sh";
const MARKERS: &str = "containerfiles/rccl-markers.sh";

fn script(path: &str, args: &[&Path]) -> Output {
    Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("bash {path}: {e}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Compiles `source` (C) into the shared library `dir/name` with `cc`.
fn shared_lib(dir: &Path, name: &str, source: &str, link: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .args(link)
        .current_dir(dir)
        .output()
        .expect("cc (the system C compiler) must be installed");
    assert!(o.status.success(), "cc {name}: {}", stderr(&o));
    out
}

/// A torch-like consumer that needs ncclCommInitRank and ncclCommResume,
/// linked against `lib` (a DT_NEEDED entry on its file name), a librccl
/// that has both, and one that lacks ncclCommResume (the old gfx1151 branch).
struct Elfs {
    _dir: tempfile::TempDir,
    consumer: PathBuf,
    full: PathBuf,
    old: PathBuf,
    dir: PathBuf,
}

fn elfs() -> Elfs {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let full = shared_lib(
        &dir,
        "librccl.so.1",
        "int ncclCommInitRank(void) { return 0; }\nint ncclCommResume(void) { return 0; }\nint rcclUnused(void) { return 0; }\n",
        &[],
    );
    let old = shared_lib(
        &dir,
        "librccl-old.so.1",
        "int ncclCommInitRank(void) { return 0; }\n",
        &[],
    );
    let consumer = shared_lib(
        &dir,
        "libtorch_hip.so",
        "int ncclCommInitRank(void);\nint ncclCommResume(void);\nint puts(const char *);\n\
         int torch_init(void) { puts(\"x\"); return ncclCommInitRank() + ncclCommResume(); }\n",
        &["-L.", "-l:librccl.so.1"],
    );
    Elfs {
        _dir: tmp,
        consumer,
        full,
        old,
        dir,
    }
}

#[test]
fn the_gate_passes_a_librccl_that_defines_every_symbol_the_consumer_needs() {
    let e = elfs();
    let o = script(GATE, &[&e.consumer, Path::new("--"), &e.full]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("defines all 2 nccl*/rccl* symbol(s)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_gate_fails_naming_the_symbol_the_librccl_lacks() {
    let e = elfs();
    let o = script(GATE, &[&e.consumer, Path::new("--"), &e.old]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("lacks 1 of the 2"), "{err}");
    assert!(err.contains("\n  ncclCommResume\n"), "{err}");
    assert!(
        !err.contains("  ncclCommInitRank"),
        "only the missing symbol is named: {err}"
    );
    // puts (libc) is needed too but is not an nccl*/rccl* symbol.
    assert!(!err.contains("puts"), "{err}");
    // Two consumers: what either needs counts.
    let o = script(GATE, &[&e.full, &e.consumer, Path::new("--"), &e.old]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn the_gate_says_how_to_call_it() {
    let e = elfs();
    for (args, needle) in [
        (vec![e.consumer.as_path(), e.full.as_path()], "no -- before"),
        (
            vec![Path::new("--"), e.full.as_path()],
            "no consumer library",
        ),
        (
            vec![e.consumer.as_path(), Path::new("--")],
            "exactly one librccl",
        ),
        (
            vec![e.consumer.as_path(), Path::new("--"), &e.full, &e.old],
            "exactly one librccl",
        ),
        (
            vec![
                e.consumer.as_path(),
                Path::new("--"),
                Path::new("/nonexistent/librccl.so.1"),
            ],
            "/nonexistent/librccl.so.1: no such readable file",
        ),
    ] {
        let o = script(GATE, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(
            err.contains("usage: rccl-abi-check CONSUMER.so... -- LIBRCCL.so"),
            "{err}"
        );
    }
    // A file that is not ELF: nm's own reason, exit 2 (not "all defined").
    let text = e.dir.join("librccl.so.1.sha256");
    std::fs::write(&text, "not an ELF file\n").unwrap();
    let o = script(GATE, &[&e.consumer, Path::new("--"), &text]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("nm cannot read"), "{}", stderr(&o));
}

#[test]
fn consumers_are_the_libraries_that_link_librccl() {
    let e = elfs();
    let tree = e.dir.join("tree");
    std::fs::create_dir_all(tree.join("torch/lib")).unwrap();
    std::fs::create_dir_all(tree.join("rocm/lib")).unwrap();
    std::fs::copy(&e.consumer, tree.join("torch/lib/libtorch_hip.so")).unwrap();
    std::fs::copy(&e.full, tree.join("rocm/lib/librccl.so.1")).unwrap();
    std::fs::copy(&e.old, tree.join("rocm/lib/libunrelated.so")).unwrap();
    let o = script(CONSUMERS, &[&tree]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!("{}\n", tree.join("torch/lib/libtorch_hip.so").display())
    );
    // None: exit 1, so the build does not run the gate on nothing.
    let o = script(CONSUMERS, &[&tree.join("rocm")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no library under"), "{}", stderr(&o));
    let o = script(CONSUMERS, &[&tree.join("nope")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not a folder"), "{}", stderr(&o));
}

/// An uncompressed offload bundle as LLVM writes it: the magic, the entry
/// count, per entry its offset, size, id length and id, then the code
/// objects. Each GPU code object carries its target id again in its
/// `amdhsa.target` metadata, as a real one does.
fn bundle(ids: &[&str]) -> Vec<u8> {
    let objects: Vec<Vec<u8>> = ids
        .iter()
        .map(|id| {
            let target = id.split_once("amdgcn-").map(|(_, t)| t).unwrap_or("");
            format!("\x7fELF amdhsa.target amdgcn-{target}\0").into_bytes()
        })
        .collect();
    let mut head = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    head.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    let header_len = 32 + ids.iter().map(|i| 24 + i.len()).sum::<usize>();
    let mut offset = header_len as u64;
    for (id, obj) in ids.iter().zip(&objects) {
        head.extend_from_slice(&offset.to_le_bytes());
        head.extend_from_slice(&(obj.len() as u64).to_le_bytes());
        head.extend_from_slice(&(id.len() as u64).to_le_bytes());
        head.extend_from_slice(id.as_bytes());
        offset += obj.len() as u64;
    }
    [head, objects.concat()].concat()
}

/// A compressed offload bundle as LLVM writes it: `CCOB`, version 3,
/// method 1 (zstd), three 8-byte fields, then the zstd frame.
fn ccob(payload: &[u8]) -> Vec<u8> {
    let mut z = Command::new("zstd")
        .args(["-q", "-19", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("zstd must be installed");
    use std::io::Write;
    z.stdin.take().unwrap().write_all(payload).unwrap();
    let out = z.wait_with_output().unwrap();
    assert!(out.status.success());
    let mut v = b"CCOB\x03\x00\x01\x00".to_vec();
    v.extend_from_slice(&[0u8; 24]);
    v.extend_from_slice(&out.stdout);
    v
}

const HOST: &str = "host-x86_64-unknown-linux-gnu-";
const GFX1151: &str = "hipv4-amdgcn-amd-amdhsa--gfx1151";

/// `CCOB` as the immediate of a `cmp` in x86 code (a bundle reader's own
/// check of the magic), followed by more code: not a bundle.
const FALSE_MAGIC: &[u8] = b"\x81\x3fCCOB\x0f\x85\x21\x02\x00\x00\x48\x8b";

#[test]
fn markers_find_gfx1151_code_objects_and_the_ib_transport() {
    let tmp = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let ib = b"\x7fELF host code NET/IB : Using [%d]%s:%d/%s\0".to_vec();
    let plain = file(
        "plain.so",
        &[
            &ib[..],
            &bundle(&[HOST, GFX1151, "hipv4-amdgcn-amd-amdhsa--gfx942"]),
        ]
        .concat(),
    );
    let o = script(MARKERS, &[&plain]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // One entry for gfx1151, though its id is in the file twice.
    assert!(
        stdout(&o).contains(": 1 gfx1151 code object(s) in 1 of 1 offload bundle(s) (0 compressed, 1 uncompressed; 2 code object(s) for any GPU target), 0 unreadable, 0 bundle magic(s) not a bundle, 1 NET/IB marker(s)"),
        "{}",
        stdout(&o)
    );

    // Device code only inside a compressed bundle: the target id is not in
    // the file's bytes, it is found by unpacking.
    let mut ids: Vec<String> = (1000..1100)
        .map(|n| format!("hipv4-amdgcn-amd-amdhsa--gfx{n}"))
        .collect();
    ids.push(GFX1151.to_string());
    ids.push(format!("{GFX1151}:xnack-"));
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let packed = ccob(&bundle(&ids));
    let hidden = b"amdgcn-amd-amdhsa--gfx1151";
    assert!(
        !packed.windows(hidden.len()).any(|w| w == hidden),
        "the stand-in must hide the id in the zstd frame"
    );
    let compressed = file(
        "compressed.so",
        &[
            &ib[..],
            FALSE_MAGIC,
            &packed,
            b"more host code after the bundle",
        ]
        .concat(),
    );
    let o = script(MARKERS, &[&compressed]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(": 2 gfx1151 code object(s) in 1 of 1 offload bundle(s) (1 compressed, 0 uncompressed; 102 code object(s) for any GPU target), 0 unreadable, 1 bundle magic(s) not a bundle"),
        "{}",
        stdout(&o)
    );
    // A real header whose frame is cut short is unreadable, not "not a bundle".
    let cut = file("cut.so", &[&ib[..], &packed[..40], b"\0\0\0\0"].concat());
    let o = script(MARKERS, &[&cut]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("1 unreadable, 0 bundle magic(s) not a bundle"),
        "{}",
        stdout(&o)
    );
    // The magic of an uncompressed bundle as a string (a bundle reader's
    // error message) is not a bundle either.
    let text = file(
        "reader.so",
        &[&ib[..], b"not a __CLANG_OFFLOAD_BUNDLE__ file\0".as_slice()].concat(),
    );
    let o = script(MARKERS, &[&text]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(": 0 gfx1151 code object(s) in 0 of 0 offload bundle(s)")
            && stdout(&o).contains("1 bundle magic(s) not a bundle"),
        "{}",
        stdout(&o)
    );

    // A real compressed bundle: cut from AMD's XLA plugin (27 targets).
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/amd/xla-plugin-ccob.bin");
    let real = file(
        "real.so",
        &[&ib[..], FALSE_MAGIC, &std::fs::read(real).unwrap()].concat(),
    );
    let o = script(MARKERS, &[&real]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(": 1 gfx1151 code object(s) in 1 of 1 offload bundle(s) (1 compressed, 0 uncompressed; 27 code object(s) for any GPU target), 0 unreadable, 1 bundle magic(s) not a bundle"),
        "{}",
        stdout(&o)
    );
    let o = script(MARKERS, &[&real, Path::new("gfx1150")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = script(MARKERS, &[&real, Path::new("gfx1152")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = script(MARKERS, &[&real, Path::new("gfx1154")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // gfx942 is not in it: exit 1 naming the target.
    let o = script(MARKERS, &[&compressed, Path::new("gfx942")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("has no gfx942 code objects"),
        "{}",
        stderr(&o)
    );

    assert!(
        stdout(&o).contains("no fault injection compiled in"),
        "{}",
        stdout(&o)
    );

    // Fault injection is reported (not a failure): without and with the
    // net-ib gate of rocm-systems PR 8512.
    let gfx = &bundle(&[GFX1151])[..];
    let slow = file("slow.so", &[&ib[..], gfx, b"RCCL_INJECT_FAULTS\0"].concat());
    let o = script(MARKERS, &[&slow]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("fault injection compiled in without the net-ib gate"),
        "{}",
        stdout(&o)
    );
    let gated = file(
        "gated.so",
        &[
            &ib[..],
            gfx,
            b"RCCL_INJECT_FAULTS\0RCCL_IB_FAULT_INJECTION\0",
        ]
        .concat(),
    );
    let o = script(MARKERS, &[&gated]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("with the net-ib gate RCCL_IB_FAULT_INJECTION"),
        "{}",
        stdout(&o)
    );

    // A library without the IB transport (a TCP-only build).
    let no_ib = file(
        "no-ib.so",
        &[b"NET/Socket only ".as_slice(), &bundle(&[GFX1151])].concat(),
    );
    let o = script(MARKERS, &[&no_ib]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("has no NET/IB transport"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("code objects"), "{}", stderr(&o));

    // Usage errors.
    let o = script(MARKERS, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("usage: rccl-markers LIBRCCL [GFX_TARGET]"));
    let o = script(MARKERS, &[&plain, Path::new("1151")]);
    assert_eq!(o.status.code(), Some(2));
    let o = script(MARKERS, &[&tmp.path().join("nope.so")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no such readable file"));
}

const BUILD: &str = "containerfiles/rccl-build.sh";
const INSTALL: &str = "containerfiles/rccl-install.sh";
/// The markers rccl-markers.sh wants: the IB transport's log string and a
/// bundle with gfx1151 code.
fn marked() -> Vec<u8> {
    [b"\0NET/IB : Using\0".as_slice(), &bundle(&[HOST, GFX1151])].concat()
}

fn run_env(path: &str, args: &[&Path], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new("bash");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.env("RCCL_TAG", "therock-7.14");
    c.output().unwrap()
}

/// A librccl (`full` or `old` of [`elfs`]) with the marker strings appended,
/// as `dir/lib/librccl.so.1`.
fn marked_lib(dir: &Path, elf: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let p = dir.join("lib/librccl.so.1");
    std::fs::write(&p, [std::fs::read(elf).unwrap(), marked()].concat()).unwrap();
    p
}

#[test]
fn stock_takes_the_sdk_librccl_as_is_when_it_has_the_markers() {
    let e = elfs();
    let rocm = e.dir.join("rocm");
    let lib = marked_lib(&rocm, &e.full);
    let out = e.dir.join("out");
    let o = run_env(BUILD, &[Path::new("stock"), &out], &[("ROCM_PATH", &rocm)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(out.join("librccl.so.1")).unwrap(),
        std::fs::read(&lib).unwrap()
    );
    let env = std::fs::read_to_string(out.join("rccl.env")).unwrap();
    assert!(
        env.contains("RCCL_SOURCE=stock\nRCCL_TAG=therock-7.14\n"),
        "{env}"
    );
    let sha = std::fs::read_to_string(out.join("librccl.so.1.sha256")).unwrap();
    assert!(
        env.contains(&format!("RCCL_SHA256={}", &sha[..64])),
        "{env} {sha}"
    );

    // Without gfx1151 code or NET/IB: the build stops, nothing written.
    std::fs::copy(&e.full, &lib).unwrap();
    let out2 = e.dir.join("out2");
    let o = run_env(BUILD, &[Path::new("stock"), &out2], &[("ROCM_PATH", &rocm)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("has no gfx1151 code objects"),
        "{}",
        stderr(&o)
    );
    assert!(!out2.exists());

    let o = run_env(
        BUILD,
        &[Path::new("custom"), &out2],
        &[("ROCM_PATH", &rocm)],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("RCCL must be stock or patched, not 'custom'"));
}

/// An image tree: `opt/venv/.../libtorch_hip.so` linking librccl, ROCm's
/// and the wheel's librccl (the `full` one), and /opt/halobox with what
/// rccl-build.sh wrote for `source` from `chosen`.
fn image_tree(e: &Elfs, source: &str, chosen: &Path) -> (PathBuf, PathBuf) {
    let root = e.dir.join(format!("image-{source}"));
    let torch = root.join("opt/venv/lib/torch/lib");
    std::fs::create_dir_all(&torch).unwrap();
    std::fs::copy(&e.consumer, torch.join("libtorch_hip.so")).unwrap();
    std::fs::copy(&e.full, torch.join("librccl.so.1")).unwrap();
    marked_lib(&root.join("opt/rocm"), &e.full);
    std::os::unix::fs::symlink("librccl.so.1", root.join("opt/rocm/lib/librccl.so")).unwrap();
    let halobox = root.join("opt/halobox");
    std::fs::create_dir_all(&halobox).unwrap();
    std::fs::copy(chosen, halobox.join("librccl.so.1")).unwrap();
    std::fs::write(halobox.join("rccl.env"), format!("RCCL_SOURCE={source}\n")).unwrap();
    (root.join("opt"), halobox)
}

#[test]
fn patched_is_gated_before_any_librccl_is_replaced() {
    let e = elfs();
    // The old branch's library: the gate fails naming the symbol, and every
    // librccl in the image is still the one torch was shipped with.
    let (opt, halobox) = image_tree(&e, "patched", &e.old);
    let o = run_env(INSTALL, &[&halobox, &opt], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("\n  ncclCommResume\n"),
        "{}",
        stderr(&o)
    );
    let torch_rccl = opt.join("venv/lib/torch/lib/librccl.so.1");
    assert_eq!(
        std::fs::read(&torch_rccl).unwrap(),
        std::fs::read(&e.full).unwrap()
    );
    assert!(!stdout(&o).contains("->"), "nothing copied: {}", stdout(&o));

    // A library with every symbol: copied over every librccl file.
    let (opt, halobox) = image_tree(&e, "patched2", &e.full);
    std::fs::write(halobox.join("rccl.env"), "RCCL_SOURCE=patched\n").unwrap();
    let patched = [std::fs::read(&e.full).unwrap(), b"patched".to_vec()].concat();
    std::fs::write(halobox.join("librccl.so.1"), &patched).unwrap();
    let o = run_env(INSTALL, &[&halobox, &opt], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for p in [
        "venv/lib/torch/lib/librccl.so.1",
        "rocm/lib/librccl.so.1",
        "rocm/lib/librccl.so",
    ] {
        assert_eq!(std::fs::read(opt.join(p)).unwrap(), patched, "{p}");
    }
}

#[test]
fn stock_replaces_nothing_and_every_copy_must_pass_the_gate() {
    let e = elfs();
    let (opt, halobox) = image_tree(&e, "stock", &e.full);
    let o = run_env(INSTALL, &[&halobox, &opt], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("RCCL stock; 1 librccl consumer(s), 2 librccl file(s)"),
        "{}",
        stdout(&o)
    );
    // An old librccl somewhere in the image fails the build, named.
    std::fs::copy(&e.old, opt.join("rocm/lib/librccl.so.1")).unwrap();
    let o = run_env(INSTALL, &[&halobox, &opt], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rocm/lib/librccl.so.1 lacks 1 of the 2"),
        "{}",
        stderr(&o)
    );
}

/// The Containerfile's instructions, continuation lines joined, comments
/// dropped, with the stage each belongs to.
fn instructions() -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string("containerfiles/vllm-therock-gfx1151.Containerfile").unwrap();
    let mut out = Vec::new();
    let mut stage = String::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(t);
        let ins = std::mem::take(&mut cur);
        if ins.starts_with("FROM ") {
            stage = ins.rsplit(' ').next().unwrap().to_string();
        }
        out.push((stage.clone(), ins));
    }
    out
}

#[test]
fn the_build_gates_rccl_before_replacing_it_and_imports_torch_after() {
    let ins = instructions();
    let find = |stage: &str, needle: &str| {
        ins.iter()
            .position(|(s, i)| s == stage && i.starts_with("RUN ") && i.contains(needle))
            .unwrap_or_else(|| panic!("no RUN with {needle} in stage {stage}"))
    };
    let build = find("rccl-builder", "rccl-build.sh \"${RCCL}\" /out");
    let install = find("runtime", "rccl-install.sh /opt/halobox /opt /usr");
    let torch = find("runtime", "python /opt/halobox/bin/torch-check.py");
    assert!(
        build < install && install < torch,
        "{build} {install} {torch}"
    );
    // Nothing in the Containerfile itself copies a librccl: only
    // rccl-install.sh does, after its gate (tested above).
    for (stage, i) in &ins {
        if i.starts_with("RUN ") {
            assert!(
                !(i.contains("cp ") && i.contains("librccl")),
                "{stage}: {i}"
            );
        }
    }
    // find_spec does not load libtorch_hip.so: the contract imports torch.
    assert!(!ins.iter().any(|(_, i)| i.contains("find_spec(\"torch\")")));
    let script = std::fs::read_to_string(INSTALL).unwrap();
    let gate = script
        .find("rccl-abi-check.sh\" \"${consumers[@]}\" -- \"$chosen\"")
        .unwrap();
    let copy = script.find("cp -v \"$chosen\"").unwrap();
    assert!(gate < copy, "rccl-install.sh gates before it copies");
    // Every script the build runs is a file here that the build copies in.
    for f in [
        "rccl-abi-check.sh",
        "rccl-consumers.sh",
        "rccl-install.sh",
        "rccl-markers.sh",
        "torch-check.py",
        "rccl-build.sh",
    ] {
        assert!(Path::new("containerfiles").join(f).is_file(), "{f}");
        assert!(
            ins.iter()
                .any(|(_, i)| i.starts_with("COPY ") && i.contains(&format!("containerfiles/{f}"))),
            "{f} is not copied in"
        );
    }
    // The labels say which RCCL the image carries.
    let label = ins
        .iter()
        .find(|(s, i)| s == "runtime" && i.starts_with("LABEL "))
        .unwrap();
    for l in [
        "io.halobox.rccl.source=\"${RCCL}\"",
        "io.halobox.rccl.tag=\"${RCCL_TAG}\"",
        "io.halobox.rccl.sha256=\"${RCCL_SHA256}\"",
    ] {
        assert!(label.1.contains(l), "{l}");
    }
}

#[test]
fn the_torch_check_fails_without_torch() {
    let o = Command::new("python3")
        .arg("containerfiles/torch-check.py")
        .env("PYTHONPATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("torch-check: import torch failed: ModuleNotFoundError"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_rdma_core_version_comes_from_the_package_manager() {
    let run = |args: &[&str]| {
        Command::new("sh")
            .arg("containerfiles/rdma-core-version.sh")
            .args(args)
            .output()
            .unwrap()
    };
    // This host has Debian's libibverbs1 (perftest needs it).
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let line = stdout(&o);
    let v = line
        .strip_prefix("rdma-core ")
        .and_then(|r| r.strip_suffix(" (dpkg)\n"))
        .unwrap_or_else(|| panic!("{line}"));
    let major: u32 = v.split('.').next().unwrap().parse().unwrap();
    assert!(major > 0, "{v}");
    assert_eq!(run(&["1.0"]).status.code(), Some(0));
    assert_eq!(run(&[&format!("{major}.0")]).status.code(), Some(0));
    let o = run(&[&format!("{}.0", major + 1)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!("rdma-core {v} is older than {}.0", major + 1)),
        "{}",
        stderr(&o)
    );
    let o = run(&["new"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("MIN must be a version number"));
    // An upstream release the image build installed wins over the package.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rdma-core.version");
    std::fs::write(&file, "62.0\n").unwrap();
    let o = Command::new("sh")
        .arg("containerfiles/rdma-core-version.sh")
        .arg("62.0")
        .env("RDMA_CORE_VERSION_FILE", &file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "rdma-core 62.0 (built from upstream)\n");
}

const HIP: &str = "containerfiles/hip-version.sh";

fn hip(args: &[&str]) -> Output {
    let args: Vec<&Path> = args.iter().map(Path::new).collect();
    script(HIP, &args)
}

/// HIP's own numbering: hipconfig and torch.version.hip are checked against
/// HIP_VERSION, which is 7.14 for ROCm 7.14 and 7.15 for ROCm 10.0.0 (AMD's
/// rocm-bindings-core 10.0.0, rocm/version.py: "7.15.26333-0000000").
#[test]
fn the_hip_check_takes_hips_own_numbering() {
    // ROCm 7.14 (the build number is illustrative; the check reads major.minor).
    let o = hip(&[
        "7.14",
        "hipconfig=7.14.26200-0000000",
        "torch=7.14.26200-0000000",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("torch is HIP 7.14.26200-0000000 (HIP 7.14)"));
    // ROCm 10.0.0 ships HIP 7.15: checked against HIP_VERSION it passes...
    let rocm10 = "7.15.26333-0000000";
    let o = hip(&[
        "7.15",
        &format!("hipconfig={rocm10}"),
        &format!("torch={rocm10}"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // ...checked against ROCm's major.minor (the old rule) it would fail.
    let o = hip(&["10.0", &format!("hipconfig={rocm10}")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("hipconfig is HIP '7.15.26333-0000000', not HIP 10.0"),
        "{}",
        stderr(&o)
    );
    // A torch built for another HIP is named; 7.1 is not 7.14.
    let o = hip(&[
        "7.15",
        &format!("hipconfig={rocm10}"),
        "torch=7.14.26200-0000000",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("torch is HIP '7.14.26200-0000000', not HIP 7.15"));
    assert!(!stderr(&o).contains("hipconfig"), "{}", stderr(&o));
    assert_eq!(hip(&["7.1", "torch=7.14.1"]).status.code(), Some(1));
    assert_eq!(hip(&["7.14", "torch=none"]).status.code(), Some(1));
    // Usage errors.
    assert_eq!(hip(&["7.14"]).status.code(), Some(2));
    assert_eq!(hip(&["7.14.0", "torch=7.14.1"]).status.code(), Some(2));
    assert_eq!(hip(&["7.14", "7.14.1"]).status.code(), Some(2));

    // The images pin HIP_VERSION beside ROCM_VERSION, and their builds
    // check hipconfig and torch with it, not with ROCM_VERSION's major.minor.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for def in ["vllm-therock-gfx1151", "rccl-gfx1151", "llama-cpp-gfx1151"] {
        let text = std::fs::read_to_string(root.join(format!("images/{def}.toml"))).unwrap();
        assert!(
            text.contains("ROCM_VERSION = \"7.14.0\"\n")
                && text.contains("HIP_VERSION = \"7.14\"\n"),
            "images/{def}.toml"
        );
    }
    for (file, checks) in [("vllm-therock-gfx1151", 2), ("llama-cpp-gfx1151", 1)] {
        let text =
            std::fs::read_to_string(root.join(format!("containerfiles/{file}.Containerfile")))
                .unwrap();
        assert!(!text.contains("${ROCM_VERSION%.*}"), "{file}");
        assert!(!text.contains("cut -d. -f1,2"), "{file}");
        assert_eq!(
            text.matches("bash /usr/local/bin/hip-version.sh \"${HIP_VERSION}\"")
                .count(),
            checks,
            "{file}"
        );
    }
}
