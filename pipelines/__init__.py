"""Pipelines: jobs built as Dask graphs of operators; they never pick the scheduler."""

from .job import Job, run
from .pagerank import pagerank_job
from .stages import GraphHandle, load_stage

__all__ = ["GraphHandle", "Job", "load_stage", "pagerank_job", "run"]
