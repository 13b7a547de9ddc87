import json,sys
for f in sys.argv[1:]:
    r=json.load(open(f))
    for d in r['duts']:
        for s in d['sizes']:
            for t in s['frame_loss']:
                rd=t.get('ring_drops') or {}
                print("%-10s %-8s %.1f lost %6d dut %6d sink %4d holes %s hmax %s busylate %s inholes %s cpu %.0f lat99 %s max %s"%(f.split('/')[-1][:10],d['name'],t['target_mpps'],t['lost'],rd.get('into_dut',-1),rd.get('into_sink',-1),t.get('dut_holes'),t.get('dut_hole_max_us'),t.get('dut_busy_late_max_us'),t.get('lost_in_holes'),t.get('dut_cpu_ns_per_frame') or 0,t['latency']['p99'],t['latency']['max']))
