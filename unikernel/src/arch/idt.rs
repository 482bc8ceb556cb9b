//! CPU exceptions: an IDT whose 32 exception gates lead, through entry stubs that build a
//! [`Frame`], to the C-ABI function `exception` (`crate::fault::exception`: it prints the
//! vector, its name, the error code, RIP, and CR2 for a page fault, and stops the VM with the
//! failure status, so a guest fault is a clear message instead of a triple-fault reset). The
//! gates are filled and loaded by the boot stub (`arch::boot`) before any Rust runs: in the
//! ring-3 mode `lidt` is not allowed later.
//!
//! Vector 32 is the LAPIC timer that ends an idle `hlt` (see `arch::apic`), 33 the NIC's
//! used-buffer interrupt (virtio-mmio through an IOAPIC pin, see `arch::ioapic`), 47 the
//! LAPIC's spurious vector; all three return.
//!
//! Exception handlers never return, so they need no saved state and may run on the interrupted stack
//! (gate IST 0; the red zone they overwrite is never used again). In the ring-3 mode the CPU
//! switches to the TSS's ring-0 stack; the handler runs at ring 0 (selector 0x08).

use core::arch::global_asm;
use core::sync::atomic::AtomicU64;

/// Vectors the IDT covers: the 32 exceptions, [`TIMER_VECTOR`], and up to
/// [`SPURIOUS_VECTOR`]; any other interrupt in that range is reported like an exception.
pub const VECTORS: usize = 48;
/// The LAPIC timer's vector (its handler only acknowledges it: it exists to end a `hlt`).
#[cfg_attr(feature = "ring3", allow(dead_code))] // ring 3 never halts
pub const TIMER_VECTOR: u8 = 32;
/// The NIC's interrupt vector: its handler acknowledges the device (virtio-mmio
/// InterruptStatus -> InterruptACK at [`NIC_ISR_ADDR`]), counts in [`NIC_IRQS`] and sends the
/// LAPIC EOI. It touches nothing else: the loop finds the frames itself once `hlt` returns.
#[cfg_attr(feature = "ring3", allow(dead_code))]
pub const NIC_VECTOR: u8 = 33;
/// NIC interrupts taken (written only by the handler; read by the loop for INFO).
#[no_mangle]
pub static NIC_IRQS: AtomicU64 = AtomicU64::new(0);
/// Address of the NIC's virtio-mmio InterruptStatus register (InterruptACK follows at +4);
/// 0 until the interrupt is wired (the handler then acknowledges nothing).
#[no_mangle]
pub static NIC_ISR_ADDR: AtomicU64 = AtomicU64::new(0);
/// The LAPIC's spurious-interrupt vector (ignored, no EOI).
#[cfg_attr(feature = "ring3", allow(dead_code))]
pub const SPURIOUS_VECTOR: u8 = 47;

/// The IDT: 16 bytes a gate (zeroed with `.bss`, filled by the boot stub).
#[repr(C, align(16))]
pub struct Idt(pub [u64; VECTORS * 2]);

/// The IDT the stub fills and loads.
#[no_mangle]
pub static mut BOOT_IDT: Idt = Idt([0; VECTORS * 2]);

/// What the entry stubs leave on the stack: vector, error code (0 when the CPU pushes none),
/// then the CPU's own frame.
#[repr(C)]
pub struct Frame {
    /// The vector.
    pub vector: u64,
    /// The error code (0 when the CPU pushes none).
    pub error: u64,
    /// Where the CPU was.
    pub rip: u64,
    /// Its code segment.
    pub cs: u64,
    /// Its flags.
    pub rflags: u64,
    /// Its stack pointer.
    pub rsp: u64,
    /// Its stack segment.
    pub ss: u64,
}

