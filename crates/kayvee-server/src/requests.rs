//! The file work commands ask of the shell ([`kayvee_session::Request`]): SAVE and BGSAVE,
//! SHUTDOWN's final save, CONFIG REWRITE and the ACL file, each answered with Redis's reply.

use crate::durability::Durability;
use kayvee_engine::{Engine, Now, ShutdownFlags};
use kayvee_session::Answer;
use std::io::{self, Write};
use tracing::warn;

/// SAVE: writes the snapshot now; `+OK` or `-ERR` (the reason goes to the log).
pub fn save(engine: &mut Engine, now: Now) -> Answer {
    match crate::persist::save_sync(engine, now) {
        Ok(()) => Answer::Ok,
        Err(_) => Answer::Error("ERR".into()),
    }
}

/// SHUTDOWN: saves first when asked (after the running background save, so an older
/// snapshot cannot land last). `Err` carries the reply when the shutdown is cancelled, as in
/// Redis 7.0: the save failed, or the first rewrite of the AOF turned on at runtime still
/// runs (the AOF on disk does not hold the data yet). FORCE exits anyway; the AOF's first
/// base is then written in the foreground ([`crate::aof::Aof::close_at_exit`]).
pub fn shutdown(
    engine: &mut Engine,
    files: &mut Durability,
    flags: ShutdownFlags,
    now: Now,
) -> Result<(), Answer> {
    warn!("User requested shutdown...");
    if files.writing_initial_aof() {
        if !flags.force {
            warn!("Writing initial AOF, can't exit.");
            return Err(shutdown_failed(engine));
        }
        warn!("Writing initial AOF. Exit anyway.");
    }
    let save = flags.save.unwrap_or(!engine.core.config.save.is_empty());
    if !save {
        return Ok(());
    }
    files.kill_bgsave(engine, now);
    warn!("Saving the final RDB snapshot before exiting.");
    if crate::persist::save_on_shutdown(engine, now).is_ok() {
        return Ok(());
    }
    if flags.force {
        warn!("Error trying to save the DB. Exit anyway.");
        return Ok(());
    }
    warn!("Error trying to save the DB, can't exit.");
    Err(shutdown_failed(engine))
}

/// The shutdown is cancelled: the server goes on, the clients that waited in SHUTDOWN are
/// answered, and this is the reply of the one that asked.
fn shutdown_failed(engine: &mut Engine) -> Answer {
    warn!("Errors trying to shut down the server. Check the logs for more information.");
    engine.shutdown_failed();
    Answer::Error(kayvee_engine::shutdown::FAILED.into())
}

/// DEBUG LOADAOF: the open AOF written out and synced, then the dataset emptied and loaded
/// again from the AOF files. A file that does not load ends the process (Redis exits too: the
/// dataset is gone by then).
pub fn load_aof(
    engine: &mut Engine,
    files: &mut Durability,
    now: Now,
    wait: &mut dyn kayvee_engine::ScriptWait,
) -> Answer {
    if let Some(aof) = files.aof.as_mut() {
        if let Err(e) = aof.flush_and_sync(engine) {
            return Answer::Error(format!("ERR writing the append only file: {e}"));
        }
    }
    match crate::aof::reload(engine, now, wait) {
        Ok(()) => {
            warn!("Append Only File loaded by DEBUG LOADAOF");
            Answer::Ok
        }
        Err(e) => {
            tracing::error!("{e:#}");
            std::process::exit(1)
        }
    }
}

/// CONFIG REWRITE: the engine renders the file's text, this writes it.
pub fn rewrite_config(engine: &mut Engine) -> Answer {
    let result = match engine.rewrite_config() {
        Ok((path, text)) => write_atomically(&path, &text)
            .map_err(|e| format!("ERR Rewriting config file: {}", os_error_text(&e))),
        Err(e) => Err(e.to_string()),
    };
    match result {
        Ok(()) => {
            tracing::info!("CONFIG REWRITE executed with success.");
            Answer::Ok
        }
        Err(text) => {
            warn!("CONFIG REWRITE failed: {text}");
            Answer::Error(text)
        }
    }
}

/// Replaces `path` with `text` atomically: a temporary file beside it, fsync, rename.
pub fn write_atomically(path: &str, text: &str) -> io::Result<()> {
    let tmp = format!("{path}.tmp-{}", std::process::id());
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// An OS error as `strerror` words it (`Permission denied`), without Rust's `(os error 13)`.
pub fn os_error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_are_replaced_whole_and_errors_read_like_strerror() {
        let path = std::env::temp_dir().join(format!("kv-rewrite-{}.conf", std::process::id()));
        let p = path.to_str().unwrap();
        std::fs::write(p, "port 1\nold line\n").unwrap();
        write_atomically(p, "port 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "port 2\n");
        std::fs::remove_file(p).unwrap();
        let e = write_atomically("/nonexistent-dir/k.conf", "x").unwrap_err();
        assert_eq!(os_error_text(&e), "No such file or directory");
    }
}
