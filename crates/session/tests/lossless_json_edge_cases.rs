//! The lossless-JSON rule as a table: what is accepted (and kept byte for byte), what is
//! refused, and whether a refusal is a syntax error (physical damage) or a rule violation.

use sessionlog_session::json::{self, js_number, write_js_string, JsonErrorKind, JsonRef};
use sessionlog_session::{Event, EventInput};

/// (input, expected outcome): `Ok` or the refusal kind.
#[derive(Debug)]
enum Expect {
    Ok,
    Syntax,
    Utf8,
    Duplicate,
    NonFinite,
    NegativeZero,
    TooDeep,
}

#[test]
fn lossless_json_edge_cases_table() {
    let deep = "[".repeat(300) + &"]".repeat(300);
    let cases: Vec<(&[u8], Expect)> = vec![
        (b"null", Expect::Ok),
        (b" {\"b\":1,\"a\":2} ", Expect::Ok),
        (b"{\"x\":1.50,\"y\":1e2,\"z\":-0.5}", Expect::Ok),
        (b"\"\\u00e9\\ud83d\\ude00 raw \xc3\xa9\"", Expect::Ok),
        (b"\"\\ud800 lone surrogate\"", Expect::Ok),
        (b"0", Expect::Ok),
        (b"-0", Expect::NegativeZero),
        (b"-0.0", Expect::NegativeZero),
        (b"-0e5", Expect::NegativeZero),
        (b"-1e-400", Expect::NegativeZero),
        (b"1e400", Expect::NonFinite),
        (b"-1e309", Expect::NonFinite),
        (b"{\"a\":1,\"a\":1}", Expect::Duplicate),
        (b"{\"a\":1,\"\\u0061\":2}", Expect::Duplicate),
        (b"{\"a\":{\"k\":1},\"b\":{\"k\":2}}", Expect::Ok),
        (b"\"\xff\"", Expect::Utf8),
        (b"\"\xed\xa0\x80\"", Expect::Utf8),
        (b"NaN", Expect::Syntax),
        (b"Infinity", Expect::Syntax),
        (b"01", Expect::Syntax),
        (b"1.", Expect::Syntax),
        (b".5", Expect::Syntax),
        (b"+1", Expect::Syntax),
        (b"[1,]", Expect::Syntax),
        (b"{\"a\":1,}", Expect::Syntax),
        (b"{a:1}", Expect::Syntax),
        (b"'a'", Expect::Syntax),
        (b"\"tab\there\"", Expect::Syntax),
        (b"\"\\x\"", Expect::Syntax),
        (b"\"\\u12\"", Expect::Syntax),
        (b"[1] [2]", Expect::Syntax),
        (b"", Expect::Syntax),
        (b"{\"a\":-0,", Expect::Syntax),
        (deep.as_bytes(), Expect::TooDeep),
    ];
    for (input, expect) in cases {
        let result = json::validate(input);
        let shown = String::from_utf8_lossy(input);
        match (&expect, &result) {
            (Expect::Ok, Ok(text)) => {
                assert_eq!(text.as_bytes(), input, "text must be kept as given")
            }
            (Expect::Syntax, Err(e)) => {
                assert!(matches!(e.kind, JsonErrorKind::Syntax(_)), "{shown}: {e:?}")
            }
            (Expect::Utf8, Err(e)) => assert_eq!(e.kind, JsonErrorKind::InvalidUtf8, "{shown}"),
            (Expect::Duplicate, Err(e)) => assert!(
                matches!(e.kind, JsonErrorKind::DuplicateKey(_)),
                "{shown}: {e:?}"
            ),
            (Expect::NonFinite, Err(e)) => assert!(
                matches!(e.kind, JsonErrorKind::NonFiniteNumber(_)),
                "{shown}: {e:?}"
            ),
            (Expect::NegativeZero, Err(e)) => assert!(
                matches!(e.kind, JsonErrorKind::NegativeZero(_)),
                "{shown}: {e:?}"
            ),
            (Expect::TooDeep, Err(e)) => assert_eq!(e.kind, JsonErrorKind::TooDeep),
            _ => panic!("{shown}: expected {expect:?}, got {result:?}"),
        }
        if let Err(e) = &result {
            let syntax = matches!(expect, Expect::Syntax | Expect::Utf8 | Expect::TooDeep);
            assert_eq!(e.kind.is_syntax(), syntax, "{shown}");
        }
    }
}

#[test]
fn payload_bytes_survive_an_event_round_trip_exactly() {
    let data = r#"{"z":1.50,"a":[1e2,-3.25E-1,"\u00e9\n"],"m":{"k":null,"b":true}}"#;
    let event = EventInput::new("todo/write", 5, data)
        .into_event(0)
        .expect("valid");
    assert_eq!(event.data().raw(), data);
    let reparsed = Event::parse(event.raw(), 0).expect("reparse");
    assert_eq!(reparsed.data().raw(), data);
    let keys: Vec<String> = JsonRef::new(data)
        .members()
        .map(|(k, _)| k.into_owned())
        .collect();
    assert_eq!(keys, ["z", "a", "m"]);
}

#[test]
fn strings_and_numbers_are_written_as_javascript_writes_them() {
    let mut out = String::new();
    write_js_string(&mut out, "q\"b\\\u{8}\u{c}\n\r\t\u{1}\u{1f}é\u{2028}/");
    assert_eq!(out, "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001fé\u{2028}/\"");
    let numbers = [
        (0.0, "0"),
        (1.0, "1"),
        (-1.5, "-1.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-10, "1.5e-10"),
        (9007199254740991.0, "9007199254740991"),
        (0.1 + 0.2, "0.30000000000000004"),
        (5e-324, "5e-324"),
    ];
    for (value, text) in numbers {
        assert_eq!(js_number(value), text, "{value:e}");
    }
}

mod stored_parse {
    use proptest::prelude::*;
    use sessionlog_session::Event;

    proptest! {
        /// The parse used for records read back from the log skips the lossless scan, so it
        /// must stay panic-free on any text, and agree with the full parse on valid envelopes.
        #[test]
        fn parse_stored_never_panics_and_agrees_with_parse(text in ".{0,200}", valid in any::<bool>()) {
            let text = if valid {
                format!(r#"{{"type":"turn/start","seq":3,"time":1,"data":{{"turn":1,"x":{}}}}}"#, serde_json::Value::String(text.clone()))
            } else {
                text
            };
            let stored = Event::parse_stored(&text, 0);
            if let Ok(full) = Event::parse(&text, 0) {
                prop_assert_eq!(stored.ok(), Some(full));
            }
        }
    }
}
