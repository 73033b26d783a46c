//! The golden vectors in `format-spec/events.md` decode to events with the documented kind tag and
//! re-encode to the same bytes, so the document cannot drift from the code.

use sessionlog_session::codec::{decode_header, encode_header, is_surface_kind, kind};
use sessionlog_session::{decode_event, encode_event, kind_tag, Error};

struct Vector {
    title: String,
    record: String,
    kind: String,
    json: String,
    bytes: Vec<u8>,
}

fn vectors() -> Vec<Vector> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../format-spec/events.md"
    ))
    .expect("format-spec/events.md");
    // Only the "Golden vectors" section: other sections have `###` headings of their own.
    let start = doc
        .find("## Golden vectors")
        .expect("a Golden vectors section");
    let end = doc[start + 3..]
        .find("\n## ")
        .map_or(doc.len(), |e| start + 3 + e);
    let doc = &doc[start..end];
    let mut out = Vec::new();
    let mut current: Option<Vector> = None;
    let mut in_hex = false;
    let tick = |line: &str| line.split('`').nth(1).unwrap_or_default().to_owned();
    for line in doc.lines() {
        if let Some(title) = line.strip_prefix("### ") {
            out.extend(current.take());
            current = Some(Vector {
                title: title.into(),
                record: String::new(),
                kind: String::new(),
                json: String::new(),
                bytes: Vec::new(),
            });
        } else if let Some(v) = current.as_mut() {
            if line.starts_with("- record:") {
                v.record = tick(line);
            } else if line.starts_with("- kind tag:") {
                v.kind = tick(line);
            } else if line.starts_with("- JSON:") {
                v.json = line
                    .trim_start_matches("- JSON: `")
                    .trim_end_matches('`')
                    .to_owned();
            } else if line == "```hex" {
                in_hex = true;
            } else if line == "```" {
                in_hex = false;
            } else if in_hex {
                for pair in line.as_bytes().chunks(2) {
                    let hex = std::str::from_utf8(pair).expect("ascii");
                    v.bytes
                        .push(u8::from_str_radix(hex, 16).expect("hex digit pair"));
                }
            }
        }
    }
    out.extend(current);
    out
}

#[test]
fn storage_encoding_matches_golden_vectors() {
    let vectors = vectors();
    assert!(vectors.len() >= 5, "events.md lost its vectors");
    for v in vectors {
        assert_eq!(v.bytes.first(), Some(&1), "{}: version byte", v.title);
        assert_eq!(
            &v.bytes[1..],
            v.json.as_bytes(),
            "{}: hex and JSON disagree",
            v.title
        );
        match v.record.as_str() {
            "event" => {
                let event = decode_event(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.title));
                let tag = u8::from_str_radix(v.kind.trim_start_matches("0x"), 16).expect("tag");
                assert_eq!(kind_tag(&event), tag, "{}", v.title);
                assert_eq!(encode_event(&event), v.bytes, "{}", v.title);
            }
            "header" => {
                let header = decode_header(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.title));
                assert_eq!(encode_header(&header), v.bytes, "{}", v.title);
            }
            other => panic!("{}: unknown record {other}", v.title),
        }
    }
}

#[test]
fn surface_tags_are_exactly_the_surface_types() {
    for tag in 0..=u8::MAX {
        let surface = [
            kind::USER_MESSAGE,
            kind::ASSISTANT_MESSAGE,
            kind::TOOL_RESULT,
            kind::SYSTEM_MESSAGE,
        ]
        .contains(&tag);
        assert_eq!(
            is_surface_kind(tag),
            surface || (0x05..=0x0F).contains(&tag),
            "tag {tag:#x}"
        );
    }
}

#[test]
fn undecodable_records_are_errors_not_panics() {
    for bad in [
        &b""[..],
        b"\x02{}",
        b"\x01{",
        b"\x01\xff",
        b"\x01{\"type\":\"a\"}",
    ] {
        assert!(
            matches!(decode_event(bad), Err(Error::Decode { .. })),
            "{bad:?}"
        );
    }
}
