//! The trie writer's directory of blocks: (bit offset, address bits above
//! it) -> block number, for every block in use.
//!
//! An update of a prefix below the trie's top level needs the block it
//! ends in; reached from the top entry, that is one dependent cache miss
//! per level (a /48 is four blocks below IPv6's 16-bit top level). One
//! probe of this table finds the block instead, and its line can be
//! prefetched with the update's other first lines (the RIB cell, the top
//! entry), so the block's own lines are one step away rather than four.
//! The walk from the top remains for the blocks an update creates and for
//! the path a removal unlinks.
//!
//! Open addressing with linear probing and backward-shift deletion, at
//! most half full, keyed with a per-table seed (the keys come from peers'
//! prefixes), as the RIB's `PrefixMap`.

/// One cell: 24 bytes (the key's bits, the block, the offset; offset 0 =
/// empty, as every block's offset is at least the top level's width).
#[derive(Clone, Copy, Default)]
struct Cell {
    hi: u64,
    lo: u64,
    node: u32,
    off: u8,
}

pub(crate) struct BlockDir {
    cells: Vec<Cell>,
    len: usize,
    seed: u64,
}

impl Default for BlockDir {
    fn default() -> Self {
        BlockDir { cells: Vec::new(), len: 0, seed: crate::keyhash::new_seed(0x626c_6f63_6b73) }
    }
}

impl BlockDir {
    #[inline]
    fn home(&self, hi: u64, lo: u64, off: u8) -> usize {
        let h = crate::keyhash::hash128(hi, lo, off, self.seed);
        h as usize & self.cells.len().wrapping_sub(1)
    }

    /// `bits` cut to its first `off` bits, as two words.
    #[inline]
    fn key(bits: u128, off: u32) -> (u64, u64) {
        let k = bits & crate::prefix::mask128(off.min(128) as u8);
        ((k >> 64) as u64, k as u64)
    }

    /// Starts loading the line a `find` of the same key reads first.
    #[inline]
    pub(crate) fn prefetch(&self, bits: u128, off: u32) {
        if !self.cells.is_empty() {
            let (hi, lo) = Self::key(bits, off);
            tern_intrin::prefetch_index(&self.cells, self.home(hi, lo, off as u8));
        }
    }

    /// The cell of the block at `off` on the path of `bits`, if any.
    #[inline]
    fn slot(&self, bits: u128, off: u32) -> Option<usize> {
        if self.cells.is_empty() {
            return None;
        }
        let (hi, lo) = Self::key(bits, off);
        let off = off as u8;
        let mask = self.cells.len() - 1;
        let mut i = self.home(hi, lo, off);
        loop {
            let c = self.cells.get(i)?;
            if c.off == 0 {
                return None;
            }
            if c.off == off && c.hi == hi && c.lo == lo {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The block at `off` on the path of `bits`, if there is one.
    #[inline]
    pub(crate) fn find(&self, bits: u128, off: u32) -> Option<u32> {
        self.slot(bits, off).and_then(|i| self.cells.get(i)).map(|c| c.node)
    }

    /// Records block `node` at `off` on the path of `bits` (`off` > 0).
    pub(crate) fn insert(&mut self, bits: u128, off: u32, node: u32) {
        if (self.len + 1) * 2 > self.cells.len() {
            self.grow();
        }
        let (hi, lo) = Self::key(bits, off);
        let c = Cell { hi, lo, node, off: off as u8 };
        self.place(c);
    }

    /// Puts `c` in its key's cell or the first free one after it.
    fn place(&mut self, c: Cell) {
        let mask = self.cells.len().wrapping_sub(1);
        let mut i = self.home(c.hi, c.lo, c.off);
        while let Some(x) = self.cells.get_mut(i) {
            if x.off == 0 {
                *x = c;
                self.len += 1;
                return;
            }
            if x.off == c.off && x.hi == c.hi && x.lo == c.lo {
                x.node = c.node;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Forgets the block at `off` on the path of `bits`.
    pub(crate) fn remove(&mut self, bits: u128, off: u32) {
        let Some(mut hole) = self.slot(bits, off) else { return };
        let mask = self.cells.len() - 1;
        if let Some(c) = self.cells.get_mut(hole) {
            *c = Cell::default();
        }
        self.len -= 1;
        // Backward shift: a later cell of the run moves into the hole when
        // the hole lies on its probe path.
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some(c) = self.cells.get(j).copied() else { return };
            if c.off == 0 {
                return;
            }
            let home = self.home(c.hi, c.lo, c.off);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.cells.swap(hole, j);
                hole = j;
            }
        }
    }

    fn grow(&mut self) {
        let n = (self.cells.len() * 2).max(64);
        let old = std::mem::replace(&mut self.cells, vec![Cell::default(); n]);
        self.len = 0;
        for c in old.into_iter().filter(|c| c.off != 0) {
            self.place(c);
        }
    }

    /// Blocks recorded.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell>()
    }
}
