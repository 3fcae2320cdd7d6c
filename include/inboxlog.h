/*
 * inboxlog C ABI: append-only session logs for AI agents, with a durable two-queue inbox
 * replayed from the log.
 *
 * CONTENTS, in the order the functions are declared below
 *
 *   Status and errors  inboxlog_status (enum), inboxlog_status_name, inboxlog_version
 *   Strings            inboxlog_string_free
 *   Store              inboxlog_store_new_memory, inboxlog_store_open_jsonl,
 *                      inboxlog_store_open_postgres, inboxlog_store_open,
 *                      inboxlog_store_free,
 *                      inboxlog_store_list, inboxlog_store_inspect,
 *                      inboxlog_store_verify, inboxlog_store_delete
 *   Session lifecycle  inboxlog_session_create, inboxlog_session_create_seeded,
 *                      inboxlog_session_open, inboxlog_session_open_ex,
 *                      inboxlog_session_fork,
 *                      inboxlog_session_flush, inboxlog_session_close,
 *                      inboxlog_session_free, inboxlog_session_id, inboxlog_session_header,
 *                      inboxlog_session_open_report
 *   Append and events  inboxlog_session_append, inboxlog_session_events,
 *                      inboxlog_session_last_seq, inboxlog_session_current_turn
 *   Inbox              inboxlog_inbox_splice, inboxlog_inbox_append, inboxlog_inbox_prepend,
 *                      inboxlog_inbox_replace, inboxlog_inbox_remove, inboxlog_inbox_clear,
 *                      inboxlog_inbox_next_turn, inboxlog_inbox_next_step,
 *                      inboxlog_inbox_has_pending
 *   Protocol           inboxlog_session_open_turn, inboxlog_session_propose_step,
 *                      inboxlog_session_decide, inboxlog_session_end_step,
 *                      inboxlog_session_close_turn, inboxlog_session_cancel,
 *                      inboxlog_session_fail
 *   Projections        inboxlog_fold_consumed_work, inboxlog_session_baseline,
 *                      inboxlog_projection_new, inboxlog_projection_replay,
 *                      inboxlog_projection_free, inboxlog_projection_apply,
 *                      inboxlog_projection_apply_all, inboxlog_projection_baseline
 *   Conversation       inboxlog_session_surface, inboxlog_store_surface
 *   Approvals          inboxlog_session_ask_approval, inboxlog_session_decide_approval,
 *                      inboxlog_session_approvals, inboxlog_session_park,
 *                      inboxlog_session_resume_parked, inboxlog_store_decide
 *   Compaction         inboxlog_session_begin_compaction,
 *                      inboxlog_session_commit_compaction,
 *                      inboxlog_session_abort_compaction, inboxlog_session_prune
 *   Notifications      inboxlog_session_watch, inboxlog_session_poll,
 *                      inboxlog_session_take_observer_failures
 *   Fleet              inboxlog_store_post, inboxlog_store_remove_pending,
 *                      inboxlog_store_move_pending,
 *                      inboxlog_store_replace_pending, inboxlog_inbox_receive,
 *                      inboxlog_follower_open, inboxlog_follower_poll,
 *                      inboxlog_follower_next_seq, inboxlog_follower_free
 *
 * LIFECYCLE: a store (_new_memory, _open_jsonl or _open_postgres) makes sessions
 * (_create, _open, _fork); a session is the one writer of its log until
 * inboxlog_session_close or _free. With PostgreSQL, workers on many machines share the
 * sessions: an open of a session a live writer holds is LOCKED, _open_ex with takeover
 * takes it from a stuck one (the old writer then gets FENCED), and a call whose server
 * went away is UNAVAILABLE.
 * INBOX: input waits in two lists, "next-turn" and "next-step", written to the log
 * before it changes. PROTOCOL, one turn: inboxlog_session_open_turn, then per step
 * _propose_step (claims input), _decide, the model's events via _append, _end_step;
 * when end_step says no further step, _close_turn. _cancel and _fail end a turn early.
 * extra_json (optional everywhere) adds host keys to the event a call writes; a key
 * the library writes (turn, step, reason) is INVALID_INPUT. PROJECTIONS read a log
 * without a writer: a consumer's copy of the inbox follows its splice events.
 * FLEET: any process may post a message to a session (_store_post), or remove or
 * replace one of its pending messages (_store_remove_pending, _store_replace_pending);
 * its writer takes each in exactly once, in order per store handle. A follower (_follower_open, then _follower_poll) reads a session's
 * events as they commit, from another process, without owning it.
 *
 * CONVENTIONS, the same for every function
 *
 * - Status: every function returns an int, INBOXLOG_STATUS_OK (0) or an inboxlog_status
 *   code; below, statuses are named without their prefix (LOCKED for
 *   INBOXLOG_STATUS_LOCKED). Exceptions: the _free functions return nothing, and
 *   inboxlog_version and inboxlog_status_name return static strings.
 * - Errors: the last parameter, char **error, is optional (NULL: not wanted). On failure
 *   only, it receives {"code":N,"kind":"...","message":"..."} plus, where known, the keys
 *   "session", "path", "line", "offset" (bytes) and "seq" naming where it happened.
 * - Outputs go to out-parameters, written only on success. A string out is allocated
 *   by the library and owned by the caller, who frees it with inboxlog_string_free (and
 *   nothing else); a handle out is owned by the caller, who releases it with its _free.
 * - Inputs are borrowed for the call only. Strings are NUL-terminated UTF-8 (else
 *   INVALID_UTF8). Structured values cross as JSON text: malformed is INVALID_JSON,
 *   nested deeper than 512 levels is TOO_LARGE, the wrong shape is INVALID_INPUT.
 * - NULL: every pointer parameter is required unless its function calls it optional;
 *   a required pointer that is NULL is NULL_ARGUMENT, for every function, with no
 *   exception but one: every _free function (inboxlog_string_free too) takes NULL as a
 *   no-op.
 * - Flags, in and out, are bool.
 * - Absent numbers: a number that may be absent is an int64_t, and absent is spelled
 *   INBOXLOG_ABSENT (-1); a present value is 0 to 2^53-1, and any other value is
 *   INVALID_INPUT. A number that is always present is a uint64_t. In JSON, absent is
 *   null.
 * - Ranges: an argument out of range is refused with INVALID_INPUT naming it, never
 *   clamped. inboxlog_inbox_splice is the one deliberate exception: it follows
 *   JavaScript's Array.prototype.splice arithmetic.
 * - Threads: store, session, projection and follower handles may be used from several
 *   threads at once; calls on one session, one projection or one follower serialize. A
 *   handle's _free must not race any other call on that handle. Each function states
 *   its rule as "Threads:".
 * - Ownership: each function states what it gives the caller as "Ownership:".
 * - Closed sessions: after inboxlog_session_close, every call on that session fails
 *   with CLOSED, except inboxlog_session_close (a no-op), inboxlog_session_free and
 *   inboxlog_session_take_observer_failures.
 * - Panics never unwind into C: a panic inside the library is PANIC.
 * - valgrind: a host checked with --leak-check=full passes the suppressions shipped
 *   with the library (share/inboxlog/valgrind.supp; ffi/valgrind.supp in a checkout).
 *   The first PostgreSQL call from a thread Rust did not start (a C program's main
 *   thread) makes the Rust runtime's 48-byte handle of that thread, kept until the
 *   thread exits; for the main thread valgrind reports it as "possibly lost".
 * - Safety: a pointer argument is NULL (where allowed) or valid: a live handle of its
 *   type (made by this library, not yet freed), a NUL-terminated string, or memory
 *   writable as the out-parameter's type. Anything else is undefined behaviour; the
 *   library can detect NULL only.
 */

