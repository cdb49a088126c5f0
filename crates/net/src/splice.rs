//! Socket bytes into a file without passing through this process: `splice` from the TCP socket
//! into a pipe (the kernel hands over the packets' pages) and from the pipe into the file at an
//! offset (one copy, into the page cache), where `read` and `pwrite` copy twice.

use crate::{Pump, PumpError};
use nix::errno::Errno;
use nix::fcntl::{fcntl, splice, FcntlArg, OFlag, SpliceFFlags};
use std::fs::File;
use std::io::{self, ErrorKind};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};

/// The pipe's size asked for: what one pair of calls moves at most.
const PIPE: i32 = 1 << 20;

/// A pipe that carries one connection's bytes into a file.
#[derive(Debug)]
pub struct SpliceIn {
    read: OwnedFd,
    write: OwnedFd,
}

impl SpliceIn {
    /// A new pipe (1 MiB where the system allows, else its default).
    pub fn new() -> io::Result<SpliceIn> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let _ = fcntl(write.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(PIPE));
        Ok(SpliceIn { read, write })
    }

    /// Moves what `sock` has (waiting for at least one byte, at most `max`) into `file` at
    /// `at`, or at its position (`None`, which then advances); `file` is one that
    /// [`splices_into`]. How many bytes, 0 when the peer closed the connection.
    pub fn move_some(
        &mut self,
        pump: &Pump,
        sock: &TcpStream,
        file: &File,
        at: Option<u64>,
        max: usize,
    ) -> Result<usize, PumpError> {
        let n = self.fill(pump, sock, max)?;
        self.drain(pump, file, at, n)?;
        Ok(n)
    }

    /// Moves what `sock` has (waiting for at least one byte, at most `max`) into the pipe: how
    /// many bytes, 0 when the peer closed the connection. [`SpliceIn::drain`] then writes them.
    pub fn fill(&mut self, pump: &Pump, sock: &TcpStream, max: usize) -> Result<usize, PumpError> {
        loop {
            match splice(
                sock,
                None,
                &self.write,
                None,
                max,
                SpliceFFlags::SPLICE_F_MOVE,
            ) {
                Ok(n) => return Ok(n),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(pump.classify(PumpError::Read(e.into()))),
            }
        }
    }

    /// Writes the `n` bytes [`SpliceIn::fill`] put in the pipe into `file` at `at`, or at its
    /// position (`None`, which then advances).
    pub fn drain(
        &mut self,
        pump: &Pump,
        file: &File,
        at: Option<u64>,
        n: usize,
    ) -> Result<(), PumpError> {
        let mut off = at.map(i64::try_from).transpose().map_err(|_| {
            PumpError::Write(io::Error::new(ErrorKind::InvalidInput, "offset past 2^63"))
        })?;
        let mut left = n;
        while left > 0 {
            match splice(
                &self.read,
                None,
                file,
                off.as_mut(),
                left,
                SpliceFFlags::SPLICE_F_MOVE,
            ) {
                Ok(0) => return Err(PumpError::Write(io::Error::from(ErrorKind::WriteZero))),
                Ok(m) => left -= m,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(pump.classify(PumpError::Write(e.into()))),
            }
        }
        Ok(())
    }
}

/// MODE S into `file` from its position: what `sock` carries until the peer closes it, `most`
/// bytes at most (more is an error, and nothing past them is written); the bytes moved.
pub fn receive_file(
    pump: &Pump,
    sock: &TcpStream,
    file: &File,
    most: Option<u64>,
) -> Result<u64, PumpError> {
    let mut pipe = SpliceIn::new().map_err(PumpError::Read)?;
    let mut total = 0u64;
    loop {
        pump.check()?;
        let max = most.map_or(PIPE as u64, |m| (m - total).min(PIPE as u64)) as usize;
        if max == 0 {
            // At the size announced: the connection must end here.
            return match sock.peek(&mut [0u8; 1]) {
                Ok(0) => {
                    pump.check()?;
                    Ok(total)
                }
                Ok(_) => Err(PumpError::Write(crate::at_most::past_size())),
                Err(e) => Err(pump.classify(PumpError::Read(e))),
            };
        }
        let n = pipe.move_some(pump, sock, file, None, max)?;
        if n == 0 {
            break;
        }
        pump.note_read(n);
        pump.add(n);
        total += n as u64;
    }
    // A cancel that shut the socket down reads as a clean end of stream.
    pump.check()?;
    Ok(total)
}

