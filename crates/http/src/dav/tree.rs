//! Whole subtrees: removing a collection with everything beneath it, copying one. Links are
//! removed as links; a copy reads through them only inside the tree (the sandbox resolves
//! them), and depth is bounded so that a link to an ancestor cannot make a copy endless.

use fatpipe_net::sandbox::{FsError, Sandbox, WriteAt};
use fatpipe_proto::listing::EntryKind;
use fatpipe_proto::VPath;

/// Collections nested deeper than this are refused.
const MAX_DEPTH: usize = 64;

fn too_deep() -> FsError {
    FsError::WrongKind("the tree is nested too deeply")
}

/// Removes `path`: a file or link, or a collection and all beneath it.
pub fn remove(sandbox: &Sandbox, path: &VPath) -> Result<(), FsError> {
    remove_at(sandbox, path, 0)
}

fn remove_at(sandbox: &Sandbox, path: &VPath, depth: usize) -> Result<(), FsError> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    if sandbox.entry_of(path)?.kind != EntryKind::Dir {
        return sandbox.remove_file(path);
    }
    for child in sandbox.list_dir(path)? {
        let c = path.join(&child.name);
        if child.kind == EntryKind::Dir {
            remove_at(sandbox, &c, depth + 1)?;
        } else {
            sandbox.remove_file(&c)?;
        }
    }
    sandbox.remove_dir(path)
}

/// Copies `from` to `to` (which must not exist): a file, or a collection with what is in it
/// when `deep` (else the collection alone, as `Depth: 0` asks).
pub fn copy(sandbox: &Sandbox, from: &VPath, to: &VPath, deep: bool) -> Result<(), FsError> {
    copy_at(sandbox, from, to, deep, 0)
}

fn copy_at(
    sandbox: &Sandbox,
    from: &VPath,
    to: &VPath,
    deep: bool,
    depth: usize,
) -> Result<(), FsError> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    if !sandbox.metadata(from)?.is_dir() {
        return copy_file(sandbox, from, to);
    }
    sandbox.make_dir(to)?;
    if !deep {
        return Ok(());
    }
    for child in sandbox.list_dir(from)? {
        let (f, t) = (from.join(&child.name), to.join(&child.name));
        match copy_at(sandbox, &f, &t, deep, depth + 1) {
            // A link leading nowhere (or out of the tree) is not copied.
            Err(FsError::NotFound | FsError::Outside) if child.kind == EntryKind::Link => {}
            r => r?,
        }
    }
    Ok(())
}

/// Copies one file's content into a new file (written under a temporary name, renamed when
/// complete).
fn copy_file(sandbox: &Sandbox, from: &VPath, to: &VPath) -> Result<(), FsError> {
    let (src, _) = sandbox.open_read(from)?;
    let mut up = sandbox.upload(to, WriteAt::Start)?;
    let copied = up
        .begin()
        .and_then(|()| std::io::copy(&mut &src, &mut up.file()).map(|_| ()));
    match copied {
        Ok(()) => Ok(up.commit()?),
        Err(e) => {
            up.discard();
            Err(FsError::Io(e))
        }
    }
}
