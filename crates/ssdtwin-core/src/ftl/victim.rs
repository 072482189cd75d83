//! Victim index for greedy GC: closed superblocks bucketed by valid count.
//!
//! Buckets are intrusive doubly linked lists over superblock ids, so moving a superblock
//! when its valid count crosses a bucket edge is O(1), and picking the emptiest superblock
//! is a scan of the lowest non-empty bucket. Ties break on the lowest id, so the choice is
//! deterministic.

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug, Default)]
pub struct VictimIndex {
    /// bucket = valid >> shift (a shift, not a division: this runs on every overwrite).
    shift: u32,
    head: Vec<u32>,
    prev: Vec<u32>,
    next: Vec<u32>,
    bucket_of: Vec<u32>, // NIL when not indexed
    count: Vec<u32>,
    lowest: usize,
    members: u32,
}

impl VictimIndex {
    pub fn new(superblocks: u32, max_valid: u32) -> VictimIndex {
        let mut shift = 0;
        while ((max_valid as u64) >> shift) >= 1024 {
            shift += 1;
        }
        let buckets = ((max_valid >> shift) + 1) as usize;
        VictimIndex {
            shift,
            head: vec![NIL; buckets],
            prev: vec![NIL; superblocks as usize],
            next: vec![NIL; superblocks as usize],
            bucket_of: vec![NIL; superblocks as usize],
            count: vec![0; buckets],
            lowest: buckets,
            members: 0,
        }
    }

    #[inline(always)]
    fn bucket(&self, valid: u32) -> usize {
        (valid >> self.shift) as usize
    }

    pub fn contains(&self, sb: u32) -> bool {
        self.bucket_of[sb as usize] != NIL
    }

    pub fn len(&self) -> u32 {
        self.members
    }

    pub fn insert(&mut self, sb: u32, valid: u32) {
        debug_assert!(!self.contains(sb));
        let b = self.bucket(valid);
        self.link(sb, b);
        self.members += 1;
    }

    pub fn remove(&mut self, sb: u32) {
        debug_assert!(self.contains(sb));
        self.unlink(sb);
        self.members -= 1;
    }

    /// The superblock's valid count changed; move it if it crossed a bucket edge.
    #[inline]
    pub fn update(&mut self, sb: u32, valid: u32) {
        let cur = self.bucket_of[sb as usize];
        if cur == NIL {
            return;
        }
        let b = self.bucket(valid);
        if b != cur as usize {
            self.unlink(sb);
            self.link(sb, b);
        }
    }

    fn link(&mut self, sb: u32, b: usize) {
        let h = self.head[b];
        self.next[sb as usize] = h;
        self.prev[sb as usize] = NIL;
        if h != NIL {
            self.prev[h as usize] = sb;
        }
        self.head[b] = sb;
        self.bucket_of[sb as usize] = b as u32;
        self.count[b] += 1;
        if b < self.lowest {
            self.lowest = b;
        }
    }

    fn unlink(&mut self, sb: u32) {
        let b = self.bucket_of[sb as usize] as usize;
        let (p, n) = (self.prev[sb as usize], self.next[sb as usize]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.head[b] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
        self.bucket_of[sb as usize] = NIL;
        self.count[b] -= 1;
    }

    /// The member with the fewest valid units (ties: lowest id).
    pub fn min_valid(&mut self, valid_of: impl Fn(u32) -> u32) -> Option<u32> {
        while self.lowest < self.head.len() && self.count[self.lowest] == 0 {
            self.lowest += 1;
        }
        if self.lowest >= self.head.len() {
            return None;
        }
        let mut best: Option<(u32, u32)> = None;
        let mut sb = self.head[self.lowest];
        while sb != NIL {
            let key = (valid_of(sb), sb);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
            sb = self.next[sb as usize];
        }
        best.map(|(_, sb)| sb)
    }

    /// Every member (any order).
    pub fn members(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.bucket_of.len() as u32).filter(|&sb| self.bucket_of[sb as usize] != NIL)
    }

    /// Check bucket placement against the true valid counts.
    pub fn check(&self, valid_of: impl Fn(u32) -> u32) -> Result<(), String> {
        let mut n = 0;
        for sb in self.members() {
            n += 1;
            let want = self.bucket(valid_of(sb));
            let got = self.bucket_of[sb as usize] as usize;
            if want != got {
                return Err(format!("superblock {sb} in victim bucket {got}, valid count says {want}"));
            }
            if got < self.lowest && self.count[got] > 0 {
                return Err(format!("victim index lowest bucket {} above occupied bucket {got}", self.lowest));
            }
        }
        if n != self.members {
            return Err(format!("victim index counts {} members, holds {n}", self.members));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_minimum_with_id_tiebreak() {
        let mut valid = [50u32, 10, 10, 99];
        let mut v = VictimIndex::new(4, 100);
        for (i, &x) in valid.iter().enumerate() {
            v.insert(i as u32, x);
        }
        assert_eq!(v.min_valid(|s| valid[s as usize]), Some(1));
        v.remove(1);
        assert_eq!(v.min_valid(|s| valid[s as usize]), Some(2));
        valid[3] = 0;
        v.update(3, 0);
        assert_eq!(v.min_valid(|s| valid[s as usize]), Some(3));
        v.check(|s| valid[s as usize]).unwrap();
    }
}
