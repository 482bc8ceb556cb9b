//! What the image does when it cannot go on: a CPU exception (its gates and entry stubs are
//! `arch::idt`'s; they call [`exception`] by its C name) is reported on the console, with the
//! vector, its name, the error code, RIP, CR2 for a page fault and a hit stack guard
//! (`arch::guard`), then the VM stops with the failure status ([`crate::exit::fail`]). It sits
//! above `arch`, the console and the exit paths, so `arch` never prints or exits itself.

use crate::arch::idt::{self, Frame};

/// Called by the entry stubs with the frame they built; prints it and stops the VM.
#[no_mangle]
extern "C" fn exception(frame: &Frame) -> ! {
    let v = frame.vector as usize;
    crate::serial::release();
    crate::println!(
        "\nkayvee: CPU exception {v}: {}, error code {:#x}, RIP {:#x}, CS {:#x}, RFLAGS {:#x}, RSP {:#x}, SS {:#x}",
        idt::name(v),
        frame.error,
        frame.rip,
        frame.cs,
        frame.rflags,
        frame.rsp,
        frame.ss
    );
    if v == 14 {
        let addr = idt::cr2();
        crate::println!("kayvee: page fault address (CR2) {addr:#x}");
        #[cfg(not(feature = "ring3"))]
        {
            use crate::arch::guard;
            let page = guard::guard_page();
            if page != 0 && (page..page + 4096).contains(&addr) {
                crate::println!(
                    "kayvee: stack overflow: the guard page below the {} KiB stack was hit",
                    guard::stack_bytes() / 1024
                );
            }
        }
    }
    crate::exit::fail("CPU exception")
}

/// Referenced by the prebuilt `alloc` (built with unwinding); never called, since the image
/// aborts on panic.
#[no_mangle]
pub extern "C" fn _Unwind_Resume() -> ! {
    crate::exit::fail("_Unwind_Resume called")
}

/// Referenced by unwind tables of prebuilt `compiler_builtins` objects the image links since
/// the geo, HyperLogLog and stream code came in; never called, since the image aborts on panic.
#[no_mangle]
pub extern "C" fn rust_eh_personality() -> ! {
    crate::exit::fail("rust_eh_personality called")
}
