#!/usr/bin/env python3
"""A userspace Ethernet switch that emulates links, for the test bed (testbed/net/bed.ts).

This kernel has no netem, so delay and shared-medium rate limits are done here: every frame
from a port is serialized at the port's uplink rate (or on ONE shared medium, as Wi-Fi),
delayed, then serialized at the egress port's downlink rate and delayed again. A queue longer
than `queueMs` drops the frame, as a router's buffer would. MAC addresses are learned; unknown
destinations and broadcasts are flooded. Runs inside the test bed's LAN namespace on the
hosts' veth ends (AF_PACKET), prints "ready", and runs until killed.

  python3 linkemu.py '{"ports": ["p0", "p1"], "upBps": 10e6, "downBps": 50e6, "sharedBps": 0,
                       "upDelayMs": 12.5, "downDelayMs": 12.5, "queueMs": 200}'
"""
import heapq
import json
import select
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def main() -> None:
    cfg = json.loads(sys.argv[1])
    ports = cfg["ports"]
    up, down, shared = float(cfg["upBps"]), float(cfg["downBps"]), float(cfg["sharedBps"])
    up_delay, down_delay = cfg["upDelayMs"] / 1000.0, cfg["downDelayMs"] / 1000.0
    queue = cfg["queueMs"] / 1000.0
    socks = []
    for name in ports:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        socks.append(s)
    by_fd = {s.fileno(): i for i, s in enumerate(socks)}
    # select() waits to the microsecond; epoll's timeout is whole milliseconds rounded up, which
    # sent every frame up to 1 ms late (a Wi-Fi round trip of 2 x 3 ms measured 7-10 ms).
    fds = list(by_fd)
    macs = {}  # MAC -> port index
    up_free = [0.0] * len(socks)
    down_free = [0.0] * len(socks)
    medium_free = 0.0
    heap = []  # (time, seq, port, frame)
    seq = 0
    dropped = 0
    print("ready", flush=True)
    reported = (0, 0)
    next_report = time.monotonic() + 1.0
    forwarded = 0
    while True:
        now = time.monotonic()
        if now >= next_report:
            next_report = now + 1.0
            if (dropped, forwarded) != reported:
                reported = (dropped, forwarded)
                print(json.dumps({"dropped": dropped, "forwarded": forwarded}), flush=True)
        while heap and heap[0][0] <= now:
            _, _, port, frame = heapq.heappop(heap)
            try:
                socks[port].send(frame)
            except OSError:
                pass  # the host's link is down (cut): the frame is lost, as on a real wire
        timeout = max(0.0, heap[0][0] - now) if heap else 1.0
        for fd in select.select(fds, [], [], min(timeout, 1.0))[0]:
            i = by_fd[fd]
            for _ in range(64):
                try:
                    frame, addr = socks[i].recvfrom(65536)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING or len(frame) < 14:
                    continue
                t = time.monotonic()
                bits = 8 * len(frame)  # the Ethernet frame (header included; no preamble or gap)
                macs[frame[6:12]] = i
                # stage 1: the sender's uplink, or the one shared medium
                if shared > 0:
                    start = max(t, medium_free)
                    if start - t > queue:
                        dropped += 1
                        continue
                    medium_free = start + bits / shared
                    t1 = medium_free + up_delay
                else:
                    start = max(t, up_free[i])
                    if up > 0 and start - t > queue:
                        dropped += 1
                        continue
                    up_free[i] = start + (bits / up if up > 0 else 0.0)
                    t1 = up_free[i] + up_delay
                dst = macs.get(frame[0:6])
                outs = [dst] if dst is not None and frame[0] & 1 == 0 else [j for j in range(len(socks)) if j != i]
                for j in outs:
                    if j == i:
                        continue
                    # stage 2: the receiver's downlink
                    start2 = max(t1, down_free[j])
                    if down > 0 and start2 - t1 > queue:
                        dropped += 1
                        continue
                    down_free[j] = start2 + (bits / down if down > 0 else 0.0)
                    seq += 1
                    forwarded += 1
                    heapq.heappush(heap, (down_free[j] + down_delay, seq, j, frame))


if __name__ == "__main__":
    main()
