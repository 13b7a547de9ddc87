use std::time::Duration;
use tern_bench::bpf::{Generator, Sink};
use tern_bench::dut::{self, DutKind, DutNeeds, Firewall, Placement, Setup};
use tern_bench::topology::*;
use tern_bench::traffic::*;
use tern_bench::trial::*;
use tern_bench::scenario::ScenarioName;

fn stats(ns: &tern_bench::netns::Netns, dev: &str) -> String {
    let s = ns.exec("ethtool", &["-S", dev]).unwrap_or_default();
    let l = ns.ip(&["-s", "link", "show", dev]).unwrap_or_default();
    format!("{dev}: {}\n{}", s.lines().filter(|l| !l.trim().ends_with(": 0")).collect::<Vec<_>>().join(" | "), l.lines().skip(2).collect::<Vec<_>>().join(" | "))
}

fn main() -> tern_bench::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let with_dut = args.get(1).map(|s| s.as_str()) == Some("linux");
    let rates: Vec<f64> = args.iter().skip(2).filter_map(|s| s.parse().ok()).collect();
    let prefix = format!("tbp-{}", std::process::id());
    let mut generator = Generator::load()?;
    generator.anchor(&format!("{prefix}-anchor"))?;
    let chain = Chain::build(&prefix, with_dut)?;
    let mut sink = Sink::load()?;
    {
        let s = &mut sink;
        let ns = &chain.sink;
        std::thread::scope(|sc| sc.spawn(move || { ns.enter_current_thread()?; s.attach(SINK_DEV) }).join().unwrap())?;
    }
    chain.sink.thread_napi(SINK_DEV, 0, 50)?;
    let work = std::env::temp_dir();
    let _h = if with_dut {
        let needs = DutNeeds { firewall: Firewall::None, route_file: None, gre: false, vlan: None };
        match dut::setup(DutKind::Linux, &chain, &needs, Placement { dut_cpu: 1, rt_priority: 50 }, None, &work)? {
            Setup::Running(h) => Some(h),
            Setup::NotSupported(r) => panic!("{r}"),
        }
    } else { None };
    let sc = ScenarioName::SingleFlow50fw.expand(None);
    let profile = TrafficProfile { streams: sc.streams.clone(), size: FrameSize::Fixed { size: 64, ipv6: false }, vlan: None, src_mac: chain.gen_link.mac, dst_mac: chain.first_hop.mac };
    let slots = profile.slots()?;
    generator.configure(&slots, &[profile.streams[0].flows])?;
    let mut t = Tester { generator: &mut generator, sink: &mut sink, gen_ns: &chain.gen_ns, gen_ifindex: chain.gen_link.ifindex, profile: &profile,
        timing: TrialTiming { duration: Duration::from_secs(1), drain: Duration::from_secs(1), gen_cpu: 0, rt_priority: 50 } };
    t.warm_up(Duration::from_secs(5), || Ok(()))?;
    if args.get(1).map(|s| s.as_str()) == Some("calls") {
        let ns = &chain.gen_ns; let g = &*t.generator; let idx = chain.gen_link.ifindex; let buf = vec![0u8; 96];
        std::thread::scope(|sc| sc.spawn(move || {
            ns.enter_current_thread().unwrap();
            tern_bench::netns::pin_current_thread(0).unwrap();
            for n in [1u32, 64, 256, 1024, 4096, 16384, 65536] {
                for _ in 0..3 {
                    let st = std::time::Instant::now();
                    let d = g.send(idx, &buf, n, 64).unwrap();
                    let w = st.elapsed();
                    println!("n {n:6} wall {:8.1} us  kernel {:8.1} us  per frame {:.0} ns", w.as_secs_f64()*1e6, d.as_secs_f64()*1e6 , w.as_secs_f64()*1e9/n as f64);
                }
            }
        }).join().unwrap());
        return Ok(());
    }
    for r in rates {
        let o = t.trial(r * 1e6)?;
        println!("target {:.2} Mpps offered {:.3} Mpps sent {} lost {} loss {:.3}% lat {:?}", r, o.offered_pps / 1e6, o.sent, o.lost, o.loss_ratio() * 100.0, o.streams[0].latency);
        println!("{}", stats(&chain.gen_ns, GEN_DEV));
        if let Some(d) = &chain.dut { println!("{}\n{}", stats(d, DUT_IN), stats(d, DUT_OUT)); 
           println!("{}", d.exec("sh", &["-c", "cat /proc/net/softnet_stat | cut -d' ' -f1-3"]).unwrap_or_default()); }
        println!("{}", stats(&chain.sink, SINK_DEV));
    }
    Ok(())
}
