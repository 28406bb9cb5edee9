//! The sqlite-vec extension: registering its functions (`vec_distance_cosine`, …) on a
//! connection, the one FFI call of this crate, and the vector format it reads.

use std::ffi::{CStr, c_char, c_int, c_void};

use rusqlite::Connection;
use stategraph_store::StoreError;

use crate::error::BACKEND;

/// The C signature of `sqlite3_vec_init` (an SQLite extension entry point), which the
/// `sqlite-vec` crate declares without parameters.
type ExtensionInit =
    unsafe extern "C" fn(*mut rusqlite::ffi::sqlite3, *mut *mut c_char, *const c_void) -> c_int;

/// Registers the sqlite-vec functions (`vec_distance_cosine`, …) on this connection only.
#[allow(unsafe_code)]
pub(super) fn register_sqlite_vec(conn: &Connection) -> Result<(), StoreError> {
    let mut message: *mut c_char = std::ptr::null_mut();
    // SAFETY: `sqlite3_vec_init` is an SQLite extension entry point,
    // `int (sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi)`; the crate
    // declares it as `fn()`, so the pointer is cast back to that true signature. It is
    // compiled with SQLITE_CORE (see the crate's build.rs), so it never reads `pApi` and
    // calls the SQLite that rusqlite links directly: a null `pApi` is allowed. `conn.handle()`
    // is the open connection, valid for the duration of the call, and no other thread uses it
    // meanwhile (we hold `conn`). `message` is a valid out-pointer; an error message SQLite
    // allocated there is copied and released with `sqlite3_free`.
    let (rc, text) = unsafe {
        let init: ExtensionInit = std::mem::transmute::<*const (), ExtensionInit>(
            sqlite_vec::sqlite3_vec_init as *const (),
        );
        let rc = init(conn.handle(), &mut message, std::ptr::null());
        let text = if message.is_null() {
            None
        } else {
            let t = CStr::from_ptr(message).to_string_lossy().into_owned();
            rusqlite::ffi::sqlite3_free(message.cast());
            Some(t)
        };
        (rc, text)
    };
    if rc == rusqlite::ffi::SQLITE_OK {
        return Ok(());
    }
    Err(StoreError::backend(
        BACKEND,
        format!(
            "registering the sqlite-vec extension failed (code {rc}): {}",
            text.unwrap_or_default()
        ),
    ))
}

/// A vector as sqlite-vec reads it (and Python's `sqlite_vec.serialize_float32` writes it):
/// little-endian `f32`s.
pub(super) fn f32_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
