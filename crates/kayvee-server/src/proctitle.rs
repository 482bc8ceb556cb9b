//! The process title (Linux), as Redis's `proc-title-template` sets it: what `ps` and
//! `/proc/PID/cmdline` show, e.g. `kayvee-server 127.0.0.1:6379`.
//!
//! Linux has no call for the whole command line (`prctl(PR_SET_NAME)` sets only the 15-byte
//! `comm`), so the title is written over the memory the kernel shows: the argument strings and,
//! right after them, the environment strings. [`ProcTitle::take_over`] first moves the
//! environment (and the argument strings std reads lazily) to the heap, as every
//! `setproctitle` on Linux does (nginx, PostgreSQL, Redis); it runs at the top of `main`,
//! before any thread starts. The argument vector comes from glibc, which passes it to the
//! functions of `.init_array`.

use kayvee_engine::config::proc_title::{expand, Vars};
use kayvee_engine::config::table::Val;
use kayvee_engine::Engine;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::atomic::{AtomicIsize, AtomicPtr, Ordering};

static ARGC: AtomicIsize = AtomicIsize::new(0);
static ARGV: AtomicPtr<*mut c_char> = AtomicPtr::new(std::ptr::null_mut());

/// glibc calls the functions of `.init_array` with `argc`, `argv`, `envp` before `main`.
#[used]
#[link_section = ".init_array"]
static CAPTURE: extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) = capture;

extern "C" fn capture(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) {
    ARGC.store(argc as isize, Ordering::Relaxed);
    ARGV.store(argv, Ordering::Relaxed);
}

extern "C" {
    static mut environ: *mut *mut c_char;
}

/// The memory the title is written into, and what it shows now (nothing to write into by
/// default: the title is left alone).
#[derive(Default)]
pub struct ProcTitle {
    area: Option<(*mut u8, usize)>,
    /// `argv[0]`: the `{title}` variable.
    argv0: String,
    /// The title last written.
    shown: Option<String>,
    /// The configuration's CONFIG SET count when it was last looked at.
    seen_sets: Option<u64>,
}

impl ProcTitle {
    /// Takes over the arguments' and the environment's memory. Must run before any other
    /// thread exists (it replaces `environ`).
    pub fn take_over() -> Self {
        let argc = ARGC.load(Ordering::Relaxed);
        let argv = ARGV.load(Ordering::Relaxed);
        let mut title = ProcTitle {
            area: None,
            argv0: String::new(),
            shown: None,
            seen_sets: None,
        };
        if argv.is_null() || argc <= 0 {
            return title;
        }
        // SAFETY: `argv` holds `argc` C strings (glibc's contract for `.init_array`), and
        // `environ` is a null-terminated array of C strings; nothing else runs yet.
        unsafe {
            let first = *argv;
            if first.is_null() {
                return title;
            }
            title.argv0 = CStr::from_ptr(first).to_string_lossy().into_owned();
            let start = first.cast::<u8>();
            let mut end = start.add(CStr::from_ptr(first).to_bytes().len() + 1);
            for i in 1..argc {
                let s = *argv.offset(i);
                if s.cast::<u8>() != end {
                    break;
                }
                end = end.add(CStr::from_ptr(s).to_bytes().len() + 1);
            }
            let env = environ;
            let mut copies: Vec<*mut c_char> = Vec::new();
            if !env.is_null() {
                let mut i = 0;
                while !(*env.add(i)).is_null() {
                    let s = *env.add(i);
                    if s.cast::<u8>() == end {
                        end = end.add(CStr::from_ptr(s).to_bytes().len() + 1);
                    }
                    copies.push(CString::from(CStr::from_ptr(s)).into_raw());
                    i += 1;
                }
            }
            copies.push(std::ptr::null_mut());
            environ = Box::leak(copies.into_boxed_slice()).as_mut_ptr();
            for i in 0..argc {
                let s = argv.offset(i);
                *s = CString::from(CStr::from_ptr(*s)).into_raw();
            }
            title.area = Some((start, end.offset_from(start) as usize));
        }
        title
    }

    /// Shows the title the configuration calls for, if a CONFIG SET ran since the last look
    /// (`set-proc-title`, `proc-title-template`, `port`...): one comparison otherwise.
    #[inline]
    pub fn sync(&mut self, engine: &Engine) {
        let sets = engine.core.config.sets;
        if self.seen_sets != Some(sets) {
            self.seen_sets = Some(sets);
            self.show(engine);
        }
    }

    fn show(&mut self, engine: &Engine) {
        if let Some(title) = wanted(engine, &self.argv0) {
            self.set(&title);
        }
    }

    /// Shows `title` (a save-writer child shows the one its server computed for it).
    pub fn set(&mut self, title: &str) {
        let Some((start, len)) = self.area else {
            return;
        };
        if self.shown.as_deref() == Some(title) {
            return;
        }
        let n = title.len().min(len - 1);
        // SAFETY: `start..start + len` is the argument and environment memory taken over in
        // `take_over`, which nothing else reads any more.
        unsafe {
            std::ptr::copy_nonoverlapping(title.as_ptr(), start, n);
            std::ptr::write_bytes(start.add(n), 0, len - n);
        }
        self.shown = Some(title.to_owned());
    }
}

/// The title the configuration calls for with `{title}` = `name`; None with `set-proc-title
/// no` or a template that does not expand.
pub fn wanted(engine: &Engine, name: &str) -> Option<String> {
    let extra = &engine.core.config.extra;
    if matches!(extra.get("set-proc-title"), Some(Val::Bool(false))) {
        return None;
    }
    let template = match extra.get("proc-title-template") {
        Some(Val::Str(t)) => t.as_slice(),
        _ => kayvee_engine::config::proc_title::DEFAULT.as_bytes(),
    };
    expand(template, &Vars::of(&engine.core.config, name))
}
