//! The table's two open-addressed hash tables: stacks by their frames and live objects by address (linear
//! probing, removal by shifting back, no tombstones). Neither allocates. Stacks are appended; those given
//! back ([`Stacks::give_back`]) leave their index to the next new stack and their frames to the next
//! compaction.

use super::Totals;
use crate::sampler::budget::Thinning;

/// A live sampled object: where, from which stack, how big, and when (sequence number, record time and the
/// thinning it was drawn at).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Object {
    /// 0: empty.
    pub(super) address: usize,
    pub(super) stack: u32,
    pub(super) bytes: u64,
    pub(super) sequence: u64,
    pub(super) stamp: Stamp,
}

/// When an object was sampled (the record's seconds, 28 bits: eight years, then the last of them) and the
/// thinning it was drawn at (4 bits), in the four bytes of a slot: a slot stays 32 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Stamp(u32);

impl Stamp {
    const TIME: u32 = (1 << 28) - 1;

    pub(super) fn new(time: u32, thinning: Thinning) -> Stamp {
        Stamp(time.min(Self::TIME) | u32::from(thinning.exponent()) << 28)
    }

    pub(super) fn time(self) -> u32 {
        self.0 & Self::TIME
    }

    pub(super) fn thinning(self) -> Thinning {
        Thinning::of((self.0 >> 28) as u8)
    }
}

/// A stack: its hash, where its frames are in [`Stacks::frames`], what it allocated since it was first
/// sampled, and the sequence numbers of its first and last samples (a stack given back and not yet reused
/// is empty: no frames, `born` 0).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Stack {
    pub(super) hash: u64,
    pub(super) start: u32,
    pub(super) len: u32,
    pub(super) allocated: Totals,
    /// The sequence number of its first sample: an index reused by a new stack is told from the old one by
    /// it.
    pub(super) born: u64,
    /// The sequence number of its latest sample.
    pub(super) last: u64,
}

/// Every stack sampled, with its frames and what it allocated.
pub(super) struct Stacks {
    /// Indexes into `stacks`, plus one (0: empty), by hash.
    pub(super) slots: Box<[u32]>,
    pub(super) stacks: Vec<Stack>,
    pub(super) frames: Vec<usize>,
    /// Indexes given back, for new stacks (reserved for every stack: pushing never allocates).
    pub(super) free: Vec<u32>,
    /// How many stacks were given back, and what they had allocated.
    pub(super) given_back: (u64, Totals),
}

/// The live sampled objects of one shard (by address), in an open-addressed table.
pub(super) struct Objects {
    pub(super) slots: Box<[Object]>,
    pub(super) live: usize,
}

/// `count` empty slots, from zeroed memory (`calloc`): a fresh mapping's pages stay untouched until used.
pub(super) fn zeroed_slots(count: usize) -> Box<[Object]> {
    let layout = std::alloc::Layout::array::<Object>(count).expect("a table of at most a few million slots");
    // SAFETY: `layout` is not empty (`count` >= 16); an all-zero `Object` is a valid one (integers), the
    // empty slot; the allocation is `count` objects of the global allocator, as the box frees it.
    unsafe {
        let memory = std::alloc::alloc_zeroed(layout).cast::<Object>();
        if memory.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(memory, count))
    }
}

/// FNV-1a over the frames: cheap, allocation-free, good enough for addresses.
pub(super) fn hash_frames(frames: &[usize]) -> u64 {
    frames.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &frame| (hash ^ frame as u64).wrapping_mul(0x0100_0000_01b3))
}

