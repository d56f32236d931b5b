"""`annotate_args` and `export` under upstream's import path."""

from e2e.framework.registry import ArgAnnotation, annotate_args, export

__all__ = ["ArgAnnotation", "annotate_args", "export"]
