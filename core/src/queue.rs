//! One ordered list of the inbox, stored as an implicit treap in an arena.
//!
//! A `Vec` would make splicing at the front shift all n elements; a deque with
//! tombstones and a Fenwick tree fixes the front but inserting in the middle still
//! shifts. An implicit treap (randomized balanced tree keyed by position, each node
//! holding its subtree size) gives O(log n) expected insert/remove at any position, and
//! parent pointers give an element's position from its stable handle in O(log n).

use std::cmp::Ordering;
#[cfg(feature = "testing")]
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Index meaning "no node".
const NIL: u32 = u32::MAX;

/// Stable handle of one element while it stays in its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Handle(u32);

/// One arena slot; `value` is `None` exactly when the slot is on the free list.
#[derive(Clone)]
struct Node<T> {
    /// The element, moved out when the node is removed.
    value: Option<T>,
    /// Left child, or `NIL`.
    left: u32,
    /// Right child, or `NIL`.
    right: u32,
    /// Parent, or `NIL` for a root.
    parent: u32,
    /// Number of nodes in this subtree.
    size: u32,
    /// Heap priority: a parent's priority is >= its children's.
    prio: u64,
}

/// An ordered sequence with O(log n) positional splice and rank-by-handle.
#[derive(Clone)]
pub(crate) struct Queue<T> {
    /// Arena of nodes; live nodes form one treap rooted at `root`.
    nodes: Vec<Node<T>>,
    /// Free slots, reused before the arena grows.
    free: Vec<u32>,
    /// Root of the tree, or `NIL` when empty.
    root: u32,
    /// SplitMix64 state for priorities.
    rng: u64,
    /// Nodes visited so far (see [`Queue::work`]); only with the `testing` feature.
    #[cfg(feature = "testing")]
    work: Work,
}

/// Node-visit counter, atomic so that counting from `&self` keeps `Queue` `Sync`.
#[cfg(feature = "testing")]
#[derive(Default)]
struct Work(AtomicU64);

