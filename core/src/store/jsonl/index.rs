//! A sparse seq → byte offset index, so that reading a log's suffix seeks instead of
//! re-reading the whole file. Each entry keeps the checksum chain's value before its
//! line (version 2, core/FORMAT.md#checksums-version-2), so the suffix is checked as it is read.

/// Every `STRIDE`-th event line's offset is kept.
const STRIDE: u64 = 1024;

/// Where an indexed line is: its byte offset and the chain value before it (0 in a
/// version 1 log, which has no chain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Byte offset of the line.
    pub offset: u64,
    /// The previous line's checksum.
    pub chain: u32,
}

/// The marks kept, by seq: every `STRIDE`-th line read or written, and the lines a
/// replay started from (seq 0 and a checkpoint's seq, when it did not read the lines
/// before: core/FORMAT.md#checkpoints).
#[derive(Debug, Default)]
pub(crate) struct SeqIndex {
    marks: Vec<(u64, Mark)>,
}

impl SeqIndex {
    /// Records that seq `seq`'s line starts at `offset`, after the chain value `chain`
    /// (seqs arrive in order).
    pub(crate) fn note(&mut self, seq: u64, offset: u64, chain: u32) {
        if Self::wants(seq) && self.marks.last().is_none_or(|&(last, _)| seq > last) {
            self.marks.push((seq, Mark { offset, chain }));
        }
    }

    /// Records where seq `seq`'s line is, whether or not the stride wants it (a line a
    /// replay started from); seqs arrive in order.
    pub(crate) fn pin(&mut self, seq: u64, mark: Mark) {
        if self.marks.last().is_none_or(|&(last, _)| seq > last) {
            self.marks.push((seq, mark));
        }
    }

    /// Whether `seq`'s offset is one the index keeps.
    pub(crate) fn wants(seq: u64) -> bool {
        seq.is_multiple_of(STRIDE)
    }

    /// The closest indexed seq at or before `since`, and where its line is; `None` when
    /// no event is indexed (the log has no events).
    pub(crate) fn seek(&self, since: u64) -> Option<(u64, Mark)> {
        let k = self.marks.partition_point(|&(seq, _)| seq <= since);
        self.marks.get(k.checked_sub(1)?).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeks_to_the_closest_stride_before() {
        let mut index = SeqIndex::default();
        assert_eq!(index.seek(5), None);
        for seq in 0..2500 {
            index.note(seq, 1000 + seq * 10, seq as u32);
        }
        index.note(0, 7, 7); // a repeat is ignored
        let at = |offset, chain| Mark { offset, chain };
        assert_eq!(index.seek(0), Some((0, at(1000, 0))));
        assert_eq!(index.seek(1023), Some((0, at(1000, 0))));
        assert_eq!(index.seek(1024), Some((1024, at(1000 + 10240, 1024))));
        assert_eq!(index.seek(99_999), Some((2048, at(1000 + 20480, 2048))));
        assert!(SeqIndex::wants(2048) && !SeqIndex::wants(2049));
    }

    #[test]
    fn a_pinned_mark_is_found_between_strides() {
        let mut index = SeqIndex::default();
        let at = |offset, chain| Mark { offset, chain };
        index.pin(0, at(100, 1));
        index.pin(1500, at(9000, 2));
        index.note(2048, 12000, 3);
        assert_eq!(index.seek(1499), Some((0, at(100, 1))));
        assert_eq!(index.seek(1500), Some((1500, at(9000, 2))));
        assert_eq!(index.seek(2047), Some((1500, at(9000, 2))));
        assert_eq!(index.seek(5000), Some((2048, at(12000, 3))));
    }
}
