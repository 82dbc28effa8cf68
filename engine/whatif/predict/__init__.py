"""Predicted serving runs: the serving simulator calibrated from stored runs, carried to other hardware, stored.

:func:`~engine.whatif.predict.run.prepare` a spec on a hardware entry, find its
:func:`~engine.whatif.predict.calibration.calibration_for` (fitted from the database's measured runs, with a
leave-one-out band; the uncalibrated roofline when there are none), :func:`~engine.whatif.predict.run.predict`
it and store :func:`~engine.whatif.predict.run.new_run`. Storage is read lazily, through its facades only
(importing this package loads neither storage nor SQLAlchemy). See ARCHITECTURE.md, "Calibration and
predicted runs".
"""
