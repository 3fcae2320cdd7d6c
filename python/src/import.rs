//! `import_reference`: a reference harness log as a new session (ARCHITECTURE.md#import).

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors::OrRaise;
use crate::session::PySession;
use crate::store::PyStore;

/// Imports the reference harness log at `path` (`.jsonl` or `.jsonl.zstd`) into
/// `store` as a new session and returns it open; `id` overrides the source's id.
#[pyfunction]
#[pyo3(signature = (path, store, id = None))]
#[expect(
    clippy::needless_pass_by_value,
    reason = "PyO3 converts a path argument (str or os.PathLike) to an owned PathBuf only"
)]
pub(crate) fn import_reference(
    py: Python<'_>,
    path: PathBuf,
    store: &Bound<'_, PyStore>,
    id: Option<&str>,
) -> PyResult<PySession> {
    let store = store.get();
    let shared = store.shared();
    let session = py
        .detach(|| inboxlog::import_reference(&path, &*shared, id))
        .py()?;
    store.session(py, session)
}