/// The exception names of the Intel SDM (vol. 3A, 6.3.1).
const NAMES: [&str; 32] = [
    "divide error (#DE)",
    "debug (#DB)",
    "NMI",
    "breakpoint (#BP)",
    "overflow (#OF)",
    "BOUND range exceeded (#BR)",
    "invalid opcode (#UD)",
    "device not available (#NM)",
    "double fault (#DF)",
    "coprocessor segment overrun",
    "invalid TSS (#TS)",
    "segment not present (#NP)",
    "stack-segment fault (#SS)",
    "general protection (#GP)",
    "page fault (#PF)",
    "reserved 15",
    "x87 floating-point error (#MF)",
    "alignment check (#AC)",
    "machine check (#MC)",
    "SIMD floating-point (#XM)",
    "virtualization (#VE)",
    "control protection (#CP)",
    "reserved 22",
    "reserved 23",
    "reserved 24",
    "reserved 25",
    "reserved 26",
    "reserved 27",
    "hypervisor injection (#HV)",
    "VMM communication (#VC)",
    "security (#SX)",
    "reserved 31",
];

/// The faulting address of the last page fault.
pub fn cr2() -> u64 {
    let v: u64;
    // SAFETY: reading CR2 has no side effects; handlers run at ring 0 in both modes.
    unsafe {
        core::arch::asm!("mov {}, cr2", out(reg) v, options(nomem, nostack, preserves_flags))
    };
    v
}

/// The name of exception `vector` (Intel SDM), or "unexpected interrupt" past the 32.
pub fn name(vector: usize) -> &'static str {
    NAMES.get(vector).copied().unwrap_or("unexpected interrupt")
}

// Entry stubs: vectors whose exception pushes no error code push a 0 first, so every frame
// has the same shape; all then push their vector and go to `exc_common`. The table of their
// addresses is what the boot stub turns into gates.
global_asm!(
    r#"
    .section .text.boot, "ax"
    .code64
    .altmacro
    .macro exc_stub n
    exc_stub_\n:
    .if (\n == 8) || (\n == 10) || (\n == 11) || (\n == 12) || (\n == 13) || (\n == 14) || (\n == 17) || (\n == 21) || (\n == 29) || (\n == 30)
    .else
        pushq $0
    .endif
        pushq $\n
        jmp exc_common
    .endm
    .set i, 0
    .rept 47
        exc_stub %i
        .set i, i + 1
    .endr

    /* LAPIC timer: acknowledge (EOI register of the LAPIC at 0xfee00000) and return. Only
       taken while the loop idles in `sti; hlt` (arch::apic), on whatever stack it runs:
       that asm block does not use the red zone, and nothing here touches SSE state. */
irq_timer:
    pushq %rax
    movabsq $0xfee000b0, %rax
    movl $0, (%rax)
    popq %rax
    iretq
irq_spurious:
    iretq

    /* NIC (virtio-mmio): InterruptStatus read and written back to InterruptACK (the device
       drops its line), the count, the LAPIC EOI. Taken only inside the loop's `sti; hlt`
       (like the timer); touches no SSE state and no memory the loop uses. */
irq_nic:
    pushq %rax
    pushq %rdx
    movq NIC_ISR_ADDR(%rip), %rax
    testq %rax, %rax
    jz 1f
    movl (%rax), %edx
    movl %edx, 4(%rax)
1:
    lock incq NIC_IRQS(%rip)
    movabsq $0xfee000b0, %rax
    movl $0, (%rax)
    popq %rdx
    popq %rax
    iretq

exc_common:
    movq %rsp, %rdi                      /* &Frame */
    andq $-16, %rsp                      /* the ABI's alignment at the call */
    call exception
9:
    hlt
    jmp 9b

    .section .rodata.boot, "a"
    .p2align 3
    .global exc_stub_table
exc_stub_table:
    .macro exc_entry n
        .quad exc_stub_\n
    .endm
    .set i, 0
    .rept 32
        exc_entry %i
        .set i, i + 1
    .endr
    .quad irq_timer                      /* 32 */
    .quad irq_nic                        /* 33 */
    .set i, 34
    .rept 13
        exc_entry %i
        .set i, i + 1
    .endr
    .quad irq_spurious                   /* 47 */
    .noaltmacro
"#,
    options(att_syntax)
);
