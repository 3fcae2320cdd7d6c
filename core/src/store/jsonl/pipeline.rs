//! Reading a large log on two cores: a helper thread reads the file, splits it into
//! complete lines and checks them (limit, UTF-8) while the caller's thread parses and
//! validates events. Whenever the caller falls behind (the queue of batches is full),
//! the helper prepares the batch in hand itself (for a log: parses its events) instead
//! of waiting, so both cores stay busy whichever side is slower. The order of lines,
//! and what each one is, stay exactly those of [`Lines`]; only the work is split. The
//! helper also runs a check over every line in order (for a log: its checksum against
//! the line before, core/FORMAT.md#checksums-version-2), whose results ride with the batch.

use std::io::{self, BufRead};
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread;

use super::lines::{Fault, Lines};

/// Text gathered before a batch is handed over.
const BATCH_BYTES: usize = 256 << 10;

/// Batches in flight: bounds the memory the helper can run ahead by.
const IN_FLIGHT: usize = 4;

/// Consecutive complete lines: their checked text, concatenated.
#[derive(Debug)]
pub(crate) struct Batch<P, C = ()> {
    /// The lines' text, without their `\n`s.
    pub text: String,
    /// (number, offset, the line's range in `text` or why it has no text).
    pub lines: Vec<(u64, u64, Result<Range<usize>, Fault>)>,
    /// What `prepare` made of each line with text, in line order: empty when the
    /// helper handed the batch over unprepared.
    pub prepared: Vec<P>,
    /// What `check` made of each line with text, in line order: always there.
    pub checked: Vec<C>,
}

impl<P, C> Batch<P, C> {
    /// An empty batch with room for [`BATCH_BYTES`] of text and any line up to as long
    /// again, and for `lines` lines: filling it copies each line once, where growing it
    /// would copy the text gathered so far at every doubling.
    fn with_room(lines: usize) -> Batch<P, C> {
        Batch {
            text: String::with_capacity(2 * BATCH_BYTES),
            lines: Vec::with_capacity(lines),
            prepared: Vec::new(),
            checked: Vec::with_capacity(lines),
        }
    }
}

/// What the helper thread sends, in file order.
#[derive(Debug)]
pub(crate) enum Msg<P, C = ()> {
    /// More complete lines.
    Lines(Batch<P, C>),
    /// No more complete lines: where they end, and the torn tail after them.
    End { end: u64, torn: u64 },
    /// Reading failed.
    Failed(io::Error),
}

/// Runs [`Lines`] over `reader` on a helper thread and `consume` over its messages on
/// this one; the helper runs `check(number, text)` over every line with text, in order,
/// and `prepare(number, text, checked)` (with what `check` found) over the lines of the
/// batches it would otherwise wait to hand over. When `consume` returns early the helper stops at its next send.
pub(crate) fn run<R, P, C, T>(
    reader: R,
    limit: usize,
    (prepare, mut check): (
        impl Fn(u64, &str, &C) -> P + Send,
        impl FnMut(u64, &str) -> C + Send,
    ),
    consume: impl FnOnce(Receiver<Msg<P, C>>) -> T,
) -> io::Result<T>
where
    R: BufRead + Send,
    P: Send,
    C: Send,
{
    thread::scope(|scope| {
        let (tx, rx) = sync_channel(IN_FLIGHT);
        thread::Builder::new()
            .name("inboxlog-read".into())
            .spawn_scoped(scope, move || {
                produce(reader, limit, (&prepare, &mut check), &tx);
            })?;
        Ok(consume(rx))
    })
}

/// Hands `batch` over; when the queue is full, prepares it first. `false` when the
/// consumer is gone.
fn hand_over<P, C>(
    mut batch: Batch<P, C>,
    prepare: &impl Fn(u64, &str, &C) -> P,
    tx: &SyncSender<Msg<P, C>>,
) -> bool {
    match tx.try_send(Msg::Lines(batch)) {
        Ok(()) => true,
        Err(TrySendError::Disconnected(_)) => false,
        Err(TrySendError::Full(Msg::Lines(back))) => {
            batch = back;
            batch.prepared = batch
                .lines
                .iter()
                .filter_map(|(number, _, item)| Some((*number, item.as_ref().ok()?)))
                .zip(&batch.checked)
                .map(|((number, range), checked)| {
                    prepare(number, &batch.text[range.clone()], checked)
                })
                .collect();
            tx.send(Msg::Lines(batch)).is_ok()
        }
        Err(TrySendError::Full(_)) => unreachable!("only lines are offered here"),
    }
}

