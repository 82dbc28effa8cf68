"""The texts jobs read: the bundled default corpus and its disjoint evaluation and calibration parts."""
