//! `Want-Digest` / `Digest` (RFC 3230, as WLCG storage uses it): which checksum a client wants
//! and how it is written back. adler32 is what gfal2 and FTS3 compare.

use base64::Engine;
use fatpipe_proto::gridftp::ChecksumAlg;

/// The first algorithm of a `Want-Digest` header that the server computes (the client's
/// order, `q=0` skipped), with the name to answer under.
pub fn chosen(want: &str) -> Option<(ChecksumAlg, &'static str)> {
    let mut best: Option<(f32, ChecksumAlg, &'static str)> = None;
    for item in want.split(',') {
        let mut fields = item.split(';');
        let name = fields.next().unwrap_or("").trim();
        let q = fields
            .filter_map(|f| f.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q <= 0.0 {
            continue;
        }
        let alg = match name.to_ascii_lowercase().as_str() {
            "adler32" => (ChecksumAlg::Adler32, "adler32"),
            "md5" => (ChecksumAlg::Md5, "md5"),
            "sha-256" => (ChecksumAlg::Sha256, "sha-256"),
            _ => continue,
        };
        if best.as_ref().is_none_or(|(bq, _, _)| q > *bq) {
            best = Some((q, alg.0, alg.1));
        }
    }
    best.map(|(_, a, n)| (a, n))
}

/// The `Digest` header value for `hex`, the lowercase hex checksum under `name`: adler32 in
/// hex, md5 and sha-256 in base64 (RFC 3230 and RFC 5843).
pub fn header(name: &str, hex: &str) -> String {
    match name {
        "adler32" => format!("adler32={hex}"),
        _ => {
            let raw = hex::decode(hex).unwrap_or_default();
            let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
            format!("{name}={b64}")
        }
    }
}

/// The lowercase hex value of `alg` in a `Digest` header, if it carries one.
pub fn value_in(digest: &str, alg: ChecksumAlg) -> Option<String> {
    let want = match alg {
        ChecksumAlg::Adler32 => "adler32",
        ChecksumAlg::Md5 => "md5",
        ChecksumAlg::Sha256 => "sha-256",
        _ => return None,
    };
    digest.split(',').find_map(|item| {
        let (name, value) = item.trim().split_once('=')?;
        if !name.trim().eq_ignore_ascii_case(want) {
            return None;
        }
        let value = value.trim();
        if alg == ChecksumAlg::Adler32 {
            return Some(format!("{:0>8}", value.to_ascii_lowercase()));
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(value)
            .ok()?;
        Some(hex::encode(raw))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_s_preference_wins_among_what_is_known() {
        assert_eq!(chosen("adler32").unwrap().1, "adler32");
        assert_eq!(chosen("crc32c, MD5").unwrap().1, "md5");
        assert_eq!(chosen("md5;q=0.3, sha-256;q=0.9").unwrap().1, "sha-256");
        assert_eq!(chosen("adler32;q=0, md5").unwrap().1, "md5");
        assert!(chosen("crc32c, unixcksum").is_none());
    }

    #[test]
    fn digests_are_written_as_rfc_3230_says_and_read_back() {
        assert_eq!(header("adler32", "0a1b2c3d"), "adler32=0a1b2c3d");
        let md5 = "d41d8cd98f00b204e9800998ecf8427e";
        assert_eq!(header("md5", md5), "md5=1B2M2Y8AsgTpgAmY7PhCfg==");
        assert_eq!(
            value_in("MD5=1B2M2Y8AsgTpgAmY7PhCfg==", ChecksumAlg::Md5).unwrap(),
            md5
        );
        assert_eq!(
            value_in("adler32=1B2C3D", ChecksumAlg::Adler32).unwrap(),
            "001b2c3d"
        );
        assert!(value_in("md5=x", ChecksumAlg::Adler32).is_none());
    }
}
