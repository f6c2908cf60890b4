//! Quoting words for a POSIX shell: for printing commands (`--dry-run`) and
//! for the command strings ssh hands to the remote shell.

/// Quotes a word for a POSIX shell when it needs it.
pub fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&b));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Joins words into one shell-safe line.
pub fn line(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("/dev/kfd:/dev/kfd:rwm"), "/dev/kfd:/dev/kfd:rwm");
        assert_eq!(quote("10.0.0.1"), "10.0.0.1");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(line(&["echo".into(), "a b".into()]), "echo 'a b'");
    }
}