#[cfg(feature = "testing")]
impl Clone for Work {
    fn clone(&self) -> Self {
        Work(AtomicU64::new(self.0.load(Relaxed)))
    }
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Queue<T> {
    /// An empty queue.
    pub(crate) fn new() -> Self {
        Queue {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            rng: 0x853c_49e6_748f_ea9b,
            #[cfg(feature = "testing")]
            work: Work::default(),
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.size(self.root) as usize
    }

    /// Whether the queue has no elements.
    pub(crate) fn is_empty(&self) -> bool {
        self.root == NIL
    }

    /// Element at `pos`, if any.
    pub(crate) fn get(&self, mut pos: usize) -> Option<&T> {
        let mut x = self.root;
        while x != NIL {
            self.tick();
            let n = &self.nodes[x as usize];
            let ls = self.size(n.left) as usize;
            match pos.cmp(&ls) {
                Ordering::Less => x = n.left,
                Ordering::Equal => return n.value.as_ref(),
                Ordering::Greater => {
                    pos -= ls + 1;
                    x = n.right;
                }
            }
        }
        None
    }

    /// The element a handle names. Panics only on a stale handle (a caller bug).
    pub(crate) fn value(&self, h: Handle) -> &T {
        self.nodes[h.0 as usize]
            .value
            .as_ref()
            .expect("stale queue handle")
    }

    /// Current position of the element a handle names.
    pub(crate) fn position(&self, h: Handle) -> usize {
        let mut x = h.0;
        assert!(self.nodes[x as usize].value.is_some(), "stale queue handle");
        self.tick();
        let mut pos = self.size(self.nodes[x as usize].left) as usize;
        // Invariant: `pos` is the element's rank within the subtree rooted at `x`.
        loop {
            let p = self.nodes[x as usize].parent;
            if p == NIL {
                return pos;
            }
            self.tick();
            let pn = &self.nodes[p as usize];
            if pn.right == x {
                pos += self.size(pn.left) as usize + 1;
            }
            x = p;
        }
    }

    /// Removes `delete` elements starting at `start` and inserts `inserted` at `start`
    /// (like JavaScript's `Array.prototype.splice` with normalized, in-range coordinates:
    /// `start <= len` and `start + delete <= len`). `on_insert` is called once per
    /// inserted element, in order, with the element and its new handle. Returns the
    /// removed elements in order; their handles become stale.
    pub(crate) fn splice(
        &mut self,
        start: usize,
        delete: usize,
        inserted: impl IntoIterator<Item = T>,
        on_insert: impl FnMut(&T, Handle),
    ) -> Vec<T> {
        debug_assert!(start <= self.len() && delete <= self.len() - start);
        let (a, rest) = self.split(self.root, start);
        let (mid, c) = self.split(rest, delete);
        // Take `mid`'s values before building, so its slots can be reused right away.
        let mut removed = Vec::with_capacity(delete);
        if delete == 1 {
            // One node: no walk (the common removal by id).
            removed.extend(self.nodes[mid as usize].value.take());
            self.free.push(mid);
        } else {
            let (mut stack, mut cur) = (Vec::new(), mid);
            while let Some(x) = self.next_in_order(&mut stack, &mut cur) {
                removed.extend(self.nodes[x as usize].value.take());
                self.free.push(x);
            }
        }
        let new = self.build(inserted, on_insert);
        let left = self.merge(a, new);
        self.root = self.merge(left, c);
        removed
    }

    /// In-order iterator over the elements.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let (mut stack, mut cur) = (Vec::new(), self.root);
        std::iter::from_fn(move || {
            let x = self.next_in_order(&mut stack, &mut cur)?;
            self.nodes[x as usize].value.as_ref()
        })
    }

    /// Count of tree nodes visited so far by all operations (a cost counter for tests).
    #[cfg(feature = "testing")]
    pub(crate) fn work(&self) -> u64 {
        self.work.0.load(Relaxed)
    }

    /// Counts one node visit with the `testing` feature (load + store: no locked
    /// instruction; concurrent readers may lose counts, which only matters to tests);
    /// without it, nothing: shipped builds pay no store per visited node.
    #[inline(always)]
    fn tick(&self) {
        #[cfg(feature = "testing")]
        self.work.0.store(self.work.0.load(Relaxed) + 1, Relaxed);
    }

    /// Size of the subtree at `x` (0 for `NIL`).
    fn size(&self, x: u32) -> u32 {
        self.nodes.get(x as usize).map_or(0, |n| n.size) // `NIL` is never a valid index.
    }

    /// Recomputes `x`'s size from its children and points them back at `x`.
    fn pull(&mut self, x: u32) {
        let Node { left, right, .. } = self.nodes[x as usize];
        for c in [left, right] {
            if c != NIL {
                self.nodes[c as usize].parent = x;
            }
        }
        self.nodes[x as usize].size = 1 + self.size(left) + self.size(right);
    }

    /// Next node of an in-order walk whose pending state is `stack` and `cur`.
    fn next_in_order(&self, stack: &mut Vec<u32>, cur: &mut u32) -> Option<u32> {
        while *cur != NIL {
            stack.push(*cur);
            *cur = self.nodes[*cur as usize].left;
        }
        let x = stack.pop()?;
        *cur = self.nodes[x as usize].right;
        Some(x)
    }

    // `split` and `merge` take and return roots (parent `NIL`): each visited node is
    // detached on entry and reattached by its caller's `pull`.

    /// Splits tree `t` into roots of its first `k` nodes and of the rest.
    fn split(&mut self, t: u32, k: usize) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        // Splitting at either end leaves the tree whole: no path to walk. Like `visit`,
        // detach it, since its caller re-links it (or it becomes a root).
        if k == 0 || k >= self.size(t) as usize {
            self.nodes[t as usize].parent = NIL;
            return if k == 0 { (NIL, t) } else { (t, NIL) };
        }
        self.visit(t);
        let Node { left, right, .. } = self.nodes[t as usize];
        let ls = self.size(left) as usize;
        if k <= ls {
            let (a, b) = self.split(left, k);
            self.nodes[t as usize].left = b;
            self.pull(t);
            (a, t)
        } else {
            let (a, b) = self.split(right, k - ls - 1);
            self.nodes[t as usize].right = a;
            self.pull(t);
            (t, b)
        }
    }

