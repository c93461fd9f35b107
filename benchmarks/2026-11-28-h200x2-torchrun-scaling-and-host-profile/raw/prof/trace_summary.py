import json,gzip,sys
d=json.load(gzip.open(sys.argv[1]))
ev=[e for e in d['traceEvents'] if e.get('ph')=='X']
k=[e for e in ev if e.get('cat') in ('kernel','gpu_memcpy','gpu_memset')]
t0=min(e['ts'] for e in k); t1=max(e['ts']+e['dur'] for e in k)
def union(iv):
    iv=sorted(iv); tot=0; cs,ce=None,None
    for s,e in iv:
        if cs is None: cs,ce=s,e
        elif s<=ce: ce=max(ce,e)
        else: tot+=ce-cs; cs,ce=s,e
    if cs is not None: tot+=ce-cs
    return tot
nccl=[(e['ts'],e['ts']+e['dur']) for e in k if 'nccl' in e['name'].lower()]
comp=[(e['ts'],e['ts']+e['dur']) for e in k if 'nccl' not in e['name'].lower()]
n=int(sys.argv[2])
print('window ms/step',(t1-t0)/1000/n,'compute busy',union(comp)/1000/n,'nccl kernel',sum(b-a for a,b in nccl)/1000/n,'nccl count/step',len(nccl)/n,'all busy',union(comp+nccl)/1000/n)
from collections import Counter
c=Counter()
for e in k:
    if 'nccl' in e['name'].lower(): c[e['name'][:60]]+=e['dur']
print(c.most_common(5))
# gaps in compute stream > 100us
gaps=[];iv=sorted(comp+nccl);ce=iv[0][1]
for s,e in iv[1:]:
    if s>ce: gaps.append(s-ce)
    ce=max(ce,e)
gaps.sort(reverse=True); print('gaps total ms/step',sum(gaps)/1000/n,'n gaps>50us per step',sum(1 for g in gaps if g>50)/n, 'largest', gaps[:10])
