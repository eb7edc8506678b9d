#!/usr/bin/env python3
"""Side-by-side table: Fairway's `bench e2e` JSON lines beside the peer harness's.
usage: sidebyside.py FAIRWAY.jsonl[,...] PEERS.jsonl"""
import json, statistics, sys

def load(paths):
    out = []
    for p in paths.split(','):
        for line in open(p):
            line = line.strip()
            if line.startswith('{'):
                out.append(json.loads(line))
    return out

fw = load(sys.argv[1])
peers = load(sys.argv[2])

def med(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return statistics.median(xs)

def rng(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return ''
    return f' <sub>({fmt(min(xs))}–{fmt(max(xs))})</sub>'

def fmt(x):
    if x is None:
        return '–'
    if isinstance(x, float) and x < 100 and x != int(x):
        return f'{x:.1f}'
    return f'{int(round(x)):,}'

def rows(recs, scenario, who, variant=None):
    return [r for r in recs if r.get('scenario') == scenario and r.get('peer') == who
            and (variant is None or r.get('variant') == variant)]

def g(r, *path):
    for p in path:
        if r is None or p not in r:
            return None
        r = r[p]
    return r

def cell(rs, *path):
    xs = [g(r, *path) for r in rs]
    return fmt(med(xs)) + rng(xs), med(xs)

lines = []
summary = {}
def row(label, enq, e2e, fair, prio):
    bulk, b = cell(enq, 'bulk', 'jobs_per_s')
    seq, s = cell(enq, 'single_sequential', 'jobs_per_s')
    conc, c = cell(enq, 'single_concurrent', 'jobs_per_s')
    _, alone = cell(enq, 'single_concurrent_uncoalesced', 'jobs_per_s')
    e, ev = cell(e2e, 'e2e_jobs_per_s')
    p50, _ = cell(e2e, 'enqueue_to_start', 'p50_ms')
    p99, _ = cell(e2e, 'enqueue_to_start', 'p99_ms')
    bp50, _ = cell(fair, 'b_wait_enqueue_to_start', 'p50_ms')
    bp99, bv = cell(fair, 'b_wait_enqueue_to_start', 'p99_ms')
    last, _ = cell(fair, 'b_last_completion_position')
    low, lv = cell(prio, 'low_started_in_window')
    share, _ = cell(prio, 'low_share_of_starts_while_low_waited')
    n = max(len(enq), len(e2e), len(fair), len(prio))
    summary[label] = dict(bulk=b, seq=s, conc=c, alone=alone, e2e=ev, bp99=bv, low=lv)
    lines.append(f'| {label} | {bulk if enq else "–"} | {seq if enq else "–"} / {conc if enq else "–"} | {e} | {p50} / {p99} | {bp50} / {bp99} | {last} | {low} / 100 | {share} | {n} |')

print('| | bulk enqueue jobs/s | single enqueue jobs/s, sequential / 64 in flight | end to end jobs/s (50,000 no-op) | enqueue to start p50 / p99 ms | noisy neighbour: B wait p50 / p99 ms | B\'s last completion / 20,200 | low jobs started in the 10 s window | low share of starts while low waited | runs |')
print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
enq = rows(fw, 'enqueue', 'fairway')
row('**Fairway, batched**', enq, rows(fw, 'e2e', 'fairway', 'batched'), rows(fw, 'fair', 'fairway', 'batched'), rows(fw, 'prio', 'fairway', 'batched'))
row('**Fairway, sdk-worker**', [], rows(fw, 'e2e', 'fairway', 'sdk-worker'), rows(fw, 'fair', 'fairway', 'sdk-worker'), rows(fw, 'prio', 'fairway', 'sdk-worker'))
row('**Fairway, single**', [], rows(fw, 'e2e', 'fairway', 'single'), [], [])
names = {'bullmq': 'BullMQ 6.7 (Redis, AOF fsync every second)', 'pg-boss': 'pg-boss 12.38 (PostgreSQL, fsync per commit)',
         'bullmq-pg': 'BullMQ 6.7 on PostgreSQL', 'celery': 'Celery 5.7 (Redis)'}
for p in ['bullmq', 'pg-boss', 'bullmq-pg', 'celery']:
    row(names[p], rows(peers, 'enqueue', p), rows(peers, 'e2e', p), rows(peers, 'fair', p), rows(peers, 'prio', p))
for l in lines:
    print(l)
print()
best = lambda k: max(((v[k], n) for n, v in summary.items() if not n.startswith('**') and v[k] is not None), default=(None, None))
lowest = lambda k: min(((v[k], n) for n, v in summary.items() if not n.startswith('**') and v[k] is not None), default=(None, None))
fb = summary['**Fairway, batched**']
fs = summary['**Fairway, single**']
for what, ours, k in [('bulk enqueue', fb['bulk'], 'bulk'), ('end to end, batched', fb['e2e'], 'e2e'),
                      ('end to end, single submissions', fs['e2e'], 'e2e'),
                      ('single enqueue, 64 in flight', fb['conc'], 'conc'),
                      ('single enqueue, 64 in flight, one request each (SDK coalescing off)', fb['alone'], 'conc'),
                      ('single enqueue, sequential', fb['seq'], 'seq')]:
    v, n = best(k)
    if ours is None:
        continue
    print(f'{what}: {fmt(ours)} vs {fmt(v)} ({n}): {ours / v:.2f}x')
v, n = lowest('bp99')
print(f"noisy B p99: batched {fmt(fb['bp99'])} ms, sdk {fmt(summary['**Fairway, sdk-worker**']['bp99'])} vs {fmt(v)} ({n}): {v / fb['bp99']:.1f}x / {v / summary['**Fairway, sdk-worker**']['bp99']:.1f}x lower")
