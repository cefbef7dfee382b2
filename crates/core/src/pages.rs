//! [`Pages`]: a growable array of fixed-width rows, stored in pages of
//! [`PAGE_ROWS`] rows that are shared (`Arc`) once full.
//!
//! Why not a `Vec`: a `Vec` that doubles keeps up to half its capacity
//! unused and, at 10 M rows, copies gigabytes when it grows; pages never move
//! and waste at most one page. And a full page is immutable and shared, so
//! [`Pages::view`] — a consistent copy of the whole array as it is now — costs
//! one `Arc` clone per page plus a copy of the last, partly filled page. A
//! row changed after a view was taken is copied into a private page first
//! (copy on write), so the view never sees it.

use std::sync::Arc;

/// Rows per page.
pub const PAGE_ROWS: usize = 4096;

/// Fixed-width rows of `T` in shared pages. See the module doc.
#[derive(Clone, Debug)]
pub struct Pages<T> {
    width: usize,
    full: Vec<Arc<[T]>>,
    tail: Vec<T>,
}

impl<T: Copy + Default> Pages<T> {
    /// An empty array of rows of `width` values (at least 1).
    pub fn new(width: usize) -> Pages<T> {
        Pages { width: width.max(1), full: Vec::new(), tail: Vec::new() }
    }

    /// Values per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows stored.
    pub fn len(&self) -> usize {
        self.full.len() * PAGE_ROWS + self.tail.len() / self.width
    }

    /// True when no row is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a row; a row shorter than the width is padded with `T::default()`.
    pub fn push(&mut self, row: &[T]) {
        if self.tail.capacity() == 0 {
            self.tail.reserve_exact(PAGE_ROWS * self.width);
        }
        let take = row.len().min(self.width);
        self.tail.extend_from_slice(&row[..take]);
        self.tail.resize(self.tail.len() + (self.width - take), T::default());
        if self.tail.len() == PAGE_ROWS * self.width {
            let page: Arc<[T]> = std::mem::take(&mut self.tail).into();
            self.full.push(page);
        }
    }

    /// Row `i`.
    ///
    /// # Panics
    /// When `i >= len()` (a caller's bug, never input-driven).
    #[inline]
    pub fn row(&self, i: usize) -> &[T] {
        match self.get(i) {
            Some(row) => row,
            None => panic!("row {i} of {} rows", self.len()),
        }
    }

    /// Row `i`, or `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[T]> {
        let (page, at) = (i / PAGE_ROWS, (i % PAGE_ROWS) * self.width);
        match self.full.get(page) {
            Some(p) => p.get(at..at + self.width),
            None if page == self.full.len() => self.tail.get(at..at + self.width),
            None => None,
        }
    }

    /// Asks the CPU to bring row `i` into its cache ahead of a read: a
    /// hint that changes no result (nothing past the end). For loops over
    /// rows in an order the hardware prefetcher cannot guess (candidate
    /// ids).
    #[inline]
    pub fn prefetch(&self, i: usize) {
        if let Some(row) = self.get(i) {
            prefetch(row);
        }
    }

    /// Replaces row `i` (copying its page first if a view shares it).
    pub fn set(&mut self, i: usize, row: &[T]) {
        let (page, at) = (i / PAGE_ROWS, (i % PAGE_ROWS) * self.width);
        let w = self.width;
        let dst = match self.full.get_mut(page) {
            Some(p) => {
                if Arc::get_mut(p).is_none() {
                    *p = Arc::from(&p[..]);
                }
                &mut Arc::get_mut(p).expect("a page just made private")[at..at + w]
            }
            None => &mut self.tail[at..at + w],
        };
        dst.copy_from_slice(&row[..w]);
    }

    /// A consistent copy of every row as it is now; later changes to `self`
    /// do not show in it. Costs an `Arc` clone per full page and a copy of
    /// the partly filled last page.
    pub fn view(&self) -> Pages<T> {
        Pages { width: self.width, full: self.full.clone(), tail: self.tail.clone() }
    }

    /// Every value in row order, page by page (for writing an image).
    pub fn chunks(&self) -> impl Iterator<Item = &[T]> {
        self.full.iter().map(|p| &p[..]).chain(std::iter::once(&self.tail[..]))
    }

    /// Heap bytes held (pages and the reserved last page).
    pub fn heap_bytes(&self) -> u64 {
        let v = std::mem::size_of::<T>();
        (self.full.len() * (PAGE_ROWS * self.width * v + 16) + self.tail.capacity() * v + self.full.capacity() * 16)
            as u64
    }
}

/// Asks the CPU to bring every cache line of `values` into its cache: a
/// hint that never faults and changes no result (nothing where the target
/// has no such instruction).
#[inline]
pub fn prefetch<T>(values: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let bytes = std::mem::size_of_val(values);
        if bytes == 0 {
            return;
        }
        let start = values.as_ptr().cast::<u8>();
        let misalign = start as usize % LINE;
        // The line holding the first byte, then each line up to the last.
        let first = start.wrapping_sub(misalign);
        let mut at = 0;
        while at < misalign + bytes {
            // SAFETY: a prefetch is a hint: it reads nothing into the
            // program and never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(at).cast()) };
            at += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = values;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_across_pages_and_views_are_frozen() {
        let mut p: Pages<u32> = Pages::new(3);
        let n = PAGE_ROWS * 2 + 17;
        for i in 0..n as u32 {
            p.push(&[i, i + 1, i + 2]);
        }
        assert_eq!(p.len(), n);
        assert_eq!(p.row(5), [5, 6, 7]);
        assert_eq!(p.row(PAGE_ROWS + 3), [PAGE_ROWS as u32 + 3, PAGE_ROWS as u32 + 4, PAGE_ROWS as u32 + 5]);
        let view = p.view();
        p.set(7, &[0, 0, 0]);
        p.set(n - 1, &[9, 9, 9]);
        p.push(&[1]); // padded
        assert_eq!(p.row(7), [0, 0, 0]);
        assert_eq!(view.row(7), [7, 8, 9]);
        assert_eq!(view.row(n - 1), [n as u32 - 1, n as u32, n as u32 + 1]);
        assert_eq!(view.len(), n);
        assert_eq!(p.row(n), [1, 0, 0]);
        let flat: Vec<u32> = view.chunks().flatten().copied().collect();
        assert_eq!(flat.len(), n * 3);
        assert_eq!(&flat[21..24], [7, 8, 9]);
    }

    #[test]
    fn get_is_row_within_and_none_past_the_end() {
        let mut p: Pages<u8> = Pages::new(2);
        assert_eq!(p.get(0), None);
        let n = PAGE_ROWS + 5;
        for i in 0..n {
            p.push(&[i as u8, 1]);
        }
        for i in [0, 1, PAGE_ROWS - 1, PAGE_ROWS, n - 1] {
            assert_eq!(p.get(i), Some(p.row(i)));
            p.prefetch(i);
        }
        // Past the end, in the last page and pages beyond it.
        for i in [n, PAGE_ROWS * 2 - 1, PAGE_ROWS * 2, PAGE_ROWS * 3 + 1, usize::MAX / 4] {
            assert_eq!(p.get(i), None, "{i}");
            p.prefetch(i);
        }
        prefetch::<u64>(&[]);
        prefetch(&[0u64; 100][3..]);
    }
}
