//! Writing JSON exactly as JavaScript's `JSON.stringify` does, for the few values this
//! crate writes itself (closers, upgraded legacy shapes, unpacked chunk rows).

/// Appends `s` as a JSON string literal, escaped exactly as `JSON.stringify` does.
pub fn write_js_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    // Only ASCII bytes are escaped, and no byte of a multi-byte character is ASCII: the runs
    // between escapes are found a word at a time (`plain_run` stops at exactly the bytes
    // escaped here) and copied whole, on character boundaries.
    let bytes = s.as_bytes();
    let mut run = 0;
    loop {
        let at = run + super::plain::plain_run(bytes.get(run..).unwrap_or_default());
        let Some(&b) = bytes.get(at) else {
            break;
        };
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            _ => "",
        };
        out.push_str(s.get(run..at).unwrap_or_default());
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        } else {
            out.push_str(escape);
        }
        run = at + 1;
    }
    out.push_str(s.get(run..).unwrap_or_default());
    out.push('"');
}

/// Writes the decimal digits of `v` at the end of `buf` and returns where they begin
/// (`buf` holds at least the 20 digits of `u64::MAX`, or the digits that fit): the bytes
/// before are left as they were, for a caller's padding.
pub fn decimal_into(buf: &mut [u8], v: u64) -> usize {
    // Two digits per division: a time in milliseconds has 13.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut start = buf.len();
    let mut rest = v;
    while rest >= 10 && start >= 2 {
        let pair = (rest % 100) as usize * 2;
        rest /= 100;
        start -= 2;
        if let (Some(to), Some(digits)) = (buf.get_mut(start..start + 2), PAIRS.get(pair..pair + 2))
        {
            to.copy_from_slice(digits);
        }
    }
    // The last (or only) digit, or the lowest digit that still fits.
    if start > 0 && (rest > 0 || start == buf.len()) {
        start -= 1;
        if let Some(d) = buf.get_mut(start) {
            *d = b'0' + (rest % 10) as u8;
        }
    }
    start
}

/// Appends `v` in decimal, as `{v}` formats it, without the formatting machinery (whose
/// cost, per integer, is several times that of making the digits).
pub(crate) fn push_u64(out: &mut String, v: u64) {
    let mut buf = [0u8; 20];
    let start = decimal_into(&mut buf, v);
    // ASCII digits: valid UTF-8, appended in one call (checking a few bytes costs less
    // than pushing them one character at a time).
    if let Ok(digits) = std::str::from_utf8(buf.get(start..).unwrap_or_default()) {
        out.push_str(digits);
    }
}

/// [`push_u64`] for a signed integer.
pub(crate) fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
}

/// Formats a finite double exactly as JavaScript's `Number.prototype.toString`.
pub fn js_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_owned();
    }
    if !value.is_finite() {
        return "null".to_owned();
    }
    // `{:e}` yields the shortest round-trip digits, the same digits JavaScript picks.
    let sci = format!("{:e}", value.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    let n = exponent.parse::<i64>().unwrap_or(0) + 1;
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
    out
}

/// Builds one JSON object in key order, for the few events this crate writes itself.
#[derive(Debug, Default)]
pub struct ObjectWriter {
    out: String,
}

impl ObjectWriter {
    /// Starts an empty object.
    pub fn new() -> Self {
        Self {
            out: String::from("{"),
        }
    }

    fn key(&mut self, key: &str) {
        if self.out.len() > 1 {
            self.out.push(',');
        }
        write_js_string(&mut self.out, key);
        self.out.push(':');
    }

    /// Adds a member whose value is already JSON text.
    pub fn raw(mut self, key: &str, json: &str) -> Self {
        self.key(key);
        self.out.push_str(json);
        self
    }

    /// Adds a string member.
    pub fn string(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        write_js_string(&mut self.out, value);
        self
    }

    /// Adds an integer member.
    pub fn int(mut self, key: &str, value: i64) -> Self {
        self.key(key);
        self.out.push_str(&value.to_string());
        self
    }

    /// Finishes the object.
    pub fn finish(mut self) -> String {
        self.out.push('}');
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `JSON.stringify`'s escaping, one character at a time: what the runs must equal.
    fn escaped_by_character(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    proptest! {
        #[test]
        fn strings_are_escaped_as_one_character_at_a_time(
            s in proptest::collection::vec(
                prop_oneof![
                    (0u32..0x80).prop_map(|c| char::from_u32(c).unwrap_or('a')),
                    any::<char>(),
                    Just('"'),
                    Just('\\'),
                ],
                0..100,
            )
            .prop_map(|chars| chars.into_iter().collect::<String>())
        ) {
            let mut out = String::from("prefix");
            write_js_string(&mut out, &s);
            prop_assert_eq!(out, format!("prefix{}", escaped_by_character(&s)));
        }
    }

    #[test]
    fn every_control_character_and_the_two_escaped_printables_are_escaped() {
        let all: String = (0u32..0x80).filter_map(char::from_u32).collect();
        let mut out = String::new();
        write_js_string(&mut out, &all);
        assert_eq!(out, escaped_by_character(&all));
        assert!(out.contains("\\u0000") && out.contains("\\u001f") && out.contains("\\b"));
        for s in ["", "plain", "é\u{2028}/€𝄞", "\"\"", "end\\"] {
            let mut out = String::new();
            write_js_string(&mut out, s);
            assert_eq!(out, escaped_by_character(s), "{s:?}");
        }
    }

    /// Into a buffer too short for all of them, the lowest digits that fit are written.
    #[test]
    fn a_short_buffer_gets_the_lowest_digits() {
        for v in [0u64, 7, 10, 99, 100, 12_345, 1_700_000_000_123, u64::MAX] {
            let all = v.to_string();
            for len in 0..=21 {
                let mut buf = vec![b'.'; len];
                let start = decimal_into(&mut buf, v);
                let fit = all.len().min(len);
                assert_eq!(start, len - fit, "{v} into {len}");
                assert_eq!(
                    &buf[start..],
                    &all.as_bytes()[all.len() - fit..],
                    "{v} into {len}"
                );
                assert!(buf[..start].iter().all(|b| *b == b'.'), "{v} into {len}");
            }
        }
    }

    /// The digits made by hand are those `{}` formats, at every length and both ends.
    #[test]
    fn integers_are_written_as_display_writes_them() {
        let mut unsigned = vec![0u64, 1, 9, 10, 99, 100, u64::MAX, u64::MAX - 1];
        unsigned.extend((0..20).map(|p| 10u64.pow(p)));
        unsigned.extend((1..20).map(|p| 10u64.pow(p) - 1));
        for v in unsigned {
            let mut out = String::from("x");
            push_u64(&mut out, v);
            assert_eq!(out, format!("x{v}"));
        }
        for v in [
            0i64,
            -1,
            1,
            i64::MIN,
            i64::MAX,
            -1_700_000_000_000,
            1_700_000_000_000,
        ] {
            let mut out = String::new();
            push_i64(&mut out, v);
            assert_eq!(out, v.to_string());
        }
    }
}
