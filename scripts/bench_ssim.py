#!/usr/bin/env python3
"""The training loss's SSIM on the GPU, pytorch_msssim against the fused kernels: splatbench.ssim_speed.

python scripts/bench_ssim.py --out /tmp/ssim
"""

from splatbench.ssim_speed import main

if __name__ == "__main__":
    main()
