//! `COPY` and `MOVE`. A `Destination` on this server is a WebDAV copy or move inside the tree
//! (`Overwrite`, `Depth` as RFC 4918 says); a `COPY` with a `Source` header, or whose
//! `Destination` is another server, is a third-party copy ([`crate::tpc`]).

use super::write::kind;
use super::{check, empty, fs, fs_failed, header, tree, Answer};
use crate::answer::refuse;
use crate::auth::{Grant, Op};
use crate::request::State;
use fatpipe_proto::VPath;
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Request, StatusCode};
use std::sync::Arc;

/// Where a `Destination` header points.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// A path on this server.
    Local(VPath),
    /// Another server's URL.
    Remote(url::Url),
}

/// The target of `Destination`, judged against the request's `Host`: an absolute path, or a
/// URL whose authority is this server's, is local.
pub fn target(destination: &str, host: Option<&str>) -> Result<Target, String> {
    if destination.starts_with('/') {
        return crate::paths::vpath(destination)
            .map(Target::Local)
            .map_err(|e| e.to_string());
    }
    let url = url::Url::parse(destination).map_err(|e| format!("bad Destination: {e}"))?;
    let authority = |u: &url::Url| {
        (
            u.host_str().map(str::to_ascii_lowercase),
            u.port_or_known_default(),
        )
    };
    let here = host.and_then(|h| url::Url::parse(&format!("https://{}/", h.trim())).ok());
    let same = here.is_some_and(|h| authority(&h) == authority(&url));
    if same {
        return crate::paths::vpath(url.path())
            .map(Target::Local)
            .map_err(|e| e.to_string());
    }
    Ok(Target::Remote(url))
}

/// `COPY` (`is_move` false) or `MOVE` of `path`.
pub async fn copy_or_move(
    state: &Arc<State>,
    grant: &Grant,
    path: &VPath,
    req: Request<Incoming>,
    is_move: bool,
) -> Answer {
    let h = req.headers();
    if !is_move {
        if let Some(source) = header(h, "source") {
            let source = source.to_string();
            return crate::tpc::pull(state, grant, path, req.headers(), &source).await;
        }
    }
    let dest = header(h, "destination")
        .ok_or_else(|| refuse(StatusCode::BAD_REQUEST, "no Destination header"))?;
    let to = match target(dest, header(h, "host")) {
        Ok(Target::Local(v)) => v,
        Ok(Target::Remote(url)) if !is_move => {
            return crate::tpc::push(state, grant, path, req.headers(), url).await;
        }
        Ok(Target::Remote(_)) => {
            return Err(refuse(
                StatusCode::BAD_GATEWAY,
                "MOVE to another server is not supported",
            ))
        }
        Err(e) => return Err(refuse(StatusCode::BAD_REQUEST, &e)),
    };
    local(state, grant, path, &to, h, is_move).await
}

/// A copy or move inside the tree.
async fn local(
    state: &Arc<State>,
    grant: &Grant,
    from: &VPath,
    to: &VPath,
    h: &HeaderMap,
    is_move: bool,
) -> Answer {
    let overwrite = header(h, "overwrite").is_none_or(|v| !v.trim().eq_ignore_ascii_case("F"));
    let deep = match header(h, "depth").map(str::trim) {
        None => true,
        Some(d) if d.eq_ignore_ascii_case("infinity") => true,
        Some("0") if !is_move => false,
        Some(d) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!("Depth {d} not allowed here"),
            ))
        }
    };
    if from.is_root() || to.is_root() {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "the root cannot be copied or moved",
        ));
    }
    let mut up = to.components();
    if from.components().all(|c| up.next() == Some(c)) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "the destination is the source or inside it",
        ));
    }
    check(grant, if is_move { Op::Modify } else { Op::Read }, from)?;
    if kind(state, from)
        .await
        .map_err(|e| fs_failed(&e, from))?
        .is_none()
    {
        return Err(refuse(StatusCode::NOT_FOUND, &format!("{from}: not found")));
    }
    match kind(state, &to.parent()).await {
        Ok(Some(true)) => {}
        Ok(_) => {
            return Err(refuse(
                StatusCode::CONFLICT,
                "the destination's parent collection does not exist",
            ))
        }
        Err(e) => return Err(fs_failed(&e, to)),
    }
    let existed = kind(state, to)
        .await
        .map_err(|e| fs_failed(&e, to))?
        .is_some();
    if existed && !overwrite {
        return Err(refuse(
            StatusCode::PRECONDITION_FAILED,
            "the destination exists and Overwrite is F",
        ));
    }
    check(grant, if existed { Op::Modify } else { Op::Create }, to)?;
    let sandbox = state.sandbox.clone();
    let (f, t) = (from.clone(), to.clone());
    fs(move || {
        if existed {
            tree::remove(&sandbox, &t)?;
        }
        if is_move {
            sandbox.rename(&f, &t)
        } else {
            tree::copy(&sandbox, &f, &t, deep)
        }
    })
    .await
    .map_err(|e| fs_failed(&e, to))?;
    Ok(empty(if existed {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::CREATED
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_on_this_server_are_local() {
        let v = |s: &str| Target::Local(VPath::root().join(s));
        assert_eq!(target("/a/b", Some("x:1")), Ok(v("/a/b")));
        assert_eq!(
            target("https://X:8443/a%20b", Some("x:8443")),
            Ok(v("/a b"))
        );
        assert_eq!(target("https://x/a", Some("x:443")), Ok(v("/a")));
        assert_eq!(target("https://x:443/a", Some("x")), Ok(v("/a")));
        assert_eq!(
            target("https://[::1]:8443/a", Some("[::1]:8443")),
            Ok(v("/a"))
        );
        assert!(matches!(
            target("https://x:8444/a", Some("x:8443")),
            Ok(Target::Remote(_))
        ));
        assert!(matches!(
            target("https://y:8443/a", Some("x:8443")),
            Ok(Target::Remote(_))
        ));
        assert!(target("no url", Some("x")).is_err());
    }
}
