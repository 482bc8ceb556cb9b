//! PVH boot stub: the Xen ELF note naming the 32-bit entry, and the code from that entry to
//! Rust. Follows the PVH boot ABI (Xen's `docs/misc/pvh.pandoc`): 32-bit protected mode, paging
//! off, `ebx` = physical address of `hvm_start_info`, no stack.
//!
//! The stub zeroes `.bss` (not the stack), builds page tables identity mapping the first 4 GiB with 2 MiB pages
//! (RAM, the virtio-mmio window at 0xfeb00000, PCI ECAM at 0xb0000000 and the LAPIC all lie
//! there; everything from 0xb0000000 up is mapped uncached), enables PAE, long mode and SSE (the prebuilt `core`
//! uses SSE2), loads a 64-bit GDT, switches to its own stack and calls
//! `kmain(start_info_paddr)`. On the way it fills and loads the IDT of `arch::idt` (CPU
//! exceptions print and exit instead of resetting the VM).

use core::arch::global_asm;

/// Bytes of the boot stack (NOLOAD, like `.bss`: it costs no file size). 1 MiB: Lua scripts
/// nest up to 200 C calls (`string.gsub` with a function calling `gsub`: about 2.7 KiB each)
/// on top of the server's own frames; 512 KiB overflowed at about 170.
pub const STACK_BYTES: usize = 1024 * 1024;

#[repr(C, align(4096))]
pub(super) struct PageTables {
    pml4: [u64; 512],
    pdpt: [u64; 512],
    pub(super) pd: [[u64; 512]; 4],
}

#[repr(C, align(16))]
pub(super) struct Stack([u8; STACK_BYTES]);

/// The page tables the stub fills (zeroed with `.bss` first).
#[no_mangle]
pub(super) static mut BOOT_PAGE_TABLES: PageTables = PageTables {
    pml4: [0; 512],
    pdpt: [0; 512],
    pd: [[0; 512]; 4],
};

/// TSC stamps the stub takes: at entry and after zeroing `.bss`. A non-zero initialiser keeps
/// them in `.data`, which the zeroing does not touch; `crate::boottime` reads them.
#[no_mangle]
pub static mut BOOT_TSC: [u64; 2] = [1, 1];

/// The stack Rust runs on (in a section of its own that the stub does not zero: see link.ld).
#[no_mangle]
#[link_section = ".bss.boot_stack"]
pub(super) static mut BOOT_STACK: Stack = Stack([0; STACK_BYTES]);

