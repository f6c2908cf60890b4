//! The memlock a user's next login gets from pam_limits:
//! `/etc/security/limits.conf`, then `/etc/security/limits.d/*.conf` in
//! byte order, read the way pam_limits reads them.
//!
//! A line is `<domain> <type> <item> <value>`; `#` starts a comment. The
//! domain is a user name, `@group`, `*`, or a uid (`min:max`) or gid
//! (`@min:max`) range. A user entry beats a group entry, which beats `*`,
//! whatever the order; between entries of the same kind the later wins.
//! Type `-` sets soft and hard. A `<domain> -` line naming the user or one
//! of their groups (not `*`) means no limits are set at all. Memlock values are KiB; `unlimited`, `infinity`,
//! `-1` and `-` mean no limit.

use schemars::JsonSchema;
use serde::Serialize;

use super::limits::LimitValue;
use super::reader::Reader;

/// pam_limits' main file.
pub const LIMITS_CONF: &str = "/etc/security/limits.conf";
/// pam_limits' drop-in directory.
pub const LIMITS_DIR: &str = "/etc/security/limits.d";

/// One configured value and the file that sets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Setting {
    /// The value.
    pub value: LimitValue,
    /// The host path of the file whose line wins.
    pub file: String,
}

/// The memlock pam_limits gives a login of the user; an unset side keeps
/// what the login process had.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ConfiguredMemlock {
    /// The soft limit set, when a line sets it.
    pub soft: Option<Setting>,
    /// The hard limit set, when a line sets it.
    pub hard: Option<Setting>,
    /// The user was not known (a snapshot that does not say who it was
    /// taken for): only the lines for every login (`*`) were applied.
    pub every_login: bool,
}

/// Who the lines are matched against.
#[derive(Debug, Clone, Default)]
pub struct LoginUser {
    /// Login name.
    pub name: String,
    /// Numeric uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Names of every group the user is in (primary and supplementary).
    pub groups: Vec<String>,
    /// Gids of every group the user is in.
    pub gids: Vec<u32>,
}

/// How specific a matching line is: lower beats higher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    User,
    Group,
    Default,
}

/// What the files say for `user` (for any login when the user is not
/// known: only `*` lines), or `None` when no file exists or a
/// `<domain> -` line exempts the user from limits.
pub fn read(r: &Reader, user: Option<&LoginUser>) -> Option<ConfiguredMemlock> {
    let mut files = vec![LIMITS_CONF.to_string()];
    files.extend(r.files_ending(LIMITS_DIR, ".conf"));
    let texts: Vec<(String, String)> = files
        .into_iter()
        .filter_map(|f| r.text_quiet(&f).map(|t| (f, t)))
        .collect();
    if texts.is_empty() {
        return None;
    }
    evaluate(&texts, user)
}

/// pam_limits over `(path, content)` files in reading order, for `user`
/// or (`None`) for a login of anyone: then only `*` lines match.
pub fn evaluate(files: &[(String, String)], user: Option<&LoginUser>) -> Option<ConfiguredMemlock> {
    let mut out = ConfiguredMemlock {
        every_login: user.is_none(),
        ..ConfiguredMemlock::default()
    };
    let mut src: (Option<Source>, Option<Source>) = (None, None);
    for (path, text) in files {
        for raw in text.lines() {
            let line = raw.split('#').next().unwrap_or_default().trim();
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [domain, "-"] if matches(domain, user).is_some_and(|s| s != Source::Default) => {
                    return None;
                }
                [domain, kind, item, value, ..] => {
                    if !item.eq_ignore_ascii_case("memlock") {
                        continue;
                    }
                    let Some(source) = matches(domain, user) else {
                        continue;
                    };
                    let Some(value) = parse_value(value) else {
                        continue;
                    };
                    let setting = Setting {
                        value,
                        file: path.clone(),
                    };
                    let (soft, hard) = match kind.to_ascii_lowercase().as_str() {
                        "soft" => (true, false),
                        "hard" => (false, true),
                        "-" => (true, true),
                        _ => continue,
                    };
                    // pam_limits stops at the first side a more specific
                    // line already holds.
                    if soft {
                        if src.0.is_some_and(|s| s < source) {
                            continue;
                        }
                        src.0 = Some(source);
                        out.soft = Some(setting.clone());
                    }
                    if hard {
                        if src.1.is_some_and(|s| s < source) {
                            continue;
                        }
                        src.1 = Some(source);
                        out.hard = Some(setting);
                    }
                }
                _ => {}
            }
        }
    }
    Some(out)
}

/// How `domain` matches `user`, when it does (an unknown user matches `*` only).
fn matches(domain: &str, user: Option<&LoginUser>) -> Option<Source> {
    if domain == "*" {
        return Some(Source::Default);
    }
    let user = user?;
    if domain == user.name {
        return Some(Source::User);
    }
    if let Some(group) = domain.strip_prefix('@') {
        return match range(group) {
            None => user
                .groups
                .iter()
                .any(|g| g == group)
                .then_some(Source::Group),
            Some(Range::One(gid)) => user.gids.contains(&gid).then_some(Source::Group),
            Some(Range::Span(lo, hi)) => (lo..=hi).contains(&user.gid).then_some(Source::Group),
            Some(Range::Bad) => None,
        };
    }
    match range(domain)? {
        Range::One(uid) => (uid == user.uid).then_some(Source::User),
        Range::Span(lo, hi) => (lo..=hi).contains(&user.uid).then_some(Source::User),
        Range::Bad => None,
    }
}

