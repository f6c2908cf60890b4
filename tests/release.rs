//! The release files: `scripts/release.sh` runs once per test run (its
//! cargo-zigbuild release build is cached in /var/cache/halobox/release-target), and each
//! test checks one promise the files make to a user without Rust: a binary
//! that needs no glibc newer than 2.28 and runs on the oldest distribution
//! image the tests can make, a tarball that unpacks into exactly what INSTALL
//! describes, and an RPM that installs exactly the binary, completions and
//! man pages (and the license). Missing tools (rpmbuild, objdump, podman,
//! debootstrap) fail these tests, never skip them.
//!
//! The build here runs at `opt-level = 0` (`CARGO_PROFILE_RELEASE_OPT_LEVEL`):
//! nothing these tests check (the glibc symbols, the files, their modes, what
//! the binary prints) depends on optimisation, and halobox's own compile then
//! takes about 37 CPU-seconds instead of 254 (measured on the 2-core CI
//! machine), CPU the live tests in the other lane need.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const GLIBC_FLOOR: (u32, u32) = (2, 28);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd`, panicking with its output unless it exits 0.
fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The files `scripts/release.sh` made, and the tarball unpacked.
struct Release {
    dist: PathBuf,
    unpacked: PathBuf,
}

impl Release {
    fn tarball(&self) -> String {
        format!("halobox-{VERSION}-x86_64-linux.tar.gz")
    }
    fn rpm(&self) -> PathBuf {
        self.dist.join(format!("halobox-{VERSION}-1.x86_64.rpm"))
    }
    fn binary(&self) -> PathBuf {
        self.unpacked
            .join(format!("halobox-{VERSION}-x86_64-linux"))
            .join("halobox")
    }
}

/// Where the release build keeps its target folder between runs on one machine.
const RELEASE_TARGET: &str = "/var/cache/halobox/release-target";

/// Builds the release once; every test shares the result (a failure too).
fn release() -> &'static Release {
    static RELEASE: OnceLock<Result<Release, String>> = OnceLock::new();
    let built = RELEASE.get_or_init(|| {
        let dist = root().join("target/release-dist");
        let _ = std::fs::remove_dir_all(&dist);
        // At umask 0: the modes in the tarball must not follow the builder's.
        let out = Command::new("bash")
            .arg("-c")
            .arg("umask 0 && exec bash \"$0\" \"$1\"")
            .arg(root().join("scripts/release.sh"))
            .arg(VERSION)
            .env("HALOBOX_DIST", &dist)
            // The machine's cache (as the venvs in /opt): a fresh clone then
            // rebuilds only halobox itself, not every dependency.
            .env("CARGO_TARGET_DIR", RELEASE_TARGET)
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
            .current_dir(root())
            .output()
            .map_err(|e| format!("cannot run bash scripts/release.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/release.sh {VERSION} failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let unpacked = dist.join("unpacked");
        std::fs::create_dir_all(&unpacked).map_err(|e| e.to_string())?;
        let r = Release { dist, unpacked };
        let tar = Command::new("tar")
            .arg("-xzf")
            .arg(r.dist.join(r.tarball()))
            .arg("-C")
            .arg(&r.unpacked)
            .output()
            .map_err(|e| format!("cannot run tar: {e}"))?;
        if !tar.status.success() {
            return Err(format!(
                "tar -xzf {} failed: {}",
                r.tarball(),
                String::from_utf8_lossy(&tar.stderr)
            ));
        }
        Ok(r)
    });
    built.as_ref().unwrap_or_else(|e| panic!("{e}"))
}

/// Every file below `dir`, as paths relative to it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// The man pages the release carries: `halobox man --out-dir`'s pages.
fn man_pages(r: &Release) -> BTreeSet<String> {
    let dir = r.binary().with_file_name("man");
    let pages: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        pages.contains("halobox.1") && pages.contains("halobox-doctor.1"),
        "man pages missing from {}: {pages:?}",
        dir.display()
    );
    pages
}

