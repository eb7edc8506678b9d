import os, threading, time
def worker(fd, base, n, out):
    buf = b'y' * 4096
    t = time.perf_counter()
    for i in range(n):
        os.pwrite(fd, buf, base + (i % 64) * 4096)
        os.fdatasync(fd)
    out.append(time.perf_counter() - t)
for mode in ['same-file', 'two-files']:
    for threads in [1, 2, 4]:
        fds = []
        for k in range(threads if mode == 'two-files' else 1):
            fn = f'/tmp/pf{k}.dat'
            fd = os.open(fn, os.O_RDWR | os.O_CREAT)
            os.pwrite(fd, b'\0' * (4096 * 64 * 8), 0); os.fsync(fd)
            fds.append(fd)
        out = []; n = 400
        ts = [threading.Thread(target=worker, args=(fds[k % len(fds)], k * 4096 * 64, n, out)) for k in range(threads)]
        t = time.perf_counter()
        [x.start() for x in ts]; [x.join() for x in ts]
        el = time.perf_counter() - t
        print(mode, threads, 'threads:', round(threads * n / el), 'syncs/s')
        for fd in fds: os.close(fd)
for k in range(4):
    try: os.unlink(f'/tmp/pf{k}.dat')
    except FileNotFoundError: pass
