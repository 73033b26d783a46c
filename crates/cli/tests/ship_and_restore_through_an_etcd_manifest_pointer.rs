//! `sessionlog ship --shard NAME` and `sessionlog restore --shard NAME` against a real etcd
//! cluster (three members on loopback in CI, started by `.ci/with-etcd.sh`, found through
//! SESSIONLOG_ETCD_ENDPOINTS; without it the test says it was skipped, under CI=true it
//! fails): the ship takes the shard's lease and publishes through its manifest pointer, a
//! restore takes what the pointer names, and the mistakes an operator can make are refused
//! with one line and their exit code.

mod common;

use common::{events, make_store, run};

#[test]
fn ship_and_restore_through_an_etcd_manifest_pointer() {
    let test = "ship_and_restore_through_an_etcd_manifest_pointer";
    let Ok(endpoints) = std::env::var("SESSIONLOG_ETCD_ENDPOINTS") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must run {test} against a real etcd cluster: run the tests through .ci/with-etcd.sh"
        );
        println!("skipped {test}: no etcd (SESSIONLOG_ETCD_ENDPOINTS is not set)");
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let shard = format!("cli-{}-{nanos}", std::process::id());
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let store = store.to_str().expect("utf-8");
    make_store(store.as_ref(), "alpha", 30);
    let url = format!("file://{}", tmp.path().join("bucket").display());
    let path = |name: &str| tmp.path().join(name).to_str().expect("utf-8").to_owned();

    // The endpoints come from the environment here; --etcd gives them explicitly below.
    let r = run(
        &["ship", "--store", store, "--to", &url, "--shard", &shard],
        "",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("shipped generation 1 to file://"),
        "{r:?}"
    );
    let r = run(
        &[
            "ship", "--store", store, "--to", &url, "--shard", &shard, "--etcd", &endpoints,
        ],
        "",
    );
    assert_eq!(r.code, 0, "{r:?}");
    let restored = path("restored");
    let r = run(
        &[
            "restore", "--from", &url, "--store", &restored, "--shard", &shard, "--etcd",
            &endpoints,
        ],
        "",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("restored generation 2 from"), "{r:?}");
    assert_eq!(events(&restored, "alpha"), events(store, "alpha"));
    assert_eq!(run(&["verify", "--store", &restored], "").code, 0);

    // Another shard's name: nothing of it was shipped there (not found: 2), and nothing is
    // left at the target.
    let wrong = path("wrong");
    let r = run(
        &[
            "restore",
            "--from",
            &url,
            "--store",
            &wrong,
            "--shard",
            "no-such-shard",
        ],
        "",
    );
    assert_eq!((r.code, r.stderr.lines().count()), (2, 1), "{r:?}");
    assert!(r.stderr.contains("check the shard name"), "{r:?}");
    assert!(!tmp.path().join("wrong").exists());

    // etcd out of reach: an environment error, one line.
    let r = run(
        &[
            "restore",
            "--from",
            &url,
            "--store",
            &wrong,
            "--shard",
            &shard,
            "--etcd",
            "http://127.0.0.1:1",
        ],
        "",
    );
    assert_eq!((r.code, r.stderr.lines().count()), (2, 1), "{r:?}");
    assert!(!tmp.path().join("wrong").exists());

    // --etcd without --shard is a usage error.
    let r = run(
        &["ship", "--store", store, "--to", &url, "--etcd", &endpoints],
        "",
    );
    assert_eq!(r.code, 2, "{r:?}");
}
