#!/usr/bin/env python3
"""Runs a command and watches the TCP sockets its process tree listens on.

Usage: listeners.py [--allow-port N]... COMMAND [ARGS...]
Polls every 50 ms while the command runs; prints each listening socket of the command or its
descendants whose address is not loopback (127.0.0.0/8, ::1, ::ffff:127.x) and whose port is not
allowed (a job's /metrics port serves every interface by design), and exits 3 if there was one,
else with the command's exit status.
"""
import os
import subprocess
import sys
import time


def descendants(root):
    children = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def socket_inodes(pids):
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def loopback(family, addr):
    host = addr.split(":")[0]
    if family == "tcp":
        return host[6:8] == "7F"  # little-endian words: the first byte is last
    return host == "00000000000000000000000001000000" or (
        host[:24] == "0000000000000000FFFF0000" and host[30:32] == "7F")


def listeners(inodes):
    found = set()
    for family in ("tcp", "tcp6"):
        try:
            with open(f"/proc/net/{family}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:
                found.add((family, cols[1]))
    return found


def main():
    args, allowed = sys.argv[1:], set()
    while len(args) >= 2 and args[0] == "--allow-port":
        allowed.add(int(args[1]))
        args = args[2:]
    proc = subprocess.Popen(args)
    bad = set()
    while proc.poll() is None:
        for family, addr in listeners(socket_inodes(descendants(proc.pid))):
            if not loopback(family, addr) and int(addr.split(":")[1], 16) not in allowed:
                bad.add(f"{family} {addr}")
        time.sleep(0.05)
    for b in sorted(bad):
        print(f"listeners: listening beyond loopback: {b}", file=sys.stderr)
    sys.exit(3 if bad else proc.returncode)


if __name__ == "__main__":
    main()
