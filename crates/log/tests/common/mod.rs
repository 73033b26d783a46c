//! A `Storage` over the real file system that lets a test step into chosen calls: the
//! tests of this directory that count, hold or fail a call implement [`Hooks`] and open their
//! log over [`Hooked`], which delegates everything else, file by file, to `RealStorage`.
#![allow(dead_code)] // each test uses the hooks it needs

use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use sessionlog_log::{DirLock, OpenMode, RealStorage, Storage, StorageFile};

/// Called before the storage call of the same name; an error is returned instead of making
/// the call. Each defaults to letting the call through.
pub trait Hooks: std::fmt::Debug + Send + Sync + 'static {
    fn open_file(&self, _path: &Path, _mode: OpenMode) -> io::Result<()> {
        Ok(())
    }
    fn write_all_at(&self, _offset: u64) -> io::Result<()> {
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The real file system with `H` called before the calls it hooks.
#[derive(Debug)]
pub struct Hooked<H> {
    pub hooks: Arc<H>,
}

impl<H: Hooks> Hooked<H> {
    pub fn new(hooks: H) -> Arc<Self> {
        Arc::new(Hooked {
            hooks: Arc::new(hooks),
        })
    }
}

#[derive(Debug)]
struct HookedFile<H> {
    inner: Arc<dyn StorageFile>,
    hooks: Arc<H>,
}

impl<H: Hooks> StorageFile for HookedFile<H> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.hooks.write_all_at(offset)?;
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.hooks.sync_data()?;
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn len_if_named(&self) -> io::Result<Option<u64>> {
        self.inner.len_if_named()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
    fn data_end(&self) -> io::Result<u64> {
        self.inner.data_end()
    }
    fn map_readonly(&self) -> io::Result<Bytes> {
        self.inner.map_readonly()
    }
}

impl<H: Hooks> Storage for Hooked<H> {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealStorage.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealStorage.list_dir(dir)
    }
    fn open_file(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>> {
        self.hooks.open_file(path, mode)?;
        Ok(Arc::new(HookedFile {
            inner: RealStorage.open_file(path, mode)?,
            hooks: self.hooks.clone(),
        }))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealStorage.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealStorage.rename(from, to)
    }
    fn replace_unordered(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealStorage.replace_unordered(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealStorage.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        RealStorage.try_lock(path)
    }
}
