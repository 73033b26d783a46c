//! Raw bytes into event validation: the lossless JSON validator, `Event::parse` (the stored
//! envelope) and `EventInput::from_json` (the append shape), then appending the input to a
//! fresh session. No input may panic; whatever is accepted must keep its bytes and survive the
//! storage encoding, and an event built from an input (made from its fields when its envelope
//! passes the rules by construction) must be the event its own envelope parses to.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sessionlog_session::{
    decode_event, encode_event, json, Event, EventInput, FormatVersion, Session, SessionHeader,
};

fuzz_target!(|data: &[u8]| {
    let valid_json = json::validate(data).is_ok();
    let Ok(text) = std::str::from_utf8(data) else {
        assert!(!valid_json, "invalid UTF-8 passed the JSON validator");
        return;
    };
    if let Ok(event) = Event::parse(text, 0) {
        assert!(
            valid_json,
            "an envelope that is not lossless JSON was accepted"
        );
        assert_eq!(event.raw(), text, "the envelope's bytes were not kept");
        let stored = encode_event(&event);
        let back = decode_event(&stored).expect("a parsed event decodes from storage");
        assert_eq!(back, event);
    }
    if let Ok(input) = EventInput::from_json(text, 0) {
        assert!(
            valid_json,
            "an input that is not lossless JSON was accepted"
        );
        for seq in [0, 5, 1_000_000] {
            if let Ok(built) = input.clone().into_event(seq) {
                assert_eq!(
                    Event::parse(built.raw(), seq).as_ref(),
                    Ok(&built),
                    "a built event is not the event its envelope parses to"
                );
            }
        }
        let data_text = input.data.clone();
        for version in [FormatVersion::dsh_v0(), FormatVersion::current()] {
            let mut session = Session::new(SessionHeader::new("s", 1, None), version);
            let before = session.clone();
            match session.try_append(input.clone()) {
                Ok(event) => {
                    assert!(event.raw().contains(&data_text), "payload bytes changed");
                    let event = event.clone();
                    assert_eq!(decode_event(&encode_event(&event)).as_ref(), Ok(&event));
                }
                Err(_) => assert_eq!(session, before, "a refused event changed the session"),
            }
        }
    }
});
