//! Text of a transcript's rows and columns: abbreviation of message text to one line (from
//! decoded text or straight from a JSON string literal), columns padded as the format
//! widths pad them, and a row split into its lines. These run for every row folded or
//! written, so each avoids the general machinery where a plain case allows.

use sessionlog_session::json::{JsonKind, JsonRef};

/// `text` on one line (control characters as spaces, runs of whitespace as one space), cut
/// to `max` characters with an ellipsis.
pub fn abbreviate(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    abbreviate_into(&mut out, text, max);
    out
}

/// The start of a line abbreviated from a text that needs no rewriting: what
/// [`abbreviate_into`] appends, when it is a prefix of the text.
pub(super) struct PlainPrefix<'a> {
    /// The characters shown.
    pub(super) text: &'a str,
    /// Whether the text goes on past them (an ellipsis follows).
    pub(super) cut: bool,
}

/// The abbreviation of `text` to `max` characters when it is the text's first `max`
/// characters as they are (with an ellipsis when there are more): the first `max + 1`
/// bytes are printable ASCII or single spaces between them, with no backslash (so the
/// bytes read the same inside a JSON string literal, undecoded). `None` when anything in
/// them must be rewritten, or could be; [`abbreviate_into`] then walks the text.
pub(super) fn plain_prefix(text: &str, max: usize) -> Option<PlainPrefix<'_>> {
    let bytes = text.as_bytes();
    let head = bytes.get(..bytes.len().min(max.saturating_add(1)))?;
    // Whole-slice folds without early exits, which the compiler turns into vector code:
    // this runs for every text of every message folded.
    let odd = head.iter().fold(false, |odd, &b| {
        odd | !(0x20..=0x7E).contains(&b) | (b == b'\\')
    });
    let doubled = head
        .iter()
        .zip(head.iter().skip(1))
        .fold(false, |d, (&a, &b)| d | ((a == b' ') & (b == b' ')));
    // A leading or trailing space is dropped, and a space where the cut falls marks the
    // cut only if something printable follows it: so it does when the byte after it is
    // printable ASCII (and no backslash, which in a literal starts an escape).
    if odd || doubled || head.first() == Some(&b' ') {
        return None;
    }
    if head.last() == Some(&b' ') {
        let after = bytes.get(head.len())?;
        if head.len() <= max || !(0x21..=0x7E).contains(after) || *after == b'\\' {
            return None;
        }
    }
    let cut = bytes.len() > max;
    Some(PlainPrefix {
        text: text.get(..bytes.len().min(max))?,
        cut,
    })
}

/// The text between the quotes of a JSON string literal, undecoded.
pub(super) fn literal_inner(value: JsonRef<'_>) -> &str {
    let raw = value.raw();
    raw.get(1..raw.len().saturating_sub(1)).unwrap_or_default()
}

/// [`abbreviate_into`] of a string member's text (nothing for a missing member or one
/// that is not a string), read from the JSON literal without decoding it when its start
/// needs no rewriting.
pub(super) fn abbreviate_value(out: &mut String, value: Option<JsonRef<'_>>, max: usize) {
    let Some(value) = value.filter(|v| v.kind() == JsonKind::String) else {
        return;
    };
    let inner = literal_inner(value);
    if let Some(prefix) = plain_prefix(inner, max) {
        return push_prefix(out, prefix);
    }
    // Only a literal whose start is not plain as it is spelled has its start decoded.
    let mut buf = [0u8; DECODED_HEAD];
    if let Some(prefix) = quoted_head(inner, max + 2, &mut buf).and_then(|h| plain_prefix(h, max)) {
        return push_prefix(out, prefix);
    }
    abbreviate_into(out, &value.as_str().unwrap_or_default(), max);
}

/// Appends a plain prefix's characters, and the ellipsis when the text goes on.
fn push_prefix(out: &mut String, prefix: PlainPrefix<'_>) {
    out.push_str(prefix.text);
    if prefix.cut {
        out.push('…');
    }
}

/// Room for the decoded start of a literal that [`quoted_head`] makes.
const DECODED_HEAD: usize = 128;

/// The first `limit` bytes of the text of a JSON string literal (`inner`, between its
/// quotes), decoded into `buf`, when they are ASCII and the escapes among them are only
/// `\"`, `\\` and `\/`: a JSON text held in a string, as tool arguments are, is read
/// without decoding the rest of it. `None` for anything else, and for a `limit` past
/// [`DECODED_HEAD`] (a shorter head would read as the whole text).
fn quoted_head<'b>(inner: &str, limit: usize, buf: &'b mut [u8; DECODED_HEAD]) -> Option<&'b str> {
    if limit > DECODED_HEAD {
        return None;
    }
    let mut bytes = inner.bytes();
    let mut len = 0;
    while len < limit {
        let Some(b) = bytes.next() else {
            break;
        };
        let b = match b {
            b'\\' => match bytes.next()? {
                e @ (b'"' | b'\\' | b'/') => e,
                _ => return None,
            },
            b if b.is_ascii() => b,
            _ => return None,
        };
        *buf.get_mut(len)? = b;
        len += 1;
    }
    std::str::from_utf8(buf.get(..len)?).ok()
}

