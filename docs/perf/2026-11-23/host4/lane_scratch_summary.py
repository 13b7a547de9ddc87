import json,sys
for f in sys.argv[1:]:
    d=json.load(open(f))
    for v in d[0]['formatted']['values']:
        x=v['value']; print(f.split('/')[-1], 'cpu',v['cpu'],'c_miss',x['c_miss'],'m_miss',x['m_miss'],'f_miss',x['f_miss'],'verdict',x['verdict'],'reason',x['reason'])