#ifndef INBOXLOG_H
#define INBOXLOG_H

/* Generated by cbindgen from ffi/src; do not edit. Regenerate with:
 * INBOXLOG_BLESS=1 cargo test -p inboxlog-ffi --test header */

#include <stdbool.h>
#include <stdint.h>

/* The version of the library this header declares (semantic versioning: within one
 * major version no function is removed and no declaration changes incompatibly).
 * inboxlog_version() returns the version of the library actually loaded. */
#define INBOXLOG_VERSION_MAJOR 0
#define INBOXLOG_VERSION_MINOR 1
#define INBOXLOG_VERSION_PATCH 0
#define INBOXLOG_VERSION_STRING "0.1.0"

/**
 * The one spelling of an absent number: an int64_t argument or result that may be
 * absent holds INBOXLOG_ABSENT (-1) when it is; a present value is 0 to 2^53-1.
 */
#define INBOXLOG_ABSENT -1

/**
 * The result of every call: INBOXLOG_STATUS_OK (0) or what went wrong.
 *
 * Codes from 1 to 99 are the error kinds shared by every layer (the same numbers as
 * the Rust ErrorKind::code() and the Python exception's code); codes from 100 exist
 * only at the C boundary. Numbers are never reused. Functions return them as int.
 */
typedef enum inboxlog_status {
    /**
     * Success.
     */
    INBOXLOG_STATUS_OK = 0,
    /**
     * The OS refused a read, write, fsync or lock.
     */
    INBOXLOG_STATUS_IO = 1,
    /**
     * A stored log fails validation (the message names file, line, offset, seq).
     */
    INBOXLOG_STATUS_CORRUPT = 2,
    /**
     * Another writer holds the session.
     */
    INBOXLOG_STATUS_LOCKED = 3,
    /**
     * A write or fsync failed earlier; reopen the session to continue.
     */
    INBOXLOG_STATUS_POISONED = 4,
    /**
     * No such session.
     */
    INBOXLOG_STATUS_NOT_FOUND = 5,
    /**
     * A session with that id already exists.
     */
    INBOXLOG_STATUS_ALREADY_EXISTS = 6,
    /**
     * Splice coordinates out of range.
     */
    INBOXLOG_STATUS_INVALID_SPLICE = 7,
    /**
     * A message id already pending.
     */
    INBOXLOG_STATUS_DUPLICATE_MESSAGE = 8,
    /**
     * A step-boundary call out of order (the message names the state).
     */
    INBOXLOG_STATUS_PROTOCOL = 9,
    /**
     * A bad message, event, id, reason or argument value, or JSON of the wrong shape.
     */
    INBOXLOG_STATUS_INVALID_INPUT = 10,
    /**
     * A log written in another on-disk format version.
     */
    INBOXLOG_STATUS_FORMAT_UNSUPPORTED = 11,
    /**
     * A record or a JSON nesting over the limits.
     */
    INBOXLOG_STATUS_TOO_LARGE = 12,
    /**
     * Use of a session after inboxlog_session_close (stores have no close).
     */
    INBOXLOG_STATUS_CLOSED = 13,
    /**
     * A mutation from inside an observer.
     */
    INBOXLOG_STATUS_REENTRANT = 14,
    /**
     * This writer lost ownership of its session (another writer took it over);
     * nothing of the call was written.
     */
    INBOXLOG_STATUS_FENCED = 15,
    /**
     * The store's server cannot be reached or went away mid-call; the message says
     * whether the call committed or that its outcome is unknown.
     */
    INBOXLOG_STATUS_UNAVAILABLE = 16,
    /**
     * A compaction is running; nothing was written.
     */
    INBOXLOG_STATUS_BUSY = 17,
    /**
     * The surface changed under a compaction; its end with the error was written.
     */
    INBOXLOG_STATUS_CONFLICT = 18,
    /**
     * Approvals of the turn are still pending (a resume, end_step or close_turn);
     * nothing was written.
     */
    INBOXLOG_STATUS_APPROVALS_PENDING = 19,
    /**
     * A decision for an approval already decided, recorded as rejected.
     */
    INBOXLOG_STATUS_ALREADY_DECIDED = 20,
    /**
     * A required pointer argument was NULL.
     */
    INBOXLOG_STATUS_NULL_ARGUMENT = 100,
    /**
     * A string argument was not valid UTF-8.
     */
    INBOXLOG_STATUS_INVALID_UTF8 = 101,
    /**
     * A JSON argument was not well-formed JSON.
     */
    INBOXLOG_STATUS_INVALID_JSON = 102,
    /**
     * The library panicked; the call was abandoned (a bug: please report it).
     */
    INBOXLOG_STATUS_PANIC = 199,
} inboxlog_status;

/**
 * Follows one session's log from elsewhere: its events from a seq on, as they are
 * committed, read without owning the session or slowing its writer. Opaque.
 *
 * Made by inboxlog_follower_open, released by inboxlog_follower_free. Calls on one
 * follower serialize.
 */
typedef struct inboxlog_follower inboxlog_follower;

/**
 * A standalone copy of an inbox that follows a log's agent/inbox/spliced events.
 * Opaque.
 *
 * Made by inboxlog_projection_new or inboxlog_projection_replay, released by
 * inboxlog_projection_free. Every function but inboxlog_projection_free may be called
 * from several threads at once: calls on one projection serialize.
 */
