//! KFD `properties` files and the gfx target decoder.
#![no_main]

use halobox::host::gpu::{gfx_target_name, parse_properties};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let props = parse_properties(s);
    assert!(props.len() <= s.lines().count());
    if let Some(v) = props.get("gfx_target_version").and_then(|v| u32::try_from(*v).ok())
        && let Some(name) = gfx_target_name(v)
    {
        assert!(name.starts_with("gfx") && name.len() >= 6);
    }
});
