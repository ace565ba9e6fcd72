"""Background indexing: a durable embedding-job queue, its workers, and a reconciler.

With ``mindfile.open(path, indexing="background")``, ``store`` and ``store_many`` commit
the event, its chunks and their FTS rows together with one ``memory_jobs`` row per new
chunk, without calling the embedder. A worker embeds them later:

>>> import mindfile
>>> with mindfile.open(":memory:", embedder="hash", indexing="background") as mem:
...     _ = mem.store("s1", 1, "I moved to Lisbon in May.")
...     mem.search("Lisbon").degraded
...     mem.run_jobs().succeeded
...     mem.search("Lisbon").degraded is None
'1 chunk awaiting its embedding (1 queued); such chunks are matched by full text only'
1
True

:func:`run_jobs` is one synchronous pass (for cron, the scheduler, tests);
:class:`IndexWorker` runs passes in threads. Retries back off exponentially and end in
a dead letter (status ``failed``); leases let a job held by a crashed worker be taken
over. :func:`reconcile` finds and repairs chunk/vector/index mismatches. See
docs/background-indexing.md.
"""

from mindfile.jobs.queue import list_jobs, queue_status
from mindfile.jobs.reconcile import reconcile
from mindfile.jobs.types import (
    Clock,
    JobInfo,
    JobPolicy,
    JobQueueStatus,
    JobReport,
    JobStatus,
    ReconcileReport,
)
from mindfile.jobs.worker import IndexWorker, run_jobs

__all__ = [
    "Clock",
    "IndexWorker",
    "JobInfo",
    "JobPolicy",
    "JobQueueStatus",
    "JobReport",
    "JobStatus",
    "ReconcileReport",
    "list_jobs",
    "queue_status",
    "reconcile",
    "run_jobs",
]