typedef struct inboxlog_projection inboxlog_projection;

/**
 * One open session: the exclusive writer of a log, its inbox and its turn/step
 * protocol. Opaque.
 *
 * Made by inboxlog_session_create, inboxlog_session_create_seeded,
 * inboxlog_session_open or inboxlog_session_fork; inboxlog_session_close releases the
 * log (later calls fail with INBOXLOG_STATUS_CLOSED) and inboxlog_session_free closes
 * it and releases the handle. Every function but inboxlog_session_free may be called
 * from several threads at once: calls on one session serialize.
 */
typedef struct inboxlog_session inboxlog_session;

/**
 * A place that holds session logs (memory, a JSONL directory or PostgreSQL). Opaque.
 *
 * Made by inboxlog_store_new_memory, inboxlog_store_open_jsonl or
 * inboxlog_store_open_postgres, released by inboxlog_store_free. Sessions made from a
 * store stay usable after the store handle is freed. Every function but
 * inboxlog_store_free may be called from several threads at once.
 */
typedef struct inboxlog_store inboxlog_store;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The kind name of a status code ("not_found" for 5, "ok" for 0), or NULL for a number
 * that is no status.
 *
 * Ownership: the result is a static string, never freed.
 * Threads: any thread, any number at once.
 */
const char *inboxlog_status_name(int status);

/**
 * The library version, e.g. "0.1.0".
 *
 * Ownership: the result is a static string, never freed.
 * Threads: any thread, any number at once.
 */
const char *inboxlog_version(void);

/**
 * Frees a string returned by this library (an out-parameter or an error). NULL is a
 * no-op.
 *
 * s must be NULL or a string returned by an inboxlog_ function and not yet freed; it
 * must not be used afterwards. Strings from other allocators must not be passed.
 *
 * Ownership: takes back the string the caller owned.
 * Threads: any thread; must not race another use of the same string.
 */
void inboxlog_string_free(char *s);

/**
 * Creates an empty in-memory store (for tests and ephemeral agents).
 *
 * Ownership: *out receives a new store handle owned by the caller; release it with
 * inboxlog_store_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_new_memory(struct inboxlog_store **out, char **error);

/**
 * Opens the JSONL directory store at root (one <id>.jsonl file per session; the
 * directory and its parents are created if missing).
 *
 * durability is "sync" (each mutation is fdatasynced before it returns), "batched"
 * (group commit within 5 ms; inboxlog_session_flush is the barrier) or "none" (OS
 * buffered; only flush syncs); anything else is INVALID_INPUT.
 *
 * Ownership: *out receives a new store handle owned by the caller; release it with
 * inboxlog_store_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_open_jsonl(const char *root,
                              const char *durability,
                              struct inboxlog_store **out,
                              char **error);

/**
 * Connects the PostgreSQL store at url, a postgresql:// URL (libpq syntax, sslmode
 * with libpq's meanings, TLS through rustls: prefer, the default, encrypts whenever the
 * server offers TLS; verify-full checks the certificate and host name, the mode for
 * production). The tables are created on first use.
 *
 * options_json is NULL (the defaults) or an object with optional "schema" (a plain
 * SQL identifier, default "inboxlog"), "durability" ("sync", the default: each call
 * committed before it returns; "batched" or "none": asynchronous commit,
 * inboxlog_session_flush is the barrier), "recordLimit" (bytes of one event line,
 * default 64 MiB) and "maxConnections" (the most connections the store holds at once,
 * however many sessions are open: default 8, at least 2); other keys are
 * INVALID_INPUT. UNAVAILABLE when the server cannot be reached or refuses the login,
 * FORMAT_UNSUPPORTED for tables of another version; no message shows the password.
 * options_json may be NULL.
 *
 * Ownership: *out receives a new store handle owned by the caller; release it with
 * inboxlog_store_free. The sessions opened from it share its connections.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_open_postgres(const char *url,
                                 const char *options_json,
                                 struct inboxlog_store **out,
                                 char **error);

/**
 * Opens the store url names, the one constructor for every backend: "memory:" for a
 * new in-memory store, a postgresql:// (or postgres://) URL for the PostgreSQL store
 * (as inboxlog_store_open_postgres), anything else for the JSONL directory store at
 * that path (as inboxlog_store_open_jsonl).
 *
 * options_json is NULL (the defaults) or an object with optional "durability"
 * ("sync", the default, "batched" or "none"), "recordLimit" (bytes of one event line,
 * default 64 MiB; JSONL and PostgreSQL), "schema" (PostgreSQL only, default
 * "inboxlog") and "maxConnections" (PostgreSQL only: the most connections the store
 * holds at once, however many sessions are open; default 8, at least 2); an option
 * the store has no use for and any other key are INVALID_INPUT. options_json may be
 * NULL.
 *
 * Ownership: *out receives a new store handle owned by the caller; release it with
 * inboxlog_store_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_open(const char *url,
                        const char *options_json,
                        struct inboxlog_store **out,
                        char **error);

/**
 * Releases a store handle. NULL is a no-op. Open sessions are not affected.
 *
 * Ownership: takes back the handle the caller owned; it must not be used afterwards.
 * Threads: must not race any other call on this store.
 */
void inboxlog_store_free(struct inboxlog_store *store);

