//! `export --format-version N --compress zstd` and `migrate --to dsh:DIR` with the same
//! options write the DSH file asked for; `import` reads any of them back; the bytes at the
//! imported version are the imported file's; a version lacking one of the session's events
//! is refused with exit 3 and DSH's reason.

mod common;

use std::path::Path;

use common::{describe, sessionlog};

const V0_FILE: &str = concat!(
    r#"{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
    "\n",
    r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
    "\n",
    r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
    "\n",
    r#"{"type":"user/message","seq":2,"time":2,"data":{"role":"user","id":"u1","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"step/end","seq":3,"time":3,"data":{"turn":1,"step":1}}"#,
    "\n",
    r#"{"type":"turn/end","seq":4,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    "\n",
);

/// A message before any step: DSH's V2 -> V3 stage cannot give it a system head.
const V0_MESSAGE_BEFORE_STEP: &str = concat!(
    r#"{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
    "\n",
    r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
    "\n",
    r#"{"type":"user/message","seq":1,"time":2,"data":{"role":"user","id":"u1","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    "\n",
);

fn ok(args: &[&str]) -> Vec<u8> {
    let out = sessionlog(args, b"");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
    out.stdout
}

fn import(store: &Path, file: &Path) {
    ok(&[
        "import",
        "--store",
        &store.display().to_string(),
        &file.display().to_string(),
    ]);
}

fn export(store: &Path, extra: &[&str]) -> Vec<u8> {
    let store = store.display().to_string();
    let mut args = vec!["export", "--store", store.as_str(), "--session", "s1"];
    args.extend_from_slice(extra);
    ok(&args)
}

/// `export` of session s1 at `version`, which must be refused: exit 3 and nothing written.
/// Returns what it said.
fn refused_export(store: &Path, version: &str) -> String {
    let store = store.display().to_string();
    let args = [
        "export",
        "--store",
        &store,
        "--session",
        "s1",
        "--format-version",
        version,
    ];
    let out = sessionlog(&args, b"");
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(
        out.stdout.is_empty(),
        "nothing is written before the refusal"
    );
    common::text(&out.stderr)
}

