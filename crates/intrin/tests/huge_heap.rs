//! tern's global allocator (`tern_intrin::alloc`) puts a heap of small
//! objects on transparent huge pages where the kernel's THP mode lets an
//! advised mapping have them (`madvise` or `always`). glibc's malloc, the
//! system allocator, does not: its small objects stay on 4 KiB pages in
//! `madvise` mode.
#![cfg(feature = "alloc")]

tern_intrin::global_allocator!();

#[test]
fn small_objects_land_on_huge_pages() {
    let Some(mode) = tern_intrin::alloc::thp_mode() else { return };
    if mode == "never" {
        return;
    }
    let before = tern_intrin::alloc::huge_page_bytes().expect("smaps_rollup reads");
    // 64 MiB in 256-byte objects (an SA's size class), each written: the
    // shape of a million SAs' heap, smaller.
    let objs: Vec<Box<[u8; 256]>> = (0..256 * 1024).map(|i| Box::new([i as u8; 256])).collect();
    let after = tern_intrin::alloc::huge_page_bytes().expect("smaps_rollup reads");
    assert!(objs.iter().enumerate().all(|(i, o)| o[255] == i as u8));
    // At least a quarter of it: the kernel may not find a free 2 MiB page
    // for every fault, but with the advice most of them are.
    assert!(
        after.saturating_sub(before) >= 16 << 20,
        "THP {mode}: {} MiB on huge pages before, {} MiB after allocating 64 MiB",
        before >> 20,
        after >> 20
    );
}