/**
 * Lists the headers of every stored session, sorted by id, as a JSON array of header
 * objects.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_list(const struct inboxlog_store *store, char **out_json, char **error);

/**
 * Reads a stored session as it is, without locking or repairing it (a session open
 * for writing elsewhere may be inspected): {"header":{...},"events":[...]}. NOT_FOUND
 * when there is no such session.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_inspect(const struct inboxlog_store *store,
                           const char *id,
                           char **out_json,
                           char **error);

/**
 * Checks a stored session exactly as inboxlog_session_open would (header and format
 * version, every complete record, the turn/step rules, the inbox replay), with the
 * same error at the same location, but without locking, repairing or writing: safe
 * beside a live writer, and it changes no byte.
 *
 * On success the session would open, and the result is
 * {"header":{...},"events":N,"tornBytes":N,"openTurn":N|null,"openStep":N|null,
 * "needsRepair":bool,"nextTurn":N,"nextStep":N}: tornBytes and openTurn are the
 * repairs opening would make (drop a torn tail, close the turn as interrupted), not
 * errors. On failure the status is the error inboxlog_session_open would return
 * (CORRUPT, FORMAT_UNSUPPORTED, NOT_FOUND, ...) and *error names the "path", "line",
 * "offset" and "seq" as keys. Whether another writer holds the session is not checked.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_verify(const struct inboxlog_store *store,
                          const char *id,
                          char **out_json,
                          char **error);

/**
 * Deletes a stored session for good (retention, a user's request to forget), durably:
 * a JSONL store unlinks the file and fsyncs its directory before returning OK.
 *
 * LOCKED while a writer (a session handle in this or another process) holds the
 * session: close it first. NOT_FOUND when there is no such session; INVALID_INPUT for
 * an id that is not a valid session id. A reader that started before the delete
 * (inboxlog_store_inspect, a fork) reads the whole log as it was; one that starts
 * after gets NOT_FOUND.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_delete(const struct inboxlog_store *store, const char *id, char **error);

/**
 * Creates a new, empty session log id in store. ALREADY_EXISTS when the id is taken;
 * a bad id is INVALID_INPUT.
 *
 * meta_json is optional (NULL: none): an object with optional "cwd", "origin"
 * ("subagent"), "delegationDepth" and "agentPreset".
 *
 * Ownership: *out receives a new session handle owned by the caller; release it with
 * inboxlog_session_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_create(const struct inboxlog_store *store,
                            const char *id,
                            const char *meta_json,
                            struct inboxlog_session **out,
                            char **error);

/**
 * Creates a session log id whose first events are seed_json (a JSON array of events,
 * e.g. another log's, seqs from 0): every event is validated, and session/end-seed is
 * appended unless the seed ends with one.
 *
 * seed_length is INBOXLOG_ABSENT or the seedLength recorded in the header (the inbox
 * replays from there). meta_json is optional, as for inboxlog_session_create.
 *
 * Ownership: *out receives a new session handle owned by the caller; release it with
 * inboxlog_session_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_create_seeded(const struct inboxlog_store *store,
                                   const char *id,
                                   const char *meta_json,
                                   const char *seed_json,
                                   int64_t seed_length,
                                   struct inboxlog_session **out,
                                   char **error);

/**
 * Opens a stored session for writing: takes its exclusive lock (LOCKED when another
 * writer holds it), drops a torn tail, replays the inbox once, and closes a turn the
 * previous writer left open as interrupted (see inboxlog_session_open_report).
 * NOT_FOUND when there is no such session; CORRUPT when the log fails validation
 * (nothing is changed then).
 *
 * Ownership: *out receives a new session handle owned by the caller; release it with
 * inboxlog_session_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_open(const struct inboxlog_store *store,
                          const char *id,
                          struct inboxlog_session **out,
                          char **error);

/**
 * inboxlog_session_open with a takeover flag. When takeover is true, the session is
 * taken from its current owner even when that owner is alive but stuck (PostgreSQL
 * store only): this call proceeds at once, and the old owner gets FENCED on its next
 * call, having written nothing after the takeover. The memory and JSONL stores refuse
 * takeover as INVALID_INPUT (their locks die with their owner). With takeover false
 * this is inboxlog_session_open.
 *
 * Ownership: *out receives a new session handle owned by the caller; release it with
 * inboxlog_session_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_open_ex(const struct inboxlog_store *store,
                             const char *id,
                             bool takeover,
                             struct inboxlog_session **out,
                             char **error);

/**
 * Forks parent_id into a new session child_id: the child starts with a copy of the
 * parent's events (up to, not including, an open turn), an empty inbox and the
 * parent's cwd; the parent log is not changed.
 *
 * meta_json is optional, as for inboxlog_session_create (a subagent passes
 * {"origin":"subagent","delegationDepth":N}).
 *
 * Ownership: *out receives the child's new session handle, owned by the caller;
 * release it with inboxlog_session_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_fork(const struct inboxlog_store *store,
                          const char *parent_id,
                          const char *child_id,
                          const char *meta_json,
                          struct inboxlog_session **out,
                          char **error);

/**
 * Makes everything appended so far durable (the barrier of the batched durability
 * mode; a no-op for sync).
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_flush(struct inboxlog_session *session, char **error);

/**
 * Flushes and releases the log (and its lock); later calls on this handle fail with
 * CLOSED. Closing a closed session is a no-op returning OK; a NULL session is
 * NULL_ARGUMENT, as everywhere but the _free functions. The handle itself stays
 * allocated until inboxlog_session_free.
 *
 * Ownership: nothing is returned; the caller still owns the handle.
 * Threads: may race other calls on this session: they either complete first or fail
 * with CLOSED.
 */
int inboxlog_session_close(struct inboxlog_session *session, char **error);

/**
 * Closes the session (ignoring a flush error; call inboxlog_session_close first to
 * see it) and releases the handle. NULL is a no-op.
 *
 * Ownership: takes back the handle the caller owned; it must not be used afterwards.
 * Threads: must not race any other call on this session.
 */
void inboxlog_session_free(struct inboxlog_session *session);

