//! An upload that leaves nothing behind unless it completes: over HTTP a body cut short is
//! never resumed in place (unlike an FTP upload), so a dropped request, a cancelled copy or a
//! failure discards what arrived and leaves any old file as it was.

use fatpipe_net::sandbox::{FsError, Sandbox, Upload, WriteAt};
use fatpipe_proto::VPath;
use std::fs::File;
use std::io;

/// An upload in progress, discarded when dropped uncommitted.
pub struct Pending(Option<Upload>);

impl Pending {
    /// Prepares an upload replacing `path` (nothing that exists is touched until commit).
    pub fn start(sandbox: &Sandbox, path: &VPath) -> Result<Pending, FsError> {
        let mut up = sandbox.upload(path, WriteAt::Start)?;
        up.begin()?;
        Ok(Pending(Some(up)))
    }

    /// A handle on the file the data goes into.
    pub fn file(&self) -> io::Result<File> {
        match &self.0 {
            Some(u) => u.file().try_clone(),
            None => Err(io::Error::other("the upload is over")),
        }
    }

    /// The upload is complete: the file takes its name.
    pub fn commit(mut self) -> io::Result<()> {
        match self.0.take() {
            Some(u) => u.commit(),
            None => Ok(()),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(u) = self.0.take() {
            u.discard();
        }
    }
}
