//! The shapes a rooted collective moves data along: who a rank receives from and sends
//! to. Ranks here are *virtual*: the root is 0 (a team rank `r` is `(r - root) mod n`).

use smallvec::SmallVec;

/// The children of a rank in a tree: inline up to a binomial tree's over 16 ranks.
pub(crate) type Children = SmallVec<[u32; 4]>;

/// How a rooted collective spreads over the team (selectable by name, see
/// [`Algorithm`](super::Algorithm)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tree {
    /// The root talks to every other rank directly.
    Flat,
    /// A binomial tree: virtual rank `v` has the children `v + 2^j` for every `2^j`
    /// below the lowest set bit of `v` (every `j` for the root), and its subtree holds
    /// the ranks `[v, v + lowbit(v))`: `ceil(log2 n)` levels.
    Binomial,
}

impl Tree {
    /// The parent of virtual rank `v` (none for the root).
    pub(crate) fn parent(self, v: u32) -> Option<u32> {
        match (self, v) {
            (_, 0) => None,
            (Tree::Flat, _) => Some(0),
            (Tree::Binomial, v) => Some(v & (v - 1)),
        }
    }

    /// The children of virtual rank `v` in a team of `n`, by increasing virtual rank:
    /// each child's subtree follows the previous one's, so combining them in this
    /// order keeps rank order.
    pub(crate) fn children(self, v: u32, n: u32) -> Children {
        match self {
            Tree::Flat if v == 0 => (1..n).collect(),
            Tree::Flat => Children::new(),
            Tree::Binomial => {
                let limit = if v == 0 {
                    u64::MAX
                } else {
                    u64::from(v & v.wrapping_neg())
                };
                let mut children = Children::new();
                let mut step = 1u64;
                while step < limit && u64::from(v) + step < u64::from(n) {
                    children.push(v + step as u32);
                    step <<= 1;
                }
                children
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tree;

    /// Every rank but the root has exactly one parent, which lists it as a child.
    #[test]
    fn parents_and_children_agree() {
        for tree in [Tree::Flat, Tree::Binomial] {
            for n in 1..=33 {
                let mut seen = vec![0; n as usize];
                for v in 0..n {
                    for c in tree.children(v, n) {
                        assert_eq!(tree.parent(c), Some(v), "{tree:?} n={n} v={v} c={c}");
                        seen[c as usize] += 1;
                    }
                }
                assert_eq!(seen[0], 0);
                assert!(
                    seen[1..].iter().all(|&s| s == 1),
                    "{tree:?} n={n}: {seen:?}"
                );
            }
        }
    }

    /// A binomial subtree is the contiguous range after its root: the children's
    /// subtrees tile it in order.
    #[test]
    fn binomial_subtrees_are_contiguous_and_in_order() {
        fn subtree(v: u32, n: u32) -> Vec<u32> {
            let mut all = vec![v];
            for c in Tree::Binomial.children(v, n) {
                all.extend(subtree(c, n));
            }
            all
        }
        for n in 1..=40 {
            assert_eq!(subtree(0, n), (0..n).collect::<Vec<_>>(), "n={n}");
        }
    }
}