/**
 * The session id.
 *
 * Ownership: *out receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_id(const struct inboxlog_session *session, char **out, char **error);

/**
 * The log's header as JSON ({"format":"inboxlog","version":2,"id":...,"createdAt":...}
 * plus optional keys).
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_header(const struct inboxlog_session *session, char **out_json, char **error);

/**
 * What opening found and fixed: {"tornBytes":N,"repairedTurn":N|null,
 * "repairedCompaction":S|null} (bytes of a torn tail dropped; the turn closed as
 * interrupted, if any; the compaction ended as interrupted, if any). Always 0 and null
 * for a created or forked session.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_open_report(const struct inboxlog_session *session,
                                 char **out_json,
                                 char **error);

/**
 * Appends a host event of type type with data_json (any JSON; kept byte for byte once
 * valid, whitespace outside strings removed).
 *
 * envelope_json is optional (NULL: none): an object with optional "ignorable"
 * (bool), "surfaceOp" and "sourceEventSeqs" (only on user/message, assistant/message,
 * tool/result). Reserved types (turn/start, agent/inbox/spliced, ...) are refused with
 * INVALID_INPUT, except user/message, whose data may be any JSON object: an "id" is
 * optional there (runtime context carries none); only inbox messages need one.
 *
 * Ownership: out_event_json is optional; when it is not NULL, *out_event_json
 * receives the committed event as a new string owned by the caller (free it with
 * inboxlog_string_free).
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_append(struct inboxlog_session *session,
                            const char *type,
                            const char *data_json,
                            const char *envelope_json,
                            char **out_event_json,
                            char **error);

/**
 * The events with seq >= since, as a JSON array of event objects (keys "type",
 * "seq", "time", "data", then optional "ignorable", "surfaceOp", "sourceEventSeqs").
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_events(const struct inboxlog_session *session,
                            uint64_t since,
                            char **out_json,
                            char **error);

/**
 * The seq of the last event: *out receives it, or INBOXLOG_ABSENT for an empty log.
 *
 * Ownership: *out receives a number; nothing to free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_last_seq(const struct inboxlog_session *session, int64_t *out, char **error);

/**
 * The open turn: *out receives its number (turns count from 1), or INBOXLOG_ABSENT
 * when no turn is open.
 *
 * Ownership: *out receives a number; nothing to free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_current_turn(const struct inboxlog_session *session,
                                  int64_t *out,
                                  char **error);

/**
 * Removes delete_count messages of target ("next-turn" or "next-step") from start
 * and inserts inserted_json (a JSON array of messages) there, with JavaScript
 * Array.prototype.splice arithmetic: start and delete_count may be any double, NaN
 * and infinities included, and a negative start counts from the end. This is the one
 * function whose numbers are clamped, on purpose: it is splice.
 *
 * The change is durable before the call returns; a change that does nothing writes
 * nothing. INVALID_SPLICE or DUPLICATE_MESSAGE when the result would be invalid
 * (nothing is changed then).
 *
 * Ownership: *out_removed_json receives the removed messages as a JSON array, a new
 * string owned by the caller; free it with inboxlog_string_free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_inbox_splice(struct inboxlog_session *session,
                          const char *target,
                          double start,
                          double delete_count,
                          const char *inserted_json,
                          char **out_removed_json,
                          char **error);

/**
 * Adds message_json at the end of target ("next-turn" or "next-step").
 * DUPLICATE_MESSAGE when its id is already pending.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_inbox_append(struct inboxlog_session *session,
                          const char *target,
                          const char *message_json,
                          char **error);

/**
 * Adds message_json at the front of target. As inboxlog_inbox_append otherwise.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_inbox_prepend(struct inboxlog_session *session,
                           const char *target,
                           const char *message_json,
                           char **error);

/**
 * Replaces the pending message id (looked up in next-turn, then next-step) with
 * message_json, which may have a new id. *out_replaced receives false (and nothing is
 * written) when id is not pending.
 *
 * Ownership: *out_replaced receives a bool; nothing to free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_inbox_replace(struct inboxlog_session *session,
                           const char *id,
                           const char *message_json,
                           bool *out_replaced,
                           char **error);

/**
 * Removes the pending message id (a durable cancellation). *out_removed receives
 * false (and nothing is written) when id is not pending.
 *
 * Ownership: *out_removed receives a bool; nothing to free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_inbox_remove(struct inboxlog_session *session,
                          const char *id,
                          bool *out_removed,
                          char **error);

/**
 * Cancels everything pending, next-step first, then next-turn (an empty list writes
 * nothing).
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_inbox_clear(struct inboxlog_session *session, char **error);

/**
 * A copy of next-turn as a JSON array of messages.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_inbox_next_turn(const struct inboxlog_session *session, char **out_json, char **error);

/**
 * A copy of next-step as a JSON array of messages.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_inbox_next_step(const struct inboxlog_session *session, char **out_json, char **error);

/**
 * Whether either list holds a message: *out receives true or false.
 *
 * Ownership: *out receives a bool; nothing to free.
 * Threads: any thread, any number at once.
 */
int inboxlog_inbox_has_pending(const struct inboxlog_session *session, bool *out, char **error);

