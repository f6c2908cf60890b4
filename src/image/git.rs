//! The git checkout halobox runs in: its commit and origin, for the
//! revision and source labels of the images it builds and publishes.

/// `git rev-parse HEAD` of the working folder, when it is a git checkout.
pub fn revision() -> Option<String> {
    git(&["rev-parse", "HEAD"])
}

/// The URL of the `origin` remote, when there is one.
pub fn origin_url() -> Option<String> {
    git(&["remote", "get-url", "origin"])
}

/// One line of `git` output, when git runs and succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = crate::proc::command("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}
