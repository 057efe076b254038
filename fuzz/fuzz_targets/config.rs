//! libFuzzer entry of the `config` target; the body is `queuebox_fuzz::config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::config(data));