/// Whether bytes can be spliced into `file` at an offset: a regular file not opened for
/// appending, or /dev/null (a pipe or another device may refuse once bytes are in the pipe,
/// where they could not be written another way).
pub fn splices_into(file: &File) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(m) = file.metadata() else {
        return false;
    };
    let append = fcntl(file.as_raw_fd(), FcntlArg::F_GETFL).map_or(true, |f| {
        OFlag::from_bits_truncate(f).contains(OFlag::O_APPEND)
    });
    let null = m.file_type().is_char_device() && m.rdev() == nix::sys::stat::makedev(1, 3);
    (m.is_file() || null) && !append
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::net::TcpListener;

    #[test]
    fn a_connection_s_bytes_land_in_the_file_at_their_offset() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let writer = {
            let data = data.clone();
            std::thread::spawn(move || {
                tx.write_all(&data).unwrap();
            })
        };
        let mut file = tempfile::tempfile().unwrap();
        assert!(splices_into(&file));
        let pump = Pump::default();
        let mut pipe = SpliceIn::new().unwrap();
        let mut at = 5u64;
        let end = 5 + data.len() as u64;
        while at < end {
            let n = pipe
                .move_some(&pump, &rx, &file, Some(at), (end - at) as usize)
                .unwrap();
            assert!(n > 0);
            at += n as u64;
        }
        writer.join().unwrap();
        // The peer closed: nothing more moves.
        assert_eq!(pipe.move_some(&pump, &rx, &file, Some(at), 10).unwrap(), 0);
        let mut back = Vec::new();
        file.seek(SeekFrom::Start(5)).unwrap();
        file.read_to_end(&mut back).unwrap();
        assert!(back == data);
    }

    /// A connection that carries `data` and closes, and the receiving end.
    fn carrying(data: Vec<u8>) -> (TcpStream, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        let t = std::thread::spawn(move || {
            tx.write_all(&data).unwrap();
        });
        (rx, t)
    }

    #[test]
    fn mode_s_lands_at_the_file_s_position_and_stops_at_the_announced_size() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let pump = Pump::default();
        // All of it, after 3 bytes already there.
        let (rx, t) = carrying(data.clone());
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"abc").unwrap();
        let n = receive_file(&pump, &rx, &file, Some(data.len() as u64)).unwrap();
        t.join().unwrap();
        assert_eq!(n, data.len() as u64);
        let mut back = Vec::new();
        file.seek(SeekFrom::Start(0)).unwrap();
        file.read_to_end(&mut back).unwrap();
        assert_eq!(&back[..3], b"abc");
        assert!(back[3..] == data[..]);
        // Five bytes more than announced: an error, and nothing past the size is written.
        let mut more = data.clone();
        more.extend_from_slice(b"extra");
        let (rx, t) = carrying(more);
        let file = tempfile::tempfile().unwrap();
        let e = receive_file(&pump, &rx, &file, Some(data.len() as u64)).unwrap_err();
        t.join().unwrap();
        assert!(e.to_string().contains("more bytes than"), "{e}");
        assert_eq!(file.metadata().unwrap().len(), data.len() as u64);
    }

    #[test]
    fn only_regular_files_and_dev_null_take_splices() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        assert!(splices_into(&File::create(&path).unwrap()));
        let append = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        assert!(!splices_into(&append));
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        assert!(splices_into(&null));
        let (_r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        assert!(!splices_into(&File::from(w)));
    }
}