/// [`abbreviate`], appended to `out`. A text whose start needs no rewriting is copied as
/// it is; otherwise runs of printable ASCII (most of what agents write) are copied whole
/// and other characters are decoded one at a time.
pub(super) fn abbreviate_into(out: &mut String, text: &str, max: usize) {
    if let Some(prefix) = plain_prefix(text, max) {
        return push_prefix(out, prefix);
    }
    let printable = |b: &u8| (0x21..=0x7E).contains(b);
    let start = out.len();
    let mut chars = 0usize;
    let mut space = false;
    let mut ascii = true;
    let mut rest = text;
    while chars <= max {
        let Some(&b) = rest.as_bytes().first() else {
            break;
        };
        if printable(&b) {
            // At most the characters that still fit, and one more to mark the cut.
            let room = max + 1 - chars;
            let run = rest
                .as_bytes()
                .iter()
                .take(room)
                .position(|b| !printable(b))
                .unwrap_or(rest.len().min(room));
            let Some((head, tail)) = rest.split_at_checked(run) else {
                break;
            };
            if space {
                out.push(' ');
                chars += 1;
                space = false;
            }
            out.push_str(head);
            chars += run;
            rest = tail;
            continue;
        }
        let c = if b.is_ascii() {
            rest = rest.get(1..).unwrap_or_default();
            char::from(b)
        } else {
            let mut it = rest.chars();
            let Some(c) = it.next() else {
                break;
            };
            rest = it.as_str();
            c
        };
        if c.is_whitespace() || c.is_control() {
            space = chars > 0;
            continue;
        }
        if space {
            out.push(' ');
            chars += 1;
            space = false;
        }
        out.push(c);
        chars += 1;
        ascii = false;
    }
    if chars > max {
        let cut = if ascii {
            start + max
        } else {
            out.get(start..)
                .and_then(|t| t.char_indices().nth(max))
                .map_or(out.len(), |(i, _)| start + i)
        };
        out.truncate(cut);
        out.push('…');
    }
}

/// Appends `v` in decimal, right-aligned in `width` columns (as `{v:>width$}` formats it).
/// Runs for every row a transcript writes: the padding and the digits are made in one
/// buffer and appended with one call.
pub(super) fn push_u64(line: &mut String, v: u64, width: usize) {
    // Room for the widest column a transcript has (a seq of 20 digits) and its padding.
    const ROOM: usize = 32;
    if width > ROOM {
        push_spaces(line, width.saturating_sub(decimal_digits(v)));
        return push_u64(line, v, 0);
    }
    let mut buf = [b' '; ROOM];
    let start = sessionlog_session::json::decimal_into(&mut buf, v).min(ROOM - width);
    // Spaces and ASCII digits: valid UTF-8, appended in one call (the check of a few ASCII
    // bytes costs less than pushing them as characters one at a time).
    let column = buf.get(start..).unwrap_or_default();
    if let Ok(column) = std::str::from_utf8(column) {
        line.push_str(column);
    }
}

/// Digits of `v` in decimal.
pub(super) fn decimal_digits(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The lines of a row's text, as [`str::lines`] splits them (at each `\n`, and a `\r`
/// before it dropped), found with a vector search: a short line costs a few steps, where
/// the general character search costs a few hundred.
pub(super) struct Lines<'a>(pub(super) &'a str);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.0.is_empty() {
            return None;
        }
        let (line, rest) = match memchr::memchr(b'\n', self.0.as_bytes()) {
            Some(at) => {
                let line = self.0.get(..at).unwrap_or_default();
                (
                    line.strip_suffix('\r').unwrap_or(line),
                    self.0.get(at + 1..),
                )
            }
            None => (self.0, None),
        };
        self.0 = rest.unwrap_or_default();
        Some(line)
    }
}

/// Appends `s` left-aligned in `width` columns (as `{s:width$}` formats it).
pub(super) fn push_left(line: &mut String, s: &str, width: usize) {
    line.push_str(s);
    // A kind column is short ASCII: its length in characters is its length in bytes.
    let chars = if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    };
    push_spaces(line, width.saturating_sub(chars));
}

/// Appends `n` spaces.
pub(super) fn push_spaces(line: &mut String, n: usize) {
    const SPACES: &str = "                        ";
    match SPACES.get(..n) {
        Some(spaces) => line.push_str(spaces),
        None => line.extend(std::iter::repeat_n(' ', n)),
    }
}

/// 2,000 texts for tests, the `i`th made of `i % longest` of `pieces`, drawn by an
/// xorshift generator from `seed`: the same texts on every run.
#[cfg(test)]
pub(super) fn drawn_texts<'p>(
    pieces: &'p [&'p str],
    seed: u64,
    longest: usize,
) -> impl Iterator<Item = String> + 'p {
    let mut rng = seed;
    (0..2000).map(move |case| {
        let mut text = String::new();
        for _ in 0..case % longest {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            text.push_str(pieces[(rng % pieces.len() as u64) as usize]);
        }
        text
    })
}

