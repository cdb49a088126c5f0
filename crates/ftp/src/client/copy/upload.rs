//! One local file onto the server, resumed or verified, moved to the UDP channel when this
//! end's TCP senders meet random loss.

use super::*;

impl Copier<'_> {
    /// A local file to the server, resumed or verified as the options say; the copy keeps
    /// the local file's modification time where the server can set it (`MFMT`).
    pub(super) fn upload_file(&mut self, local: &Path, rpath: &str, modified: i64) {
        let (obs, resume, verify) = (self.obs, self.opts.resume, self.opts.verify);
        let (udp_on_loss, streams) = (self.opts.udp_on_random_loss.as_ref(), self.opts.streams);
        self.record(local.display().to_string(), rpath.into(), |c, pump| {
            let mut file = File::open(local).with_context(|| format!("cannot read {}", local.display()))?;
            let len = file.metadata()?.len();
            // A fatpipe server's SIZE of a cut MODE E upload is what it holds without a gap.
            let mut have = if resume { c.size(rpath)?.unwrap_or(0) } else { 0 };
            if have > len {
                bail!("remote {rpath} has {have} bytes, more than {}'s {len}: not a partial copy of it", local.display());
            }
            if have > 0 && have < len && remote_is_prefix(c, rpath, &file, have)? == Some(false) {
                tracing::warn!("remote {rpath} is not the beginning of {}: copying it again in full", local.display());
                have = 0;
            }
            obs.file_started(rpath, Some(len), have, pump);
            if have == len && have > 0 {
                obs.verifying(rpath);
                match already_there(c, verify, rpath, local)? {
                    Some(verified) => return Ok(Done { bytes: 0, resumed_from: have, verified }),
                    None => {
                        tracing::info!("remote {rpath} is not known to match {}: copying it again", local.display());
                        have = 0;
                    }
                }
            }
            let first = have;
            let mut moved = 0;
            let alg = verify_alg(c, verify, rpath, local).ok().flatten();
            c.verifies(alg == Some(ChecksumAlg::Xxh3));
            loop {
                file.seek(SeekFrom::Start(have))?;
                let (hashed, _watch) = prepare_upload_check(c, &file, alg, rpath, (have, len), pump);
                let send = |c: &mut Connection, file: &File| match c.uses_blocks() {
                    true => c.store_blocks(rpath, have, file, pump),
                    false => c.store_file(rpath, have, file, pump),
                };
                moved += match send(c, &file) {
                    // No UDP packet got through: all of it over TCP streams.
                    Err(_) if goes_on_after_leaving_udp(c, streams, pump, obs) => {
                        file.seek(SeekFrom::Start(have))?;
                        send(c, &file)?
                    }
                    // Left on random loss: the rest from what the server holds without a gap,
                    // over UDP (from where this transfer began if it will not say; the
                    // checksum after it finds any gap).
                    Err(_) if goes_on_after_leaving_tcp(c, udp_on_loss, pump, obs) => {
                        let said = c.size(rpath).ok().flatten();
                        let held = said.unwrap_or(have).clamp(have, len);
                        file.seek(SeekFrom::Start(held))?;
                        held - have + c.store_file(rpath, held, &file, pump)?
                    }
                    n => n?,
                };
                obs.verifying(rpath);
                match check_upload(c, verify, (rpath, local), len, modified, hashed)? {
                    Ok(verified) => {
                        return Ok(Done { bytes: moved, resumed_from: first, verified });
                    }
                    // What the server held before may not be a prefix of this file: once more,
                    // in full.
                    Err(e) if have > 0 => {
                        tracing::warn!("{e:#}: copying {} again in full", local.display());
                        have = 0;
                    }
                    Err(e) => return Err(e),
                }
            }
        });
    }
}