/**
 * Opens a turn (idle only; PROTOCOL otherwise): writes turn/start before any claim.
 * *out_turn receives the turn number (the first turn of a log is 1).
 *
 * extra_json is optional (NULL: none): a JSON object of host keys for the turn/start
 * data, e.g. {"trigger":{"kind":"message"}}.
 *
 * Ownership: *out_turn receives a number; nothing to free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_open_turn(struct inboxlog_session *session,
                               const char *extra_json,
                               uint64_t *out_turn,
                               char **error);

/**
 * Proposes the next step: claims all of next-step (and, for the first proposal of
 * the turn, the first message of next-turn). The claimed batch belongs to the turn
 * from now on. The result is {"turn":N,"step":K,"messages":[...]}; pass the final
 * batch to inboxlog_session_decide. PROTOCOL when no turn is open, a step is open or
 * a proposal is pending.
 *
 * Ownership: *out_proposal_json receives a new string owned by the caller; free it
 * with inboxlog_string_free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_propose_step(struct inboxlog_session *session,
                                  char **out_proposal_json,
                                  char **error);

/**
 * The one pre-step decision for the pending proposal: decision_json is
 * {"kind":"reject"} (the turn ends blocked) or {"kind":"enter","messages":[...]} (the
 * complete final batch; empty ends a turn that has nothing left to do). The result is
 * {"kind":"step","turn":N,"step":K} or {"kind":"turn-end","turn":N,"reason":{...}}.
 * PROTOCOL when no proposal is pending.
 *
 * extra_json is optional (NULL: none): a JSON object of host keys for the first event
 * the decision writes (step/start, or turn/end).
 *
 * Ownership: *out_decided_json receives a new string owned by the caller; free it
 * with inboxlog_string_free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_decide(struct inboxlog_session *session,
                            const char *decision_json,
                            const char *extra_json,
                            char **out_decided_json,
                            char **error);

/**
 * Ends the open step with outcome: "continue" (the step owes another model call),
 * "completed" or "max-tokens". *out_again receives whether the loop must propose
 * another step (the turn has not concluded, or steering arrived in next-step);
 * otherwise call inboxlog_session_close_turn. PROTOCOL when no step is open.
 *
 * extra_json is optional (NULL: none): a JSON object of host keys for the step/end
 * data.
 *
 * Ownership: *out_again receives a bool; nothing to free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_end_step(struct inboxlog_session *session,
                              const char *outcome,
                              const char *extra_json,
                              bool *out_again,
                              char **error);

/**
 * Closes a concluded turn (between steps, no steering pending) with its concluded
 * reason: the result is {"kind":"turn-end","turn":N,"reason":{...}}. PROTOCOL, naming
 * the state, otherwise.
 *
 * extra_json is optional (NULL: none): a JSON object of host keys for the turn/end
 * data.
 *
 * Ownership: *out_decided_json receives a new string owned by the caller; free it
 * with inboxlog_string_free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_close_turn(struct inboxlog_session *session,
                                const char *extra_json,
                                char **out_decided_json,
                                char **error);

/**
 * Cancels: unless keep_inbox, clears the inbox first (durable cancellations); then,
 * if a turn is open, ends an open step and the turn as aborted with the cause. Idle
 * with nothing pending writes nothing.
 *
 * cause_json is optional (NULL: {"kind":"user"}): one of {"kind":"user"},
 * {"kind":"parent"}, {"kind":"hook","reason":"..."}, {"kind":"disposed"}. extra_json is
 * optional (NULL: none): a JSON object of host keys for the aborted turn's turn/end
 * data.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_cancel(struct inboxlog_session *session,
                            const char *cause_json,
                            bool keep_inbox,
                            const char *extra_json,
                            char **error);

/**
 * Fails the open turn (any state but idle; PROTOCOL when idle): ends an open step,
 * then the turn with {"kind":"error","error":...}. error_json is an object with string
 * "message" and "code" (other keys kept).
 *
 * extra_json is optional (NULL: none): a JSON object of host keys for the turn/end
 * data.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_session_fail(struct inboxlog_session *session,
                          const char *error_json,
                          const char *extra_json,
                          char **error);

/**
 * Folds a log, or an owned suffix of one, into the turn that last accounted for
 * pending work: events_json is a JSON array of events, and the result is
 * {"end":<turn/end event>|null,"droppedUnrun":bool}.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_fold_consumed_work(const char *events_json, char **out_json, char **error);

/**
 * The inbox of session as of the event at seq upto (INBOXLOG_ABSENT: the current
 * end), as a baseline {"seq":N|null,"next_turn":[...],"next_step":[...]} to hand to a
 * consumer (inboxlog_projection_new), which then applies the events after seq
 * (inboxlog_session_events(session, seq + 1, ...)). An upto past the last event is
 * INVALID_INPUT naming the log's length, never clamped.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_baseline(const struct inboxlog_session *session,
                              int64_t upto,
                              char **out_json,
                              char **error);

/**
 * Starts a projection from a baseline {"seq":N|null,"next_turn":[...],"next_step":[...]}
 * (every key required, no other; seq null or a safe integer; ids unique across both
 * lists; a baseline of another shape is INVALID_INPUT).
 *
 * Ownership: *out receives a new projection handle owned by the caller; release it
 * with inboxlog_projection_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_projection_new(const char *baseline_json,
                            struct inboxlog_projection **out,
                            char **error);

/**
 * Builds a projection by replaying events_json (a JSON array of a log's events, in
 * order): splices before seq replay_from (the header's seedLength, 0 when it has none)
 * are skipped, and events after seq upto (INBOXLOG_ABSENT: none) are ignored. An upto
 * past the last event, or a replay_from past the end of the events, is INVALID_INPUT,
 * never clamped.
 *
 * Ownership: *out receives a new projection handle owned by the caller; release it
 * with inboxlog_projection_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_projection_replay(const char *events_json,
                               uint64_t replay_from,
                               int64_t upto,
                               struct inboxlog_projection **out,
                               char **error);

/**
 * Releases a projection handle. NULL is a no-op.
 *
 * Ownership: takes back the handle the caller owned; it must not be used afterwards.
 * Threads: must not race any other call on this projection.
 */
void inboxlog_projection_free(struct inboxlog_projection *projection);

/**
 * Applies the next event (event_json, one event object, seq after the projection's):
 * a splice changes the lists, validated as the live inbox is (INVALID_SPLICE,
 * DUPLICATE_MESSAGE); other events only advance the seq; an event already applied is
 * INVALID_INPUT. On failure nothing changes.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one projection serialize).
 */
int inboxlog_projection_apply(struct inboxlog_projection *projection,
                              const char *event_json,
                              char **error);

/**
 * Applies a JSON array of events in order (e.g. the output of
 * inboxlog_session_events), all or nothing: on failure the projection is unchanged and
 * the error names the event.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once (calls on one projection serialize).
 */
int inboxlog_projection_apply_all(struct inboxlog_projection *projection,
                                  const char *events_json,
                                  char **error);

/**
 * The projection as a baseline {"seq":N|null,"next_turn":[...],"next_step":[...]}.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_projection_baseline(const struct inboxlog_projection *projection,
                                 char **out_json,
                                 char **error);

/**
 * The model-visible surface: {"nodes":[seq…],"messages":[message…]}, the seqs of the
 * surface's events in the order the model sees them and the messages projected from
 * them (a user/message's data, an assistant/message's or a tool/result's
 * data.message; an assistant/message with empty content is skipped).
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_surface(const struct inboxlog_session *session, char **out_json, char **error);

/**
 * The model-visible surface of stored session id, as inboxlog_session_surface gives
 * it, read without owning the session (no lock, no repair, no write: a writer may be
 * appending meanwhile), from the session's checkpoint, so that it costs what the
 * surface holds and what follows the checkpoint. NOT_FOUND when there is no such
 * session; CORRUPT as inboxlog_session_open would refuse it.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_surface(const struct inboxlog_store *store,
                           const char *id,
                           char **out_json,
                           char **error);

/**
 * Asks for a person's approval of a tool call: writes approval/asked. request_json is
 * {"id","toolName","callId"?,"arguments"?,"reason"?}: callId names a tool call still
 * waiting for its result, arguments is any JSON, reason a string. PROTOCOL with no
 * open turn or a parked one; INVALID_INPUT for an id asked before in this log, an empty
 * id or tool name, a call not waiting, or another key. Nothing is written when refused.
 *
 * Ownership: nothing is returned.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_ask_approval(const struct inboxlog_session *session,
                                  const char *request_json,
                                  char **error);

/**
 * Decides approval approval_id: outcome is "allowed-once", "rejected", "cancelled" or
 * "unavailable". Writes approval/decided and, when the outcome does not allow the call
 * the approval names and that call still waits, the tool/result answering it
 * TOOL_NOT_ALLOWED. Allowed while parked. A decision for an approval that is not
 * pending is recorded as agent/inbox/rejected {"decision":...} and then refused:
 * ALREADY_DECIDED, or NOT_FOUND for an id never asked.
 *
 * Ownership: nothing is returned.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_decide_approval(const struct inboxlog_session *session,
                                     const char *approval_id,
                                     const char *outcome_name,
                                     char **error);

/**
 * The session's approvals, after taking posted decisions in:
 * {"pending":[approval/asked data…],"parked":{"turn","approvals":[id…],"ready"}|null}.
 * "ready" says every approval the parked turn names is decided, so
 * inboxlog_session_resume_parked may hand the run on.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_approvals(const struct inboxlog_session *session,
                               char **out_json,
                               char **error);

/**
 * Parks the open turn on its pending approvals: writes turn/parked
 * {"turn","approvals":[id…],"state"?}; state_json (NULL for none) is whatever the host
 * needs to resume the run. The turn stays open with no process alive for it: opening
 * the session leaves it open. While parked, the step-boundary calls and appends are
 * PROTOCOL; deciding, cancel and fail are not. PROTOCOL with no open turn, a parked
 * one, or no pending approval.
 *
 * Ownership: nothing is returned; state_json is only read.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_park(const struct inboxlog_session *session,
                          const char *state_json,
                          char **error);

/**
 * Hands the parked run on, after taking posted decisions in: writes turn/resumed
 * {"turn"}, the one commit after which the run continues here, and gives
 * {"turn","parked":{turn/parked data},"decisions":[{"id","outcome"}…]}.
 * APPROVALS_PENDING while an approval it names is pending; PROTOCOL when the turn is
 * not parked; nothing is written then.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_resume_parked(const struct inboxlog_session *session,
                                   char **out_json,
                                   char **error);

/**
 * Decides approval approval_id of session id from anywhere, whether the session is
 * open or not: the decision travels as a post does (inboxlog_store_post), exactly
 * once; the session's writer takes it in where it takes posts in and writes
 * approval/decided carrying "post"; the first decision taken in wins, and a later one
 * (or one for an unknown id) is recorded as agent/inbox/rejected {"decision":...}
 * (already_decided, not_found). NOT_FOUND when there is no session id; INVALID_INPUT
 * for a bad id, an empty approval_id or an unknown outcome.
 *
 * Ownership: *out_post receives the post id once the decision is durable, a new
 * string owned by the caller; free it with inboxlog_string_free.
 * Threads: any thread, any number at once.
 */
