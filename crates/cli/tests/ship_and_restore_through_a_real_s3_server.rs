//! `sessionlog ship --to s3://…` and `sessionlog restore --from s3://…` against a real S3
//! server (SeaweedFS in CI, started by `.ci/with-seaweedfs.sh`), the endpoint given by flag
//! and the credentials by the AWS_* environment. Without SESSIONLOG_S3_ENDPOINT the test says
//! it was skipped; under CI=true it fails instead.

mod common;

use common::{events, make_store, run};
use sessionlog_remote::{ObjectStore, S3Config, S3ObjectStore};

#[test]
fn ship_and_restore_through_a_real_s3_server() {
    let test = "ship_and_restore_through_a_real_s3_server";
    let Ok(endpoint) = std::env::var("SESSIONLOG_S3_ENDPOINT") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must run {test} against a real S3 server: run the tests through .ci/with-seaweedfs.sh"
        );
        println!("skipped {test}: no S3 server (SESSIONLOG_S3_ENDPOINT is not set)");
        return;
    };
    let bucket = std::env::var("SESSIONLOG_S3_BUCKET").unwrap_or_else(|_| "sessionlog-ci".into());
    let prefix = format!("tests/cli-{}", std::process::id());
    let url = format!("s3://{bucket}/{prefix}");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let store = store.to_str().expect("utf-8");
    make_store(store.as_ref(), "alpha", 30);

    let r = run(
        &[
            "ship",
            "--store",
            store,
            "--to",
            &url,
            "--endpoint",
            &endpoint,
        ],
        "",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("shipped generation 1 to s3://"),
        "{r:?}"
    );
    let restored = tmp.path().join("restored");
    let restored = restored.to_str().expect("utf-8");
    let r = run(
        &[
            "restore",
            "--from",
            &url,
            "--store",
            restored,
            "--endpoint",
            &endpoint,
        ],
        "",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(events(restored, "alpha"), events(store, "alpha"));
    assert_eq!(run(&["verify", "--store", restored], "").code, 0);

    // Wrong credentials: an environment error (2), one line.
    let elsewhere = tmp.path().join("elsewhere");
    let r = run(
        &[
            "restore",
            "--from",
            &url,
            "--store",
            elsewhere.to_str().expect("utf-8"),
            "--endpoint",
            &endpoint,
            "--secret-access-key",
            "wrong",
        ],
        "",
    );
    assert_eq!((r.code, r.stderr.lines().count()), (2, 1), "{r:?}");

    let objects = S3ObjectStore::new(&S3Config {
        bucket,
        prefix,
        endpoint: Some(endpoint),
        ..S3Config::default()
    })
    .expect("client");
    for dir in sessionlog_remote::SHIPPED_DIRS {
        for key in objects.list(dir).expect("list") {
            objects.delete(&key).expect("delete");
        }
    }
}
