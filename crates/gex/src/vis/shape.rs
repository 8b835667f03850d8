//! Strided shapes (spec "Strided Puts and Gets"): checking a shape with overflow-checked
//! arithmetic, its extent on each side, normalization for the copy loop, and the loop.
//!
//! An element is `elemsz` contiguous bytes; element `(i_0, .., i_{L-1})` (each
//! `i_k < count[k]`) lies at `base + Σ i_k * strides[k]` on each side. The extent of a
//! side is the smallest range `[base + lo, base + hi)` holding every element: `lo` sums
//! the negative `stride * (count - 1)`, `hi` the positive ones plus `elemsz`.

/// One stride level: how many positions, and the byte stride of each side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Level {
    pub(super) count: usize,
    pub(super) src: isize,
    pub(super) dst: isize,
}

/// A checked shape that moves at least one byte, normalized for copying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Shape {
    /// Bytes of one contiguous run after normalization (a multiple of `elemsz`).
    pub(super) elem: usize,
    /// The levels of count > 1, innermost (smallest destination stride) first.
    pub(super) levels: Vec<Level>,
    /// The source's extent `[lo, hi)`, relative to its base.
    pub(super) src: (isize, isize),
    /// The destination's extent `[lo, hi)`, relative to its base.
    pub(super) dst: (isize, isize),
    /// The elements of the shape as given (the GASP `runs`).
    pub(super) elems: usize,
    /// Total bytes moved.
    pub(super) bytes: usize,
}

/// What a strided call does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Checked {
    /// Nothing: `elemsz == 0` or an entry of `count` is zero.
    NoOp,
    /// This shape.
    Moves(Shape),
}

/// Above this many runs, overlapping destinations that the quick test cannot rule out
/// are not searched for element by element (the spec leaves their result undefined).
const EXACT_OVERLAP_LIMIT: usize = 1 << 22;

/// Checks a shape (`elemsz`, `count`, the strides of both sides) for `call`: stride
/// slices long enough, no arithmetic overflow, no two destination elements overlapping.
#[track_caller]
pub(super) fn check(
    call: &str,
    elemsz: usize,
    count: &[usize],
    src_strides: &[isize],
    dst_strides: &[isize],
) -> Checked {
    if elemsz == 0 {
        return Checked::NoOp;
    }
    let levels = count.len();
    for (side, strides) in [("source", src_strides), ("destination", dst_strides)] {
        if strides.len() < levels {
            panic!(
                "gex::{call}: the {side} strides have {} entries, fewer than the {levels} \
                 stride levels of count",
                strides.len()
            );
        }
    }
    if count.contains(&0) {
        return Checked::NoOp;
    }
    let overflow = || -> ! { panic!("gex::{call}: the shape's size overflows the address space") };
    let elems = count
        .iter()
        .try_fold(1usize, |n, &c| n.checked_mul(c))
        .unwrap_or_else(|| overflow());
    let bytes = elems.checked_mul(elemsz).unwrap_or_else(|| overflow());
    let elem = isize::try_from(elemsz).unwrap_or_else(|_| overflow());
    let extent = |strides: &[isize]| -> (isize, isize) {
        let (mut lo, mut hi) = (0isize, elem);
        for (&c, &s) in count.iter().zip(strides) {
            let span = isize::try_from(c - 1)
                .ok()
                .and_then(|n| n.checked_mul(s))
                .unwrap_or_else(|| overflow());
            let side = if span < 0 { &mut lo } else { &mut hi };
            *side = side.checked_add(span).unwrap_or_else(|| overflow());
        }
        // The extent's length must be a size too.
        hi.checked_sub(lo).unwrap_or_else(|| overflow());
        (lo, hi)
    };
    let (src, dst) = (extent(src_strides), extent(dst_strides));
    let given: Vec<Level> = (0..levels)
        .map(|k| Level {
            count: count[k],
            src: src_strides[k],
            dst: dst_strides[k],
        })
        .collect();
    let (elem, levels) = normalize(elemsz, given);
    let shape = Shape {
        elem,
        levels,
        src,
        dst,
        elems,
        bytes,
    };
    if let Some((a, b)) = shape.overlapping_destinations() {
        panic!(
            "gex::{call}: destination elements overlap (at offsets {a} and {b} from the \
             destination base); the spec leaves the result undefined"
        );
    }
    Checked::Moves(shape)
}

