"""Top-k rounds replayed as CUDA graphs (``GPUQuery.estimate_launch``), in batches and one query at a time.

A round queues ten or so launches and copies (the query's start with its first round, the push, the
touched list, the candidates and Alg. 4, Alg. 6, the round's top k and its copy to the host), each
costing host time in CuPy. In a batch the host thread queues every stream's rounds, so on small
graphs it, not the GPU, sets the rate. The kernels read the round's r_max, tau and source from the
workspace's parameter block (``GPUQuery.qp``, copied from pinned memory inside the round), so the same
launches serve every round of a configuration: its first round runs them directly (kernels compile,
buffers and argument tuples get made), the second captures them on the workspace's stream, and every
later one writes the three parameters and launches the graph. A configuration whose capture fails
(a driver that cannot capture a cooperative launch) keeps running them directly.

A graph holds the addresses of the workspace's buffers, the index's arrays and the round's top-k
buffers (``GPUQuery.round_tops``, one per k), which live as long as the workspace that holds it.

Rounds replay below MAX_VERTICES only: on larger graphs a batch is bound by the GPU, not the host.
The refinement (``_topk_refine_gpu``) replays through ``replay`` at every size: its dozen launches a
query cost host time that the replay saves. Several queries in flight each replay their rounds on
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


def queue_round(q, rmax: float, tau: float, k: int, high_irw: bool, tiling: bool, ids, offset: int) -> None:
    """Queue one round of the query on the current stream, as a graph where one was captured."""
    key = (q.fresh, k, high_irw, tiling, q.blocks, q.in_flight, q.bound_smem, q.bound_by_vertex, offset)
    q.qp_host[:3] = (rmax, tau, q.s)
    q.qp_sent = False  # a round's first launch sends them: one copy a round, inside its graph
    args = (rmax, tau, k, high_irw, tiling, ids, offset)
    if replay(q, key, lambda: q.round_kernels(*args)):
        q.fresh = q.qp_sent = False  # the graph sent the parameters (``qp_sent`` is the host's view)
        q.round_top = q.round_tops[k]  # where the graph's copy lands, read by ``estimate_finish``


def replay(q, key, launch) -> bool:
    """Queue ``launch()``'s work (launches and copies on the current stream, the same buffers each time) as
    the workspace's graph for ``key``: run directly the first time, captured and launched the second,
    launched from then on. True where a graph was launched."""
    cp = import_cupy()
    got = q.graphs.get(key)
    if got is None or got is _DIRECT:
        launch()
        q.graphs.setdefault(key, _CAPTURE)
        return False
    if got is _CAPTURE:
        got = q.graphs[key] = _capture(cp, q, launch)
        if got is _DIRECT:
            launch()
            return False
    got.launch(cp.cuda.get_current_stream())
    return True


def _capture(cp, q, launch):
    """``launch()``'s work captured (nothing runs yet), or _DIRECT. The legacy default stream, where a
    query answered alone runs, cannot capture: the workspace's own stream captures it then, and the
    graph is launched on the current stream like any other work."""
    stream = cp.cuda.get_current_stream()
    if stream.ptr == 0:
        if q.capture_stream is None:
            q.capture_stream = cp.cuda.Stream(non_blocking=True)
        stream = q.capture_stream
    with stream:
        return _capture_on(cp, q, launch, stream)


def _capture_on(cp, q, launch, stream):
    fresh = q.fresh
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
        q.fresh, q.qp_sent = fresh, False  # the start kernels and the parameters' copy were captured, not run
        return _DIRECT
    return graph
