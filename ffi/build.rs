//! Gives the shared library its soname, `libinboxlog.so.<major>` (SPEC §13): a host
//! linked against it records that name, which `make install` provides as a link to
//! `libinboxlog.so.<major>.<minor>.<patch>`, so a minor or patch upgrade needs no relink
//! and a major one is never picked up by an old host.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let elf = [
        "linux",
        "android",
        "freebsd",
        "netbsd",
        "openbsd",
        "dragonfly",
    ];
    if elf.contains(&os.as_str()) {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libinboxlog.so.{major}");
    }
}
