//! Client certificates over HTTPS: a grid user's certificate and its RFC 3820 proxy are
//! credentials when `fatpipe serve --gridmap` maps the user's subject to an account; curl and
//! gfal2 (davix, `X509_USER_PROXY`) present them, and a certificate from another CA, a
//! subject the grid-mapfile does not name, or a proxy without its issuer is refused with
//! the reason.

mod common;
use common::https::*;
use common::*;
use fatpipe_net::tls::testing::{grid_user, GridUser};
use std::process::Command;

/// Alice (mapped to the account `alice`) and Mallory (another CA's), with a server that takes
/// Alice's CA, and its grid-mapfile.
struct Grid {
    pki: Pki,
    alice: GridUser,
    mallory: GridUser,
    gridmap: std::path::PathBuf,
    server: FatpipeServer,
}

fn grid() -> Grid {
    let pki = Pki::new();
    let sub = |n: &str| {
        let d = pki.dir.path().join(n);
        std::fs::create_dir(&d).unwrap();
        d
    };
    let alice = grid_user(&sub("alice"), "grid CA", "alice").unwrap();
    let mallory = grid_user(&sub("mallory"), "grid CA", "mallory").unwrap();
    let gridmap = pki.dir.path().join("grid-mapfile");
    std::fs::write(&gridmap, format!("\"{}\" alice\n", alice.dn)).unwrap();
    let server = pki.server(&[
        "--gridmap",
        gridmap.to_str().unwrap(),
        "--x509-ca",
        alice.ca.to_str().unwrap(),
    ]);
    Grid {
        pki,
        alice,
        mallory,
        gridmap,
        server,
    }
}

/// curl presenting `cert` (its key in `key`, or in the same file).
fn curl_as(
    g: &Grid,
    cert: &std::path::Path,
    key: &std::path::Path,
    args: &[&str],
) -> (u16, String) {
    let mut all = vec![
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ];
    all.extend(args);
    let (code, body) = curl(&g.pki, &all);
    (code, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn curl_with_a_proxy_or_a_user_certificate_acts_as_the_mapped_account() {
    let g = grid();
    let url = format!("{}/up.bin", base(&g.server));
    let src = g.pki.dir.path().join("src.bin");
    random_file(&src, 3 << 20, 7);
    let proxy = &g.alice.proxy;
    let (code, body) = curl_as(&g, proxy, proxy, &["-T", src.to_str().unwrap(), &url]);
    assert_eq!(code, 201, "{body}");
    assert_same(&src, &g.server.path("up.bin"));
    let (code, body) = curl_as(&g, &g.alice.cert, &g.alice.key, &["-I", &url]);
    assert_eq!(code, 200, "{body}");
    let log = std::fs::read_to_string(g.pki.log_of(&g.server)).unwrap();
    assert!(
        log.contains(&format!("client certificate of {}", g.alice.dn)),
        "{log}"
    );
    assert!(log.contains("who=alice"), "{log}");
}

#[test]
fn foreign_unmapped_and_incomplete_certificates_are_refused_with_the_reason() {
    let g = grid();
    let url = format!("{}/", base(&g.server));
    // Another CA's user: 401, and why.
    let m = &g.mallory.proxy;
    let (code, body) = curl_as(&g, m, m, &["-X", "PROPFIND", "-H", "Depth: 0", &url]);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("client certificate refused"), "{body}");
    // Alice's proxy without her certificate after it.
    let text = std::fs::read_to_string(&g.alice.proxy).unwrap();
    let cut = text.rfind("-----BEGIN CERTIFICATE").unwrap();
    let alone = g.pki.dir.path().join("proxy-alone.pem");
    std::fs::write(&alone, &text[..cut]).unwrap();
    let (code, body) = curl_as(&g, &alone, &alone, &["-I", &url]);
    assert_eq!(code, 401, "{body}");
    // The grid-mapfile no longer names Alice (read again on change): 403, and why.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&g.gridmap, "\"/O=fatpipe/UID=somebody\" alice\n").unwrap();
    let a = &g.alice.proxy;
    let (code, body) = curl_as(&g, a, a, &["-X", "PROPFIND", "-H", "Depth: 0", &url]);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("maps to no account"), "{body}");
    // Basic in the request still works beside the certificate.
    let (code, body) = curl_as(&g, a, a, &["-u", "alice:pw", "-I", &url]);
    assert_eq!(code, 200, "{body}");
}

#[test]
fn gfal2_lists_and_copies_with_a_proxy() {
    let g = grid();
    let src = g.pki.dir.path().join("src.bin");
    random_file(&src, 1 << 20, 9);
    let url = format!("davs://localhost:{}/", g.server.https.unwrap().port());
    let script = r#"
import gfal2, sys
src, dst, dir = sys.argv[1:4]
ctx = gfal2.creat_context()
params = ctx.transfer_parameters()
params.set_checksum(gfal2.checksum_mode.both, "ADLER32", "")
params.timeout = 60
ctx.filecopy(params, src, dst)
print(ctx.listdir(dir))
"#;
    let out = run(Command::new("/usr/bin/python3")
        .env("X509_CERT_DIR", g.pki.cadir())
        .env("X509_USER_PROXY", &g.alice.proxy)
        .args(["-c", script])
        .arg(format!("file://{}", src.display()))
        .arg(format!("{url}g.bin"))
        .arg(&url));
    assert!(out.status.success(), "{out:?}");
    assert_same(&src, &g.server.path("g.bin"));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("g.bin"),
        "{out:?}"
    );
    let log = std::fs::read_to_string(g.pki.log_of(&g.server)).unwrap();
    assert!(log.contains("who=alice"), "{log}");
}

#[test]
fn fatpipe_cp_and_ls_show_a_grid_proxy_to_servers_that_ask() {
    let g = grid();
    let src = g.pki.dir.path().join("src.bin");
    random_file(&src, 2 << 20, 11);
    let port = g.server.https.unwrap().port();
    let url = format!("davs://localhost:{port}/c.bin");
    let ca = g.pki.ca.to_str().unwrap();
    let proxy = g.alice.proxy.to_str().unwrap();
    // Up with --cert, no other credentials.
    let mut up = fatpipe_cmd(&["cp", "--quiet", "--ca", ca, "--cert", proxy]);
    run_ok(up.arg(&src).arg(&url));
    assert_same(&src, &g.server.path("c.bin"));
    // Down with the proxy found where the grid's tools look ($X509_USER_PROXY).
    let got = g.pki.dir.path().join("got.bin");
    let mut down = fatpipe_cmd(&["cp", "--quiet", "--ca", ca]);
    run_ok(
        down.env("X509_USER_PROXY", &g.alice.proxy)
            .arg(&url)
            .arg(&got),
    );
    assert_same(&src, &got);
    let mut ls = fatpipe_cmd(&["ls", "--ca", ca, "--cert", proxy]);
    let out = run_ok(ls.arg(format!("davs://localhost:{port}/")));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("c.bin"),
        "{out:?}"
    );
    // Without a certificate nor any other credentials: refused, and said so.
    let mut bare = fatpipe_cmd(&["ls", "--ca", ca]);
    let out = run(bare
        .env_remove("X509_USER_PROXY")
        .arg(format!("davs://localhost:{port}/")));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("401"),
        "{out:?}"
    );
    let log = std::fs::read_to_string(g.pki.log_of(&g.server)).unwrap();
    assert!(log.contains("who=alice method=PUT"), "{log}");
}
