//! The ACL file for the engine: read at startup (`aclfile`, or the config file's `user`
//! lines), reread by ACL LOAD and written by ACL SAVE. The engine parses and renders the text;
//! this module only does the file I/O, with redis-server 7.0.15's messages.

use crate::requests::{os_error_text, write_atomically};
use kayvee_engine::Engine;
use kayvee_session::Answer;
use std::path::{Path, PathBuf};
use tracing::warn;

/// Where `aclfile` is: a relative name is in `dir`, where Redis has moved by then (Kayvee
/// never changes its working directory).
fn resolve(engine: &Engine, path: &str) -> PathBuf {
    Path::new(&engine.core.config.dir).join(path)
}

/// Reads the ACL file, as Redis words a failure to open it (with the name as configured).
fn read(engine: &Engine, path: &str) -> Result<String, String> {
    std::fs::read_to_string(resolve(engine, path)).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            os_error_text(&e)
        )
    })
}

/// Startup: the config file's `user` lines, then the ACL file. An error aborts the start
/// with Redis's message.
pub fn load_at_startup(engine: &mut Engine) -> anyhow::Result<()> {
    if let Err(e) = engine.acl_apply_config_users() {
        warn!("{e}");
        anyhow::bail!("Critical error while loading ACLs. Exiting.");
    }
    let Some(path) = engine.acl_file() else {
        return Ok(());
    };
    let result = read(engine, &path).and_then(|text| engine.acl_load(&text).map(|_| ()));
    if let Err(e) = result {
        warn!("Aborting Redis startup because of ACL errors: {e}");
        anyhow::bail!("Aborting startup because of ACL errors: {e}");
    }
    Ok(())
}

/// ACL LOAD (`save` false) or ACL SAVE after the engine asked for it: does the file work
/// and gives the reply (the driver closes the clients ACL LOAD logged out).
pub fn acl_file_command(engine: &mut Engine, save: bool) -> Answer {
    let path = engine.acl_file().unwrap_or_default();
    let result = if save {
        write_atomically(
            &resolve(engine, &path).to_string_lossy(),
            &engine.acl_save_text(),
        )
        .map_err(|e| {
            warn!("Opening temp ACL file for ACL SAVE: {}", os_error_text(&e));
            "ERR There was an error trying to save the ACLs. Please check the server logs for \
             more information"
                .to_string()
        })
    } else {
        read(engine, &path)
            .and_then(|text| engine.acl_load(&text).map(|_| ()))
            .map_err(|e| format!("ERR {e}"))
    };
    match result {
        Ok(()) => Answer::Ok,
        Err(text) => Answer::Error(text),
    }
}