enum Range {
    One(u32),
    Span(u32, u32),
    Bad,
}

/// `:n`, `min:`, `min:max`; `None` when `s` is not a range.
fn range(s: &str) -> Option<Range> {
    let (lo, hi) = s.split_once(':')?;
    let num = |t: &str| t.parse::<u32>().ok();
    Some(match (lo, hi) {
        ("", hi) => num(hi).map_or(Range::Bad, Range::One),
        (lo, "") => num(lo).map_or(Range::Bad, |l| Range::Span(l, u32::MAX)),
        (lo, hi) => match (num(lo), num(hi)) {
            (Some(l), Some(h)) => Range::Span(l, h),
            _ => Range::Bad,
        },
    })
}

/// A memlock value in KiB, or no limit.
fn parse_value(v: &str) -> Option<LimitValue> {
    let v = v.to_ascii_lowercase();
    if ["unlimited", "infinity", "-1", "-"].contains(&v.as_str()) {
        return Some(LimitValue::Unlimited);
    }
    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
    let kib: u64 = digits.parse().ok()?;
    Some(match kib.checked_mul(1024) {
        Some(b) => LimitValue::Finite(b),
        None => LimitValue::Unlimited,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_user_gets_the_lines_for_every_login() {
        let got = evaluate(
            &files(&[
                (
                    "a.conf",
                    "halo hard memlock 64\n@render - memlock 128\nhalo -\n",
                ),
                (
                    "b.conf",
                    "* soft memlock unlimited\n* hard memlock unlimited\n",
                ),
            ]),
            None,
        )
        .unwrap();
        assert!(got.every_login);
        assert_eq!(
            values(&got),
            (Some(LimitValue::Unlimited), Some(LimitValue::Unlimited))
        );
        assert_eq!(got.hard.unwrap().file, "b.conf");
    }

    fn halo() -> LoginUser {
        LoginUser {
            name: "halo".into(),
            uid: 1000,
            gid: 1000,
            groups: vec!["halo".into(), "render".into()],
            gids: vec![1000, 992],
        }
    }

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    fn values(c: &ConfiguredMemlock) -> (Option<LimitValue>, Option<LimitValue>) {
        (
            c.soft.as_ref().map(|s| s.value),
            c.hard.as_ref().map(|s| s.value),
        )
    }

    #[test]
    fn later_files_win_between_lines_of_the_same_kind() {
        let got = evaluate(
            &files(&[
                ("limits.conf", "*  hard  memlock  64\n* soft memlock 64\n"),
                ("limits.d/90.conf", "* - memlock unlimited\n"),
            ]),
            Some(&halo()),
        )
        .unwrap();
        assert_eq!(
            values(&got),
            (Some(LimitValue::Unlimited), Some(LimitValue::Unlimited))
        );
        assert_eq!(got.hard.unwrap().file, "limits.d/90.conf");
    }

    #[test]
    fn a_user_line_beats_a_group_line_which_beats_star_whatever_the_order() {
        let got = evaluate(
            &files(&[
                (
                    "a.conf",
                    "halo hard memlock 8192\n@render hard memlock 16384\n",
                ),
                (
                    "b.conf",
                    "* hard memlock unlimited\n@render soft memlock 4096\n",
                ),
            ]),
            Some(&halo()),
        )
        .unwrap();
        assert_eq!(
            values(&got),
            (
                Some(LimitValue::Finite(4096 * 1024)),
                Some(LimitValue::Finite(8192 * 1024))
            )
        );
        // A group the user is not in, and `%` domains, do not apply.
        let got = evaluate(
            &files(&[(
                "a.conf",
                "@video - memlock 1\n% - memlock 1\nbob - memlock 1\n",
            )]),
            Some(&halo()),
        )
        .unwrap();
        assert_eq!(values(&got), (None, None));
    }

    #[test]
    fn comments_case_ranges_and_other_items() {
        let got = evaluate(
            &files(&[(
                "a.conf",
                "# * - memlock 1\n   *  HARD  MEMLOCK  unlimited  # all of it\n\
                 * - nofile 1024\n1000: soft memlock 2048\n@:992 hard memlock 1\nbroken line\n",
            )]),
            Some(&halo()),
        )
        .unwrap();
        assert_eq!(
            values(&got),
            (
                Some(LimitValue::Finite(2048 * 1024)),
                Some(LimitValue::Finite(1024))
            )
        );
    }

    #[test]
    fn a_dash_line_for_the_user_means_no_limits_and_no_files_mean_unknown() {
        assert_eq!(
            evaluate(
                &files(&[("a.conf", "* - memlock unlimited\nhalo -\n")]),
                Some(&halo())
            ),
            None
        );
        assert_eq!(
            evaluate(&files(&[("a.conf", "bob -\n* -\n")]), Some(&halo())),
            Some(ConfiguredMemlock::default())
        );
    }
}
