//! Online CPUs from `/sys/devices/system/cpu/online` (`0-31`, `0-3,8-11`).

use super::reader::Reader;

/// The number of online CPUs of the host behind `r`, or `None` when the
/// file is missing or not a CPU list.
pub fn online(r: &Reader) -> Option<u32> {
    let text = r.line("/sys/devices/system/cpu/online")?;
    let n = parse_list(&text);
    if n.is_none() {
        r.note(
            "/sys/devices/system/cpu/online",
            format!("not a CPU list: {text:?}"),
        );
    }
    n
}

/// Counts the CPUs of a kernel CPU list.
pub fn parse_list(text: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in text.trim().split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let a = part.parse::<u32>().ok()?;
                (a, a)
            }
        };
        n = n.checked_add(b.checked_sub(a)? + 1)?;
    }
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_list("0-31\n"), Some(32));
        assert_eq!(parse_list("0-3,8-11,15"), Some(9));
        assert_eq!(parse_list("0"), Some(1));
        assert_eq!(parse_list("3-1"), None);
        assert_eq!(parse_list("x"), None);
    }
}
