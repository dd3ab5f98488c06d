"""The Ray engine: Q² over a Ray Dataset (:mod:`.dataset`: ``Q2BatchScorer``, ``score_dataset``), ``q2 score
--engine ray`` over files (:mod:`.engine`), and the filter that keeps Ray's own noise off standard error
(:mod:`.stderr_filter`)."""