/// Built at umask 0, the tarball's folders and binary are 0755 and every
/// other file 0644 (not 0777 and 0666), and so is what it unpacks to.
#[test]
fn tarball_modes_do_not_follow_the_builders_umask() {
    let r = release();
    let out = run(Command::new("tar")
        .arg("-tvzf")
        .arg(r.dist.join(r.tarball())));
    let listing = String::from_utf8_lossy(&out.stdout);
    for line in listing.lines() {
        let (mode, path) = (
            line.split_whitespace().next().unwrap(),
            line.split_whitespace().last().unwrap(),
        );
        let want = if mode.starts_with('d') || path.ends_with("/halobox") {
            "rwxr-xr-x"
        } else {
            "rw-r--r--"
        };
        assert_eq!(&mode[1..], want, "{line}");
    }
    assert!(listing.lines().count() > 5, "{listing}");
}

#[test]
fn binary_needs_no_glibc_newer_than_2_28() {
    let r = release();
    let out = run(Command::new("objdump").arg("-T").arg(r.binary()));
    let text = String::from_utf8_lossy(&out.stdout);
    let versions: BTreeSet<(u32, u32)> = text
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
        })
        .collect();
    let newest = *versions.last().expect("objdump -T shows no GLIBC_ symbol");
    assert!(
        newest <= GLIBC_FLOOR,
        "the release binary needs GLIBC_{}.{}, newer than {}.{}: it would not run on older distributions",
        newest.0,
        newest.1,
        GLIBC_FLOOR.0,
        GLIBC_FLOOR.1
    );
}

#[test]
fn binary_runs_on_the_oldest_distribution_image() {
    let r = release();
    let out = run(Command::new("bash").arg(root().join("scripts/engines/oldest-distro.sh")));
    let image = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mount = format!("{}:/opt/halobox:ro", r.binary().display());
    let out = run(Command::new("podman").args([
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        &mount,
        &image,
        "/opt/halobox",
        "--version",
    ]));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!("halobox {VERSION} (commit ")),
        "--version in {image} said: {said}"
    );
}

#[test]
fn tarball_unpacks_into_what_install_describes_and_runs() {
    let r = release();
    run(Command::new("sha256sum")
        .args(["-c", &format!("{}.sha256", r.tarball())])
        .current_dir(&r.dist));
    let top = r.binary().parent().unwrap().to_path_buf();
    let mut want: BTreeSet<String> = [
        "halobox",
        "LICENSE",
        "INSTALL",
        "completions/halobox.bash",
        "completions/_halobox",
        "completions/halobox.fish",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    want.extend(man_pages(r).into_iter().map(|p| format!("man/{p}")));
    assert_eq!(files_under(&top), want, "the tarball's files");
    let out = run(Command::new(r.binary()).arg("--version"));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!("halobox {VERSION} (commit ")) && said.contains(", built "),
        "--version said: {said}"
    );
    let license = std::fs::read_to_string(top.join("LICENSE")).unwrap();
    assert!(license.contains("Apache License") && license.contains("Version 2.0"));
    let bash = std::fs::read_to_string(top.join("completions/halobox.bash")).unwrap();
    assert!(bash.contains("complete -F"), "bash completion: {bash:.200}");
}

#[test]
fn rpm_installs_exactly_the_binary_completions_and_man_pages() {
    let r = release();
    run(Command::new("sha256sum")
        .args([
            "-c",
            &format!("{}.sha256", r.rpm().file_name().unwrap().to_string_lossy()),
        ])
        .current_dir(&r.dist));
    let out = run(Command::new("rpm").arg("-qlp").arg(r.rpm()));
    let listed: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_end_matches(".gz").to_string())
        .collect();
    let mut want: BTreeSet<String> = [
        "/usr/bin/halobox",
        "/usr/share/bash-completion/completions/halobox",
        "/usr/share/zsh/site-functions/_halobox",
        "/usr/share/fish/vendor_completions.d/halobox.fish",
        "/usr/share/licenses/halobox",
        "/usr/share/licenses/halobox/LICENSE",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    want.extend(
        man_pages(r)
            .into_iter()
            .map(|p| format!("/usr/share/man/man1/{p}")),
    );
    assert_eq!(listed, want, "rpm -qlp {}", r.rpm().display());
    let out = run(Command::new("rpm")
        .args(["-qp", "--queryformat", "%{VERSION} %{LICENSE} %{ARCH}"])
        .arg(r.rpm()));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{VERSION} Apache-2.0 x86_64")
    );
}
