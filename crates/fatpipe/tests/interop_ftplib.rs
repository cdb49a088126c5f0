//! Python's ftplib against `fatpipe serve`: retrbinary, storbinary, mlsd and REST.

mod common;
use common::*;
use std::process::Command;

const SCRIPT: &str = r#"
import ftplib, hashlib, io, sys
port, sizes = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
ftp = ftplib.FTP()
ftp.connect("127.0.0.1", port, timeout=60)
ftp.login("alice", "pw")
for i, size in enumerate(sizes):
    got = io.BytesIO()
    ftp.retrbinary(f"RETR d{i}", got.write, blocksize=1 << 20)
    print(f"d{i}", hashlib.sha256(got.getvalue()).hexdigest())
    data = bytes((j * 31 + i) % 256 for j in range(min(size, 3000000)))
    ftp.storbinary(f"STOR s{i}", io.BytesIO(data))
    assert ftp.size(f"s{i}") == len(data), "SIZE after STOR"
facts = {name: f for name, f in ftp.mlsd("/", facts=["type", "size"])}
for i, size in enumerate(sizes):
    assert facts[f"d{i}"]["type"] == "file" and int(facts[f"d{i}"]["size"]) == size, facts[f"d{i}"]
assert facts["sub"]["type"] == "dir"
# REST: the tail of the largest file from an offset.
last = len(sizes) - 1
tail = io.BytesIO()
ftp.retrbinary(f"RETR d{last}", tail.write, rest=1000)
print("tail", hashlib.sha256(tail.getvalue()).hexdigest())
try:
    ftp.retrbinary("RETR ../../etc/passwd", lambda b: None)
    print("escape allowed")
except ftplib.error_perm as e:
    print("escape", str(e)[:3])
ftp.quit()
"#;

#[test]
fn ftplib_retr_stor_mlsd_rest() {
    require("python3");
    let s = FatpipeServer::start(&["--user", "alice:pw"]);
    std::fs::create_dir(s.path("sub")).unwrap();
    for (i, size) in SIZES.iter().enumerate() {
        random_file(&s.path(&format!("d{i}")), *size, 70 + i as u64);
    }
    let sizes: Vec<String> = SIZES.iter().map(u64::to_string).collect();
    let out = run_ok(Command::new("python3").args([
        "-c",
        SCRIPT,
        &s.addr.port().to_string(),
        &sizes.join(","),
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (i, _) in SIZES.iter().enumerate() {
        assert_eq!(
            lines[i],
            format!("d{i} {}", sha256(&s.path(&format!("d{i}"))))
        );
        let expect: Vec<u8> = (0..SIZES[i].min(3_000_000))
            .map(|j| ((j * 31 + i as u64) % 256) as u8)
            .collect();
        assert_eq!(
            std::fs::read(s.path(&format!("s{i}"))).unwrap(),
            expect,
            "s{i} stored"
        );
    }
    let last = std::fs::read(s.path(&format!("d{}", SIZES.len() - 1))).unwrap();
    let tail = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tail.path(), &last[1000..]).unwrap();
    assert_eq!(lines[SIZES.len()], format!("tail {}", sha256(tail.path())));
    assert_eq!(lines[SIZES.len() + 1], "escape 550");
}
