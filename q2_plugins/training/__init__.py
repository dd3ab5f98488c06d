"""Silver training data and detectors: perturbed responses after BEGIN's taxonomy and Conv-FEVER's edits
(``q2 perturb``), and a small detector trained on them (``q2 train``)."""
