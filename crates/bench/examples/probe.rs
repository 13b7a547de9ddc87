use std::time::Duration;
use tern_bench::bpf::{Generator, Sink};
use tern_bench::dut::{self, DutKind, DutNeeds, Firewall, Placement, Setup};
use tern_bench::topology::*;
use tern_bench::traffic::*;
use tern_bench::trial::*;

fn main() -> tern_bench::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let with_dut = args.get(1).map(|s| s.as_str()) == Some("linux");
    let rates: Vec<f64> = args.iter().skip(2).filter_map(|s| s.parse().ok()).collect();
    let prefix = format!("tbp-{}", std::process::id());
    let chain = Chain::build(&prefix, with_dut)?;
    let work = std::env::temp_dir();
    let _h = if with_dut {
        let needs = DutNeeds { firewall: Firewall::None, route_file: None, gre: false, vlan: None };
        match dut::setup(DutKind::Linux, &chain, &needs, Placement { dut_cpu: 1 }, None, &work)? {
            Setup::Running(h) => Some(h),
            Setup::NotSupported(r) => panic!("{r}"),
        }
    } else { None };
    let mut generator = Generator::load()?;
    let mut sink = Sink::load()?;
    {
        let s = &mut sink;
        let ns = &chain.sink;
        std::thread::scope(|sc| sc.spawn(move || { ns.enter_current_thread()?; s.attach(SINK_DEV) }).join().unwrap())?;
    }
    chain.sink.exec("sh", &["-c", "echo 1 > /sys/class/net/tb-sink/threaded"]).ok();
    let profile = TrafficProfile {
        streams: vec![StreamSpec { label: "legit".into(), counted: true, src4: GEN_V4, dst4: "198.18.0.1".parse().unwrap(), src6: GEN_V6, dst6: "2001:2::1".parse().unwrap(), flows: FlowSpec::SINGLE }],
        size: FrameSize::Fixed { size: 64, ipv6: false }, vlan: None,
        src_mac: chain.gen_link.mac, dst_mac: chain.first_hop.mac,
    };
    let slots = profile.slots()?;
    generator.configure(&slots, &[profile.streams[0].flows])?;
    let mut t = Tester { generator: &mut generator, sink: &mut sink, gen_ns: &chain.gen_ns, gen_ifindex: chain.gen_link.ifindex, profile: &profile,
        timing: TrialTiming { duration: Duration::from_secs(2), drain: Duration::from_secs(1), gen_cpu: 0 } };
    t.warm_up(Duration::from_secs(5), || Ok(()))?;
    for r in rates {
        let o = t.trial(r * 1e6)?;
        println!("target {:.2} Mpps offered {:.3} Mpps sent {} lost {} loss {:.3}% lat {:?}", r, o.offered_pps / 1e6, o.sent, o.lost, o.loss_ratio() * 100.0, o.streams[0].latency);
    }
    Ok(())
}
