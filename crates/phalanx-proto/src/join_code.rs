//! Join codes: a seat's token as a player types it.

use std::fmt;
use std::str::FromStr;

/// A seat's token as a player types it (a lobby shows it, a player types it in): 13 characters of Crockford's base32 (no I, L, O or U;
/// read case-insensitively, with `I`/`L` as 1 and `O` as 0), the same 64 bits as the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JoinCode(pub u64);

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

impl fmt::Display for JoinCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // 13 digits of 5 bits: the first carries the top 4 bits.
        for digit in (0..13).rev() {
            let value = (self.0 >> (digit * 5)) & 31;
            write!(f, "{}", CROCKFORD[value as usize] as char)?;
        }
        Ok(())
    }
}

impl FromStr for JoinCode {
    type Err = JoinCodeError;
    fn from_str(text: &str) -> Result<JoinCode, JoinCodeError> {
        let digits: Vec<u8> = text.bytes().filter(|&b| b != b'-').collect();
        if digits.len() != 13 {
            return Err(JoinCodeError);
        }
        let mut value: u64 = 0;
        for (position, byte) in digits.into_iter().enumerate() {
            let byte = match byte.to_ascii_uppercase() {
                b'I' | b'L' => b'1',
                b'O' => b'0',
                other => other,
            };
            let digit = CROCKFORD.iter().position(|&c| c == byte).ok_or(JoinCodeError)? as u64;
            if position == 0 && digit > 15 {
                return Err(JoinCodeError);
            }
            value = (value << 5) | digit;
        }
        Ok(JoinCode(value))
    }
}

impl serde::Serialize for JoinCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Text that is not a [`JoinCode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinCodeError;

impl fmt::Display for JoinCodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a join code (13 letters and digits of Crockford's base32)")
    }
}

impl std::error::Error for JoinCodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_codes_print_and_parse_back() {
        for value in [0, 1, 31, 32, u64::MAX, 0x0123_4567_89ab_cdef] {
            let code = JoinCode(value);
            let text = code.to_string();
            assert_eq!(text.len(), 13);
            assert_eq!(text.parse(), Ok(code));
            assert_eq!(text.to_lowercase().parse(), Ok(code));
        }
        assert_eq!("0000000000001".parse::<JoinCode>(), Ok(JoinCode(1)));
        assert_eq!("000000000000L".parse::<JoinCode>(), Ok(JoinCode(1)));
        assert_eq!("000000-0000001".parse::<JoinCode>(), Ok(JoinCode(1)));
        assert_eq!("G000000000000".parse::<JoinCode>(), Err(JoinCodeError));
        assert_eq!("000000000000U".parse::<JoinCode>(), Err(JoinCodeError));
        assert_eq!("00000000001".parse::<JoinCode>(), Err(JoinCodeError));
    }
}
