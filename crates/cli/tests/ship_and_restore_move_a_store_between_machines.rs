//! `sessionlog ship` and `sessionlog restore` through a directory standing in for a bucket
//! (`file://`): a store shipped and restored elsewhere holds the same sessions and verifies;
//! `--session` restores only the sessions named; every refusal is one line on stderr with the
//! documented exit code and changes nothing.

mod common;

use common::{events, make_store, run};

#[test]
fn a_shipped_store_restores_elsewhere_with_the_same_sessions() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let store = store.to_str().expect("utf-8");
    make_store(store.as_ref(), "alpha", 40);
    make_store(store.as_ref(), "beta", 10);
    let bucket = format!("file://{}", tmp.path().join("bucket").display());

    let shipped = run(&["ship", "--store", store, "--to", &bucket], "");
    assert_eq!(shipped.code, 0, "{shipped:?}");
    assert!(
        shipped.stdout.starts_with("shipped generation 1 to "),
        "{shipped:?}"
    );
    let again = run(&["ship", "--store", store, "--to", &bucket], "");
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.starts_with("nothing new to ship"), "{again:?}");

    let restored = tmp.path().join("restored");
    let restored = restored.to_str().expect("utf-8");
    let r = run(&["restore", "--from", &bucket, "--store", restored], "");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("2 sessions"), "{r:?}");
    for session in ["alpha", "beta"] {
        assert_eq!(
            events(restored, session),
            events(store, session),
            "{session}"
        );
    }
    let verify = run(&["verify", "--store", restored], "");
    assert_eq!(verify.code, 0, "{verify:?}");

    let one = tmp.path().join("one");
    let one = one.to_str().expect("utf-8");
    let r = run(
        &[
            "restore",
            "--from",
            &bucket,
            "--store",
            one,
            "--session",
            "beta",
        ],
        "",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(events(one, "beta"), events(store, "beta"));
    assert_eq!(events(one, "alpha").0, Some(2), "alpha was not restored");
}

#[test]
fn ship_and_restore_refusals_are_one_line_with_the_documented_exit_code() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let store = store.to_str().expect("utf-8");
    make_store(store.as_ref(), "alpha", 4);
    let bucket = format!("file://{}", tmp.path().join("bucket").display());
    let target = tmp.path().join("target");
    let target = target.to_str().expect("utf-8");

    // Nothing shipped yet: environment (2).
    let r = run(&["restore", "--from", &bucket, "--store", target], "");
    assert_eq!((r.code, r.stderr.lines().count()), (2, 1), "{r:?}");
    assert!(r.stderr.contains("nothing has been shipped"), "{r:?}");
    // Not a location: usage (2).
    let r = run(
        &["ship", "--store", store, "--to", "http://example.invalid/x"],
        "",
    );
    assert_eq!((r.code, r.stderr.lines().count()), (2, 1), "{r:?}");
    assert!(r.stderr.contains("s3://"), "{r:?}");

    assert_eq!(
        run(&["ship", "--store", store, "--to", &bucket], "").code,
        0
    );
    // A target that is not empty: refused (3), left as it was.
    let r = run(&["restore", "--from", &bucket, "--store", store], "");
    assert_eq!((r.code, r.stderr.lines().count()), (3, 1), "{r:?}");
    // A session the shipped state does not hold: not found (2), nothing created.
    let r = run(
        &[
            "restore",
            "--from",
            &bucket,
            "--store",
            target,
            "--session",
            "nope",
        ],
        "",
    );
    assert_eq!((r.code, r.stderr.lines().count()), (2, 1), "{r:?}");
    assert!(!std::path::Path::new(target).exists());
    // Another store's history at the location: refused (3).
    let other = tmp.path().join("other");
    make_store(&other, "gamma", 2);
    let r = run(
        &[
            "ship",
            "--store",
            other.to_str().expect("utf-8"),
            "--to",
            &bucket,
        ],
        "",
    );
    assert_eq!((r.code, r.stderr.lines().count()), (3, 1), "{r:?}");
    assert!(r.stderr.contains("prefix of its own"), "{r:?}");
}

#[test]
fn an_s3_location_without_credentials_is_refused_before_any_request() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let store = store.to_str().expect("utf-8");
    make_store(store.as_ref(), "alpha", 2);
    // Port 9 on loopback: were a request sent despite the missing credentials, the error
    // would be a connection failure, not the refusal this test expects.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args([
            "ship",
            "--store",
            store,
            "--to",
            "s3://bucket/prefix",
            "--endpoint",
            "http://127.0.0.1:9",
        ])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SKIP_SIGNATURE")
        .output()
        .expect("run sessionlog");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no credentials"), "{stderr}");
}
