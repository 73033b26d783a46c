//! `Storage::replace_unordered` on the real file system: the new file takes the name,
//! whoever holds the old one open keeps reading the old bytes (mapped or read), the
//! temporary name is gone, and a name that did not exist yet is simply given.

use std::path::Path;

use sessionlog_log::{OpenMode, RealStorage, Storage};

fn write(storage: &RealStorage, path: &Path, bytes: &[u8]) {
    let f = storage
        .open_file(path, OpenMode::CreateNew)
        .expect("create");
    f.write_all_at(bytes, 0).expect("write");
}

#[test]
fn the_new_file_takes_the_name_and_the_old_one_stays_whole_for_its_readers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = RealStorage;
    let (tmp, path) = (dir.path().join("f.tmp"), dir.path().join("f"));

    // A name that does not exist yet.
    write(&storage, &tmp, b"first");
    storage.replace_unordered(&tmp, &path).expect("replace");
    assert_eq!(std::fs::read(&path).expect("read"), b"first");
    assert!(!tmp.exists(), "the temporary name is gone");

    for round in 0..3u8 {
        let old = std::fs::read(&path).expect("read");
        // A reader holding the old file, read and mapped.
        let held = storage.open_file(&path, OpenMode::ReadOnly).expect("open");
        let mapped = held.map_readonly().expect("map");
        let new = vec![b'a' + round; 10_000 * (usize::from(round) + 1)];
        write(&storage, &tmp, &new);
        storage.replace_unordered(&tmp, &path).expect("replace");
        assert_eq!(std::fs::read(&path).expect("read"), new, "round {round}");
        assert!(!tmp.exists(), "round {round}: the temporary name is gone");
        assert_eq!(
            &mapped[..],
            &old[..],
            "round {round}: the mapping is unchanged"
        );
        let mut buf = vec![0; old.len()];
        held.read_exact_at(&mut buf, 0).expect("read the old file");
        assert_eq!(buf, old, "round {round}: the open file is unchanged");
    }

    // A missing source is an error, and the name keeps its file.
    let before = std::fs::read(&path).expect("read");
    let err = storage
        .replace_unordered(&tmp, &path)
        .expect_err("nothing to put in place");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(std::fs::read(&path).expect("read"), before);
}
