//! libFuzzer entry of the `inbox` target; the body is `queuebox_fuzz::inbox`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::inbox(data));