global_asm!(
    r#"
    .section .note.Xen, "a"
    .p2align 2
    .long 4                 /* name size: "Xen\0" */
    .long 8                 /* descriptor size */
    .long 18                /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .p2align 2
    .quad pvh_start
    .p2align 2

    .section .text.boot, "ax"
    .code32
    .global pvh_start
pvh_start:
    cli
    cld
    movl %ebx, %esi                      /* keep hvm_start_info; rep stos spares esi */
    rdtsc                                /* boot phase stamp: entry (in .data, not zeroed) */
    movl %eax, BOOT_TSC
    movl %edx, BOOT_TSC + 4

    /* zero .bss (page tables included; the stack lives in .stack, not zeroed) */
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    shrl $2, %ecx                        /* .bss is page aligned: whole dwords */
    xorl %eax, %eax
    rep stosl
    rdtsc                                /* boot phase stamp: .bss zeroed */
    movl %eax, BOOT_TSC + 8
    movl %edx, BOOT_TSC + 12

    /* PML4[0] -> PDPT; PDPT[0..4] -> PD0..PD3 */
    movl $BOOT_PAGE_TABLES, %edi
    leal 0x1007(%edi), %eax              /* pdpt | present | writable | user (ring-3 mode) */
    movl %eax, (%edi)
    leal 0x1000(%edi), %ebx              /* ebx = pdpt */
    leal 0x2007(%edi), %eax              /* pd0 | present | writable | user */
    xorl %ecx, %ecx
1:
    movl %eax, (%ebx,%ecx,8)
    addl $0x1000, %eax
    incl %ecx
    cmpl $4, %ecx
    jne 1b

    /* 2048 PD entries: 2 MiB pages, identity; from 0xB0000000 (PCI ECAM, then the 32-bit
       MMIO window, virtio-mmio, the LAPIC) cache-disabled */
    leal 0x2000(%edi), %ebx              /* ebx = pd0 */
    xorl %ecx, %ecx
2:
    movl %ecx, %eax
    shll $21, %eax
    orl $0x87, %eax                      /* present | writable | user | page size */
    cmpl $1408, %ecx                     /* 0xB0000000 >> 21 */
    jb 3f
    orl $0x18, %eax                      /* PWT | PCD */
3:
    movl %eax, (%ebx,%ecx,8)
    movl $0, 4(%ebx,%ecx,8)
    incl %ecx
    cmpl $2048, %ecx
    jne 2b

    movl %edi, %cr3

    movl %cr4, %eax
    orl $0x620, %eax                     /* PAE | OSFXSR | OSXMMEXCPT */
    movl %eax, %cr4

    movl $0xC0000080, %ecx               /* EFER */
    rdmsr
    orl $0x100, %eax                     /* LME */
    wrmsr

    movl %cr0, %eax
    andl $0xFFFFFFF3, %eax               /* EM = 0, TS = 0 */
    orl $0x80000023, %eax                /* PG | NE | MP | PE */
    movl %eax, %cr0

    lgdt boot_gdt_ptr
    ljmp $0x08, $long_entry

    .code64
long_entry:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movq $BOOT_STACK + {stack_bytes}, %rsp

    /* IDT: 48 gates to the stubs of arch::idt (interrupt gates, CS 0x08, DPL 0,
       IST 0); loaded here because the ring-3 mode cannot lidt later */
    movq $BOOT_IDT, %r8
    movq $exc_stub_table, %r9
    xorl %ecx, %ecx
5:
    movq (%r9,%rcx,8), %rax              /* handler address */
    movl %eax, %edx
    andl $0xffff, %edx                   /* offset 15:0 */
    orl $0x00080000, %edx                /* selector 0x08 */
    movl %edx, (%r8)
    movl %eax, %edx
    andl $0xffff0000, %edx               /* offset 31:16 */
    orl $0x8e00, %edx                    /* present, DPL 0, 64-bit interrupt gate, IST 0 */
    movl %edx, 4(%r8)
    shrq $32, %rax
    movl %eax, 8(%r8)                    /* offset 63:32 */
    movl $0, 12(%r8)
    addq $16, %r8
    incl %ecx
    cmpl $48, %ecx
    jne 5b
    lidt boot_idt_ptr

    movl %esi, %edi                      /* zero-extends: rdi = hvm_start_info */
    xorl %ebp, %ebp
    jmp enter_kmain                      /* ring 0: call kmain; ring-3 mode: drop first */

    .section .rodata.boot, "a"
    .p2align 3
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff             /* 0x08: 64-bit code */
    .quad 0x00cf92000000ffff             /* 0x10: data */
boot_gdt_end:
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .long boot_gdt
    .p2align 3
boot_idt_ptr:
    .word 48 * 16 - 1
    .quad BOOT_IDT
    "#,
    stack_bytes = const STACK_BYTES,
    options(att_syntax)
);

// Ring 0 (the default): `kmain` is called as is.
#[cfg(not(feature = "ring3"))]
global_asm!(
    r#"
    .section .text.boot, "ax"
    .code64
enter_kmain:
    call kmain
4:
    hlt
    jmp 4b
"#,
    options(att_syntax)
);

