//! The counter follows what a program allocates and frees.

#[global_allocator]
static GLOBAL: tern_alloc_count::Counting = tern_alloc_count::Counting;

#[test]
fn counts_alloc_realloc_and_free() {
    let before = tern_alloc_count::live();
    let mut v: Vec<u64> = Vec::with_capacity(1000);
    assert_eq!(tern_alloc_count::live() - before, 8000);
    v.reserve_exact(2000);
    assert_eq!(tern_alloc_count::live() - before, 8 * v.capacity() as isize);
    drop(v);
    assert_eq!(tern_alloc_count::live(), before);
    let (b, n) = tern_alloc_count::measure(|| vec![0u8; 4096].into_boxed_slice());
    assert_eq!(n, 4096);
    assert_eq!(b.len(), 4096);
    assert!(tern_alloc_count::rss_bytes() > 0);
}
