"""Pipelines: jobs built as Dask graphs of operators; they never pick the scheduler."""

from .influence import influence_job
from .job import Job, OutputLockedError, WorkdirLockedError, run
from .pagerank import pagerank_job
from .ppr import ppr_job
from .ppr_index import index_job
from .simrank import simrank_job
from .sources import RandomSources, SourceText
from .stages import GraphHandle, load_stage
from .summary import Summary
from .topk_ppr import topk_ppr_job

__all__ = [
    "GraphHandle",
    "Job",
    "OutputLockedError",
    "RandomSources",
    "SourceText",
    "Summary",
    "WorkdirLockedError",
    "index_job",
    "influence_job",
    "load_stage",
    "pagerank_job",
    "ppr_job",
    "run",
    "simrank_job",
    "topk_ppr_job",
]
