"""The capacity planner: the highest rate one replica sustains within an SLO, found by simulation; the replicas
a traffic's peak needs; GPU-hours and cost per million output tokens at a stated price.

:func:`~engine.whatif.capacity.traffic.traffic_of` sizes a job's request plan (peak and mean rate, the sample
each probe sends); :func:`~engine.whatif.capacity.configs.configurations` prepares recipe variants x hardware x
tensor parallelism (one-line reasons for those left out); :func:`~engine.whatif.capacity.planner.plan_capacity`
sizes each (:mod:`~engine.whatif.capacity.sizing`, :mod:`~engine.whatif.capacity.search`) under a
:class:`~engine.whatif.capacity.slo.CapacitySLO` and names the best or the closest. Pure given its inputs but
for the calibration, read from storage's facades when asked (:func:`~engine.whatif.capacity.planner.calibrator`).
Nothing is stored. See ARCHITECTURE.md, "Capacity planner".
"""
