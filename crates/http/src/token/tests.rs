use super::*;
use crate::testing::TestIssuer;

const NOW: u64 = 1_800_000_000;

fn trusting(issuer: &TestIssuer, dir: &Path) -> Issuers {
    let mut i = Issuers::default();
    i.add_file(&issuer.iss, &issuer.jwks_file(dir).unwrap())
        .unwrap();
    i
}

#[test]
fn a_good_token_gives_its_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let iss = TestIssuer::new("https://issuer.example").unwrap();
    let issuers = trusting(&iss, dir.path());
    let t = iss.token(
        "storage.read:/data storage.create:/data/in openid",
        NOW,
        600,
    );
    let s = issuers.verify(&t, NOW).unwrap();
    assert_eq!(s.subject, "tester");
    let p = |s: &str| VPath::root().join(s);
    assert!(s.allows(Op::Read, &p("/data/x")));
    assert!(s.allows(Op::Read, &p("/data")));
    assert!(!s.allows(Op::Read, &p("/database")));
    assert!(!s.allows(Op::Read, &p("/")));
    assert!(s.allows(Op::Create, &p("/data/in/f")));
    assert!(!s.allows(Op::Create, &p("/data/f")));
    assert!(!s.allows(Op::Modify, &p("/data/in/f")));
    assert!(s.allows(Op::Stat, &p("/data/in/f")));
}

#[test]
fn refusals_name_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let iss = TestIssuer::new("https://issuer.example").unwrap();
    let issuers = trusting(&iss, dir.path());
    assert_eq!(
        issuers.verify(&iss.token("storage.read:/", NOW, -120), NOW),
        Err(TokenError::Expired)
    );
    // Within the leeway: still good.
    assert!(issuers
        .verify(&iss.token("storage.read:/", NOW, -30), NOW)
        .is_ok());
    let early = iss.sign(serde_json::json!({"iss": iss.iss, "aud": ANY_AUDIENCE,
        "nbf": NOW + 600, "exp": NOW + 1200, "scope": "storage.read:/"}));
    assert_eq!(issuers.verify(&early, NOW), Err(TokenError::NotYet));
    let elsewhere = iss.sign(
        serde_json::json!({"iss": iss.iss, "aud": "https://other.site",
        "exp": NOW + 600, "scope": "storage.read:/"}),
    );
    assert_eq!(issuers.verify(&elsewhere, NOW), Err(TokenError::Audience));
    let no_exp = iss.sign(serde_json::json!({"iss": iss.iss, "aud": ANY_AUDIENCE,
        "scope": "storage.read:/"}));
    assert!(matches!(
        issuers.verify(&no_exp, NOW),
        Err(TokenError::Malformed(_))
    ));
    // Another issuer with the same name but its own key: the signature fails.
    let impostor = TestIssuer::new("https://issuer.example").unwrap();
    assert_eq!(
        issuers.verify(&impostor.token("storage.read:/", NOW, 600), NOW),
        Err(TokenError::BadSignature)
    );
    let stranger = TestIssuer::new("https://stranger.example").unwrap();
    assert!(matches!(
        issuers.verify(&stranger.token("storage.read:/", NOW, 600), NOW),
        Err(TokenError::UnknownIssuer(_))
    ));
    assert!(matches!(
        issuers.verify("not.a.jwt", NOW),
        Err(TokenError::Malformed(_))
    ));
}

#[test]
fn a_configured_audience_is_accepted_too() {
    let dir = tempfile::tempdir().unwrap();
    let iss = TestIssuer::new("https://issuer.example").unwrap();
    let mut issuers = trusting(&iss, dir.path());
    issuers.add_audience("https://se.example:8443");
    let t = iss.sign(
        serde_json::json!({"iss": iss.iss, "aud": ["x", "https://se.example:8443"],
        "exp": NOW + 600, "scope": "storage.modify:/"}),
    );
    let s = issuers.verify(&t, NOW).unwrap();
    assert!(s.allows(Op::Create, &VPath::root().join("/a")));
}

#[test]
fn a_symmetric_token_is_refused_whatever_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let iss = TestIssuer::new("https://issuer.example").unwrap();
    let issuers = trusting(&iss, dir.path());
    let claims = serde_json::json!({"iss": iss.iss, "aud": ANY_AUDIENCE, "exp": NOW + 600,
        "scope": "storage.modify:/"});
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(b"guess"),
    )
    .unwrap();
    assert!(matches!(
        issuers.verify(&hs, NOW),
        Err(TokenError::NoKey(_))
    ));
}

#[test]
fn scopes_of_both_profiles() {
    let s = parse_scopes("storage.modify:/a read:/b write storage.stage:/c compute.read");
    let ops: Vec<_> = s.iter().map(|s| (s.op, s.path.to_string())).collect();
    assert_eq!(
        ops,
        vec![
            (Op::Modify, "/a".into()),
            (Op::Read, "/b".into()),
            (Op::Create, "/".into()),
            (Op::Modify, "/".into()),
        ]
    );
}
