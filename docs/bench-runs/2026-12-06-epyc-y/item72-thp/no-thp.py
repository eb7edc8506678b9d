#!/usr/bin/env python3
"""Runs a command with transparent huge pages off, as `fairway serve` runs itself (item 9):
PR_SET_THP_DISABLE (41) is kept across exec, so the command's memory gets 4 KiB pages only.

    python3 no-thp.py /tmp/fw-base bench engine --min-queued 1000000 ...
"""
import ctypes, os, sys

libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(41, 1, 0, 0, 0) != 0:
    sys.exit(f"prctl(PR_SET_THP_DISABLE) failed: errno {ctypes.get_errno()}")
os.execv(sys.argv[1], sys.argv[1:])
