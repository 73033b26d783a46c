//! The manifest: the object that makes a shipped state exist, and the names of the objects it
//! lists. design: docs/distributed.md#object-layout-and-naming

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The manifest format this build writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// The first line's opening word. design: docs/distributed.md#manifest
const HEADER_WORD: &str = "sessionlog-manifest";

/// Where manifests live.
pub(crate) const MANIFEST_DIR: &str = "manifests";
/// Where sealed segments live.
pub(crate) const SEGMENT_DIR: &str = "segments";
/// Where parts of active segments live.
pub(crate) const TAIL_DIR: &str = "tails";
/// Where session checkpoints live.
pub(crate) const CACHE_DIR: &str = "cache";
/// Every directory of an object store that a shipper writes under: the objects listed
/// under them are all a shipped store consists of (to remove one, or to count it).
pub const SHIPPED_DIRS: [&str; 4] = [MANIFEST_DIR, SEGMENT_DIR, TAIL_DIR, CACHE_DIR];

/// One shipped state of a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: u32,
    /// The store id of every segment header, 32 lower-case hex digits.
    pub store_id: String,
    /// One more than the generation of the manifest before it; the first is 1.
    pub generation: u64,
    /// The writer's fencing token; 0 when ownership is not used.
    pub fencing_token: u64,
    /// The log position (`Lsn`) the shipped state reaches: everything before it is in it.
    pub durable_lsn: u64,
    /// The segments, in increasing id order without gaps; only the last may be active.
    pub segments: Vec<ShippedSegment>,
    /// Session checkpoint files.
    pub cache: Vec<ShippedCheckpoint>,
    /// The live streams as the store listed them when it shipped.
    pub sessions: Vec<ShippedStream>,
}

/// One segment of a shipped state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShippedSegment {
    /// Its segment id.
    pub id: u64,
    /// Sealed: one object holds the whole file. Active: its parts hold the durable prefix.
    pub sealed: bool,
    /// The objects whose bytes, in order, are the file (or its durable prefix).
    pub objects: Vec<ObjectRef>,
}

impl ShippedSegment {
    /// The bytes the objects hold together.
    pub fn len(&self) -> u64 {
        self.objects.last().map_or(0, |o| o.offset + o.length)
    }

    /// Whether no object holds any byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An object and where its bytes belong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Its key.
    pub key: String,
    /// Where its first byte belongs in the file.
    pub offset: u64,
    /// Its length in bytes.
    pub length: u64,
    /// CRC-32 (IEEE) of its bytes.
    pub crc32: u32,
}

/// A session checkpoint file of a shipped state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShippedCheckpoint {
    /// Its file name in the store's `cache/` directory.
    pub file: String,
    /// Its object (offset 0).
    pub object: ObjectRef,
}

/// A live stream of a shipped state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShippedStream {
    /// Its catalog name (a session's name, or a raw stream's reserved name).
    pub name: String,
    /// Its stream id.
    pub stream: u64,
    /// How many records it had.
    pub next_seq: u64,
}

/// The key of manifest `generation`.
pub(crate) fn manifest_key(generation: u64) -> String {
    format!("{MANIFEST_DIR}/{generation:020}.manifest")
}

/// The key of manifest `generation` written under a manifest pointer by the owner with
/// `fencing_token`: the token is in the key, so that a stale owner's manifest of the same
/// generation is another object and never replaces the one the pointer names.
/// design: docs/distributed.md#manifest-pointer
pub(crate) fn pointed_manifest_key(generation: u64, fencing_token: u64) -> String {
    format!("{MANIFEST_DIR}/{generation:020}-{fencing_token:020}.manifest")
}

/// The generation a manifest key names and, for a key written under a manifest pointer,
/// the fencing token in it.
pub(crate) fn manifest_key_parts(key: &str) -> Option<(u64, Option<u64>)> {
    let name = key.strip_prefix(MANIFEST_DIR)?.strip_prefix('/')?;
    let stem = name.strip_suffix(".manifest")?;
    let number = |digits: &str| {
        (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse::<u64>().ok())
            .flatten()
    };
    match stem.split_once('-') {
        None => Some((number(stem)?, None)),
        Some((generation, token)) => Some((number(generation)?, Some(number(token)?))),
    }
}

/// The key of a whole sealed segment.
pub(crate) fn segment_key(id: u64, length: u64, crc32: u32) -> String {
    format!("{SEGMENT_DIR}/{id:020}-{length:012}-{crc32:08x}.seg")
}