fn produce<R: BufRead, P, C>(
    reader: R,
    limit: usize,
    (prepare, check): (
        &impl Fn(u64, &str, &C) -> P,
        &mut impl FnMut(u64, &str) -> C,
    ),
    tx: &SyncSender<Msg<P, C>>,
) {
    let mut lines = Lines::new(reader, limit);
    let mut batch = Batch::with_room(0);
    loop {
        match lines.next() {
            Err(e) => {
                let _ = tx.send(Msg::Failed(e));
                return;
            }
            Ok(None) => break,
            Ok(Some(line)) => {
                let item = line.checked().map(|text| {
                    batch.checked.push(check(line.number, text));
                    let start = batch.text.len();
                    batch.text.push_str(text);
                    start..batch.text.len()
                });
                batch.lines.push((line.number, line.offset, item));
                if batch.text.len() >= BATCH_BYTES {
                    // The next batch most likely holds about as many lines as this one.
                    let room = batch.lines.len() + batch.lines.len() / 8;
                    let full = std::mem::replace(&mut batch, Batch::with_room(room));
                    if !hand_over(full, prepare, tx) {
                        return;
                    }
                }
            }
        }
    }
    if !batch.lines.is_empty() && !hand_over(batch, prepare, tx) {
        return;
    }
    let _ = tx.send(Msg::End {
        end: lines.end(),
        torn: lines.torn(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_arrive_in_order_with_their_faults() {
        let long = "y".repeat(300_000);
        let mut input = format!("a\n{long}\nbz\nc\n\ntorn").into_bytes();
        // Line 3 is not UTF-8.
        let z = input.iter().position(|&b| b == b'z').unwrap();
        input[z] = 0xff;
        let got = run(&input[..], 400_000, (|_, _, ()| (), |_, _| ()), |rx| {
            let mut seen = Vec::new();
            for msg in rx {
                match msg {
                    Msg::Lines(batch) => {
                        for (n, off, item) in batch.lines {
                            seen.push((
                                n,
                                off,
                                item.map(|r| batch.text[r].len())
                                    .map_err(|f| matches!(f, Fault::NotUtf8(_))),
                            ));
                        }
                    }
                    Msg::End { end, torn } => return (seen, end, torn),
                    Msg::Failed(e) => panic!("{e}"),
                }
            }
            unreachable!("no end")
        })
        .unwrap();
        let (seen, end, torn) = got;
        assert_eq!(seen[0], (1, 0, Ok(1)));
        assert_eq!(seen[1], (2, 2, Ok(300_000)));
        assert_eq!(seen[2], (3, 300_003, Err(true)));
        assert_eq!(seen[3], (4, 300_006, Ok(1)));
        assert_eq!(seen[4], (5, 300_008, Ok(0)));
        assert_eq!((end, torn), (300_009, 4));
    }

    #[test]
    fn a_consumer_that_falls_behind_gets_prepared_batches() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let input = "abc\n".repeat(2_000_000).into_bytes();
        let preparing = AtomicBool::new(false);
        let prepare = |n: u64, text: &str, checked: &u64| {
            preparing.store(true, Ordering::Relaxed);
            assert_eq!(*checked, n, "each line gets its own check");
            (n, text.len())
        };
        let (batches, prepared) = run(&input[..], 10, (prepare, |n, _| n), |rx| {
            // Receive nothing until the queue is full and the helper prepares.
            while !preparing.load(Ordering::Relaxed) {
                thread::yield_now();
            }
            let (mut batches, mut prepared) = (0, 0);
            for msg in rx {
                let Msg::Lines(batch) = msg else { break };
                batches += 1;
                if !batch.prepared.is_empty() {
                    prepared += 1;
                    let want: Vec<_> = batch.lines.iter().map(|(n, _, _)| (*n, 3)).collect();
                    assert_eq!(batch.prepared, want);
                }
            }
            (batches, prepared)
        })
        .unwrap();
        assert!(batches > IN_FLIGHT);
        assert!(prepared > 0, "no batch of {batches} was prepared");
    }

    #[test]
    fn an_early_stop_ends_the_helper() {
        let input = "x\n".repeat(1_000_000).into_bytes();
        let first = run(&input[..], 10, (|_, _, ()| (), |_, _| ()), |rx| {
            match rx.recv().unwrap() {
                Msg::Lines(batch) => batch.lines.len(),
                other => panic!("{other:?}"),
            }
        })
        .unwrap();
        assert!(first > 0);
    }
}
