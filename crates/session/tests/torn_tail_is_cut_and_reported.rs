//! Physical load: a torn or damaged tail is cut and reported; damage followed by a later
//! `turn/end` is corruption, never silently dropped.

mod common;

use common::{assistant, empty_session, push, user};
use sessionlog_session::{export_jsonl, import_jsonl, Error, EventInput, ImportOptions};

fn closed_turn_file() -> Vec<u8> {
    let mut s = empty_session();
    push(&mut s, EventInput::new("turn/start", 1, r#"{"turn":1}"#));
    push(&mut s, user("u1", "hi"));
    push(&mut s, assistant("a2", "hello", &[]));
    push(
        &mut s,
        EventInput::new("turn/end", 2, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    );
    export_jsonl(&s)
}

fn no_repair() -> ImportOptions {
    ImportOptions::default().with_repair(false)
}

#[test]
fn a_record_without_line_feed_is_cut_and_reported() {
    let mut file = closed_turn_file();
    let good = file.len();
    file.extend_from_slice(br#"{"type":"user/message","seq":4,"ti"#);
    let import = import_jsonl(&file, &no_repair()).expect("loads the good prefix");
    assert_eq!(import.session.events().len(), 4);
    let tail = import.tail.expect("cut reported");
    assert_eq!((tail.committed_bytes, tail.file_bytes), (good, file.len()));
}

#[test]
fn a_damaged_last_turn_is_cut_and_then_repaired() {
    let file = closed_turn_file();
    // Damage the turn/end line: its turn is lost, so the load keeps seqs 0..=2 and closes turn 1.
    let text = String::from_utf8(file).expect("utf8");
    let damaged = text.replace(r#"{"type":"turn/end""#, r#"{"type":"turn/end"#);
    let import = import_jsonl(damaged.as_bytes(), &ImportOptions::default()).expect("loads");
    assert!(
        import.tail.as_ref().is_some_and(|t| t
            .reason
            .contains("unparsable at line 4; that is line 5 of the file")),
        "{:?}",
        import.tail
    );
    let closer_types: Vec<&str> = import
        .closers
        .iter()
        .map(|s| import.session.event(*s).expect("closer").event_type())
        .collect();
    assert_eq!(closer_types, ["turn/end"]);
}

#[test]
fn damage_followed_by_a_turn_end_is_corrupt() {
    let text = String::from_utf8(closed_turn_file()).expect("utf8");
    let damaged = text.replace(r#"{"type":"user/message""#, r#"{"type":"user/message"#);
    let err = import_jsonl(damaged.as_bytes(), &no_repair()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { line: 2, .. }), "{err}");
}

#[test]
fn a_seq_gap_followed_by_a_turn_end_is_corrupt() {
    let text = String::from_utf8(closed_turn_file()).expect("utf8");
    let gapped = text.replace(r#""seq":1,"#, r#""seq":9,"#);
    let err = import_jsonl(gapped.as_bytes(), &no_repair()).unwrap_err();
    assert!(
        err.to_string().contains(
            "seq gap in committed region at line 2 (expected 1, got 9); that is line 3 of the file"
        ),
        "{err}"
    );
}

#[test]
fn an_unknown_type_refuses_the_load_and_names_it() {
    let text = String::from_utf8(closed_turn_file()).expect("utf8");
    let unknown = text.replace(r#""type":"turn/start""#, r#""type":"vendor/thing""#);
    let err = import_jsonl(unknown.as_bytes(), &no_repair()).unwrap_err();
    assert!(
        matches!(&err, Error::UnknownEventType { event_type, .. } if event_type == "vendor/thing"),
        "{err}"
    );
    let ignorable = text.replace(
        r#""type":"turn/start","seq":0,"time":1,"data":{"turn":1}"#,
        r#""type":"vendor/thing","seq":0,"time":1,"data":{"turn":1},"ignorable":true"#,
    );
    assert!(ignorable.contains("ignorable"));
    let import = import_jsonl(ignorable.as_bytes(), &no_repair()).expect("ignorable loads");
    assert_eq!(
        sessionlog_session::export_jsonl(&import.session),
        ignorable.as_bytes()
    );
}

#[test]
fn a_header_with_another_version_is_unsupported() {
    let text = String::from_utf8(closed_turn_file()).expect("utf8");
    let v5 = text.replacen(r#""version":0"#, r#""version":5"#, 1);
    let err = import_jsonl(v5.as_bytes(), &no_repair()).unwrap_err();
    assert!(matches!(err, Error::UnsupportedVersion { .. }), "{err}");
}