#[cfg(test)]
mod tests {
    use super::{abbreviate, abbreviate_value, drawn_texts, push_left, push_u64, Lines};
    use crate::projection::transcript::KIND_WIDTH;
    use sessionlog_session::json::JsonRef;

    #[test]
    fn abbreviation_keeps_one_line_and_marks_the_cut() {
        assert_eq!(abbreviate("a\n\n b\tc", 10), "a b c");
        assert_eq!(abbreviate("abcdefghijk", 5), "abcde…");
        assert_eq!(abbreviate("  lead", 10), "lead");
        assert_eq!(abbreviate("", 10), "");
        assert_eq!(abbreviate("é é é", 3), "é é…");
        assert_eq!(abbreviate("a\u{2003}\u{0085}b", 10), "a b");
        assert_eq!(abbreviate("ab\u{7f}c", 10), "ab c");
    }

    /// What abbreviation means, a character at a time: runs of whitespace and control
    /// characters become one space (none at either end), and more than `max` characters
    /// are cut to `max` and an ellipsis.
    fn abbreviate_by_characters(text: &str, max: usize) -> String {
        let words: Vec<String> = text
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        let line = words.join(" ");
        if line.chars().count() > max {
            let mut cut: String = line.chars().take(max).collect();
            cut.push('…');
            cut
        } else {
            line
        }
    }

    #[test]
    fn abbreviation_copying_ascii_runs_whole_cuts_as_a_character_walk_does() {
        let pieces = [
            "a",
            "word",
            " ",
            "\n\n",
            "\t",
            "\u{7f}",
            "\u{0b}",
            "é",
            "日本",
            "\u{2003}",
            "x.y",
            "0123456789",
            "—",
            "\u{85}",
            "\\",
            "\"",
            "/",
        ];
        for text in drawn_texts(&pieces, 0x2545_f491_4f6c_dd1d, 60) {
            for max in [0, 1, 2, 5, 10, 60, 100] {
                assert_eq!(
                    abbreviate(&text, max),
                    abbreviate_by_characters(&text, max),
                    "{text:?} at {max}"
                );
            }
        }
    }

    /// Plain words and single spaces, cut where a space falls at the cut or beside it,
    /// followed by what may come after such a space: abbreviated as the character walk
    /// does, from the text and from its JSON string literal.
    #[test]
    fn a_plain_text_cut_at_a_space_abbreviates_as_the_character_walk_does() {
        for max in [1usize, 2, 5, 10, 60, 100] {
            for at in max.saturating_sub(2)..=max + 1 {
                for after in ["x", "\\", "\"", " ", "  y", "\n", "\ty", "é", "", "}"] {
                    let text = format!("{} {after}", "a".repeat(at));
                    let expected = abbreviate_by_characters(&text, max);
                    assert_eq!(abbreviate(&text, max), expected, "{text:?} at {max}");
                    let literal = serde_json::to_string(&text).expect("a JSON string");
                    let mut undecoded = String::new();
                    abbreviate_value(&mut undecoded, Some(JsonRef::new(&literal)), max);
                    assert_eq!(undecoded, expected, "{literal} at {max}");
                }
            }
        }
    }

    /// JSON held in a string (its quotes escaped), of lengths around a line of any width,
    /// up to and past the room for a decoded head: abbreviated from its literal as from
    /// its decoded text.
    #[test]
    fn quoted_json_abbreviates_from_its_literal_as_its_text_does() {
        for max in [1usize, 60, 100, 125, 126, 127, 200] {
            for len in [max.saturating_sub(1), max, max + 1, max + 2, 300] {
                let text = format!("{{\"k\":\"{}\"}}", "v".repeat(len));
                let literal = serde_json::to_string(&text).expect("a JSON string");
                let mut undecoded = String::new();
                abbreviate_value(&mut undecoded, Some(JsonRef::new(&literal)), max);
                assert_eq!(undecoded, abbreviate(&text, max), "{literal} at {max}");
            }
        }
    }

    #[test]
    fn a_row_is_split_into_lines_as_str_lines_splits_it() {
        for text in [
            "",
            "\n",
            "a",
            "a\n",
            "user\nhello\n",
            "a\n\nb",
            "a\r\nb\r\n",
            "a\rb\n",
            "ends in a return\r",
            "\r\n\r\n",
            "é\n日本\n",
        ] {
            let split: Vec<&str> = Lines(text).collect();
            assert_eq!(split, text.lines().collect::<Vec<_>>(), "{text:?}");
        }
    }

    #[test]
    fn columns_are_padded_as_the_format_widths_pad_them() {
        for v in [0, 7, 10, 999, 1_000, 123_456_789, u64::MAX] {
            for width in [0, 1, 3, 7, 25, 40] {
                let mut line = String::from("x");
                push_u64(&mut line, v, width);
                assert_eq!(line, format!("x{v:>width$}"), "{v} in {width}");
            }
        }
        for s in [
            "",
            "user",
            "assistant",
            "turn/start",
            "a-very-long-kind-name",
            "réponse·»",
        ] {
            let mut line = String::new();
            push_left(&mut line, s, KIND_WIDTH);
            assert_eq!(line, format!("{s:KIND_WIDTH$}"), "{s}");
        }
    }
}
