//! libFuzzer entry of the `template` target; the body is `queuebox_fuzz::template`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::template(data));
