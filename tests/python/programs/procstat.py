"""A process's open descriptors, threads and resident memory from /proc (fork_storm.py and
soak_train.py note them for test_long_runs.py)."""

import os


def figures(pid):
    fds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed since the listing
            pass
    out = {"fds": len(fds), "fd_targets": fds}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key == "Threads":
                out["threads"] = int(value)
            elif key == "VmRSS":
                out["rss_kb"] = int(value.split()[0])
    return out
