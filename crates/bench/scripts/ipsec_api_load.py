# Adds N SAs through a running tern's API in calls of B SAs (ipsec_sa_add),
# requests encoded before the clock starts; any python3 (stdlib only):
#   python3 ipsec_api_load.py SOCKET N B    (e.g. /run/tern/tern.sock 1000000 20000)
import json, socket, sys, time
sock, n, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reqs = []
for k in range(0, n, b):
    sas = [{"id": i, "spi": 0x10000 + i, "crypto": "aes-128-gcm", "integ": "none",
            "key": "0x%040x" % i, "esn": True, "replay_window": 1024} for i in range(k + 1, min(n, k + b) + 1)]
    reqs.append((json.dumps({"version": 1, "id": k, "op": "ipsec_sa_add", "args": {"sas": sas}}) + "\n").encode())
s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rb")
t = time.monotonic(); worst = 0
for r in reqs:
    a = time.monotonic(); s.sendall(r); line = f.readline()
    worst = max(worst, time.monotonic() - a)
    if b'"ok":true' not in line: print(line[:300]); sys.exit(1)
el = time.monotonic() - t
print(f"{n} SAs in calls of {b}: {el:.2f} s, {n/el:,.0f} SAs/s, slowest call {worst*1000:.0f} ms")
