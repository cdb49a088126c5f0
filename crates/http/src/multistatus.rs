//! A WebDAV `multistatus` answer to PROPFIND (RFC 4918 §14.16) read into resources: path, kind,
//! size and modification time, what `fatpipe ls` shows. Servers name the DAV: namespace with
//! any prefix (`D:`, `d:`, `lp1:`, none), so elements are matched by their local names; a
//! property counts only from a `propstat` whose status is 200 (or says none).

use quick_xml::events::Event;
use quick_xml::Reader;
use std::time::SystemTime;

/// Most resources one answer may hold (a hostile or broken server's answer stops there).
pub const MAX_RESOURCES: usize = 1_000_000;

/// One resource of a multistatus answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// Its path on the server, percent-decoded (`href`; a full URL's path part).
    pub path: String,
    /// A collection (a directory).
    pub dir: bool,
    /// `getcontentlength`, where given.
    pub size: Option<u64>,
    /// `getlastmodified` (an HTTP date), where given and readable.
    pub modified: Option<SystemTime>,
}

/// The properties one `propstat` gave, kept once its status says 200.
#[derive(Default)]
struct Props {
    dir: bool,
    size: Option<u64>,
    modified: Option<SystemTime>,
    ok: bool,
}

/// Reads `xml`; an error says what is wrong with it.
pub fn parse(xml: &[u8]) -> Result<Vec<Resource>, String> {
    let mut reader = Reader::from_reader(xml);
    reader.config_mut().trim_text(true);
    let mut out = Vec::new();
    let mut res: Option<Resource> = None;
    let mut props: Option<Props> = None;
    // The local name of the innermost open element, for its text.
    let mut open: Vec<Vec<u8>> = Vec::new();
    let mut buf = Vec::new();
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("not a multistatus answer: {e}"))?;
        match event {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_vec();
                match name.as_slice() {
                    b"response" => res = Some(Resource::default()),
                    b"propstat" => {
                        props = Some(Props {
                            ok: true,
                            ..Props::default()
                        })
                    }
                    b"collection" => set_dir(&mut props),
                    _ => {}
                }
                open.push(name);
            }
            Event::Empty(e) if e.local_name().as_ref() == b"collection" => set_dir(&mut props),
            Event::Text(t) => {
                let text = t.unescape().map_err(|e| format!("bad text: {e}"))?;
                let text = text.trim();
                match (open.last().map(Vec::as_slice), res.as_mut(), props.as_mut()) {
                    (Some(b"href"), Some(r), _) => r.path = href_path(text),
                    (Some(b"getcontentlength"), _, Some(p)) => p.size = text.parse().ok(),
                    (Some(b"getlastmodified"), _, Some(p)) => {
                        p.modified = httpdate::parse_http_date(text).ok()
                    }
                    (Some(b"status"), _, Some(p)) => p.ok = status_ok(text),
                    _ => {}
                }
            }
            Event::End(e) => {
                open.pop();
                match e.local_name().as_ref() {
                    b"propstat" => {
                        if let (Some(p), Some(r)) = (props.take(), res.as_mut()) {
                            if p.ok {
                                r.dir |= p.dir;
                                r.size = r.size.or(p.size);
                                r.modified = r.modified.or(p.modified);
                            }
                        }
                    }
                    b"response" => {
                        if let Some(r) = res.take().filter(|r| !r.path.is_empty()) {
                            if out.len() >= MAX_RESOURCES {
                                return Err(format!("more than {MAX_RESOURCES} resources"));
                            }
                            out.push(r);
                        }
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(out)
}

fn set_dir(props: &mut Option<Props>) {
    if let Some(p) = props.as_mut() {
        p.dir = true;
    }
}

/// Whether a `status` line (`HTTP/1.1 200 OK`) says 200.
fn status_ok(line: &str) -> bool {
    line.split_whitespace().nth(1) == Some("200")
}

/// The decoded path of an `href`: a path, or a full URL's path.
fn href_path(href: &str) -> String {
    let path = match href.find("://") {
        Some(i) => href[i + 3..].find('/').map_or("/", |j| &href[i + 3 + j..]),
        None => href,
    };
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_what_servers_write_whatever_their_prefix() {
        // As fatpipe answers (D:), and as Apache mod_dav does (lp1: beside D:, a 404 propstat).
        let ours = br#"<?xml version="1.0" encoding="utf-8"?>
<D:multistatus xmlns:D="DAV:">
<D:response><D:href>/d/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype>
<D:getlastmodified>Sat, 28 Nov 2026 06:00:00 GMT</D:getlastmodified></D:prop>
<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
<D:response><D:href>/d/a%20b%26c</D:href><D:propstat><D:prop><D:resourcetype></D:resourcetype>
<D:getcontentlength>5</D:getcontentlength></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
</D:multistatus>"#;
        let r = parse(ours).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r[0].dir && r[0].path == "/d/" && r[0].modified.is_some());
        assert_eq!(
            (r[1].path.as_str(), r[1].dir, r[1].size),
            ("/d/a b&c", false, Some(5))
        );
        let apache = br#"<?xml version="1.0" encoding="utf-8"?>
<multistatus xmlns="DAV:" xmlns:lp1="DAV:"><response><href>https://h:443/x/f</href>
<propstat><prop><lp1:getcontentlength>42</lp1:getcontentlength><lp1:resourcetype/></prop>
<status>HTTP/1.1 200 OK</status></propstat>
<propstat><prop><getcontentlength>7</getcontentlength><resourcetype><collection/></resourcetype></prop>
<status>HTTP/1.1 404 Not Found</status></propstat></response></multistatus>"#;
        let r = parse(apache).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].path.as_str(), r[0].dir, r[0].size),
            ("/x/f", false, Some(42))
        );
    }

    #[test]
    fn what_is_not_xml_is_an_error_not_a_panic() {
        assert!(parse(b"<multistatus><response><href>/a</href></respon").is_err());
        assert_eq!(parse(b"").unwrap(), Vec::new());
    }

    proptest! {
        #[test]
        fn any_bytes_are_answered_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = parse(&b);
        }

        #[test]
        fn any_file_name_and_size_come_back(name in "[a-zA-Z0-9 _.&<>%-]{1,40}", size in any::<u64>()) {
            let enc = percent_encoding::utf8_percent_encode(&name, percent_encoding::NON_ALPHANUMERIC);
            let xml = format!(
                "<D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>/d/{enc}</D:href><D:propstat>\
                 <D:prop><D:getcontentlength>{size}</D:getcontentlength></D:prop>\
                 <D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>"
            );
            let r = parse(xml.as_bytes()).unwrap();
            prop_assert_eq!(r.len(), 1);
            prop_assert_eq!(&r[0].path, &format!("/d/{name}"));
            prop_assert_eq!(r[0].size, Some(size));
        }
    }
}
