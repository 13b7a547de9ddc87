#!/usr/bin/env python3
"""Print docs/PERFORMANCE.md's tables from the raw results they cite.

  scripts/perf-table.py rfc2544 FILE.json [LOAD_INDEX]   NDR/PDR/CPU per DUT, same-run ratios
  scripts/perf-table.py sink FILE.json                   frame-loss runs without a search
  scripts/perf-table.py engine FILE.json...              `tern-bench engine --json` runs: medians
  scripts/perf-table.py callgrind FILE.txt               "SCENARIO TOTAL_Ir" lines -> per packet
  scripts/perf-table.py losses FILE.json...              frames lost per trial, and how many at the DUT's ring

LOAD_INDEX picks the frame-loss trial whose router CPU per frame is shown
(0-4: 10/25/50/75/100 % of the ceiling; default 2). Standard library only.
"""
import json
import re
import signal
import statistics
import sys
import time

NAMES = {
    "tern": "tern, XDP lane",
    "tern-afxdp-busy": "tern, userspace AF_XDP (busy polling)",
    "tern-afxdp": "tern, userspace AF_XDP",
    "tern-afpacket": "tern, userspace AF_PACKET",
    "xdp-fwd": "in-kernel XDP forwarding (xdp-fwd)",
    "linux": "Linux forwarding",
    "linux-nft": "Linux + nftables",
    "testpmd": "DPDK testpmd (af_packet)",
    "testpmd-afxdp": "DPDK testpmd (af_xdp)",
    "direct": "no router (ceiling)",
}
# --packets 1000000 runs whole batches of 256
CALLGRIND_PACKETS = 1_000_192


def tidy(cmd):
    """The command as docs/PERFORMANCE.md spells it: `tern-bench ...` (from `tern-bench ...`
    or, in older results, `tern bench ...`), the table as FULL_TABLE."""
    cmd = re.sub(r"\S*full-table\S*", "FULL_TABLE", cmd)
    cmd = re.sub(r" --(html|work-dir) \S+", "", cmd)
    m = re.search(r"\S*tern[- ]bench ", cmd)
    return "tern-bench " + cmd[m.end():] if m else cmd


def header(d):
    c = d["conditions"]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(c["started_unix"]))
    print(f"{when}; {c['cpu_model']}, {c['cpus']} vCPUs, kernel {c['kernel']}; "
          f"DUT on CPU {c['dut_cpu']}, generator CPU {c['gen_cpu']}, sink CPU {c['sink_cpu']}; "
          f"{c['trial_secs']:g} s trials, {c.get('trials_per_load') or 1} per load; load average {c['loadavg'][:14]}")
    print(f"`{tidy(c['command'])}`")


def fmt(x, nd=3):
    return "" if x is None else f"{x:.{nd}f}"


def rfc2544(path, idx=2):
    d = json.load(open(path))
    header(d)
    duts = [x for x in d["duts"] if x["status"] == "ok"]
    ref = next((x for x in duts if x["name"] == "tern"), None)

    def at(x):
        s = x["sizes"][0]
        t = s["frame_loss"][idx] if len(s["frame_loss"]) > idx else None
        return s, t

    rs, rt = at(ref) if ref else (None, None)
    print(f"router CPU at {rt['target_mpps']:.3f} Mpps asked" if rt else "")
    print("| DUT | PDR, Mpps | NDR, Mpps | router CPU, ns/packet | tern's PDR / this | tern's CPU / this |")
    print("|---|---|---|---|---|---|")
    for x in [d["ceiling"]] + duts:
        s, t = at(x)
        pdr, ndr = (s.get("pdr") or {}).get("mpps"), (s.get("ndr") or {}).get("mpps")
        cpu = t.get("dut_cpu_ns_per_frame") if t and x is not d["ceiling"] else None
        r1 = fmt(rs["pdr"]["mpps"] / pdr, 2) if rs and rs.get("pdr") and pdr else ""
        r2 = fmt(rt["dut_cpu_ns_per_frame"] / cpu, 2) if rt and rt.get("dut_cpu_ns_per_frame") and cpu else ""
        top = "*" if pdr and s["pdr"].get("upper_mpps") is None and x is not d["ceiling"] else ""
        print(f"| {NAMES.get(x['name'], x['name'])} | {fmt(pdr)}{top} | {fmt(ndr)} | {fmt(cpu, 0)} | {r1} | {r2} |")
    for x in d["duts"]:
        if x["status"] != "ok":
            print(f"{x['name']}: {x['status']}: {(x.get('message') or '')[:100]}")


def sink(path):
    d = json.load(open(path))
    header(d)
    duts = [d["ceiling"]] + [x for x in d["duts"] if x["status"] == "ok"]
    sizes = [s["size"] for s in duts[0]["sizes"]]
    print("| size | " + " | ".join(NAMES.get(x["name"], x["name"]) for x in duts) + " |")
    print("|---" * (len(duts) + 1) + "|")
    for i, sz in enumerate(sizes):
        cells = []
        for x in duts:
            fl = x["sizes"][i]["frame_loss"]
            cells.append(fmt(max(t["offered_mpps"] * (1 - t["loss_pct"] / 100) for t in fl), 2))
        print(f"| {sz} | " + " | ".join(cells) + " |")


def engine(paths):
    runs = [json.load(open(p)) for p in paths]
    print(f"`{tidy(runs[0]['command'])}` x{len(runs)}; frame {runs[0]['frame_len']} bytes, workers {runs[0]['workers']}")
    print("| scenario | flows | rules | Mpps, median (range) | ns/packet | vs its plain, median of same-run ratios |")
    print("|---|---|---|---|---|---|")
    for sc in [r["scenario"] for r in runs[0]["runs"]]:
        rows = [next(x for x in r["runs"] if x["scenario"] == sc) for r in runs]
        base = "plain6" if sc == "plain6" or "flow6" in sc else "plain"
        ratios = [next(x for x in r["runs"] if x["scenario"] == sc)["ns_per_packet"]
                  / next(x for x in r["runs"] if x["scenario"] == base)["ns_per_packet"] for r in runs]
        m = [x["mpps"] for x in rows]
        print(f"| {sc} | {rows[0]['flows']} | {rows[0]['acl_rules']} | {statistics.median(m):.2f} "
              f"({min(m):.2f}-{max(m):.2f}) | {statistics.median(x['ns_per_packet'] for x in rows):.1f} | "
              f"{statistics.median(ratios):.3f} (vs {base}) |")


def callgrind(path):
    tot = dict((ln.split()[0], int(ln.split()[1])) for ln in open(path) if ln.strip())
    plain = tot["plain"]
    for sc, v in tot.items():
        per = v / CALLGRIND_PACKETS if sc == "plain" else (v - plain) / CALLGRIND_PACKETS
        print(f"{sc} {per:.1f}")


def losses(paths):
    for p in paths:
        d = json.load(open(p))
        for x in d["duts"]:
            fl = x["sizes"][0]["frame_loss"]
            print(p, x["name"], "lost", [t["lost"] for t in fl],
                  "into the DUT's ring", [(t.get("ring_drops") or {}).get("into_dut") for t in fl])


def main(a):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    if len(a) < 2:
        sys.exit(__doc__)
    if a[0] == "rfc2544":
        rfc2544(a[1], int(a[2]) if len(a) > 2 else 2)
    elif a[0] == "sink":
        sink(a[1])
    elif a[0] == "engine":
        engine(a[1:])
    elif a[0] == "losses":
        losses(a[1:])
    elif a[0] == "callgrind":
        callgrind(a[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
