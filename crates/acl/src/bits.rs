//! Rule sets as bit sets during compilation: dense words or a sorted list
//! of rule positions, whichever is smaller, in one canonical form so equal
//! sets hash and compare equal (equivalence classes are interned by value).

/// A set of rule positions `0..m`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Bits {
    Sparse(Box<[u32]>),
    Dense(Box<[u64]>),
}

/// Most elements kept in sparse form for `words` words of dense form.
fn sparse_max(words: usize) -> usize {
    (words * 2).max(8)
}

impl Bits {
    /// Canonical form of a dense word vector.
    pub(crate) fn from_words(w: Vec<u64>) -> Bits {
        let count: usize = w.iter().map(|x| x.count_ones() as usize).sum();
        if count <= sparse_max(w.len()) { Bits::Sparse(ones(&w).collect()) } else { Bits::Dense(w.into()) }
    }

    /// Calls `f` with each element in ascending order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(u32)) {
        match self {
            Bits::Sparse(l) => l.iter().for_each(|&x| f(x)),
            Bits::Dense(w) => ones(w).for_each(f),
        }
    }

    pub(crate) fn count(&self) -> usize {
        match self {
            Bits::Sparse(l) => l.len(),
            Bits::Dense(w) => w.iter().map(|x| x.count_ones() as usize).sum(),
        }
    }

    fn contains(&self, x: u32) -> bool {
        match self {
            Bits::Sparse(l) => l.binary_search(&x).is_ok(),
            Bits::Dense(w) => w.get(x as usize / 64).is_some_and(|v| v >> (x % 64) & 1 == 1),
        }
    }

    /// `self ∩ other`, cut after the first element that is also in `stop`
    /// (a rule that decides every packet reaching it in this class, so later
    /// rules can never matter), in canonical form. `words` is the dense length.
    pub(crate) fn and_cut(&self, other: &Bits, stop: &[u64], words: usize) -> Bits {
        let cut_list = |mut l: Vec<u32>| {
            if let Some(p) = l.iter().position(|&x| stop.get(x as usize / 64).is_some_and(|v| v >> (x % 64) & 1 == 1)) {
                l.truncate(p + 1);
            }
            Bits::Sparse(l.into())
        };
        match (self, other) {
            (Bits::Dense(a), Bits::Dense(b)) => {
                let mut w: Vec<u64> = a.iter().zip(b.iter()).map(|(x, y)| x & y).collect();
                w.resize(words, 0);
                cut_words(&mut w, stop);
                Bits::from_words(w)
            }
            (Bits::Sparse(l), o) | (o, Bits::Sparse(l)) => {
                let v: Vec<u32> = match o {
                    Bits::Sparse(m) => intersect_sorted(l, m),
                    d => l.iter().copied().filter(|&x| d.contains(x)).collect(),
                };
                cut_list(v)
            }
        }
    }

    /// `self`, cut after its first element in `stop`.
    pub(crate) fn cut(self, stop: &[u64], words: usize) -> Bits {
        match self {
            Bits::Dense(w) => {
                let mut w = w.into_vec();
                w.resize(words, 0);
                cut_words(&mut w, stop);
                Bits::from_words(w)
            }
            s @ Bits::Sparse(_) => {
                let all = Bits::Dense(vec![u64::MAX; words].into());
                s.and_cut(&all, stop, words)
            }
        }
    }
}

fn cut_words(w: &mut [u64], stop: &[u64]) {
    for i in 0..w.len() {
        let hit = w[i] & stop.get(i).copied().unwrap_or(0);
        if hit != 0 {
            let bit = hit.trailing_zeros();
            w[i] &= if bit == 63 { u64::MAX } else { (1u64 << (bit + 1)) - 1 };
            for x in &mut w[i + 1..] {
                *x = 0;
            }
            return;
        }
    }
}

fn intersect_sorted(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// The set bits of `w`, ascending.
pub(crate) fn ones(w: &[u64]) -> impl Iterator<Item = u32> + '_ {
    w.iter().enumerate().flat_map(|(i, &x)| {
        let mut x = x;
        std::iter::from_fn(move || {
            if x == 0 {
                return None;
            }
            let b = x.trailing_zeros();
            x &= x - 1;
            Some(i as u32 * 64 + b)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(words: usize, xs: &[u32]) -> Vec<u64> {
        let mut w = vec![0u64; words];
        for &x in xs {
            w[x as usize / 64] |= 1 << (x % 64);
        }
        w
    }

    fn elems(b: &Bits) -> Vec<u32> {
        let mut v = Vec::new();
        b.for_each(|x| v.push(x));
        v
    }

    #[test]
    fn forms_are_canonical_and_intersections_agree() {
        let words = 4;
        let dense: Vec<u32> = (0..256).filter(|x| x % 3 != 0).collect();
        let a = Bits::from_words(set(words, &dense));
        assert!(matches!(a, Bits::Dense(_)));
        let b = Bits::from_words(set(words, &[1, 2, 100, 200]));
        assert!(matches!(b, Bits::Sparse(_)));
        let none = vec![0u64; words];
        assert_eq!(elems(&a.and_cut(&b, &none, words)), vec![1, 2, 100, 200]);
        assert_eq!(elems(&b.and_cut(&a, &none, words)), vec![1, 2, 100, 200]);
        let stop = set(words, &[100]);
        assert_eq!(elems(&a.and_cut(&b, &stop, words)), vec![1, 2, 100]);
        let aa = a.and_cut(&a, &stop, words);
        assert_eq!(elems(&aa).last(), Some(&100));
        // Same set reached two ways has the same form.
        let via_dense = a.and_cut(&Bits::from_words(set(words, &[1, 2])), &none, words);
        assert_eq!(via_dense, Bits::from_words(set(words, &[1, 2])));
        assert_eq!(
            Bits::from_words(set(words, &[5, 6, 7])).cut(&set(words, &[6]), words),
            Bits::from_words(set(words, &[5, 6]))
        );
    }
}