int inboxlog_store_decide(const struct inboxlog_store *store,
                          const char *id,
                          const char *approval_id,
                          const char *outcome_name,
                          char **out_post,
                          char **error);

/**
 * Starts a compaction of the surface from seq start through seq end: writes
 * compaction/start {"compactionId","turn"}, owned by the open turn between its steps or,
 * with no turn open, by none; gives {"compactionId","turn":N|null,"range":{"start",
 * "end"},"shadowedSeqs":[seq…],"shadowedTokenCount":N,"messages":[message…]} (the
 * messages to summarize). inboxlog_session_commit_compaction or
 * inboxlog_session_abort_compaction ends it; freeing the session first ends it with
 * "abandoned". While it runs, another start, a park and any turn/start or turn/end
 * are BUSY; cancel and fail end it first. Refused with nothing written: BUSY while one
 * runs; PROTOCOL with a step open, a proposal pending or a parked turn;
 * INVALID_INPUT when start and end are not on the surface, start comes after end, or
 * the range splits a tool call from its result.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_begin_compaction(const struct inboxlog_session *session,
                                      uint64_t start,
                                      uint64_t end,
                                      char **out_json,
                                      char **error);

/**
 * Commits the compaction this session handle started, with commit_json
 * {"summary":S|[block…],"provider","model","usage"?} (a string summary is stored as one
 * text block): writes compaction/summary, one user/message replacing the range on the
 * surface and compaction/end, and gives {"compactionId","summary":event,
 * "message":event}. A commit_json that is NULL, not JSON or not of that shape is
 * refused first, the compaction still running. Any failure after that writes exactly
 * one compaction/end with an error instead: CONFLICT when the surface changed inside
 * the range since the start; INVALID_INPUT for a bad summary or usage. PROTOCOL when
 * this handle started none (or it was committed, aborted, or ended by cancel or fail
 * already).
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free; commit_json is only read.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_commit_compaction(const struct inboxlog_session *session,
                                       const char *commit_json,
                                       char **out_json,
                                       char **error);

/**
 * Ends the compaction this session handle started with error_text: writes
 * compaction/end {…,"error"}. PROTOCOL when this handle started none (or it ended
 * already).
 *
 * Ownership: nothing is returned; error_text is only read.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_abort_compaction(const struct inboxlog_session *session,
                                      const char *error_text,
                                      char **error);

/**
 * Prunes the tool/result at seq on the surface: when its text is longer than 8,192
 * code points, writes compaction/prune and a tool/result replacing it whose text keeps
 * the first 4,096 and the last 1,024 around a marker, and gives that event; gives
 * null, with nothing written, when it is not that long. INVALID_INPUT when seq is not
 * a tool/result on the surface; PROTOCOL while parked.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread; calls on one session serialize.
 */
int inboxlog_session_prune(const struct inboxlog_session *session,
                           uint64_t seq,
                           char **out_json,
                           char **error);

/**
 * Starts collecting notifications for inboxlog_session_poll: every event committed
 * from now on ({"event":{...}}) and every inbox notification ({"inbox":{"type":
 * "agent/inbox/inserted"|"agent/inbox/discarded"|"agent/inbox/claimed","message":{...}
 * [,"turn":N]}}). Collecting is opt-in so that a host that never polls does not
 * accumulate memory; watching twice is a no-op.
 *
 * Ownership: nothing is returned.
 * Threads: any thread, any number at once.
 */
int inboxlog_session_watch(struct inboxlog_session *session, char **error);

/**
 * Returns and removes the notifications collected since the last poll (see
 * inboxlog_session_watch), oldest first, in commit order: a JSON array such as
 * [{"event":{...}},{"inbox":{"type":"agent/inbox/inserted","message":{...}}}]; [] when
 * nothing happened or the session is not watched. An agent/inbox/spliced event comes
 * right before the inbox notifications it caused.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once; each notification is returned by exactly
 * one poll.
 */
int inboxlog_session_poll(struct inboxlog_session *session, char **out_json, char **error);

/**
 * Returns and removes the failures of the session's observers recorded since the last
 * call: a JSON array of strings, oldest first, [] when none failed. A failure is
 * contained (the call that committed the event still succeeded); only the last 64 are
 * kept, and when older ones were dropped the first string says how many. Works on a
 * closed session too, so the failures of its last calls can still be read.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread, any number at once; each failure is returned by exactly one
 * call.
 */
int inboxlog_session_take_observer_failures(struct inboxlog_session *session,
                                            char **out_json,
                                            char **error);

