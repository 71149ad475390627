"""Why the co-located channel is a SEQPACKET socket: a Python round trip over one, against a shared-memory ring whose
two sides spin (Python has no futex wait without native code). Two processes, 40-byte messages; run with
/usr/bin/python3 perf/colocated/transport_choice.py [round trips]. Figures: perf/README.md "co-located channel"."""
import mmap, os, socket, struct, time, sys
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
def pct(xs, f): xs = sorted(xs); return xs[int(f * len(xs))] / 1e3
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
pid = os.fork()
if pid == 0:
    a.close()
    while True:
        m = b.recv(256)
        if not m: os._exit(0)
        b.send(m)
b.close(); msg = b"x" * 40; lat = []
for i in range(N):
    t = time.perf_counter_ns(); a.send(msg); a.recv(256); lat.append(time.perf_counter_ns() - t)
a.close(); os.waitpid(pid, 0)
print(f"seqpacket   p50 {pct(lat,.5):8.1f} us  p99 {pct(lat,.99):9.1f} us")
m = mmap.mmap(-1, 4096)
U = struct.Struct("<Q")
pid = os.fork()
if pid == 0:
    seen = 0
    while True:
        (s,) = U.unpack_from(m, 0)
        if s != seen:
            if s == 2**63: os._exit(0)
            seen = s; U.pack_into(m, 8, s)
lat = []
for i in range(1, N + 1):
    t = time.perf_counter_ns(); U.pack_into(m, 0, i)
    while U.unpack_from(m, 8)[0] != i: pass
    lat.append(time.perf_counter_ns() - t)
U.pack_into(m, 0, 2**63); os.waitpid(pid, 0)
print(f"spin ring   p50 {pct(lat,.5):8.1f} us  p99 {pct(lat,.99):9.1f} us  (two spinning processes)")
