//! The ARCHITECTURE.md#errors error model as Python exceptions: `InboxlogError` with one subclass per kind.
//!
//! Each subclass carries its kind's `kind` (str) and `code` (int) as class attributes;
//! a kind this module does not know yet is raised as `InboxlogError` with both set on
//! the instance. The message is the core's, unchanged. Where the core knows where the
//! error happened, the instance carries it as `session`, `path`, `line`, `offset` and
//! `seq` (ARCHITECTURE.md#errors); the root class has them as `None`.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeWarning};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

use inboxlog::ErrorKind;
use inboxlog::wire::ErrorFields;

create_exception!(
    inboxlog,
    InboxlogError,
    PyException,
    "Root of every inboxlog error. `kind` (str) and `code` (int) name the error kind."
);

create_exception!(
    inboxlog,
    ObserverWarning,
    PyRuntimeWarning,
    "An observer (`on_event`/`on_inbox` callback) raised: the exception was contained and \
     the call that committed the change still succeeded."
);

macro_rules! kinds {
    ($($class:ident => $kind:ident, $doc:literal;)*) => {
        $(create_exception!(inboxlog, $class, InboxlogError, $doc);)*

        fn subclass(kind: ErrorKind, message: String) -> Option<PyErr> {
            match kind {
                $(ErrorKind::$kind => Some($class::new_err(message)),)*
                _ => None,
            }
        }

        /// Adds the exception classes to the module, each with its `kind` and `code`,
        /// and `_ERROR_KINDS`: every kind of the core (`ErrorKind::ALL`) as
        /// `(name, code)`, against which the tests check the classes, the stubs and
        /// the package's exports.
        pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
            let py = m.py();
            let kinds = ErrorKind::ALL.iter().map(|k| (k.name(), k.code()));
            m.add("_ERROR_KINDS", PyTuple::new(py, kinds)?)?;
            let root = py.get_type::<InboxlogError>();
            for key in LOCATION {
                root.setattr(key, py.None())?;
            }
            m.add("InboxlogError", root)?;
            m.add("ObserverWarning", py.get_type::<ObserverWarning>())?;
            $(
                let ty = py.get_type::<$class>();
                set_kind(&ty, ErrorKind::$kind)?;
                m.add(stringify!($class), ty)?;
            )*
            Ok(())
        }
    };
}

kinds! {
    StorageError => Io, "The OS refused a read, write, fsync or lock (kind `io`, code 1).";
    CorruptLogError => Corrupt, "A stored log fails validation (kind `corrupt`, code 2).";
    LockedError => Locked, "Another writer holds the session (kind `locked`, code 3).";
    PoisonedError => Poisoned, "A write or fsync failed earlier; reopen the session (kind `poisoned`, code 4).";
    NotFoundError => NotFound, "No such session (kind `not_found`, code 5).";
    AlreadyExistsError => AlreadyExists, "A session with that id already exists (kind `already_exists`, code 6).";
    InvalidSpliceError => InvalidSplice, "Splice coordinates out of range (kind `invalid_splice`, code 7).";
    DuplicateMessageError => DuplicateMessage, "A message id is already pending (kind `duplicate_message`, code 8).";
    ProtocolError => Protocol, "A step-boundary call out of order (kind `protocol`, code 9).";
    InvalidInputError => InvalidInput, "A bad message, event, id, reason or argument value (kind `invalid_input`, code 10).";
    FormatUnsupportedError => FormatUnsupported, "A log in another on-disk format version (kind `format_unsupported`, code 11).";
    TooLargeError => TooLarge, "A record or a JSON nesting over the limits (kind `too_large`, code 12).";
    ClosedError => Closed, "Use of a session after `close()` (kind `closed`, code 13).";
    ReentrantError => Reentrant, "A mutation of a session from inside one of its observers (kind `reentrant`, code 14).";
    FencedError => Fenced, "This writer lost ownership of its session to another writer; nothing was written (kind `fenced`, code 15).";
    UnavailableError => Unavailable, "The store's server cannot be reached or went away mid-call (kind `unavailable`, code 16).";
    BusyError => Busy, "A compaction is running; nothing was written (kind `busy`, code 17).";
    ConflictError => Conflict, "The surface changed under a compaction (kind `conflict`, code 18).";
    ApprovalsPendingError => ApprovalsPending, "Approvals of the turn are still pending; nothing was written (kind `approvals_pending`, code 19).";
    AlreadyDecidedError => AlreadyDecided, "A decision for an approval already decided, recorded as rejected (kind `already_decided`, code 20).";
}

/// The location attributes, `None` on the class and set on an instance where known.
const LOCATION: [&str; 5] = ["session", "path", "line", "offset", "seq"];

fn set_kind(ty: &Bound<'_, PyType>, kind: ErrorKind) -> PyResult<()> {
    ty.setattr("kind", kind.name())?;
    ty.setattr("code", kind.code())
}

/// The Python exception for a core error: the fields of the C error JSON
/// (`inboxlog::wire::ErrorFields`), the message as its text and the others as
/// attributes.
#[expect(
    clippy::needless_pass_by_value,
    reason = "a conversion, passed as `map_err(raise)`: it takes the error as `From` would"
)]
pub(crate) fn raise(e: inboxlog::Error) -> PyErr {
    let fields = ErrorFields::of(&e);
    let message = fields.message.to_owned();
    Python::attach(|py| {
        let (err, known) = match subclass(e.kind(), message.clone()) {
            Some(err) => (err, true),
            None => (InboxlogError::new_err(message), false),
        };
        let value = err.value(py);
        let set = || -> PyResult<()> {
            if !known {
                value.setattr("kind", fields.kind)?;
                value.setattr("code", fields.code)?;
            }
            if let Some(session) = fields.session {
                value.setattr("session", session)?;
            }
            if let Some(path) = &fields.path {
                value.setattr("path", path)?;
            }
            let numbers = [
                ("line", fields.line),
                ("offset", fields.offset),
                ("seq", fields.seq),
            ];
            for (key, n) in numbers {
                if let Some(n) = n {
                    value.setattr(key, n)?;
                }
            }
            Ok(())
        };
        match set() {
            Ok(()) => err,
            Err(e) => e,
        }
    })
}

/// `.py()` on core results: the error as its Python exception.
pub(crate) trait OrRaise<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for inboxlog::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(raise)
    }
}