    /// Concatenates trees `a` then `b`; returns the new root.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL || b == NIL {
            return if a == NIL { b } else { a };
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            self.visit(a);
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.pull(a);
            a
        } else {
            self.visit(b);
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.pull(b);
            b
        }
    }

    /// Counts a visit to `x` during `split` or `merge` and detaches it from its parent.
    fn visit(&mut self, x: u32) {
        self.tick();
        self.nodes[x as usize].parent = NIL;
    }

    /// Builds a treap of `items` in O(k) with a stack holding its right spine
    /// (priorities decreasing from bottom to top); returns its root.
    fn build(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut on_insert: impl FnMut(&T, Handle),
    ) -> u32 {
        let mut items = items.into_iter();
        let Some(first) = items.next() else {
            return NIL;
        };
        let leaf = self.alloc(first);
        self.tick();
        on_insert(self.value(Handle(leaf)), Handle(leaf));
        // One item (the common insert) is a root already: no spine to keep.
        let Some(second) = items.next() else {
            return leaf;
        };
        let mut spine: Vec<u32> = vec![leaf];
        for v in std::iter::once(second).chain(items) {
            let x = self.alloc(v);
            self.tick();
            on_insert(self.value(Handle(x)), Handle(x));
            let prio = self.nodes[x as usize].prio;
            // Nodes popped here are complete: their right subtrees are final.
            let mut last = NIL;
            while let Some(&top) = spine.last() {
                if self.nodes[top as usize].prio >= prio {
                    break;
                }
                spine.pop();
                self.pull(top);
                last = top;
            }
            self.nodes[x as usize].left = last;
            if let Some(&top) = spine.last() {
                self.nodes[top as usize].right = x;
            }
            spine.push(x);
        }
        let mut root = NIL;
        while let Some(top) = spine.pop() {
            self.pull(top);
            root = top;
        }
        root
    }

    /// A fresh leaf holding `value`, in a free slot if there is one.
    fn alloc(&mut self, value: T) -> u32 {
        // SplitMix64.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let node = Node {
            value: Some(value),
            left: NIL,
            right: NIL,
            parent: NIL,
            size: 1,
            prio: z ^ (z >> 31),
        };
        if let Some(x) = self.free.pop() {
            self.nodes[x as usize] = node;
            x
        } else {
            let x = u32::try_from(self.nodes.len()).expect("queue arena full");
            assert!(x != NIL, "queue arena full");
            self.nodes.push(node);
            x
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Deterministic xorshift64 test PRNG.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn matches_vec_model() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut q, mut model) = (Queue::new(), Vec::new());
        let mut handles: HashMap<u32, Handle> = HashMap::new();
        let mut next = 0u32;
        for _ in 0..20_000 {
            let start = rng.below(model.len() + 1);
            // Mostly small deletes (the list grows to ~1,000), rarely a long one.
            let room = model.len() - start;
            let delete = if rng.below(400) == 0 {
                rng.below(room + 1)
            } else {
                rng.below(room.min(2) + 1)
            };
            let inserted: Vec<u32> = (next..next + rng.below(4) as u32).collect();
            next += inserted.len() as u32;
            let mut seen = Vec::new();
            let removed = q.splice(start, delete, inserted.clone(), |&v, h| {
                seen.push(v);
                handles.insert(v, h);
            });
            let expected: Vec<u32> = model
                .splice(start..start + delete, inserted.clone())
                .collect();
            assert_eq!((removed.clone(), seen), (expected, inserted));
            for v in removed {
                handles.remove(&v);
            }
            assert_eq!(q.len(), model.len());
            assert_eq!(q.is_empty(), model.is_empty());
            assert!(q.iter().eq(model.iter()));
            for _ in 0..3 {
                let p = rng.below(model.len() + 2);
                assert_eq!(q.get(p), model.get(p));
            }
            assert_eq!(handles.len(), model.len());
            for (&v, &h) in &handles {
                assert_eq!(model[q.position(h)], v);
                assert_eq!(*q.value(h), v);
            }
        }
    }

    /// A queue, its `Vec` model, and the handle of every value ever inserted
    /// (`None` once removed).
    #[derive(Default)]
    struct Harness {
        q: Queue<u32>,
        model: Vec<u32>,
        slot: Vec<Option<Handle>>,
    }

    impl Harness {
        /// Replaces `del` elements at `at` with one fresh value if `insert`.
        fn edit(&mut self, at: usize, del: usize, insert: bool) {
            let fresh = insert.then_some(self.slot.len() as u32);
            let slot = &mut self.slot;
            let removed = self.q.splice(at, del, fresh, |_, h| slot.push(Some(h)));
            let expected: Vec<u32> = self.model.splice(at..at + del, fresh).collect();
            assert_eq!(removed, expected);
            for r in removed {
                self.slot[r as usize] = None;
            }
        }
    }

    /// Fills `n` elements, then returns the average work of 1,000 runs of each of: append
    /// at tail, insert at the middle, remove front, remove by handle, replace by handle
    /// (the length goes n, 2n, 3n, 2n, n, n for n = 1,000).
    fn average_work(n: usize) -> [f64; 5] {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut t = Harness::default();
        for _ in 0..n {
            t.edit(t.q.len(), 0, true);
        }
        let mut result = [0.0; 5];
        for (op, avg) in result.iter_mut().enumerate() {
            let before = t.q.work();
            for _ in 0..1_000 {
                match op {
                    0 => t.edit(t.q.len(), 0, true),
                    1 => t.edit(t.q.len() / 2, 0, true),
                    2 => t.edit(0, 1, false),
                    _ => {
                        let h = loop {
                            if let Some(h) = t.slot[rng.below(t.slot.len())] {
                                break h;
                            }
                        };
                        let pos = t.q.position(h);
                        assert_eq!(t.model[pos], *t.q.value(h));
                        t.edit(pos, 1, op == 4);
                    }
                }
            }
            *avg = (t.q.work() - before) as f64 / 1_000.0;
            assert!(*avg <= 8.0 * (n as f64).log2(), "op {op} at n={n}: {avg}");
        }
        assert!(t.q.iter().eq(t.model.iter()));
        result
    }

    #[test]
    fn work_grows_with_log_n() {
        let (small, large) = (average_work(1_000), average_work(100_000));
        eprintln!("avg work per op at n=1k: {small:?}, n=100k: {large:?}");
        for (s, l) in small.iter().zip(&large) {
            assert!(*l <= 2.0 * s + 8.0, "{small:?} vs {large:?}");
        }
    }

    #[test]
    fn queue_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Queue<String>>();
    }

    #[test]
    fn million_elements_without_deep_recursion() {
        let mut q = Queue::new();
        q.splice(0, 0, 0..1_000_000u32, |_, _| {});
        assert!(q.iter().copied().eq(0..1_000_000));
        let mid = q.splice(1, 999_998, [], |_, _| {});
        assert!(mid.into_iter().eq(1..999_999));
        q.splice(1, 0, 0..1_000_000, |_, _| {});
        let copy = q.clone();
        assert_eq!((q.len(), copy.get(1_000_001)), (1_000_002, Some(&999_999)));
        drop(q);
    }
}
