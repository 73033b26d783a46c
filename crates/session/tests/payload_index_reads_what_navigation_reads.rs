//! The payload index an event's parse makes (its members and its `message`'s) answers
//! every field lookup exactly as walking the payload text does, and a stored envelope
//! parses to the same event as a freshly validated one, whatever the envelope's layout:
//! the fold reads fields through the index, so this is what keeps it equal to a fold that
//! walks the text. An event built from its data (validated and indexed in one walk) is the
//! event its envelope parses to.

use proptest::prelude::*;
use sessionlog_session::json::{write_js_string, JsonRef};
use sessionlog_session::{DshFormat, Event, EventInput, Seq, SurfaceOp};

/// Keys the rules look up, and spellings that reach them through escapes.
const KEYS: [&str; 9] = [
    "message", "content", "source", "id", "role", "usage", "turn", "step", "callId",
];

fn key_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(KEYS.to_vec()).prop_map(|k| {
            let mut out = String::new();
            write_js_string(&mut out, k);
            out
        }),
        Just("\"mess\\u0061ge\"".to_owned()),
        Just("\"i\\u0064\"".to_owned()),
        Just("\"other\"".to_owned()),
        "[a-z]{1,8}".prop_map(|k| format!("\"{k}\"")),
    ]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        (-1000i64..1_000_000).prop_map(|n| n.to_string()),
        Just("1.5e3".to_owned()),
        "[ -~]{0,40}".prop_map(|s| {
            let mut out = String::new();
            write_js_string(&mut out, &s);
            out
        }),
        Just("\"quote \\\" brace } bracket ] \\\\\"".to_owned()),
    ]
}

/// A JSON value whose objects may repeat keys (stored text is not re-validated, so the
/// index must agree with navigation on such text too: first occurrence wins).
fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[{}]", items.join(","))),
            proptest::collection::vec((key_literal(), inner), 0..6).prop_map(|members| {
                let body: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("{k} : {v}"))
                    .collect();
                format!("{{ {} }}", body.join(" ,"))
            }),
        ]
    })
}

fn payload() -> impl Strategy<Value = String> {
    prop_oneof![
        value(),
        proptest::collection::vec((key_literal(), value()), 0..7).prop_map(|members| {
            let body: Vec<String> = members
                .into_iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect();
            format!("{{{}}}", body.join(","))
        }),
    ]
}

/// Envelopes around `data`: the writer's layout, and layouts that move or space members.
fn envelopes(data: &str) -> Vec<String> {
    vec![
        format!("{{\"type\":\"x/y\",\"seq\":7,\"time\":-3,\"data\":{data}}}"),
        format!("{{\"type\":\"x/y\",\"seq\":7,\"time\":12,\"data\":{data},\"ignorable\":true}}"),
        format!("{{\"seq\":7,\"data\":{data},\"type\":\"x/y\",\"time\":12}}"),
        format!("{{ \"type\" : \"x/y\" , \"seq\" : 7 , \"time\" : 12 , \"data\" : {data} }}"),
        format!("{{\"type\":\"x\\/y\",\"seq\":7,\"time\":12,\"data\":{data}}}"),
    ]
}

fn reference<const N: usize>(object: Option<JsonRef<'_>>, keys: [&str; N]) -> [Option<String>; N] {
    keys.map(|key| {
        object.and_then(|o| {
            o.members()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.raw().to_owned())
        })
    })
}

