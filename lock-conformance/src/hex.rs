//! Lower-case hex, for snapshot bytes in vector files.

/// Lower-case hex of `bytes`.
#[must_use]
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Bytes of a hex string (either case; ASCII whitespace is ignored so long snapshots can wrap).
///
/// # Errors
/// A message naming the offending character, or an odd digit count.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .map(|c| {
            c.to_digit(16)
                .map(|d| d as u8)
                .ok_or_else(|| format!("'{c}' is not a hex digit"))
        })
        .collect::<Result<_, _>>()?;
    if digits.len() % 2 != 0 {
        return Err("odd number of hex digits".into());
    }
    Ok(digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(super::encode(&bytes), "0001abff");
        assert_eq!(super::decode("00 01 AB ff").unwrap(), bytes);
        assert!(super::decode("0g").is_err());
        assert!(super::decode("abc").is_err());
    }
}
