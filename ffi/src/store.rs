//! Stores: where session logs live (ARCHITECTURE.md#stores). Imports no other C object.

use std::ffi::{c_char, c_int};

use inboxlog_core::Session;
use inboxlog_core::store::{
    self as stores, Durability, JsonlStore, MemoryStore, PgOptions, PgStore, Store, StoreOptions,
};
use inboxlog_core::wire::{self, FromJson, ToJson};

use crate::boundary::{FfiResult, boundary, boundary_void};
use crate::strings::{Out, handle, opt_json_arg, str_arg};

/// A place that holds session logs (memory, a JSONL directory or PostgreSQL). Opaque.
///
/// Made by inboxlog_store_new_memory, inboxlog_store_open_jsonl or
/// inboxlog_store_open_postgres, released by inboxlog_store_free. Sessions made from a
/// store stay usable after the store handle is freed. Every function but
/// inboxlog_store_free may be called from several threads at once.
pub struct inboxlog_store {
    pub(crate) store: Box<dyn Store>,
}

/// Creates an empty in-memory store (for tests and ephemeral agents).
///
/// Ownership: *out receives a new store handle owned by the caller; release it with
/// inboxlog_store_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_new_memory(
    out: *mut *mut inboxlog_store,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let out = unsafe { Out::new(out, "out") }?;
        let store = Box::new(inboxlog_store {
            store: Box::new(MemoryStore::new()),
        });
        out.write(Box::into_raw(store));
        Ok(())
    })
}

/// Opens the JSONL directory store at root (one <id>.jsonl file per session; the
/// directory and its parents are created if missing).
///
/// durability is "sync" (each mutation is fdatasynced before it returns), "batched"
/// (group commit within 5 ms; inboxlog_session_flush is the barrier) or "none" (OS
/// buffered; only flush syncs); anything else is INVALID_INPUT.
///
/// Ownership: *out receives a new store handle owned by the caller; release it with
/// inboxlog_store_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_open_jsonl(
    root: *const c_char,
    durability: *const c_char,
    out: *mut *mut inboxlog_store,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY (all three): the caller's contract (header overview, Safety).
        let root = unsafe { str_arg(root, "root") }?;
        let durability = unsafe { str_arg(durability, "durability") }?;
        let out = unsafe { Out::new(out, "out") }?;
        let durability = Durability::parse(durability)?;
        let store = JsonlStore::open(root, durability)?;
        out.write(Box::into_raw(Box::new(inboxlog_store {
            store: Box::new(store),
        })));
        Ok(())
    })
}

/// Connects the PostgreSQL store at url, a postgresql:// URL (libpq syntax, sslmode
/// with libpq's meanings, TLS through rustls: prefer, the default, encrypts whenever the
/// server offers TLS; verify-full checks the certificate and host name, the mode for
/// production). The tables are created on first use.
///
/// options_json is NULL (the defaults) or an object with optional "schema" (a plain
/// SQL identifier, default "inboxlog"), "durability" ("sync", the default: each call
/// committed before it returns; "batched" or "none": asynchronous commit,
/// inboxlog_session_flush is the barrier), "recordLimit" (bytes of one event line,
/// default 64 MiB) and "maxConnections" (the most connections the store holds at once,
/// however many sessions are open: default 8, at least 2); other keys are
/// INVALID_INPUT. UNAVAILABLE when the server cannot be reached or refuses the login,
/// FORMAT_UNSUPPORTED for tables of another version; no message shows the password.
/// options_json may be NULL.
///
/// Ownership: *out receives a new store handle owned by the caller; release it with
/// inboxlog_store_free. The sessions opened from it share its connections.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_open_postgres(
    url: *const c_char,
    options_json: *const c_char,
    out: *mut *mut inboxlog_store,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let (url, options, out) = unsafe { url_arguments(url, options_json, out) }?;
        let store = PgStore::connect(url, PgOptions::from_store(&options))?;
        out.write(Box::into_raw(Box::new(inboxlog_store {
            store: Box::new(store),
        })));
        Ok(())
    })
}

/// Opens the store url names, the one constructor for every backend: "memory:" for a
/// new in-memory store, a postgresql:// (or postgres://) URL for the PostgreSQL store
/// (as inboxlog_store_open_postgres), anything else for the JSONL directory store at
/// that path (as inboxlog_store_open_jsonl).
///
/// options_json is NULL (the defaults) or an object with optional "durability"
/// ("sync", the default, "batched" or "none"), "recordLimit" (bytes of one event line,
/// default 64 MiB; JSONL and PostgreSQL), "schema" (PostgreSQL only, default
/// "inboxlog") and "maxConnections" (PostgreSQL only: the most connections the store
/// holds at once, however many sessions are open; default 8, at least 2); an option
/// the store has no use for and any other key are INVALID_INPUT. options_json may be
/// NULL.
///
/// Ownership: *out receives a new store handle owned by the caller; release it with
/// inboxlog_store_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_open(
    url: *const c_char,
    options_json: *const c_char,
    out: *mut *mut inboxlog_store,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let (url, options, out) = unsafe { url_arguments(url, options_json, out) }?;
        let store = stores::open(url, &options)?;
        out.write(Box::into_raw(Box::new(inboxlog_store { store })));
        Ok(())
    })
}

