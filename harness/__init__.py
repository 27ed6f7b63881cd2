"""mtp-harness: prove that MTP-assisted decoding reproduces target-only decoding."""

__version__ = "0.1.0"
