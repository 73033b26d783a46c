//! The plain run of a string: the bytes a string scan passes over as they are.

/// The length of the run of string bytes at the start of `bytes` that are neither a quote,
/// a backslash nor a control character (the bytes a string scan passes over as they are).
///
/// The first 32 bytes, all there is of most keys and values, are searched eight bytes at a
/// time as one word ([`word_run`]). A run that goes on past them (an event's text) is
/// tested 32 bytes at a time ([`block_run`]).
#[inline]
pub(crate) fn plain_run(bytes: &[u8]) -> usize {
    let head = bytes.len().min(BLOCK);
    let run = word_run(bytes.get(..head).unwrap_or_default());
    if run < head {
        return run;
    }
    head + block_run(bytes.get(head..).unwrap_or_default())
}

/// Bytes [`block_run`] tests at once.
const BLOCK: usize = 32;

/// [`plain_run`] of a long run: each block's bytes are folded into one flag by a loop the
/// compiler turns into vector compares (about 25 instructions a block on x86-64, where the
/// word test takes about 13 per 8 bytes); the word test then finds the stop inside the
/// block that holds one, or in what is left past the last whole block.
#[inline(never)]
fn block_run(bytes: &[u8]) -> usize {
    let mut at = 0;
    for block in bytes.chunks_exact(BLOCK) {
        let stop = block.iter().fold(0u8, |stop, &b| {
            stop | u8::from(b == b'"') | u8::from(b == b'\\') | u8::from(b < 0x20)
        });
        if stop != 0 {
            break;
        }
        at += BLOCK;
    }
    at + word_run(bytes.get(at..).unwrap_or_default())
}

/// [`plain_run`] eight bytes at a time, as one word: a byte `b` of the word is flagged when
/// `b ^ '"'` or `b ^ '\\'` is zero or `b` is below `0x20`, with the usual borrow trick. A
/// borrow leaves a byte only when that byte is flagged itself, so a false flag can stand only
/// above a true one: the lowest flag is the first such byte.
#[inline]
fn word_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    let zero = |x: u64| below(x, 1);
    let below_space = |x: u64| below(x, 0x20);
    let mut at = 0;
    let mut words = bytes.chunks_exact(8);
    for word in words.by_ref() {
        let mut lanes = [0u8; 8];
        lanes.copy_from_slice(word);
        let x = u64::from_le_bytes(lanes);
        let flags = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | below_space(x);
        if flags != 0 {
            return at + (flags.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + words
        .remainder()
        .iter()
        .position(|b| matches!(b, b'"' | b'\\' | 0x00..=0x1f))
        .unwrap_or(words.remainder().len())
}

#[cfg(test)]
mod tests {
    use super::plain_run;

    fn bytewise(bytes: &[u8]) -> usize {
        bytes
            .iter()
            .position(|b| matches!(b, b'"' | b'\\' | 0x00..=0x1f))
            .unwrap_or(bytes.len())
    }

    #[test]
    fn the_run_ends_where_a_bytewise_search_ends_it() {
        // Every stop byte, and its neighbours, at every place of runs of every length up
        // to three words, among plain ASCII, multibyte UTF-8 and high bytes.
        let fillers: [&[u8]; 3] = [
            b"abcdefghijklmnopqrstuvwxyz0123",
            "é€😀ñ".as_bytes(),
            &[0x80, 0xff, 0x7f, 0x21, 0x23, 0x5b, 0x5d, 0x20],
        ];
        let probes = [
            b'"', b'\\', 0x00, 0x01, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff,
        ];
        for filler in fillers {
            for len in (0..24usize).chain([31, 32, 33, 40, 63, 64, 65, 70, 97]) {
                let base: Vec<u8> = filler.iter().copied().cycle().take(len).collect();
                assert_eq!(plain_run(&base), bytewise(&base));
                for at in 0..len {
                    for probe in probes {
                        let mut bytes = base.clone();
                        bytes[at] = probe;
                        assert_eq!(plain_run(&bytes), bytewise(&bytes), "{bytes:?}");
                        // A second stop after the first changes nothing.
                        if at + 1 < len {
                            bytes[at + 1] = 0x00;
                            assert_eq!(plain_run(&bytes), bytewise(&bytes), "{bytes:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pseudo_random_bytes_agree_with_the_bytewise_search() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 100) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|k| {
                    let b = (state >> ((k % 8) * 8)) as u8 ^ (k as u8).wrapping_mul(31);
                    // Mostly plain bytes, so the runs are long enough to cross words.
                    if b % 5 == 0 {
                        b
                    } else {
                        b | 0x20 & !0x02
                    }
                })
                .collect();
            assert_eq!(plain_run(&bytes), bytewise(&bytes), "{bytes:?}");
        }
    }
}