/// The key of the part `start..end` of active segment `id`.
pub(crate) fn tail_key(id: u64, start: u64, end: u64, crc32: u32) -> String {
    format!("{TAIL_DIR}/{id:020}-{start:012}-{end:012}-{crc32:08x}.part")
}

/// The key of a checkpoint file's content.
pub(crate) fn cache_key(file: &str, length: u64, crc32: u32) -> String {
    let stem = file.strip_suffix(".slpc").unwrap_or(file);
    format!("{CACHE_DIR}/{stem}-{length:012}-{crc32:08x}.slpc")
}

/// Whether `file` is a checkpoint file name the store writes: 20 digits and `.slpc`. A
/// restore writes only such names, so a manifest cannot make it write anywhere else.
pub(crate) fn is_checkpoint_file(file: &str) -> bool {
    file.strip_suffix(".slpc")
        .is_some_and(|d| d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// 32 lower-case hex digits of a store id.
pub(crate) fn store_id_hex(id: [u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

impl Manifest {
    /// The object bytes: the header line, then the JSON document.
    /// design: docs/distributed.md#manifest
    pub fn encode(&self) -> Bytes {
        // Serializing plain structs of strings and integers cannot fail.
        let json = serde_json::to_vec(self).unwrap_or_default();
        let crc = crc32fast::hash(&json);
        let mut out =
            format!("{HEADER_WORD} {MANIFEST_FORMAT} {} {crc:08x}\n", json.len()).into_bytes();
        out.extend_from_slice(&json);
        Bytes::from(out)
    }

    /// Decodes and validates the manifest stored under `key`.
    pub fn decode(key: &str, bytes: &[u8]) -> Result<Manifest> {
        let bad = |reason: String| Error::BadManifest {
            key: key.to_owned(),
            reason,
        };
        let newline = bytes
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("no header line".into()))?;
        let (header, json) = (&bytes[..newline], &bytes[newline + 1..]);
        let header = std::str::from_utf8(header).map_err(|_| bad("header is not text".into()))?;
        let fields: Vec<&str> = header.split(' ').collect();
        let [word, format, len, crc] = fields[..] else {
            return Err(bad(format!("header `{header}` has not four fields")));
        };
        if word != HEADER_WORD || format != MANIFEST_FORMAT.to_string() {
            return Err(bad(format!(
                "header `{header}` is not a format {MANIFEST_FORMAT} manifest"
            )));
        }
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad length `{len}`")))?;
        let crc = u32::from_str_radix(crc, 16).map_err(|_| bad(format!("bad checksum `{crc}`")))?;
        if json.len() != len {
            return Err(bad(format!(
                "{} bytes of JSON, header says {len}",
                json.len()
            )));
        }
        if crc32fast::hash(json) != crc {
            return Err(bad("checksum mismatch".into()));
        }
        let manifest: Manifest =
            serde_json::from_slice(json).map_err(|e| bad(format!("JSON: {e}")))?;
        manifest.validate().map_err(bad)?;
        if let Some((generation, token)) = manifest_key_parts(key) {
            if generation != manifest.generation {
                return Err(bad(format!("it says generation {}", manifest.generation)));
            }
            if token.is_some_and(|t| t != manifest.fencing_token) {
                return Err(bad(format!(
                    "it says fencing token {}",
                    manifest.fencing_token
                )));
            }
        }
        Ok(manifest)
    }

    /// The rules of docs/distributed.md#manifest a decoded manifest must keep.
    fn validate(&self) -> Result<(), String> {
        if self.format != MANIFEST_FORMAT {
            return Err(format!("format {}", self.format));
        }
        if self.store_id.len() != 32 || !self.store_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("store id is not 32 hex digits".into());
        }
        let last = self.segments.len().saturating_sub(1);
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 && segment.id != self.segments[i - 1].id + 1 {
                return Err(format!(
                    "segment {} does not follow its predecessor",
                    segment.id
                ));
            }
            if !segment.sealed && i != last {
                return Err(format!("segment {} is active but not last", segment.id));
            }
            if segment.sealed && segment.objects.len() != 1 {
                return Err(format!("sealed segment {} has not one object", segment.id));
            }
            let dir = if segment.sealed {
                SEGMENT_DIR
            } else {
                TAIL_DIR
            };
            let mut end = 0;
            for object in &segment.objects {
                if object.offset != end || object.length == 0 {
                    return Err(format!("segment {} has a gap or an empty part", segment.id));
                }
                check_key(&object.key, dir)?;
                end = object.offset + object.length;
            }
        }
        for checkpoint in &self.cache {
            if !is_checkpoint_file(&checkpoint.file) || checkpoint.object.offset != 0 {
                return Err(format!("bad checkpoint entry `{}`", checkpoint.file));
            }
            check_key(&checkpoint.object.key, CACHE_DIR)?;
        }
        Ok(())
    }

    /// Every data object this manifest names.
    pub fn object_keys(&self) -> impl Iterator<Item = &str> {
        self.segments
            .iter()
            .flat_map(|s| s.objects.iter())
            .chain(self.cache.iter().map(|c| &c.object))
            .map(|o| o.key.as_str())
    }
}

fn check_key(key: &str, dir: &str) -> Result<(), String> {
    let name = key.strip_prefix(dir).and_then(|k| k.strip_prefix('/'));
    match name {
        Some(name) if !name.is_empty() && !name.contains('/') && name != ".." => Ok(()),
        _ => Err(format!("object key `{key}` is not under {dir}/")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let part = |offset, length| ObjectRef {
            key: tail_key(2, offset, offset + length, 7),
            offset,
            length,
            crc32: 7,
        };
        Manifest {
            format: MANIFEST_FORMAT,
            store_id: store_id_hex([0xab; 16]),
            generation: 3,
            fencing_token: 0,
            durable_lsn: (2 << 32) | 200,
            segments: vec![
                ShippedSegment {
                    id: 1,
                    sealed: true,
                    objects: vec![ObjectRef {
                        key: segment_key(1, 4096, 9),
                        offset: 0,
                        length: 4096,
                        crc32: 9,
                    }],
                },
                ShippedSegment {
                    id: 2,
                    sealed: false,
                    objects: vec![part(0, 64), part(64, 136)],
                },
            ],
            cache: vec![ShippedCheckpoint {
                file: format!("{:020}.slpc", 1),
                object: ObjectRef {
                    key: cache_key(&format!("{:020}.slpc", 1), 10, 1),
                    offset: 0,
                    length: 10,
                    crc32: 1,
                },
            }],
            sessions: vec![],
        }
    }

    #[test]
    fn a_manifest_round_trips_through_its_bytes() {
        let manifest = sample();
        let key = manifest_key(3);
        assert_eq!(
            Manifest::decode(&key, &manifest.encode()).unwrap(),
            manifest
        );
        assert_eq!(manifest_key_parts(&key), Some((3, None)));
    }

    #[test]
    fn a_pointed_manifest_key_names_its_generation_and_token() {
        let mut manifest = sample();
        manifest.fencing_token = 41;
        let key = pointed_manifest_key(3, 41);
        assert_eq!(manifest_key_parts(&key), Some((3, Some(41))));
        assert_eq!(manifest_key_parts(&manifest_key(3)), Some((3, None)));
        assert_eq!(
            Manifest::decode(&key, &manifest.encode()).unwrap(),
            manifest
        );
        // A manifest read under another owner's key is refused.
        let err = Manifest::decode(&pointed_manifest_key(3, 40), &manifest.encode());
        assert!(err.is_err(), "another token's key");
        for bad in [
            "manifests/3-41.manifest",
            "manifests/00000000000000000003-.manifest",
            "manifests/00000000000000000003-0000000000000000004x.manifest",
            "segments/00000000000000000003.manifest",
        ] {
            assert_eq!(manifest_key_parts(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_manifest_with_a_changed_byte_is_refused() {
        let bytes = sample().encode();
        for at in [0, 25, bytes.len() / 2, bytes.len() - 2] {
            let mut changed = bytes.to_vec();
            changed[at] ^= 0x01;
            assert!(
                Manifest::decode(&manifest_key(3), &changed).is_err(),
                "byte {at}"
            );
        }
        assert!(Manifest::decode(&manifest_key(3), &bytes[..bytes.len() - 1]).is_err());
        assert!(
            Manifest::decode(&manifest_key(4), &bytes).is_err(),
            "wrong generation"
        );
    }

    #[test]
    fn a_manifest_that_breaks_a_rule_is_refused_even_with_a_good_checksum() {
        let mut escaping = sample();
        escaping.cache[0].file = "../../etc/passwd".into();
        let mut gap = sample();
        gap.segments[1].objects.remove(0);
        let mut active_first = sample();
        active_first.segments[0].sealed = false;
        let mut missing_segment = sample();
        missing_segment.segments[1].id = 3;
        let mut foreign_key = sample();
        foreign_key.segments[0].objects[0].key = "manifests/x".into();
        for broken in [escaping, gap, active_first, missing_segment, foreign_key] {
            let err = Manifest::decode(&manifest_key(3), &broken.encode()).unwrap_err();
            assert!(matches!(err, Error::BadManifest { .. }), "{err}");
        }
    }
}