/**
 * Posts message_json to the target list ("next-turn" or "next-step") of session id
 * from anywhere, whether the session is open or not (here, in another process, or
 * nowhere). The session's writer takes it in exactly once, as one
 * agent/inbox/spliced event carrying "post":"<post id>", when it opens, before each
 * inboxlog_session_propose_step and on inboxlog_inbox_receive; a message it cannot
 * take in (its id already pending) becomes one agent/inbox/rejected event instead.
 * NOT_FOUND when there is no session id; INVALID_INPUT for a bad id, target or message.
 *
 * Ownership: *out_post receives the post id once the post is durable, a new string
 * owned by the caller; free it with inboxlog_string_free.
 * Threads: any thread, any number at once (posts of one store handle to one session
 * run one at a time, in call order).
 */
int inboxlog_store_post(const struct inboxlog_store *store,
                        const char *id,
                        const char *target,
                        const char *message_json,
                        char **out_post,
                        char **error);

/**
 * Removes the pending message message_id of session id from anywhere, whether the
 * session is open or not (SPEC §11.3): the edit travels as a post does
 * (inboxlog_store_post), exactly once and in order with the same store handle's posts
 * and edits. The session's writer applies it as the local inboxlog_inbox_remove (one
 * agent/inbox/spliced with "outcome":"canceled" carrying "post":"<post id>", the
 * usual notifications); when message_id is no longer pending (claimed first, removed,
 * never there) nothing changes and the log records one agent/inbox/rejected event
 * {"edit":{"op":"remove","id":...},"reason":{...},"post":...} (kind not_found).
 * NOT_FOUND when there is no session id; INVALID_INPUT for a bad id or an empty
 * message_id.
 *
 * Ownership: *out_post receives the post id once the edit is durable, a new string
 * owned by the caller; free it with inboxlog_string_free.
 * Threads: any thread, any number at once (posts and edits of one store handle to one
 * session run one at a time, in call order).
 */
int inboxlog_store_remove_pending(const struct inboxlog_store *store,
                                  const char *id,
                                  const char *message_id,
                                  char **out_post,
                                  char **error);

/**
 * Moves the pending message message_id of session id from anywhere, whether the
 * session is open or not (SPEC §17.5): to index in target ("next-turn" or
 * "next-step"), counted without the moved message, or to its end when index is
 * INBOXLOG_ABSENT ("send now": from next-turn to the end of next-step). The move travels
 * as a post does (inboxlog_store_post), exactly once and in order with the same store
 * handle's posts and edits; the session's writer applies it as one agent/inbox/spliced
 * removal with "outcome":"moved" and one insertion carrying "post", in one commit, or,
 * when message_id is no longer pending or index is past the end, records one
 * agent/inbox/rejected event {"move":{"id","target","index"?},"reason":{...},"post":...}
 * (not_found, invalid_splice). NOT_FOUND when there is no session id; INVALID_INPUT for
 * a bad id, an empty message_id, a bad target or a negative index other than
 * INBOXLOG_ABSENT.
 *
 * Ownership: *out_post receives the post id once the move is durable, a new string
 * owned by the caller; free it with inboxlog_string_free.
 * Threads: any thread, any number at once (posts and edits of one store handle to one
 * session run one at a time, in call order).
 */
int inboxlog_store_move_pending(const struct inboxlog_store *store,
                                const char *id,
                                const char *message_id,
                                const char *target,
                                int64_t index,
                                char **out_post,
                                char **error);

/**
 * Replaces the pending message message_id of session id with message_json (which may
 * have a new id) from anywhere, whether the session is open or not (SPEC §11.3), as
 * inboxlog_store_remove_pending removes: applied as the local inboxlog_inbox_replace,
 * or recorded as one agent/inbox/rejected event
 * {"edit":{"op":"replace","id":...,"message":...},...} (kind not_found, or
 * duplicate_message when the new id is pending already). NOT_FOUND when there is no
 * session id; INVALID_INPUT for a bad id, an empty message_id or a bad message.
 *
 * Ownership: *out_post receives the post id once the edit is durable, a new string
 * owned by the caller; free it with inboxlog_string_free.
 * Threads: any thread, any number at once (posts and edits of one store handle to one
 * session run one at a time, in call order).
 */
int inboxlog_store_replace_pending(const struct inboxlog_store *store,
                                   const char *id,
                                   const char *message_id,
                                   const char *message_json,
                                   char **out_post,
                                   char **error);

/**
 * Takes in the messages posted to this session (inboxlog_store_post), each as one
 * durable event with the usual notifications; *out receives how many posts it wrote.
 * Runs on its own when the session opens and before each propose_step.
 *
 * Ownership: *out receives a number; nothing to free.
 * Threads: any thread, any number at once (calls on one session serialize).
 */
int inboxlog_inbox_receive(struct inboxlog_session *session, uint64_t *out, char **error);

/**
 * Opens a follower of session id from seq since (0: from the start). NOT_FOUND when
 * there is no session id.
 *
 * Ownership: *out receives a new follower handle owned by the caller; release it with
 * inboxlog_follower_free. It stays usable after the store handle is freed.
 * Threads: any thread, any number at once.
 */
int inboxlog_follower_open(const struct inboxlog_store *store,
                           const char *id,
                           uint64_t since,
                           struct inboxlog_follower **out,
                           char **error);

/**
 * Waits up to timeout_ms milliseconds for the next committed events and returns every
 * event available then, in seq order, as a JSON array of event objects ("[]" when none
 * came in time; 0 does not wait). Each event comes once, with no gap; an incomplete
 * record (a writer killed mid-write) never does. A session deleted meanwhile is
 * NOT_FOUND; a log cut below what was read is CORRUPT.
 *
 * Ownership: *out_json receives a new string owned by the caller; free it with
 * inboxlog_string_free.
 * Threads: any thread; calls on one follower serialize.
 */
int inboxlog_follower_poll(const struct inboxlog_follower *follower,
                           uint64_t timeout_ms,
                           char **out_json,
                           char **error);

/**
 * The seq of the next event this follower will return: where a new follower resumes
 * (after a restart) with nothing skipped or repeated.
 *
 * Ownership: *out receives a number; nothing to free.
 * Threads: any thread; calls on one follower serialize.
 */
int inboxlog_follower_next_seq(const struct inboxlog_follower *follower,
                               uint64_t *out,
                               char **error);

/**
 * Releases a follower. NULL is a no-op.
 *
 * Ownership: takes back the handle the caller owned; it must not be used afterwards.
 * Threads: must not race any other call on this follower.
 */
void inboxlog_follower_free(struct inboxlog_follower *follower);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* INBOXLOG_H */
