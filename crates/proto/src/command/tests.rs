//! The command codec: parsing, formatting and their round trip.

use super::*;
use proptest::prelude::*;

fn code(line: &str) -> u16 {
    Command::parse(line.as_bytes())
        .map(|_| 0)
        .unwrap_or_else(|e| e.code)
}

#[test]
fn verbs_are_case_insensitive_and_args_keep_spaces() {
    assert_eq!(
        Command::parse(b"retr my file.txt").unwrap(),
        Command::Retr("my file.txt".into())
    );
    assert_eq!(
        Command::parse(b"type i").unwrap(),
        Command::Type(TransferType::Image)
    );
    assert_eq!(
        Command::parse(b"TYPE L 8").unwrap(),
        Command::Type(TransferType::Image)
    );
    assert_eq!(
        Command::parse(b"TYPE A N").unwrap(),
        Command::Type(TransferType::Ascii)
    );
}

#[test]
fn line_breaks_are_neither_sent_nor_accepted() {
    assert_eq!(code("SIZE x\nDELE v1"), 501);
    assert_eq!(code("RETR a\rb"), 501);
    assert!(Command::Stor("x\r\nDELE victim".into()).to_wire().is_err());
    assert!(Command::Retr("z\nDELE v".into()).to_wire().is_err());
    assert!(Command::Dele("a\0b".into()).to_wire().is_err());
    assert_eq!(
        Command::Retr("a b".into()).to_wire().unwrap(),
        b"RETR a b\r\n"
    );
}

#[test]
fn error_codes_follow_rfc959() {
    assert_eq!(code("FOO"), 500);
    assert_eq!(code(""), 500);
    assert_eq!(code("RETR"), 501);
    assert_eq!(code("REST abc"), 501);
    assert_eq!(code("PORT 1,2,3"), 501);
    assert_eq!(code("TYPE X"), 501);
    assert_eq!(code("TYPE E"), 504);
    assert_eq!(code("MODE B"), 504);
    assert_eq!(code("REST 5-1"), 501);
    assert_eq!(code("CKSM CRC9 0 -1 f"), 501);
    assert_eq!(code("ERET X 1 2 f"), 504);
    assert_eq!(code("ERET P x 2 f"), 501);
    assert_eq!(code("ESTO B 1 f"), 504);
    assert_eq!(code("ESTO A 1"), 501);
    assert_eq!(code("MODE Q"), 501);
    assert_eq!(code("STRU R"), 504);
    assert_eq!(code("QUIT now"), 501);
    assert_eq!(code("EPSV 3"), 522);
    assert_eq!(code("EPRT |3|x|1|"), 522);
    assert_eq!(code("DELE a\0b"), 501);
    // Multi-byte characters where a delimiter or protocol digit is expected.
    assert_eq!(code("EPRT é1|x|"), 501);
    assert_eq!(code("EPRT |é|::1|5|"), 522);
    assert_eq!(code("PROT X"), 504);
    assert_eq!(code("PBSZ x"), 501);
    assert_eq!(code("AUTH"), 501);
}

#[test]
fn list_flags_are_not_paths() {
    assert_eq!(Command::parse(b"LIST -la").unwrap(), Command::List(None));
    assert_eq!(
        Command::parse(b"LIST -a -l sub dir").unwrap(),
        Command::List(Some("sub dir".into()))
    );
    assert_eq!(
        Command::parse(b"NLST x").unwrap(),
        Command::Nlst(Some("x".into()))
    );
}

fn path() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9/._ ]{1,20}".prop_filter("no leading dash or blank", |s| {
        !s.starts_with('-') && !s.starts_with(' ') && !s.trim().is_empty()
    })
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        path().prop_map(Command::User),
        path().prop_map(Command::Retr),
        path().prop_map(Command::Stor),
        path().prop_map(Command::Cwd),
        path().prop_map(|p| Command::List(Some(p))),
        path().prop_map(|p| Command::Mlsd(Some(p))),
        any::<u64>().prop_map(Command::Rest),
        any::<u64>().prop_map(Command::Allo),
        (1..u64::MAX).prop_map(Command::Sbuf),
        path().prop_map(Command::Site),
        any::<SocketAddrV4>().prop_map(Command::Port),
        any::<SocketAddrV4>().prop_map(|a| Command::Eprt(SocketAddr::V4(a))),
        Just(Command::Epsv(Some(EpsvArg::All))),
        Just(Command::Type(TransferType::Ascii)),
        Just(Command::Pasv),
        Just(Command::Abor),
        Just(Command::ModeExtended),
        Just(Command::Ccc),
        Just(Command::Dtok(None)),
        "[0-9a-f]{32}".prop_map(|t| Command::Dtok(Some(t))),
        "[A-Z-]{1,8}".prop_map(Command::Auth),
        any::<u64>().prop_map(Command::Pbsz),
        prop_oneof![
            Just(ProtLevel::Clear),
            Just(ProtLevel::Safe),
            Just(ProtLevel::Confidential),
            Just(ProtLevel::Private)
        ]
        .prop_map(Command::Prot),
        (any::<u64>(), any::<u64>(), path()).prop_map(|(offset, length, path)| Command::Eret {
            offset,
            length,
            path
        }),
        (any::<u64>(), path()).prop_map(|(offset, path)| Command::Esto { offset, path }),
        (0i64..253_402_300_799, path())
            .prop_map(|(modified, path)| Command::Mfmt { modified, path }),
        (0u64..1000, 1u64..1000, 2000u64..3000, 1u64..1000).prop_map(|(a, l, b, m)| {
            let mut r = RangeSet::default();
            r.insert(a, a + l);
            r.insert(b, b + m);
            Command::RestRanges(r)
        }),
        (any::<u64>(), proptest::option::of(any::<u64>()), path()).prop_map(
            |(offset, length, path)| Command::Cksm(Cksm {
                alg: crate::gridftp::ChecksumAlg::Sha256,
                offset,
                length,
                path
            })
        ),
    ]
}

proptest! {
    #[test]
    fn parse_never_panics(line in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Command::parse(&line);
    }

    #[test]
    fn display_then_parse_roundtrips(cmd in command()) {
        prop_assert_eq!(Command::parse(cmd.to_string().as_bytes()), Ok(cmd));
    }

    #[test]
    fn a_sent_command_is_exactly_one_line(name in ".+") {
        // Whatever a file name holds, the client either refuses it or sends one command.
        if let Ok(wire) = Command::Stor(name.clone()).to_wire() {
            let frames = crate::line::LineFramer::new(1 << 20).push(&wire);
            prop_assert_eq!(frames.len(), 1);
            let crate::line::Frame::Line(l) = &frames[0] else { panic!("too long") };
            prop_assert_eq!(Command::parse(l), Ok(Command::Stor(name)));
        }
    }

    #[test]
    fn error_messages_are_single_printable_lines(line in proptest::collection::vec(any::<u8>(), 0..100)) {
        if let Err(e) = Command::parse(&line) {
            prop_assert!(!e.message.chars().any(|c| c.is_control()));
            prop_assert!((500..600).contains(&e.code));
        }
    }
}
