//! Any bytes as a capture file: the reader and the replay port must end
//! (end of file or a counted error) without panicking, and every packet
//! they deliver must fit its buffer and match the record in the file.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use tern_io::{PcapReader, PcapRxPort};
use tern_packet::{PacketPool, PoolConfig, Port};

fuzz_target!(|data: &[u8]| {
    let mut records = Vec::new();
    if let Ok(mut r) = PcapReader::new(Cursor::new(data)) {
        let mut buf = Vec::new();
        while let Ok(Some(_)) = r.next_record(&mut buf) {
            records.push(buf.clone());
        }
    }
    let Ok(mut port) = PcapRxPort::from_reader("fuzz", Cursor::new(data)) else { return };
    let Ok(mut pool) = PacketPool::new(PoolConfig { frames: 8, ..PoolConfig::default() }) else { return };
    let room = (pool.frame_size() - u32::from(pool.headroom())) as usize;
    let mut out = Vec::new();
    let mut delivered = Vec::new();
    while !port.is_done() {
        out.clear();
        port.rx_burst(&mut pool, &mut out, 4);
        for &i in &out {
            assert!(pool.data(i).len() <= room);
            delivered.push(pool.data(i).to_vec());
        }
        pool.free_all(&out);
    }
    // The port delivers the records that fit, in file order.
    let fitting: Vec<_> = records.into_iter().filter(|r| r.len() <= room).collect();
    assert_eq!(delivered, fitting);
});
