"""Package index access: pip-style configuration, the simple API, metadata, caching."""

from envlock.index.client import IndexClient
from envlock.index.config import PYPI_SIMPLE, IndexConfig, load_index_config, redact
from envlock.index.pages import Dist, ProjectPage

__all__ = ["IndexClient", "IndexConfig", "load_index_config", "redact", "Dist", "ProjectPage",
           "PYPI_SIMPLE"]
