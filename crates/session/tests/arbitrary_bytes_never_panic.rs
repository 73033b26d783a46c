//! Decoders and navigation never panic, whatever bytes they are given.

use proptest::prelude::*;
use sessionlog_session::json::{self, JsonRef};
use sessionlog_session::{decode_event, decode_header, import_jsonl, Event, ImportOptions};

fn walk(value: JsonRef<'_>, depth: usize) {
    if depth > 8 {
        return;
    }
    let _ = (
        value.kind(),
        value.as_str(),
        value.as_f64(),
        value.as_seq(),
        value.as_bool(),
    );
    for (_, member) in value.members().take(16) {
        walk(member, depth + 1);
    }
    for element in value.elements().take(16) {
        walk(element, depth + 1);
    }
    let _ = value.deep_equal(&value);
}

fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        "\\u",
        "d83d",
        "-0",
        "1e999",
        "null",
        "true",
        " ",
        "\n",
        "\"type\"",
        "\"seq\"",
        "\"data\"",
        "\"turn/end\"",
        "\"text-chunks\"",
        "\"seq0\"",
        "0",
        "7",
        "\u{e9}",
        "\r",
    ]);
    prop::collection::vec(piece, 0..64).prop_map(|p| p.concat().into_bytes())
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), shaped in jsonish()) {
        for input in [&bytes, &shaped] {
            let _ = json::validate(input);
            let text = String::from_utf8_lossy(input);
            walk(JsonRef::new(&text), 0);
            let _ = Event::parse(&text, 0);
            let _ = decode_event(input);
            let _ = decode_header(input);
            let mut file = br#"{"type":"session","version":0,"id":"x","createdAt":0,"delegationDepth":0}"#.to_vec();
            file.push(b'\n');
            file.extend_from_slice(input);
            let _ = import_jsonl(&file, &ImportOptions::default());
            let _ = import_jsonl(input, &ImportOptions::default());
        }
    }
}
