//! The PVH start info (`struct hvm_start_info`, Xen `public/arch-x86/hvm/start_info.h`): the
//! command line and, from version 1 on, the E820-style memory map.

use core::ptr;

/// `hvm_start_info.magic`.
const START_INFO_MAGIC: u32 = 0x336e_c578;
/// E820 type of usable RAM.
const MEMMAP_TYPE_RAM: u32 = 1;
/// Most memory map entries looked at.
const MEMMAP_ENTRIES_MAX: usize = 128;
/// Longest command line kept.
pub const CMDLINE_MAX: usize = 4096;

/// `struct hvm_start_info` (version 1 layout).
#[repr(C)]
#[derive(Clone, Copy)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

/// `struct hvm_memmap_table_entry`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

/// A RAM range `[start, end)`.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// What the boot loader told us, copied out of its memory before the heap may reuse it.
pub struct BootInfo {
    cmdline: [u8; CMDLINE_MAX],
    cmdline_len: usize,
    ram: [Region; MEMMAP_ENTRIES_MAX],
    ram_len: usize,
}

impl BootInfo {
    /// Reads the start info at physical address `paddr` (identity mapped).
    ///
    /// # Safety
    /// `paddr` must be the `ebx` the PVH loader passed: a valid `hvm_start_info`, with a
    /// NUL-terminated command line and a memory map at the addresses it names.
    pub unsafe fn read(paddr: u64) -> Result<Self, &'static str> {
        let mut info = BootInfo {
            cmdline: [0; CMDLINE_MAX],
            cmdline_len: 0,
            ram: [Region { start: 0, end: 0 }; MEMMAP_ENTRIES_MAX],
            ram_len: 0,
        };
        // SAFETY: the caller guarantees `paddr` points at a start info; it may be unaligned
        // in principle, so read it unaligned.
        let si = unsafe { ptr::read_unaligned(paddr as *const StartInfo) };
        if si.magic != START_INFO_MAGIC {
            return Err("PVH start info has a bad magic number (not booted through PVH?)");
        }
        if si.cmdline_paddr != 0 {
            // SAFETY: the loader's command line is NUL-terminated; we stop at the NUL or the
            // buffer's end.
            unsafe { info.copy_cmdline(si.cmdline_paddr as *const u8) };
        }
        if si.version >= 1 && si.memmap_paddr != 0 {
            let n = (si.memmap_entries as usize).min(MEMMAP_ENTRIES_MAX);
            for i in 0..n {
                let at = (si.memmap_paddr as *const MemmapEntry).wrapping_add(i);
                // SAFETY: the loader provides `memmap_entries` entries at `memmap_paddr`.
                let e = unsafe { ptr::read_unaligned(at) };
                if e.kind == MEMMAP_TYPE_RAM && e.size > 0 {
                    info.ram[info.ram_len] = Region {
                        start: e.addr,
                        end: e.addr + e.size,
                    };
                    info.ram_len += 1;
                }
            }
        } else {
            return Err("PVH start info has no memory map (version 0 loader)");
        }
        Ok(info)
    }

    /// Copies the NUL-terminated string at `p`.
    ///
    /// # Safety
    /// `p` points at a NUL-terminated string.
    unsafe fn copy_cmdline(&mut self, p: *const u8) {
        while self.cmdline_len < CMDLINE_MAX {
            // SAFETY: within the string (we stop at its NUL).
            let b = unsafe { *p.add(self.cmdline_len) };
            if b == 0 {
                break;
            }
            self.cmdline[self.cmdline_len] = b;
            self.cmdline_len += 1;
        }
    }

    /// The kernel command line (QEMU's `-append`), lossy if not UTF-8.
    pub fn cmdline(&self) -> &str {
        let bytes = &self.cmdline[..self.cmdline_len];
        core::str::from_utf8(bytes).unwrap_or("")
    }

    /// The usable RAM ranges.
    pub fn ram(&self) -> &[Region] {
        &self.ram[..self.ram_len]
    }
}