/// A hash of an address spread over the table (Fibonacci hashing; allocations are aligned).
fn address_slot(address: usize, mask: usize) -> usize {
    ((address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize & mask
}

impl Stacks {
    /// The index of the stack of `frames` (whose [`hash_frames`] is `hash`), added if new (sampled first at
    /// `sequence`); `None` when there is no room for it.
    pub(super) fn find_or_add(&mut self, frames: &[usize], hash: u64, sequence: u64) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            match self.slots[slot] {
                0 => break,
                index => {
                    let stack = &self.stacks[index as usize - 1];
                    if stack.hash == hash && self.frames[stack.start as usize..][..stack.len as usize] == *frames {
                        return Some(index - 1);
                    }
                }
            }
            slot = (slot + 1) & mask;
        }
        let room = self.frames.capacity() - self.frames.len();
        if (self.stacks.len() == self.stacks.capacity() && self.free.is_empty()) || room < frames.len() {
            return None;
        }
        let start = self.frames.len() as u32;
        self.frames.extend_from_slice(frames);
        let stack = Stack {
            hash,
            start,
            len: frames.len() as u32,
            allocated: Totals::default(),
            born: sequence,
            last: sequence,
        };
        let index = match self.free.pop() {
            Some(index) => {
                self.stacks[index as usize] = stack;
                index
            }
            None => {
                self.stacks.push(stack);
                self.stacks.len() as u32 - 1
            }
        };
        self.slots[slot] = index + 1;
        Some(index)
    }

    /// How many stacks there are (those given back and not reused left out).
    pub(super) fn count(&self) -> usize {
        self.stacks.len() - self.free.len()
    }

    /// Gives back the stacks at `indexes` (each a stack in use): their indexes go to new stacks, their
    /// frames are compacted away, what they allocated is added to [`Stacks::given_back`]. `order` is room
    /// for every stack's index (allocated by the caller: nothing here allocates).
    pub(super) fn give_back(&mut self, indexes: &[u32], order: &mut Vec<u32>) {
        for &index in indexes {
            let stack = std::mem::take(&mut self.stacks[index as usize]);
            self.given_back.0 += 1;
            self.given_back.1.absorb(&stack.allocated);
            self.free.push(index);
        }
        // The frames of the stacks kept, moved down in the order they lie, then the hash table rebuilt.
        order.clear();
        order.extend((0..self.stacks.len() as u32).filter(|&index| self.stacks[index as usize].born != 0));
        order.sort_unstable_by_key(|&index| self.stacks[index as usize].start);
        let mut end = 0;
        for &index in order.iter() {
            let stack = &mut self.stacks[index as usize];
            let (start, len) = (stack.start as usize, stack.len as usize);
            self.frames.copy_within(start..start + len, end);
            stack.start = end as u32;
            end += len;
        }
        self.frames.truncate(end);
        self.slots.iter_mut().for_each(|slot| *slot = 0);
        let mask = self.slots.len() - 1;
        for &index in order.iter() {
            let mut slot = self.stacks[index as usize].hash as usize & mask;
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = index + 1;
        }
    }
}

impl Objects {
    /// Inserts a live object (linear probing); false when the table is as full as it may be (7/8).
    pub(super) fn insert(&mut self, object: Object) -> bool {
        let mask = self.slots.len() - 1;
        if (self.live + 1) * 8 > self.slots.len() * 7 {
            return false;
        }
        let mut slot = address_slot(object.address, mask);
        while self.slots[slot].address != 0 && self.slots[slot].address != object.address {
            slot = (slot + 1) & mask;
        }
        if self.slots[slot].address == 0 {
            self.live += 1;
        }
        self.slots[slot] = object;
        true
    }

    /// Removes the object at `address`, if recorded, shifting later entries back (no tombstones); answers
    /// it.
    pub(super) fn remove(&mut self, address: usize) -> Option<Object> {
        let mask = self.slots.len() - 1;
        let mut slot = address_slot(address, mask);
        loop {
            match self.slots[slot].address {
                0 => return None,
                found if found == address => break,
                _ => slot = (slot + 1) & mask,
            }
        }
        self.live -= 1;
        let removed = self.slots[slot];
        let mut hole = slot;
        let mut next = (hole + 1) & mask;
        while self.slots[next].address != 0 {
            let home = address_slot(self.slots[next].address, mask);
            // `next` may fill the hole if its home is not cyclically within (hole, next].
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.slots[hole] = Object::default();
        Some(removed)
    }
}
