"""What-if estimates for hardware you may not own: catalog, roofline estimator, calibration from runs, micro-benchmark."""
