pub mod pkt;
