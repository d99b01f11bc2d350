"""SAN (Zhao, Jia & Koltun, CVPR 2020): aggregation / subtraction operations and the CIFAR-10 models.

``import attnlib.san`` needs neither Triton nor a GPU: the Triton kernels are imported on first use.
"""

from attnlib.san.model import SAN, SANConfig
from attnlib.san.ops import aggregation, subtraction, subtraction2

__all__ = ["SAN", "SANConfig", "aggregation", "subtraction", "subtraction2"]
