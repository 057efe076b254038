//! Parser target: any byte string is compiled as an expression. Compiling must
//! return `Ok` or an `S0xxx`/`U1001` error, never panic, abort or overflow the
//! stack, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queuebox_jsonata::Expression;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    match Expression::compile(&src) {
        Ok(expr) => assert_eq!(expr.source(), &*src),
        Err(e) => assert!(!e.code.is_empty(), "error without a code: {e}"),
    }
});
