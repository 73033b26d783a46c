//! `JsonRef::element_fields` walks each object element of an array once, and hands
//! back exactly the elements `JsonRef::elements` yields with exactly the values
//! `JsonRef::fields` finds in each (the first of a key written twice, a key spelled with
//! escapes), whatever the array holds.

use proptest::prelude::*;
use sessionlog_session::json::{write_js_string, JsonRef};

const KEYS: [&str; 4] = ["type", "text", "id", "content"];

fn key_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(KEYS.to_vec()).prop_map(|k| {
            let mut out = String::new();
            write_js_string(&mut out, k);
            out
        }),
        Just("\"t\\u0065xt\"".to_owned()),
        Just("\"other\"".to_owned()),
        "[a-z]{1,6}".prop_map(|k| format!("\"{k}\"")),
    ]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("false".to_owned()),
        (-1000i64..1_000_000).prop_map(|n| n.to_string()),
        "[ -~]{0,40}".prop_map(|s| {
            let mut out = String::new();
            write_js_string(&mut out, &s);
            out
        }),
        Just("\"quote \\\" brace } bracket ] \\\\\"".to_owned()),
    ]
}

fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(3, 32, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| format!("[ {} ]", items.join(" , "))),
            proptest::collection::vec((key_literal(), inner), 0..5).prop_map(|members| {
                let body: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("{k} : {v}"))
                    .collect();
                format!("{{ {} }}", body.join(" ,"))
            }),
        ]
    })
}

proptest! {
    #[test]
    fn each_element_and_its_fields_are_those_of_the_two_walks(
        items in proptest::collection::vec(value(), 0..6),
        spaced in any::<bool>(),
    ) {
        let sep = if spaced { " ,\n " } else { "," };
        let text = format!("[{}]", items.join(sep));
        let array = JsonRef::new(&text);
        let walked: Vec<(&str, [Option<&str>; 4])> = array
            .element_fields(KEYS)
            .map(|(e, f)| (e.raw(), f.map(|v| v.map(|v| v.raw()))))
            .collect();
        let twice: Vec<(&str, [Option<&str>; 4])> = array
            .elements()
            .map(|e| (e.raw(), e.fields(KEYS).map(|v| v.map(|v| v.raw()))))
            .collect();
        prop_assert_eq!(walked, twice);
    }
}

#[test]
fn what_is_not_an_array_has_no_elements() {
    for text in ["{\"type\":\"text\"}", "\"[1]\"", "3", "null"] {
        assert_eq!(JsonRef::new(text).element_fields(KEYS).count(), 0);
    }
}
