//! PVH boot stub: the Xen ELF note naming the 32-bit entry, and the code from that entry to
//! Rust. Follows the PVH boot ABI (Xen's `docs/misc/pvh.pandoc`): 32-bit protected mode, paging
//! off, `ebx` = physical address of `hvm_start_info`, no stack.
//!
//! The stub zeroes `.bss`, builds page tables identity mapping the first 4 GiB with 2 MiB pages
//! (RAM, the virtio-mmio window at 0xfeb00000, PCI ECAM at 0xb0000000 and the LAPIC all lie
//! there; everything from 0xb0000000 up is mapped uncached), enables PAE, long mode and SSE (the prebuilt `core`
//! uses SSE2), loads a 64-bit GDT, switches to its own stack and calls
//! `kmain(start_info_paddr)`.

use core::arch::global_asm;

/// Bytes of the boot stack (in `.bss`: it costs no file size).
pub const STACK_BYTES: usize = 512 * 1024;

#[repr(C, align(4096))]
struct PageTables {
    pml4: [u64; 512],
    pdpt: [u64; 512],
    pd: [[u64; 512]; 4],
}

#[repr(C, align(16))]
struct Stack([u8; STACK_BYTES]);

/// The page tables the stub fills (zeroed with `.bss` first).
#[no_mangle]
static mut BOOT_PAGE_TABLES: PageTables = PageTables {
    pml4: [0; 512],
    pdpt: [0; 512],
    pd: [[0; 512]; 4],
};

/// TSC stamps the stub takes: at entry and after zeroing `.bss`. A non-zero initialiser keeps
/// them in `.data`, which the zeroing does not touch; `crate::boottime` reads them.
#[no_mangle]
pub static mut BOOT_TSC: [u64; 2] = [1, 1];

/// The stack Rust runs on.
#[no_mangle]
static mut BOOT_STACK: Stack = Stack([0; STACK_BYTES]);

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

    /* zero .bss (page tables and stack included) */
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
    leal 0x1003(%edi), %eax              /* pdpt | present | writable */
    movl %eax, (%edi)
    leal 0x1000(%edi), %ebx              /* ebx = pdpt */
    leal 0x2003(%edi), %eax              /* pd0 | present | writable */
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
    orl $0x83, %eax                      /* present | writable | page size */
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
    movl %esi, %edi                      /* zero-extends: rdi = hvm_start_info */
    xorl %ebp, %ebp
    call kmain
4:
    hlt
    jmp 4b

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
    "#,
    stack_bytes = const STACK_BYTES,
    options(att_syntax)
);
