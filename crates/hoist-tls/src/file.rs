//! File-backed payloads: a file mapped read-only once at configuration load, and the regions of
//! it that responses send. Plain and kernel-TLS transports send a region with sendfile(2) (the
//! bytes never enter user space); user-space TLS encrypts straight from the mapping.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A regular file opened and mapped read-only.
///
/// Operators must not truncate a payload file while hoist serves it: a mapping of a truncated
/// file faults on access. Replacing it (write a new file, rename over) is safe.
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    file: File,
    map: Option<memmap2::Mmap>,
    len: u64,
}

impl MappedFile {
    pub fn open(path: &Path) -> io::Result<Arc<MappedFile>> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let len = meta.len();
        // An empty file cannot be mapped; it needs no mapping either.
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only and private; the file is a regular file that
            // hoist never writes. The documented operator contract above covers truncation by
            // another process, the one way this mapping could become invalid.
            #[allow(unsafe_code)]
            Some(unsafe { memmap2::MmapOptions::new().map(&file)? })
        };
        Ok(Arc::new(MappedFile {
            path: path.to_path_buf(),
            file,
            map,
            len,
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// A byte range of a mapped file: what a file-backed body is.
#[derive(Clone, Debug)]
pub struct FileRegion {
    pub file: Arc<MappedFile>,
    pub offset: u64,
    pub len: u64,
}

impl FileRegion {
    /// The whole file.
    pub fn whole(file: Arc<MappedFile>) -> FileRegion {
        let len = file.len();
        FileRegion {
            file,
            offset: 0,
            len,
        }
    }

    /// The region's bytes in the mapping.
    pub fn bytes(&self) -> &[u8] {
        let all = self.file.bytes();
        let start = (self.offset as usize).min(all.len());
        let end = (self.offset.saturating_add(self.len) as usize).min(all.len());
        &all[start..end]
    }
}
