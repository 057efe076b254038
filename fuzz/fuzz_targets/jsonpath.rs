//! libFuzzer entry of the `jsonpath` target; the body is `queuebox_fuzz::jsonpath`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::jsonpath(data));
