"""fedlib: a reproducible companion to FedCKA, FedIntR, FedER and FedSHIBU.

The modules, one concept each, in layers that import only downward: docs/design.md ("Module map").
"""

__version__ = "0.1.0"
