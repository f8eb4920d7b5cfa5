//! A sweep's walk of every slot list at once, for both stores: the hashed wheel's node
//! stacks (`nodes.rs`, when its slab has outgrown rebuilding them) and the hierarchical
//! wheel's link queues (`lists.rs`).
//!
//! A sweep drops the tombstones of every list. Walking one list after another waits on a
//! cache miss at every element of a big store, each load depending on the one before; here
//! `LANES` lists are walked at once, an element of each in turn, so the loads of different
//! lists overlap (a steady state of cancels at 1e5 timers: 189 ns a cancel and start with one
//! list at a time, about 50 with 8 or 16 at once). A store small enough to sit in a core's
//! cache has no misses to overlap, and walks its lists one after another.

use crate::store::NIL;

/// How many lists a sweep walks at once.
const LANES: usize = 16;

/// The most elements a store may hold for its sweep to walk its lists one after another:
/// such a store fits in a core's cache (640 KiB of 20-byte nodes), and the lanes' bookkeeping
/// would cost more than the loads they overlap (steady state at 1e3, harness: 0.86–0.94× the
/// time of the lanes).
const IN_TURN_MAX: usize = 1 << 15;

/// Singly linked slot lists with an occupancy bitmap, as a sweep sees them.
pub(crate) trait SweptLists {
    /// The occupancy bitmap: a bit a list, set while the list is not empty.
    fn occupied(&self) -> &[u64];
    /// List `list`'s first element (not `NIL`: the list is occupied).
    fn head(&self, list: u32) -> u32;
    /// Reads element `at`: the element after it, and whether it stays.
    fn visit(&mut self, at: u32) -> (u32, bool);
    /// Takes element `at` out of list `list`: `before` is the last element kept before it
    /// (`NIL` when none, so `next` becomes the head). The element is not yet free.
    fn unlink(&mut self, list: u32, before: u32, at: u32, next: u32);
    /// List `list` has been walked; `last` is its last element kept (`NIL`: it is empty now).
    fn finish(&mut self, list: u32, last: u32);
}

/// One list a sweep is walking: the element it is at and the last one kept before it.
/// Idle when `cursor` is `NIL`.
#[derive(Clone, Copy)]
struct Lane {
    list: u32,
    before: u32,
    cursor: u32,
}

impl Lane {
    const IDLE: Lane = Lane { list: 0, before: NIL, cursor: NIL };
}

/// The occupied lists of a bitmap, in order; a word is read when the walk reaches it, so
/// clearing the bits of lists already handed out changes nothing.
struct Occupied {
    word: usize,
    bits: u64,
}

impl Occupied {
    fn next(&mut self, occupied: &[u64]) -> Option<u32> {
        while self.bits == 0 {
            if self.word == occupied.len() {
                return None;
            }
            self.bits = occupied[self.word];
            self.word += 1;
        }
        let list = ((self.word - 1) * 64) as u32 + self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        Some(list)
    }
}

/// How a sweep walks the lists.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Walk {
    /// One list after another.
    InTurn,
    /// `LANES` lists at once, an element of each in turn.
    InLanes,
}

impl Walk {
    /// The walk for a store of `elements` elements in all: in turn up to `IN_TURN_MAX`.
    pub(crate) fn for_size(elements: usize) -> Walk {
        if elements <= IN_TURN_MAX {
            Walk::InTurn
        } else {
            Walk::InLanes
        }
    }
}

/// Walks every occupied list of `lists` as `walk` says, unlinking the elements that do not
/// stay (a list's kept elements keep their order) and finishing each list. How many elements
/// were unlinked.
pub(crate) fn sweep(lists: &mut impl SweptLists, walk: Walk) -> usize {
    match walk {
        Walk::InTurn => in_turn(lists),
        Walk::InLanes => in_lanes(lists),
    }
}

/// [`sweep`] one list after another.
fn in_turn(lists: &mut impl SweptLists) -> usize {
    let mut occupied = Occupied { word: 0, bits: 0 };
    let mut dropped = 0;
    while let Some(list) = occupied.next(lists.occupied()) {
        let (mut before, mut cursor) = (NIL, lists.head(list));
        while cursor != NIL {
            let (next, stays) = lists.visit(cursor);
            if stays {
                before = cursor;
            } else {
                lists.unlink(list, before, cursor, next);
                dropped += 1;
            }
            cursor = next;
        }
        lists.finish(list, before);
    }
    dropped
}

/// [`sweep`] `LANES` lists at once, an element of each in turn.
fn in_lanes(lists: &mut impl SweptLists) -> usize {
    let mut occupied = Occupied { word: 0, bits: 0 };
    let mut start = |lists: &mut _, lane: &mut Lane| -> bool {
        let Some(list) = occupied.next(SweptLists::occupied(lists)) else {
            *lane = Lane::IDLE;
            return false;
        };
        let head = SweptLists::head(lists, list);
        debug_assert_ne!(head, NIL, "an occupied list");
        *lane = Lane { list, before: NIL, cursor: head };
        true
    };
    let mut lanes = [Lane::IDLE; LANES];
    let mut active = 0;
    for lane in &mut lanes {
        active += usize::from(start(lists, lane));
    }
    let mut dropped = 0;
    while active > 0 {
        for lane in &mut lanes {
            if lane.cursor == NIL {
                continue;
            }
            let at = lane.cursor;
            let (next, stays) = lists.visit(at);
            if stays {
                lane.before = at;
            } else {
                lists.unlink(lane.list, lane.before, at, next);
                dropped += 1;
            }
            lane.cursor = next;
            if next == NIL {
                lists.finish(lane.list, lane.before);
                if !start(lists, lane) {
                    active -= 1;
                }
            }
        }
    }
    dropped
}