fn owned<const N: usize>(found: [Option<JsonRef<'_>>; N]) -> [Option<String>; N] {
    found.map(|v| v.map(|v| v.raw().to_owned()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn payload_index_reads_what_navigation_reads(data in payload()) {
        for raw in envelopes(&data) {
            let Ok(stored) = Event::parse_stored(&raw, 7) else {
                continue;
            };
            let payload = stored.data();
            prop_assert_eq!(owned(payload.fields(KEYS)), reference(Some(payload), KEYS));
            prop_assert_eq!(owned(stored.data_fields(KEYS)), reference(Some(payload), KEYS));
            let message = payload.members().find(|(k, _)| k == "message").map(|(_, v)| v);
            prop_assert_eq!(owned(stored.message_fields(KEYS)), reference(message, KEYS));
            // Text that passes the full lossless check parses to the same event either way.
            if let Ok(checked) = Event::parse(&raw, 7) {
                prop_assert_eq!(&checked, &stored);
            }
        }
    }

    /// Building an event from its data, whose one walk validates the data and indexes it,
    /// gives the event (payload index included) that parsing its envelope gives, or is
    /// refused where that parse is: around the data as given and with whitespace about it.
    #[test]
    fn an_event_built_from_its_data_is_the_event_its_envelope_parses_to(
        data in payload(),
        pad in prop::sample::select(vec![("", ""), (" ", ""), ("\n\t", " \r")]),
    ) {
        let data = format!("{}{data}{}", pad.0, pad.1);
        let built = EventInput::new("x/y", 12, data.clone()).into_event(7);
        let raw = format!("{{\"type\":\"x/y\",\"seq\":7,\"time\":12,\"data\":{data}}}");
        match (built, Event::parse(&raw, 7)) {
            (Ok(built), Ok(parsed)) => prop_assert_eq!(built, parsed),
            (Err(_), Err(_)) => {}
            (built, parsed) => prop_assert!(false, "built {built:?}, parsed {parsed:?}"),
        }
    }

    /// The same for every envelope field an input sets: types that need escapes, seqs,
    /// times and replacement bounds at and past the safe integers, surface operations in
    /// both spellings, cited sources (valid or not), `ignorable`. An event made from the
    /// input's fields, or parsed where a field has rules of its own, is the event its
    /// envelope parses to; an input that is refused has an envelope that is refused.
    #[test]
    fn an_event_built_from_any_input_is_the_event_its_envelope_parses_to(
        data in payload(),
        event_type in prop::sample::select(vec!["x/y", "tool/result", "a\"b", "t\u{1}", "é/ü", ""]),
        seq in prop::sample::select(vec![0u64, 7, 9_007_199_254_740_991, 9_007_199_254_740_992]),
        time in prop::sample::select(vec![
            0i64, -3, 12, 9_007_199_254_740_991, -9_007_199_254_740_991,
            9_007_199_254_740_992, i64::MIN,
        ]),
        op in prop::sample::select(vec![
            None,
            Some(SurfaceOp::Append),
            Some(SurfaceOp::Replace { start: Seq(1), end: Seq(3) }),
            Some(SurfaceOp::Replace { start: Seq(2), end: Seq(9_007_199_254_740_992) }),
        ]),
        sources in prop::sample::select(vec![
            None, Some(vec![1u64, 2]), Some(vec![3, 3]), Some(vec![8]), Some(vec![]),
            Some(vec![2, 1]), Some(vec![0, 5, 6]), Some(vec![1, 9_007_199_254_740_990]),
            Some(vec![9_007_199_254_740_992]), Some(vec![4, 2, 4]),
        ]),
        ignorable in any::<bool>(),
        v3 in any::<bool>(),
    ) {
        let format = if v3 { DshFormat::V3 } else { DshFormat::V0 };
        let mut input = EventInput::new(event_type, time, data.clone());
        input.surface_op = op;
        input.source_event_seqs = sources.clone().map(|s| s.into_iter().map(Seq).collect());
        input.ignorable = ignorable;
        let built = input.into_event_for(seq, format);
        // The envelope as DSH's writer spells it, written here on its own.
        let mut raw = String::from("{\"type\":");
        write_js_string(&mut raw, event_type);
        raw.push_str(&format!(",\"seq\":{seq},\"time\":{time},\"data\":{data}"));
        if let Some(sources) = &sources {
            let list: Vec<String> = sources.iter().map(u64::to_string).collect();
            raw.push_str(&format!(",\"sourceEventSeqs\":[{}]", list.join(",")));
        }
        match op {
            None => {}
            Some(SurfaceOp::Append) => raw.push_str(",\"surfaceOp\":\"append\""),
            Some(SurfaceOp::Replace { start, end }) => {
                let (s, e) = if v3 { ("startSeq", "endSeq") } else { ("start", "end") };
                raw.push_str(&format!(
                    ",\"surfaceOp\":{{\"op\":\"replace\",\"{s}\":{},\"{e}\":{}}}",
                    start.get(),
                    end.get()
                ));
            }
        }
        if ignorable {
            raw.push_str(",\"ignorable\":true");
        }
        raw.push('}');
        match (built, Event::parse(&raw, seq)) {
            (Ok(built), Ok(parsed)) => {
                prop_assert_eq!(built.raw(), raw.as_str());
                prop_assert_eq!(built, parsed);
            }
            (Err(_), Err(_)) => {}
            (built, parsed) => prop_assert!(false, "built {built:?}, parsed {parsed:?}"),
        }
    }
}
