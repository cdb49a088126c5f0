//! `setsockopt`/`getsockopt` for plain-old-data values: the one place this crate calls them.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Sets option `opt` at `level` to `v` (an `int`, a `u64` rate, …).
pub(crate) fn set<T: Copy>(fd: BorrowedFd<'_>, level: i32, opt: i32, v: T) -> io::Result<()> {
    // SAFETY: passes a valid pointer to a `T` and its size; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads option `opt` at `level` into a `T` (a kernel that writes less leaves the rest at its
/// default).
pub(crate) fn get<T: Copy + Default>(fd: BorrowedFd<'_>, level: i32, opt: i32) -> io::Result<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`, a plain-old-data value.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}
