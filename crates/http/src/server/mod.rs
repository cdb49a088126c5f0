//! The HTTPS listener: TLS on every connection (the FTPS identity, reloaded when its files
//! change), HTTP/1.1 by hyper, each request authenticated by the [`Gate`] and answered by
//! [`crate::dav`] or [`crate::tpc`].

use crate::answer::status;
use crate::auth::{Gate, Refusal};
use crate::body::ResponseBody;
use crate::config::HttpsConfig;
use crate::gridmap::GridMap;
use crate::request::{Conn, State};
use crate::tuned::Tunable;
use anyhow::Context;
use fatpipe_ftp::server::auth::{Anonymous, Users};
use fatpipe_net::sandbox::Sandbox;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// A running HTTPS front-end.
pub struct HttpsServer {
    listener: TcpListener,
    state: Arc<State>,
}

impl HttpsServer {
    /// Binds the listener and prepares the served tree; errors say what is wrong.
    pub async fn bind(config: HttpsConfig) -> anyhow::Result<HttpsServer> {
        if config.users.is_empty()
            && config.anonymous == Anonymous::Off
            && config.issuers.is_empty()
            && config.client_certs.is_none()
        {
            anyhow::bail!(
                "no way to authenticate over HTTPS: give --user, --users, --anonymous, --token-issuer or --gridmap"
            );
        }
        let sandbox = Sandbox::new(&config.root)
            .with_context(|| format!("cannot serve {}", config.root.display()))?;
        let ca = config
            .ca
            .clone()
            .or_else(|| std::env::var_os("SSL_CERT_FILE").map(PathBuf::from));
        let client_tls =
            fatpipe_net::tls::client_config(ca.as_deref()).map_err(anyhow::Error::msg)?;
        let socket = if config.listen.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }?;
        socket.set_reuseaddr(true)?;
        // Accepted connections inherit the buffers set before listen (the window scale).
        if let Err(e) = fatpipe_net::tuner::before_connect(&config.tune, &socket) {
            tracing::warn!("cannot set the listener's buffers: {e}");
        }
        socket
            .bind(config.listen)
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let listener = socket.listen(1024)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let gate = Gate::new(
            config.users.clone(),
            config.anonymous,
            config.issuers.clone(),
            threads,
        )
        .context("cannot start the password-checking threads")?;
        let (gate, tls) = match &config.client_certs {
            Some(c) => (
                gate.with_gridmap(GridMap::load(&c.gridmap).map_err(anyhow::Error::msg)?),
                Arc::new(
                    config
                        .tls
                        .asking_clients(c.cas.current(Instant::now()))
                        .map_err(anyhow::Error::msg)?,
                ),
            ),
            None => (gate, config.tls.clone()),
        };
        Ok(HttpsServer {
            listener,
            state: Arc::new(State {
                config,
                sandbox,
                gate,
                client_tls,
                tls,
            }),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle to replace the accounts of the running server.
    pub fn accounts(&self) -> impl Fn(Users) + Send + Sync + 'static {
        let state = self.state.clone();
        move |u| state.gate.set_users(u)
    }

    /// Serves connections until the task is dropped.
    pub async fn run(self) -> anyhow::Result<()> {
        let slots = Arc::new(Semaphore::new(self.state.config.max_connections.max(1)));
        loop {
            let (sock, peer) = match self.listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and the like: pause rather than spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "too many HTTPS connections; closing a new one");
                continue;
            };
            let state = self.state.clone();
            tokio::spawn(async move {
                if let Err(e) = connection(state, sock, peer).await {
                    tracing::debug!(%peer, "HTTPS connection ended: {e}");
                }
                drop(slot);
            });
        }
    }
}

/// How long a client may take over the TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(15);

