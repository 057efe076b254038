//! A PostgreSQL log sequence number: a 64-bit position in the write-ahead log, written as two
//! hexadecimal halves (`16/B374D848`).

use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// A position in the write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

/// Text that is not `hex/hex`.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("`{0}` is not a log position (expected two hexadecimal numbers such as 0/16B3748)")]
pub struct LsnParseError(String);

impl Lsn {
    /// How many bytes `self` lies ahead of `earlier` (zero when it does not).
    pub fn bytes_after(self, earlier: Lsn) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

impl FromStr for Lsn {
    type Err = LsnParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || LsnParseError(text.to_owned());
        let (high, low) = text.trim().split_once('/').ok_or_else(bad)?;
        let high = u32::from_str_radix(high, 16).map_err(|_| bad())?;
        let low = u32::from_str_radix(low, 16).map_err(|_| bad())?;
        Ok(Lsn((u64::from(high) << 32) | u64::from(low)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips() {
        for text in ["0/0", "0/16B3748", "16/B374D848", "FFFFFFFF/FFFFFFFF"] {
            let lsn: Lsn = text.parse().expect("valid");
            assert_eq!(lsn.to_string(), text);
        }
        assert_eq!("1/0".parse::<Lsn>(), Ok(Lsn(1 << 32)));
    }

    #[test]
    fn malformed_text_is_refused_with_the_text() {
        for text in ["", "16", "x/1", "1/", "/1", "100000000/0"] {
            let error = text.parse::<Lsn>().expect_err(text);
            assert!(error.to_string().contains(&format!("`{text}`")));
        }
    }

    #[test]
    fn distance_never_goes_negative() {
        assert_eq!(Lsn(10).bytes_after(Lsn(4)), 6);
        assert_eq!(Lsn(4).bytes_after(Lsn(10)), 0);
    }
}