/// The arguments of the two URL constructors, decoded: the URL, the options
/// (`options_json` NULL: the defaults) and where the new handle goes.
///
/// # Safety
/// `url`, `options_json` and `out` as the header's overview (Safety) requires.
unsafe fn url_arguments<'a>(
    url: *const c_char,
    options_json: *const c_char,
    out: *mut *mut inboxlog_store,
) -> FfiResult<(&'a str, StoreOptions, Out<*mut inboxlog_store>)> {
    // SAFETY (all three): forwarded contract of this function.
    let url = unsafe { str_arg(url, "url") }?;
    let options = unsafe { opt_json_arg(options_json, "options_json") }?;
    let out = unsafe { Out::new(out, "out") }?;
    let options = match options {
        None => StoreOptions::default(),
        Some(json) => StoreOptions::from_json(&json)?,
    };
    Ok((url, options, out))
}

/// Releases a store handle. NULL is a no-op. Open sessions are not affected.
///
/// Ownership: takes back the handle the caller owned; it must not be used afterwards.
/// Threads: must not race any other call on this store.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_free(store: *mut inboxlog_store) {
    boundary_void(|| {
        if !store.is_null() {
            // SAFETY: a live handle made by `Box::into_raw`, released exactly once.
            drop(unsafe { Box::from_raw(store) });
        }
    });
}

/// Lists the headers of every stored session, sorted by id, as a JSON array of header
/// objects.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_list(
    store: *const inboxlog_store,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let out = unsafe { Out::new(out_json, "out_json") }?;
        out.write_string(wire::headers(&store.store.list()?))
    })
}

/// Reads a stored session as it is, without locking or repairing it (a session open
/// for writing elsewhere may be inspected): {"header":{...},"events":[...]}. NOT_FOUND
/// when there is no such session.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_inspect(
    store: *const inboxlog_store,
    id: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let id = unsafe { str_arg(id, "id") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let out = unsafe { Out::new(out_json, "out_json") }?;
        let (header, events) = Session::inspect(&*store.store, id)?;
        out.write_string(wire::inspect(&header, &events))
    })
}

/// Checks a stored session exactly as inboxlog_session_open would (header and format
/// version, every complete record, the turn/step rules, the inbox replay), with the
/// same error at the same location, but without locking, repairing or writing: safe
/// beside a live writer, and it changes no byte.
///
/// On success the session would open, and the result is
/// {"header":{...},"events":N,"tornBytes":N,"openTurn":N|null,"openStep":N|null,
/// "needsRepair":bool,"nextTurn":N,"nextStep":N}: tornBytes and openTurn are the
/// repairs opening would make (drop a torn tail, close the turn as interrupted), not
/// errors. On failure the status is the error inboxlog_session_open would return
/// (CORRUPT, FORMAT_UNSUPPORTED, NOT_FOUND, ...) and *error names the "path", "line",
/// "offset" and "seq" as keys. Whether another writer holds the session is not checked.
///
/// Ownership: *out_json receives a new string owned by the caller; free it with
/// inboxlog_string_free.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_verify(
    store: *const inboxlog_store,
    id: *const c_char,
    out_json: *mut *mut c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let id = unsafe { str_arg(id, "id") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let out = unsafe { Out::new(out_json, "out_json") }?;
        out.write_string(Session::verify(&*store.store, id)?.to_json())
    })
}

/// Deletes a stored session for good (retention, a user's request to forget), durably:
/// a JSONL store unlinks the file and fsyncs its directory before returning OK.
///
/// LOCKED while a writer (a session handle in this or another process) holds the
/// session: close it first. NOT_FOUND when there is no such session; INVALID_INPUT for
/// an id that is not a valid session id. A reader that started before the delete
/// (inboxlog_store_inspect, a fork) reads the whole log as it was; one that starts
/// after gets NOT_FOUND.
///
/// Ownership: nothing is returned.
/// Threads: any thread, any number at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inboxlog_store_delete(
    store: *const inboxlog_store,
    id: *const c_char,
    error: *mut *mut c_char,
) -> c_int {
    boundary(error, || {
        // SAFETY: the caller's contract (header overview, Safety).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: the caller's contract (header overview, Safety).
        let id = unsafe { str_arg(id, "id") }?;
        Session::delete(&*store.store, id)?;
        Ok(())
    })
}