#[test]
fn export_writes_each_version_and_compression_and_import_reads_them_back() {
    let temp = tempfile::tempdir().expect("tempdir");
    let v0 = temp.path().join("session.jsonl");
    std::fs::write(&v0, V0_FILE).expect("write");
    let a = temp.path().join("a");
    import(&a, &v0);
    assert_eq!(
        export(&a, &[]),
        V0_FILE.as_bytes(),
        "default: the imported version"
    );

    let v1 = export(&a, &["--format-version", "1"]);
    let v1_text = String::from_utf8(v1.clone()).expect("utf8");
    assert!(
        v1_text.starts_with(r#"{"type":"session","version":1,"#),
        "{v1_text}"
    );
    assert_eq!(
        v1_text.lines().skip(1).collect::<Vec<_>>(),
        V0_FILE.lines().skip(1).collect::<Vec<_>>()
    );
    let v1_file = temp.path().join("session.v1.jsonl");
    std::fs::write(&v1_file, &v1).expect("write");
    let b = temp.path().join("b");
    import(&b, &v1_file);
    assert_eq!(
        export(&b, &[]),
        v1,
        "a V1 import exports as V1, byte for byte"
    );
    assert_eq!(export(&b, &["--format-version", "0"]), V0_FILE.as_bytes());

    // V4 is DSH's migration of the session: the header in V4's writer order and the
    // system head DSH adds at the first step (its id a hash of the session id and anchor).
    let v4 = String::from_utf8(export(&a, &["--format-version", "4"])).expect("utf8");
    assert!(
        v4.starts_with(r#"{"type":"session","version":4,"id":"s1","createdAt":1,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#),
        "{v4}"
    );
    let lines: Vec<&str> = v4.lines().collect();
    assert_eq!(lines.len(), 7, "{v4}");
    assert!(
        lines[3].starts_with(r#"{"type":"system/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{"id":"v2-to-v3-system-"#),
        "{v4}"
    );
    assert_eq!(
        lines[4],
        V0_FILE
            .lines()
            .nth(3)
            .expect("message")
            .replace(r#""seq":2"#, r#""seq":3"#)
    );

    let packed = export(&a, &["--compress", "zstd"]);
    assert!(
        packed.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]),
        "a zstd frame"
    );
    assert_eq!(
        zstd::stream::decode_all(&packed[..]).expect("decodes"),
        V0_FILE.as_bytes()
    );
    let packed_file = temp.path().join("session.jsonl.zstd");
    std::fs::write(&packed_file, &packed).expect("write");
    let c = temp.path().join("c");
    import(&c, &packed_file);
    assert_eq!(export(&c, &[]), V0_FILE.as_bytes());
}

#[test]
fn a_v4_export_dsh_would_not_migrate_is_refused_with_dsh_reason() {
    let temp = tempfile::tempdir().expect("tempdir");
    let v0 = temp.path().join("session.jsonl");
    std::fs::write(&v0, V0_MESSAGE_BEFORE_STEP).expect("write");
    let store = temp.path().join("s");
    import(&store, &v0);
    let said = refused_export(&store, "4");
    assert!(
        said.contains("format v2 surface before first step cannot acquire a system head without changing chronology"),
        "{said}"
    );
    assert_eq!(
        export(&store, &[]),
        V0_MESSAGE_BEFORE_STEP.as_bytes(),
        "V0 still exports"
    );
}

#[test]
fn a_version_that_lacks_an_event_is_refused_with_dsh_reason() {
    let Some(root) = sessionlog_testkit::dsh_corpus("a_version_that_lacks_an_event_is_refused")
    else {
        return;
    };
    let temp = tempfile::tempdir().expect("tempdir");
    let file = root.join("logs/examples/jsonrpc-agent/tests/snapshots/text-turn/session.jsonl");
    let store = temp.path().join("s");
    let out = sessionlog(
        &[
            "import",
            "--store",
            &store.display().to_string(),
            "--session",
            "s1",
            &file.display().to_string(),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = refused_export(&store, "2");
    assert!(said.contains("cannot export as DSH format v2"), "{said}");
    assert!(said.contains("\"assistant/chunk\""), "{said}");
}

#[test]
fn migrate_to_a_dsh_directory_writes_the_version_and_compression_asked_for() {
    let temp = tempfile::tempdir().expect("tempdir");
    let v0 = temp.path().join("session.jsonl");
    std::fs::write(&v0, V0_FILE).expect("write");
    let store = temp.path().join("store");
    import(&store, &v0);
    let dsh = temp.path().join("dsh");
    ok(&[
        "migrate",
        "--from",
        &format!("store:{}", store.display()),
        "--to",
        &format!("dsh:{}", dsh.display()),
        "--format-version",
        "1",
        "--compress",
        "zstd",
    ]);
    let dir = dsh.join("s1");
    let written = dir.join("session.v1.jsonl.zstd");
    assert!(
        written.is_file(),
        "{:?}",
        std::fs::read_dir(&dir).map(|d| d.count())
    );
    assert!(
        !dir.join("session.jsonl").exists(),
        "the plain copy is replaced"
    );
    // Back through migrate from the DSH directory (it reads the newest generation, zstd).
    let again = temp.path().join("again");
    ok(&[
        "migrate",
        "--from",
        &format!("dsh:{}", dsh.display()),
        "--to",
        &format!("store:{}", again.display()),
    ]);
    assert_eq!(
        export(&again, &["--format-version", "0"]),
        V0_FILE.as_bytes()
    );
    let header = String::from_utf8(export(&again, &[])).expect("utf8");
    assert!(
        header.starts_with(r#"{"type":"session","version":1,"#),
        "{header}"
    );
}

#[test]
fn a_v4_session_written_by_dsh_derives_its_system_message_from_data_message() {
    let temp = tempfile::tempdir().expect("tempdir");
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../session/tests/dsh-v4/text-turns.session.v4.jsonl");
    let store = temp.path().join("s");
    import(&store, &file);
    let derived = ok(&[
        "derive",
        "--store",
        &store.display().to_string(),
        "--session",
        "golden-v4-text",
    ]);
    let messages: serde_json::Value = serde_json::from_slice(&derived).expect("JSON");
    let first = &messages[0];
    assert_eq!(first["role"], "system", "{first}");
    assert!(
        first.get("turn").is_none(),
        "the message, not its payload: {first}"
    );
}

/// The family of `crates/session/tests/dsh-family`: a parent and its two children, and the
/// parent's V4 file as the real DSH runtime migrated it beside them.
fn family_file(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../session/tests/dsh-family")
        .join(name)
}

#[test]
fn a_parent_migrated_to_v4_lists_the_children_beside_it_as_dsh_does() {
    let temp = tempfile::tempdir().expect("tempdir");
    let store = temp.path().join("store");
    for name in ["parent", "child-1", "child-2"] {
        import(&store, &family_file(&format!("{name}.session.jsonl")));
    }
    let dsh = std::fs::read(family_file("parent.dsh.session.v4.jsonl")).expect("DSH's file");
    let parent = "14dda109-5728-45ba-a002-7db9543fe50e";
    let store_arg = store.display().to_string();
    let exported = ok(&[
        "export",
        "--store",
        &store_arg,
        "--session",
        parent,
        "--format-version",
        "4",
    ]);
    assert_eq!(exported, dsh, "export --format-version 4");
    let home = temp.path().join("dsh");
    let out = sessionlog(
        &[
            "migrate",
            "--from",
            &format!("store:{store_arg}"),
            "--to",
            &format!("dsh:{}", home.display()),
            "--format-version",
            "4",
        ],
        b"",
    );
    // Child 2's version 2 descriptor is one DSH's own migration refuses, so the migration
    // stops there (exit 3, with DSH's reason), after the parent, which comes first by name.
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("5f49e80c-16fc-42c7-a617-0b6bd0680aa3")
            && said.contains("unsupported descriptor version 2"),
        "{said}"
    );
    let migrated = std::fs::read(home.join(parent).join("session.v4.jsonl")).expect("V4 file");
    assert_eq!(migrated, dsh, "migrate --to dsh: --format-version 4");
    assert!(
        !home.join(parent).join("session.writing").exists(),
        "nothing is left half written"
    );
}
