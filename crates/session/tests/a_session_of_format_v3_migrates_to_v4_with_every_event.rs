//! A session that declares a format after the stages that start DSH's chain (V2 or V3) is
//! migrated to V4 by the later stages alone, every event with it. The expected file and the
//! refusal are what the real DSH 0.2.1 runtime wrote and said when it resumed the same V3 file.

use sessionlog_session::{
    export_dsh, import_jsonl, DshFormat, Error, ExportOptions, ImportOptions,
};

const HEADER: &str = r#"{"type":"session","version":3,"id":"p","createdAt":1,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#;

fn catalog(seq: u64, child: &str) -> String {
    format!(
        r#"{{"type":"subagent/catalog","seq":{seq},"time":{},"data":{{"version":1,"childId":"{child}","childCreatedAt":5,"mode":"unknown"}}}}"#,
        seq + 2
    )
}

fn v4_export(children: [&str; 2]) -> Result<String, Error> {
    let file = format!(
        "{HEADER}\n{}\n{}\n",
        catalog(0, children[0]),
        catalog(1, children[1])
    );
    let imported = import_jsonl(file.as_bytes(), &ImportOptions::default()).expect("V3 imports");
    assert_eq!(imported.session.header().format(), DshFormat::V3);
    let options = ExportOptions::default().with_format(Some(DshFormat::V4));
    export_dsh(&imported.session, &options).map(|b| String::from_utf8(b).expect("utf8"))
}

#[test]
fn every_event_of_a_v3_session_reaches_its_v4_file() {
    let ours = v4_export(["c", "d"]).expect("migrates");
    let dsh = format!(
        "{}\n{}\n{}\n",
        HEADER.replace(r#""version":3"#, r#""version":4"#),
        catalog(0, "c"),
        catalog(1, "d")
    );
    assert_eq!(ours, dsh);
}

#[test]
fn a_v3_catalog_listing_one_child_twice_is_refused_as_dsh_refuses_it() {
    let said = v4_export(["c", "c"]).expect_err("refused").to_string();
    assert!(said.contains("duplicate catalog child c"), "{said}");
}