/// Ring-3 mode (cargo feature `ring3`), for hosts whose /dev/kvm is nested PVM: there ring-0
/// guest code goes through KVM's instruction emulator (about 1000x slower, and it aborts on
/// SSE), while ring-3 code runs natively. The stub loads a GDT with ring-3 segments and a TSS
/// (all-zero I/O bitmap), then `iretq`s to `kmain` at CPL 3 with IOPL 3 (port I/O stays
/// allowed) and IF set. Every page carries the U bit (set in both modes: harmless at ring 0
/// without SMEP/SMAP). Afterwards nothing privileged runs: no `hlt` (the idle halt spins), no
/// MSR or control-register access.
#[cfg(feature = "ring3")]
mod ring3 {
    /// Bytes of the TSS proper (the I/O bitmap follows it).
    const TSS_BYTES: usize = 104;

    /// The 64-bit TSS followed by its I/O bitmap (all zero: every port allowed) and the
    /// terminating 0xff byte.
    #[repr(C, align(16))]
    pub struct Tss([u8; TSS_BYTES + 8192 + 1]);

    /// The TSS (the stub fills `iomap_base`).
    #[no_mangle]
    pub static mut BOOT_TSS: Tss = Tss([0; TSS_BYTES + 8192 + 1]);

    core::arch::global_asm!(
        r#"
    .section .data.ring3, "aw"
    .p2align 3
ring3_gdt:
    .quad 0
    .quad 0x00af9a000000ffff             /* 0x08: 64-bit code, ring 0 */
    .quad 0x00cf92000000ffff             /* 0x10: data, ring 0 */
    .quad 0x00cff2000000ffff             /* 0x18: data, ring 3 */
    .quad 0x00affa000000ffff             /* 0x20: 64-bit code, ring 3 */
ring3_gdt_tss:
    .quad 0                              /* 0x28: TSS (16 bytes), filled at run time */
    .quad 0
ring3_gdt_end:
ring3_gdt_ptr:
    .word ring3_gdt_end - ring3_gdt - 1
    .quad ring3_gdt

    .section .text.boot, "ax"
    .code64
enter_kmain:
    movq %rdi, %r12                      /* hvm_start_info */
    /* TSS: iomap_base = 104 (the bitmap right after it), rsp0 = the boot stack top */
    movq $BOOT_TSS, %rbx
    movw ${tss_bytes}, 102(%rbx)
    movb $0xff, {tss_bytes} + 8192(%rbx)
    movq %rsp, 4(%rbx)
    /* TSS descriptor: limit = 104 + 8192, base = BOOT_TSS (below 4 GiB), type 0x89 */
    movq $ring3_gdt_tss, %rdi
    movl $({tss_bytes} + 8192), %eax     /* limit 15:0 */
    movl %ebx, %ecx
    shll $16, %ecx
    orl %ecx, %eax                       /* base 15:0 */
    movl %eax, (%rdi)
    movl %ebx, %eax
    shrl $16, %eax
    andl $0xff, %eax                     /* base 23:16 */
    orl $0x8900, %eax                    /* present, DPL 0, 64-bit TSS available */
    movl %ebx, %ecx
    andl $0xff000000, %ecx               /* base 31:24 */
    orl %ecx, %eax
    movl %eax, 4(%rdi)
    lgdt ring3_gdt_ptr
    movw $0x28, %ax
    ltr %ax
    /* iretq to ring 3: SS, RSP, RFLAGS (IOPL 3, IF), CS, RIP */
    pushq $0x1b
    pushq %rsp
    addq $8, (%rsp)                      /* the RSP before this push */
    pushq $0x3202
    pushq $0x23
    leaq ring3_entry(%rip), %rax
    pushq %rax
    iretq
ring3_entry:
    movw $0x1b, %ax
    movw %ax, %ds
    movw %ax, %es
    movq %r12, %rdi
    call kmain
5:
    jmp 5b
"#,
        tss_bytes = const TSS_BYTES,
        options(att_syntax)
    );
}
