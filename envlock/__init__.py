"""envlock: reproducible GPU deep-learning environments.

Importing this package is cheap on purpose: it never imports torch, urllib3 or the
matrix. Subpackages load what they need when they are used.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
