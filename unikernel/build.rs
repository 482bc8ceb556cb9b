//! Passes the linker script (image at 1 MiB, PVH note in its own PT_NOTE) to the image's link.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-link-arg-bins=-Wl,-T,{dir}/link.ld");
    println!("cargo:rerun-if-changed=link.ld");
}
