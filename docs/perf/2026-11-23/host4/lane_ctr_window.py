import json,glob,sys
names="FORWARDED PUNT_NEIGH PUNT_LOCAL PUNT_NO_ROUTE PUNT_TTL PUNT_TOO_BIG PUNT_SCOPE PUNT_UNRESOLVED PUNT_OPTIONS PUNT_FRAGMENT PUNT_GRE PUNT_ACL PUNT_FIB PUNT_EGRESS PUNT_OTHER PASS_LOCAL PASS_NEIGH PASS_MCAST PASS_OTHER".split()
def load(f):
    d=json.load(open(f))
    out={}
    for e in d:
        fm=e.get('formatted',e)
        k=fm['key']
        out[k]=sum(v['value'] for v in fm['values'] if isinstance(v['value'],int))
    return out
n=lambda k: names[k] if k < len(names) else k
for f in sorted(glob.glob(sys.argv[1]+'/*.ctr.json')):
    a=load(f.replace('.ctr.json','.ctr0.json')); b=load(f)
    print(f.split('/')[-1], 'window', {n(k):b[k]-a.get(k,0) for k in b if b[k]-a.get(k,0)}, 'before', {n(k):a[k] for k in a if a[k]})
