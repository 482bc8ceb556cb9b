//! What must happen inside the signal handler itself, while the loop may be busy (the save on
//! shutdown runs on the loop's thread): a SIGINT while a shutdown is already asked ends the
//! process at once, deleting the temporary file of the save on shutdown, as Redis does ("You
//! insist on exiting now"). Everything else a signal does goes through the loop's signal pipe.

use signal_hook::consts::{SIGINT, SIGTERM};
use std::ffi::{c_char, CString};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// A signal asked for a shutdown that is not cancelled yet.
static ASKED: AtomicBool = AtomicBool::new(false);

/// The temporary file of the save on shutdown (a leaked C string), or null.
static TEMP_RDB: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Installs the handlers' actions beside the signal pipe's.
pub fn install() -> io::Result<()> {
    // SAFETY: the actions only touch atomics and call unlink(2) and _exit(2), which are
    // async-signal-safe.
    unsafe {
        signal_hook::low_level::register(SIGTERM, || ASKED.store(true, Ordering::SeqCst))?;
        signal_hook::low_level::register(SIGINT, || {
            if ASKED.swap(true, Ordering::SeqCst) {
                let temp = TEMP_RDB.load(Ordering::SeqCst);
                if !temp.is_null() {
                    libc::unlink(temp);
                }
                libc::_exit(1);
            }
        })?;
    }
    Ok(())
}

/// The loop saw that no shutdown is asked any more (SHUTDOWN ABORT, a failed save): the next
/// SIGINT asks again instead of ending the process.
pub fn clear_asked() {
    ASKED.store(false, Ordering::SeqCst);
}

/// The save on shutdown writes `temp` from now on.
pub fn set_temp_rdb(temp: &Path) {
    if let Ok(c) = CString::new(temp.as_os_str().as_encoded_bytes()) {
        // Leaked: the handler may read it at any time (one small string per save on shutdown).
        TEMP_RDB.store(c.into_raw(), Ordering::SeqCst);
    }
}
