import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package, without installing it

# The tests run on the host device (CPU tensors): XCCL_DEVICE is read when
# libxccl.so loads, so it is set before anything loads it.
os.environ.setdefault("XCCL_DEVICE", "host")
