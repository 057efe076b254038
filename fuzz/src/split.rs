//! Cutting one fuzz input into the parts a target needs, so the fuzzer can grow each part on its
//! own: parts are separated by a NUL byte.

/// The first `N` parts of `data` split at NUL bytes (missing parts are empty; the last part keeps
/// any further NULs).
pub(crate) fn parts<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out = [&data[..0]; N];
    let mut rest = data;
    for (index, slot) in out.iter_mut().enumerate() {
        if index + 1 == N {
            *slot = rest;
            break;
        }
        match rest.iter().position(|&b| b == 0) {
            Some(at) => {
                *slot = &rest[..at];
                rest = &rest[at + 1..];
            }
            None => {
                *slot = rest;
                rest = &rest[rest.len()..];
            }
        }
    }
    out
}

/// `bytes` as text, invalid UTF-8 replaced.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_split_at_nul_and_pad_with_empty_parts() {
        assert_eq!(parts::<3>(b"a\0b\0c\0d"), [&b"a"[..], b"b", b"c\0d"]);
        assert_eq!(parts::<3>(b"a"), [&b"a"[..], b"", b""]);
        assert_eq!(parts::<1>(b"a\0b"), [&b"a\0b"[..]]);
    }
}
