//! What a request does to a path: the unit in which accounts, tokens' scopes and
//! certificates are granted rights.

/// What a request does to a path, as permissions are granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read a file's content or list a collection.
    Read,
    /// Read metadata only (PROPFIND, HEAD without content).
    Stat,
    /// Make something new (PUT of a new file, MKCOL, the target of a copy).
    Create,
    /// Change or remove what exists (overwrite, DELETE, MOVE).
    Modify,
}