/// Drops levels of count 1, folds levels contiguous on both sides into the element,
/// merges levels that continue another's progression on both sides, and orders the
/// rest innermost (smallest destination stride) first.
fn normalize(mut elem: usize, mut levels: Vec<Level>) -> (usize, Vec<Level>) {
    levels.retain(|l| l.count > 1);
    loop {
        let e = elem as isize; // `elem` divides `bytes`, which was checked to fit
        if let Some(i) = levels.iter().position(|l| l.src == e && l.dst == e) {
            elem *= levels.remove(i).count;
            continue;
        }
        let continues = |a: &Level, b: &Level| {
            let n = a.count as isize;
            a.src.checked_mul(n) == Some(b.src) && a.dst.checked_mul(n) == Some(b.dst)
        };
        let pair = (0..levels.len())
            .flat_map(|a| (0..levels.len()).map(move |b| (a, b)))
            .find(|&(a, b)| a != b && continues(&levels[a], &levels[b]));
        match pair {
            Some((a, b)) => {
                levels[a].count *= levels[b].count;
                levels.remove(b);
            }
            None => break,
        }
    }
    levels.sort_by_key(|l| l.dst.unsigned_abs());
    (elem, levels)
}

impl Shape {
    /// Calls `f(src_offset, dst_offset)` for every run of `elem` bytes, innermost level
    /// fastest. Offsets are relative to the bases and lie in the checked extents.
    #[inline(always)]
    pub(super) fn for_each_run(&self, mut f: impl FnMut(isize, isize)) {
        let Some((inner, outer)) = self.levels.split_first() else {
            f(0, 0);
            return;
        };
        let mut index = vec![0usize; outer.len()];
        let (mut so, mut d) = (0isize, 0isize);
        loop {
            let (mut s_i, mut d_i) = (so, d);
            for _ in 0..inner.count {
                f(s_i, d_i);
                s_i = s_i.wrapping_add(inner.src);
                d_i = d_i.wrapping_add(inner.dst);
            }
            // Advance the odometer of the outer levels.
            let mut k = 0;
            loop {
                let Some(l) = outer.get(k) else { return };
                index[k] += 1;
                so = so.wrapping_add(l.src);
                d = d.wrapping_add(l.dst);
                if index[k] < l.count {
                    break;
                }
                so = so.wrapping_sub(l.src.wrapping_mul(l.count as isize));
                d = d.wrapping_sub(l.dst.wrapping_mul(l.count as isize));
                index[k] = 0;
                k += 1;
            }
        }
    }

    /// Copies the shape between two mapped bases.
    ///
    /// # Safety
    /// `src + [self.src.0, self.src.1)` must be valid for reads and `dst + [self.dst.0,
    /// self.dst.1)` for writes.
    pub(super) unsafe fn copy(&self, src: *const u8, dst: *mut u8) {
        // SAFETY: (every arm) the caller's contract; every run lies in the extents.
        unsafe {
            match self.elem {
                1 => self.copy_fixed::<1>(src, dst),
                2 => self.copy_fixed::<2>(src, dst),
                4 => self.copy_fixed::<4>(src, dst),
                8 => self.copy_fixed::<8>(src, dst),
                16 => self.copy_fixed::<16>(src, dst),
                32 => self.copy_fixed::<32>(src, dst),
                n => self.for_each_run(|s, d| {
                    // A copy that tolerates overlap: a source overlapping the
                    // destination gives an undefined result, never undefined behaviour.
                    std::ptr::copy(src.offset(s), dst.offset(d), n)
                }),
            }
        }
    }

    /// [`Shape::copy`] for runs of `N` bytes: one fixed-size load and store each.
    ///
    /// # Safety
    /// As for [`Shape::copy`].
    #[inline(always)]
    unsafe fn copy_fixed<const N: usize>(&self, src: *const u8, dst: *mut u8) {
        self.for_each_run(|s, d| {
            // SAFETY: the caller's contract; the value passes through a register, so
            // overlap of source and destination cannot make the copy unsound.
            unsafe {
                let v = src.offset(s).cast::<[u8; N]>().read_unaligned();
                dst.offset(d).cast::<[u8; N]>().write_unaligned(v);
            }
        });
    }

