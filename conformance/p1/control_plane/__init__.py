"""The kit's simulated control plane (docs/spec/p1-control-plane.md): a pure core and the HTTP shell around it.

The shell, ``server.py`` (``ControlPlane``), is the only module here that does I/O: it speaks HTTP on the
loopback, holds one lock around the core, reads the origins' refs and moves their branches, runs the
observer's moment checks (CP-20), appends the log to its file (CP-19), and answers, drops or holds each
answer as the core said. Everything else is the core: values in, values out, no file, clock, socket or
thread (``tests/test_purity.py`` walks every module of this package but the server). A request goes

    server: parse HTTP into a ``Request``
      -> requests.prepare: route it, read its body, count it against the scripted faults, say what the
         shell must do first (moment checks, origin heads, branch moves)
      -> server: do that I/O
      -> requests.handle: the endpoint's rules, the answer's fault, the request's log entry (an ``Outcome``)
      -> server: write the entries, then answer

and a kit operation (issue, re-issue, move the clock, set a state, script a fault) is a function of the
core the shell calls under its lock, so every change of state is made and logged in one place.

Which module holds what, each importing only from those above it:

- ``state.py``: the values every rule reads: the API's constants (identity fields, routes, body members),
  the records (``State``, ``TaskRec``, ``Lease``), ``Request``, ``Plan``, ``Outcome``, the ``Log``, the
  shapes of an answer, the views the kit reads, and ``Fault``, the hooks through which a scripted fault
  acts, with the queue of those waiting for a request (``take``, ``fire_kill_point``);
- ``lifecycle.py``: how the records change over CP time: the clock, attempts issued, task states, leases
  granted and ended, expiry, the one stored result (CP-4 to CP-6, CP-10, CP-12);
- ``faults.py`` and ``claim_faults.py``: the scripted faults (CP-21), each a class that carries its own
  behaviour (the hooks of ``Fault`` it overrides): the rules below call the hooks and name no fault;
- ``worker_endpoints.py``: the worker's endpoints (CP-8 to CP-16), one handler each;
- ``kit_endpoints.py``: the kit's own endpoints: the origin's hook (CP-18) and the kit's tool;
- ``kit.py``: the kit's operations (issue, re-issue, set a state, script a fault) and ``FAULT_TYPES``, the
  faults a scenario can name, with ``fault_from_mapping``;
- ``requests.py``: a request's way through the core: routing (CP-22's kit paths included), planning,
  handling, the request's log entry;
- ``server.py``: the shell, ``ControlPlane``, and the ``Observer`` it asks.

No module imports another's private (``_name``) names: what one needs of another is public there, and
callers import each name from the module that defines it; this ``__init__`` re-exports nothing
(``tests/test_p1_control_plane_package.py`` checks both, and that no module but the faults' own asks which
fault it holds).
"""
