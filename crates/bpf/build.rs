//! Builds the BPF program (clang, `-target bpf`) into a libbpf-rs skeleton, and the same laws
//! for the host, so that the unit tests run the code the kernel runs.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = "src/bpf/bic.bpf.c";
    // <linux/types.h> wants <asm/types.h>, which Debian keeps under the multiarch directory.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    // Two programs from one source: BIC with adaptive pacing, and BIC alone.
    for (name, paced) in [("bic_paced", "1"), ("bic_plain", "0")] {
        SkeletonBuilder::new()
            .source(src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args([
                "-Wall",
                "-Werror",
                "-O2",
                multiarch.as_str(),
                &format!("-DFP_PACED={paced}"),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| {
                panic!(
                    "building {src} (needs clang; apt-get install clang libelf-dev zlib1g-dev): {e:#}"
                )
            });
    }
    cc::Build::new()
        .file("src/bpf/law_host.c")
        .warnings_into_errors(true)
        .compile("fatpipe_bic_law");
    for f in [
        "src/bpf/bic.bpf.c",
        "src/bpf/bic_law.h",
        "src/bpf/law_host.c",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
}
