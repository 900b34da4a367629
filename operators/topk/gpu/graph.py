"""Top-k rounds replayed as CUDA graphs (``GPUQuery.estimate_launch``), in batches and one query at a time.

A round queues ten or so launches and copies (the query's start with its first round, the push, the
touched list, the candidates and Alg. 4, Alg. 6, the round's top k and its copy to the host), each
costing host time in CuPy. In a batch the host thread queues every stream's rounds, so on small
graphs it, not the GPU, sets the rate. The kernels read the round's r_max, tau and source from the
workspace's parameter block (``RoundParams.qp``, copied from pinned memory inside the round), so the same
launches serve every round of a configuration: its first round runs them directly (kernels compile,
buffers and argument tuples get made), the second captures them on the workspace's stream, and every
later one writes the three parameters and launches the graph. A configuration whose capture fails
(a driver that cannot capture a cooperative launch) keeps running them directly.

A graph holds the addresses of the workspace's buffers, the index's arrays and the round's top-k
buffers (``RoundTops.by_k``, one per k), which live until the workspace is closed (``GPUQuery.close``),
the graphs with them.

Rounds replay below MAX_VERTICES only: on larger graphs a batch is bound by the GPU, not the host.
The refinement (``_topk_refine_gpu``) replays through ``GraphReplay.replay`` at every size: its dozen
launches a query cost host time that the replay saves. Several queries in flight each replay their rounds on
their own stream. This relies on ``gj_list_seen`` waiting for the thread that writes a tile's start
before the block reads it (``_topk_gpu_seen``): rounds replayed side by side would otherwise read a
start left by an earlier query.
"""

from __future__ import annotations

from graphs._device import import_cupy

GRAPHS = True  # False: every round launches each of its kernels (for comparison)
MAX_VERTICES = 2**23  # graphs of more vertices keep direct launches (their batches are GPU-bound)
_CAPTURE = object()  # the configuration ran once: capture it next time
_DIRECT = object()  # its capture failed: run its launches directly


class GraphReplay:
    """A workspace's rounds and refinements captured as CUDA graphs (``graphs``, by configuration: a
    graph, or _CAPTURE / _DIRECT), and the stream they are captured on when the query runs on the legacy
    default stream (``capture_stream``, made at the first such capture)."""

    def __init__(self) -> None:
        self.graphs = {}
        self.capture_stream = None

    def replay(self, key, launch, rewind) -> bool:
        """Queue ``launch()``'s work (launches and copies on the current stream, the same buffers each time)
        as the graph for ``key``: run directly the first time, captured and launched the second, launched
        from then on. True where a graph was launched. ``rewind()``, called before a capture, returns a
        function that puts back the workspace's state that the launches change on the host, called when
        the capture fails (they were captured, not run)."""
        cp = import_cupy()
        got = self.graphs.get(key)
        if got is None or got is _DIRECT:
            launch()
            self.graphs.setdefault(key, _CAPTURE)
            return False
        if got is _CAPTURE:
            got = self.graphs[key] = self._capture(cp, launch, rewind)
            if got is _DIRECT:
                launch()
                return False
        got.launch(cp.cuda.get_current_stream())
        return True

    def _capture(self, cp, launch, rewind):
        """``launch()``'s work captured (nothing runs yet), or _DIRECT. The legacy default stream, where a
        query answered alone runs, cannot capture: the workspace's own stream captures it then, and the
        graph is launched on the current stream like any other work."""
        stream = cp.cuda.get_current_stream()
        if stream.ptr == 0:
            if self.capture_stream is None:
                self.capture_stream = cp.cuda.Stream(non_blocking=True)
            stream = self.capture_stream
        with stream:
            return _capture_on(cp, launch, stream, rewind())

    def close(self) -> None:
        """Drop the graphs and the capture stream (no work of theirs may be pending)."""
        self.graphs = self.capture_stream = None


def _capture_on(cp, launch, stream, undo):
    stream.begin_capture(cp.cuda.runtime.streamCaptureModeThreadLocal)
    ok, graph = False, None
    try:
        launch()
        ok = True
    except Exception:  # a launch that a capture cannot take: its launches run directly
        pass
    finally:  # whatever ended it (a KeyboardInterrupt too), the stream leaves capture mode
        try:
            graph = stream.end_capture()
        except Exception:  # an invalidated capture reports it here
            graph = None
    if not ok or graph is None:
        undo()  # the start kernels and the parameters' copy were captured, not run
        return _DIRECT
    return graph
