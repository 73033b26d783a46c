//! DSH's compressed session files (`*.jsonl.zstd`): concatenated, checksummed zstd frames.
//! The first frame holds exactly the header line, so a reader can learn a session's
//! header without decoding its events; each later frame holds one batch of event lines.
//! The decompressed stream is the plain JSONL file byte for byte.

use std::io::Write;

use crate::error::Error;

/// The little-endian magic number that starts every zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// The compression level DSH's runtime uses (zstd's default).
const LEVEL: i32 = 3;

/// Whether `file` starts like a zstd frame (how a compressed file is recognised,
/// whatever its name).
pub fn is_zstd(file: &[u8]) -> bool {
    file.starts_with(&ZSTD_MAGIC)
}

/// A decoded compressed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The decompressed stream of every complete frame.
    pub plain: Vec<u8>,
    /// The compressed bytes of a final frame cut short (a torn append), dropped whole.
    pub torn_frame_bytes: usize,
}

fn corrupt(detail: impl Into<String>) -> Error {
    Error::Zstd {
        detail: detail.into(),
    }
}

/// Decodes every complete frame. A frame that is not zstd, fails its checksum or does not
/// decode is corruption; only a last frame that ends early (the file ends inside it) is a
/// torn tail and is dropped. The first frame must hold exactly one line, the header.
pub fn decode(file: &[u8]) -> Result<Decoded, Error> {
    let mut plain = Vec::with_capacity(file.len().saturating_mul(4));
    let mut offset = 0;
    let mut frame = 0usize;
    while offset < file.len() {
        let rest = file.get(offset..).unwrap_or_default();
        if rest.len() >= ZSTD_MAGIC.len() && !rest.starts_with(&ZSTD_MAGIC) {
            return Err(corrupt(format!("invalid frame magic at byte {offset}")));
        }
        let size = match zstd::zstd_safe::find_frame_compressed_size(rest) {
            Ok(size) if size <= rest.len() => size,
            // The file ends inside this frame: a torn final append.
            _ => {
                if frame == 0 {
                    return Err(corrupt("the header frame is incomplete"));
                }
                return Ok(Decoded {
                    plain,
                    torn_frame_bytes: rest.len(),
                });
            }
        };
        let bytes =
            zstd::stream::decode_all(rest.get(..size).unwrap_or_default()).map_err(|e| {
                corrupt(format!(
                    "frame {frame} at byte {offset} does not decode: {e}"
                ))
            })?;
        if frame == 0
            && (bytes.is_empty() || bytes.iter().position(|b| *b == b'\n') != Some(bytes.len() - 1))
        {
            return Err(corrupt("first frame is not exactly one header line"));
        }
        plain.extend_from_slice(&bytes);
        offset += size;
        frame += 1;
    }
    if frame == 0 {
        return Err(corrupt("the file holds no frame"));
    }
    Ok(Decoded {
        plain,
        torn_frame_bytes: 0,
    })
}

/// One checksummed frame of `text` (DSH writes the header line alone in one).
pub fn frame(text: &[u8]) -> Result<Vec<u8>, Error> {
    let fail = |e: std::io::Error| corrupt(format!("compression failed: {e}"));
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), LEVEL).map_err(fail)?;
    encoder.include_checksum(true).map_err(fail)?;
    encoder.write_all(text).map_err(fail)?;
    encoder.finish().map_err(fail)
}

/// Compresses a plain session file as DSH lays it out: the header line alone in the first
/// frame, the event lines (when there are any) in a second.
pub fn encode(plain: &[u8]) -> Result<Vec<u8>, Error> {
    let header_end = plain
        .iter()
        .position(|b| *b == b'\n')
        .map_or(plain.len(), |i| i + 1);
    let (header, events) = plain.split_at(header_end);
    let mut out = frame(header)?;
    if !events.is_empty() {
        out.extend_from_slice(&frame(events)?);
    }
    Ok(out)
}

/// A checksummed frame written as it is fed: event lines streamed into one frame,
/// closed by [`StreamFrame::finish`].
pub struct StreamFrame<W: Write> {
    encoder: zstd::stream::Encoder<'static, W>,
}

impl<W: Write> std::fmt::Debug for StreamFrame<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamFrame")
    }
}

impl<W: Write> StreamFrame<W> {
    /// Starts a frame written to `out`.
    pub fn new(out: W) -> std::io::Result<StreamFrame<W>> {
        let mut encoder = zstd::stream::Encoder::new(out, LEVEL)?;
        encoder.include_checksum(true)?;
        Ok(StreamFrame { encoder })
    }

    /// Compresses `bytes` into the frame.
    pub fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.encoder.write_all(bytes)
    }

    /// Ends the frame (its checksum included) and hands back the writer.
    pub fn finish(self) -> std::io::Result<W> {
        self.encoder.finish()
    }
}
