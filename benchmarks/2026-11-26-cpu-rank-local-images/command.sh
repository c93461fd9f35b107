# CPU (this project's 2-core development machine, no GPU), 2026-11-26, code of 1c1b779 + the start-up script's checksum column (995c190's tree).
# Issue 31: start-up parts, per-rank training images, RSS and replica checksums on W = 1, 2, 4 CPU ranks (gloo),
# torchrun + ns-train splat-plus, a synthetic scene of 240 views of 320x240 (210 train), 10 steps + 1 warmup step.
# On a quiet machine (load average ~1): the table in startup_parts.md. raw-contended/: the same at 2 steps while
# five other jobs ran (load average ~7), with its own command.sh.
.venv/bin/python scripts/startup_parts.py --out /tmp/startup_quiet --views 240 --width 320 --height 240 --steps 10 --worlds 1 2 4  # -> startup_parts.json, startup_parts.md (the script writes results.json; renamed: not a splatbench report)
# raw-contended/: the same at 2 steps, code of be1461a, while five other jobs ran on the 2 cores:
.venv/bin/python scripts/startup_parts.py --out /tmp/startup_parts --views 240 --width 320 --height 240 --worlds 1 2 4  # -> raw-contended/
