"""Front ends for the frameworks dialogue researchers evaluate in: Hugging Face ``evaluate`` (:mod:`.evaluate`),
lm-eval (:mod:`.lm_eval`), LightEval (:mod:`.lighteval`, tasks in :mod:`.lighteval_tasks`), Inspect
(:mod:`.inspect`), reranking of generated candidates (:mod:`.rerank`), the adapters they share (:mod:`.adapters`)
and the start-up hook's patches (:mod:`.hooks`). The only room that imports ``evaluate``, ``lm_eval``, ``parlai``,
``lighteval`` or ``inspect_ai``; each front end turns its framework's objects into one call of the core."""