    /// Two destination offsets whose runs overlap, if any. A destination stride of zero
    /// overlaps at once; levels that each step past everything the inner ones span
    /// cannot overlap; anything else is searched run by run (up to
    /// [`EXACT_OVERLAP_LIMIT`] runs).
    fn overlapping_destinations(&self) -> Option<(isize, isize)> {
        let mut by_stride = self.levels.clone();
        by_stride.sort_by_key(|l| l.dst.unsigned_abs());
        let mut span = self.elem;
        let mut separated = true;
        for l in &by_stride {
            if l.dst == 0 {
                return Some((0, 0));
            }
            if l.dst.unsigned_abs() < span {
                separated = false;
                break;
            }
            span += l.dst.unsigned_abs() * (l.count - 1);
        }
        if separated || self.bytes / self.elem > EXACT_OVERLAP_LIMIT {
            return None;
        }
        let mut starts = Vec::with_capacity(self.bytes / self.elem);
        self.for_each_run(|_, d| starts.push(d));
        starts.sort_unstable();
        starts
            .windows(2)
            .find(|w| w[1] - w[0] < self.elem as isize)
            .map(|w| (w[0], w[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(elemsz: usize, count: &[usize], src: &[isize], dst: &[isize]) -> Shape {
        match check("test", elemsz, count, src, dst) {
            Checked::Moves(s) => s,
            Checked::NoOp => panic!("no-op"),
        }
    }

    fn runs(s: &Shape) -> Vec<(isize, isize)> {
        let mut v = Vec::new();
        s.for_each_run(|a, b| v.push((a, b)));
        v
    }

    #[test]
    fn contiguous_levels_fold_into_one_run() {
        // A 4×3 block of 8-byte elements, dense on both sides: one run of 96 bytes.
        let s = shape(8, &[4, 3], &[8, 32], &[8, 32]);
        assert_eq!((s.elem, s.levels.len(), s.bytes, s.elems), (96, 0, 96, 12));
        assert_eq!(runs(&s), [(0, 0)]);
    }

    #[test]
    fn a_row_of_a_submatrix_is_one_run() {
        // 3 rows of 4 elements from a 10-wide matrix into a dense 4-wide one.
        let s = shape(8, &[4, 3], &[8, 80], &[8, 32]);
        assert_eq!(s.elem, 32);
        assert_eq!(runs(&s), [(0, 0), (80, 32), (160, 64)]);
    }

    #[test]
    fn progressions_merge_and_transposes_stay_elementwise() {
        // Levels 2 and 3 form one progression of stride 16 on both sides.
        let s = shape(4, &[2, 3], &[16, 32], &[16, 32]);
        assert_eq!(
            s.levels,
            [Level {
                count: 6,
                src: 16,
                dst: 16
            }]
        );
        // A 2×3 transpose: destination contiguous along the source's outer level.
        let t = shape(1, &[3, 2], &[1, 3], &[2, 1]);
        assert_eq!(t.elem, 1);
        assert_eq!(t.levels[0].dst, 1);
        let mut got = runs(&t);
        got.sort_by_key(|r| r.1);
        assert_eq!(got, [(0, 0), (3, 1), (1, 2), (4, 3), (2, 4), (5, 5)]);
    }

    #[test]
    fn extents_follow_negative_strides() {
        let s = shape(2, &[3, 2], &[-2, 100], &[2, -6]);
        assert_eq!(s.src, (-4, 102));
        assert_eq!(s.dst, (-6, 6));
    }

    #[test]
    fn degenerate_shapes() {
        assert_eq!(check("t", 0, &[usize::MAX], &[], &[]), Checked::NoOp);
        assert_eq!(check("t", 4, &[3, 0], &[4, 0], &[4, 0]), Checked::NoOp);
        let one = shape(5, &[], &[], &[]);
        assert_eq!((one.bytes, runs(&one)), (5, vec![(0, 0)]));
    }

    #[test]
    #[should_panic(expected = "gex::call: destination elements overlap")]
    fn zero_destination_stride_overlaps() {
        check("call", 4, &[2], &[4], &[0]);
    }

    #[test]
    #[should_panic(expected = "gex::call: destination elements overlap")]
    fn interleaved_destinations_overlap() {
        // Runs of 4 bytes every 3 bytes.
        check("call", 4, &[3], &[4], &[3]);
    }

    #[test]
    fn interleaved_destinations_that_do_not_overlap_are_accepted() {
        // Destination offsets {0, 3} + {0, 2, 4} = {0, 2, 3, 4, 5, 7}: the quick test
        // cannot separate the levels, the search finds no overlap.
        let s = shape(1, &[2, 3], &[100, 1000], &[3, 2]);
        assert_eq!((s.bytes, s.levels.len()), (6, 2));
    }

    #[test]
    #[should_panic(expected = "overflows")]
    fn overflowing_counts_are_refused() {
        check("call", 8, &[usize::MAX, 2], &[8, 8], &[8, 8]);
    }

    #[test]
    #[should_panic(expected = "overflows")]
    fn overflowing_strides_are_refused() {
        check("call", 1, &[3], &[isize::MAX], &[1]);
    }

    #[test]
    #[should_panic(expected = "fewer than the 2 stride levels")]
    fn short_stride_slices_are_refused() {
        check("call", 1, &[1, 0], &[1], &[1, 1]);
    }
}
