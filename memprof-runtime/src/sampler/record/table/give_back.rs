//! Giving stacks back when the table is nearly full: those that hold nothing, are idle and hold nothing of a
//! tracked window's peak go to new stacks, so a record kept for weeks still sees new call paths.

use super::{Held, Table, Totals};

impl Table {
    /// How many stacks were given back ([`Table::give_back_idle`]), and what they had allocated.
    pub(crate) fn given_back(&self) -> (u64, Totals) {
        self.stacks.with(|stacks| stacks.given_back)
    }

    /// Gives back, when the stacks or their frames fill more than 7/8 of their room, the stacks that hold
    /// nothing (`held`, a reading by stack index), had no sample from sequence number `idle_since` on, and
    /// hold nothing of a tracked window's high-water mark: the least recently sampled first, until 3/4 of
    /// the room is used (or none is left to give). Their indexes go to new stacks, so new stacks are still
    /// recorded when the program's paths outnumber the room; what they allocated counts in
    /// [`Table::given_back`]. Answers the indexes given back. Allocates before taking a lock, never under
    /// one.
    pub(crate) fn give_back_idle(&self, idle_since: u64, held: &[Held]) -> Vec<u32> {
        let (count, frames) = self.stacks.with(|stacks| (stacks.count(), stacks.frames.len()));
        let (room, frame_room) = (self.capacity.stacks, self.capacity.frames);
        if count * 8 <= room * 7 && frames * 8 <= frame_room * 7 {
            return Vec::new();
        }
        let mut idle: Vec<(u64, u32, u32)> = Vec::with_capacity(room);
        self.stacks.with(|stacks| {
            let candidates = stacks.stacks.iter().zip(0..).filter(|(stack, index)| {
                stack.born != 0
                    && stack.last < idle_since
                    && held.get(*index as usize).is_some_and(|held| held.live.objects == 0)
            });
            idle.extend(candidates.take(room).map(|(stack, index)| (stack.last, index, stack.len)));
        });
        idle.retain(|&(_, index, _)| !self.peaks.holds(index));
        idle.sort_unstable();
        let (mut stacks_left, mut frames_left) = (count, frames);
        let chosen: Vec<u32> = idle
            .iter()
            .take_while(|&&(_, _, len)| {
                let more = stacks_left * 4 > room * 3 || frames_left * 4 > frame_room * 3;
                stacks_left -= 1;
                frames_left -= len as usize;
                more
            })
            .map(|&(_, index, _)| index)
            .collect();
        let mut order = Vec::with_capacity(room);
        let mut given = Vec::with_capacity(chosen.len());
        self.stacks.with(|stacks| {
            // A stack sampled since it was chosen is kept: it may hold an object by now.
            given.extend(chosen.iter().copied().filter(|&index| stacks.stacks[index as usize].last < idle_since));
            stacks.give_back(&given, &mut order);
        });
        given
    }
}