/// Serves one connection: TLS, then its requests.
async fn connection(
    state: Arc<State>,
    sock: tokio::net::TcpStream,
    peer: SocketAddr,
) -> anyhow::Result<()> {
    let _ = sock.set_nodelay(true);
    let tunable = Tunable::new(&state.config.tune, &sock)
        .map_err(|e| tracing::debug!("connection left untuned: {e}"))
        .ok();
    // One session cache for all connections: clients that reconnect resume.
    let tls = state.tls.config();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.control);
    let stream = tokio::time::timeout(HANDSHAKE, acceptor.accept(sock))
        .await
        .context("TLS handshake timed out")??;
    let certified = state.config.client_certs.as_ref().and_then(|c| {
        let chain = stream.get_ref().1.peer_certificates()?;
        let cas = c.cas.current(Instant::now());
        let certified = cas.check(chain, rustls::pki_types::UnixTime::now());
        match &certified {
            Ok(subject) => tracing::info!(%peer, "client certificate of {subject}"),
            Err(why) => tracing::info!(%peer, "client certificate refused: {why}"),
        }
        Some(certified)
    });
    let header_timeout = state.config.header_timeout;
    let conn = Arc::new(Conn {
        peer,
        tunable,
        certified,
    });
    let service = hyper::service::service_fn(move |req| {
        let (state, conn) = (state.clone(), conn.clone());
        async move { Ok::<_, Infallible>(request(state, conn, req).await) }
    });
    hyper::server::conn::http1::Builder::new()
        // Old clients match header names case-sensitively (davix's neon: a lowercase
        // `www-authenticate` is never answered with credentials).
        .title_case_headers(true)
        .max_buf_size(crate::body::READ_BUFFER)
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .await?;
    Ok(())
}

/// Authenticates and answers one request, and logs it.
async fn request(
    state: Arc<State>,
    conn: Arc<Conn>,
    req: Request<Incoming>,
) -> Response<ResponseBody> {
    let method = req.method().clone();
    let target = req.uri().path().to_string();
    // OPTIONS says what the server speaks; it needs no credentials (clients probe with it).
    if method == hyper::Method::OPTIONS {
        return crate::dav::options();
    }
    let auth = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let grant = match state
        .gate
        .grant(
            auth.as_deref(),
            conn.certified.as_ref(),
            Instant::now(),
            // Whole seconds: token times are.
            fatpipe_net::telemetry::unix_now() as u64,
        )
        .await
    {
        Ok(g) => g,
        Err(r) => {
            tracing::info!(peer = %conn.peer, %method, path = %target, "refused: {r}");
            return unauthorized(&r, state.gate.takes_tokens());
        }
    };
    let resp = crate::dav::answer(&state, &conn, &grant, req).await;
    tracing::info!(
        peer = %conn.peer, who = %grant.who(), %method, path = %target,
        status = resp.status().as_u16(), "HTTPS request"
    );
    resp
}

/// 401 with the schemes the server takes, and why the credentials given were refused.
fn unauthorized(r: &Refusal, tokens: bool) -> Response<ResponseBody> {
    let code = match r {
        Refusal::Busy => StatusCode::SERVICE_UNAVAILABLE,
        Refusal::Unmapped(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::UNAUTHORIZED,
    };
    let mut resp = status(code, &r.to_string());
    let h = resp.headers_mut();
    h.append(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"fatpipe\""),
    );
    if tokens {
        let bearer = match r {
            Refusal::BadToken(e) => format!(
                "Bearer realm=\"fatpipe\", error=\"invalid_token\", error_description=\"{}\"",
                e.to_string().replace(['"', '\\'], "'")
            ),
            _ => "Bearer realm=\"fatpipe\"".to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&bearer) {
            h.append(WWW_AUTHENTICATE, v);
        }
    }
    resp
}

/// The line `fatpipe serve` prints when the HTTPS front-end listens (scripts read the port).
pub fn announcement(addr: SocketAddr, root: &str) -> String {
    format!("fatpipe serve: HTTPS listening on {addr}, root {root}")
}
