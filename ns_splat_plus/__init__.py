"""ns-splat-plus: a Nerfstudio Gaussian-splatting method that keeps working where splatfacto breaks."""

__version__ = "0.1.0"
